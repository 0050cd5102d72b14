package search

import "math"

// BM25 parameters (the usual ones: Lucene's and Elasticsearch's defaults).
const (
	K1 = 1.2  // term frequency saturation
	B  = 0.75 // document length normalization
)

// IDF is BM25's inverse document frequency of a term found in df of docs
// documents (Lucene's form, never negative). A rarer term weighs more.
func IDF(docs, df float64) float64 {
	if df > docs {
		df = docs
	}
	return math.Log(1 + (docs-df+0.5)/(df+0.5))
}

// TF is BM25's term frequency part for a term found freq times in a
// document of length docLen, when documents average avgLen: it grows with
// freq and saturates, and a longer document scores lower.
func TF(freq, docLen, avgLen float64) float64 {
	if avgLen <= 0 {
		avgLen = 1
	}
	return freq * (K1 + 1) / (freq + K1*(1-B+B*docLen/avgLen))
}

// Stats are the collection figures BM25 needs.
type Stats struct {
	Docs     int64 // documents indexed (events with at least one term)
	TotalLen int64 // sum of their lengths
}

// AvgLen returns the average document length (1 for an empty index).
func (s Stats) AvgLen() float64 {
	if s.Docs <= 0 || s.TotalLen <= 0 {
		return 1
	}
	return float64(s.TotalLen) / float64(s.Docs)
}
