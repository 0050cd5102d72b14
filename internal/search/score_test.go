package search

import (
	"math"
	"testing"
)

func TestBM25(t *testing.T) {
	const avg = 10
	// More occurrences score higher, with saturation.
	if !(TF(2, avg, avg) > TF(1, avg, avg)) || TF(100, avg, avg) > K1+1 {
		t.Fatal("term frequency")
	}
	// Shorter documents score higher.
	if !(TF(1, 5, avg) > TF(1, 20, avg)) {
		t.Fatal("length normalization")
	}
	// Rarer terms weigh more; never negative.
	if !(IDF(1000, 10) > IDF(1000, 500)) || IDF(1000, 1000) <= 0 || IDF(10, 20) <= 0 {
		t.Fatal("idf")
	}
	if got, want := IDF(100, 1), math.Log(1+99.5/1.5); math.Abs(got-want) > 1e-12 {
		t.Fatalf("IDF = %v, want %v", got, want)
	}
	if TF(1, 1, 0) <= 0 || (Stats{}).AvgLen() != 1 || (Stats{Docs: 4, TotalLen: 10}).AvgLen() != 2.5 {
		t.Fatal("degenerate stats")
	}
}
