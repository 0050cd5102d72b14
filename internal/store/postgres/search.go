package postgres

import (
	"math"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/petrel-relay/petrel/internal/search"
)

// NIP-50 search. Each searchable event's analysis (search.Analyze: its
// distinct terms, sorted, their frequencies and the document length) is
// stored in its events row (terms, tfreqs, doc_len) and indexed by a GIN
// index on terms, so "every query term present" is terms @> the query's
// terms: PostgreSQL intersects the posting lists. The matches that pass
// the filter's other conditions are ranked by BM25 (search.TF and
// search.IDF, as the pebble store ranks them), the newest
// Options.SearchCandidates of them at most. The collection figures BM25
// needs (documents, total length) are the sum of the search_stats rows,
// one per writing node; a term's document frequency (multi-term queries
// only: with one term it does not change the order) is counted from the
// index, up to dfCap.

// dfCap is the most documents counted for a term's document frequency;
// a term in more documents weighs as if it were in dfCap.
const dfCap = 20000

// queueSearchStats queues the reads of the collection figures and of
// the document frequencies of the terms of multi-term searches.
func (s *Store) queueSearchStats(b *pgx.Batch, searches []*spec, st *search.Stats) {
	b.Queue("SELECT coalesce(sum(docs), 0)::bigint, coalesce(sum(total_len), 0)::bigint FROM search_stats").
		QueryRow(func(r pgx.Row) error { return r.Scan(&st.Docs, &st.TotalLen) })
	for _, sp := range searches {
		if len(sp.terms) < 2 {
			continue
		}
		sp.df = make([]int64, len(sp.terms))
		for i, t := range sp.terms {
			b.Queue("SELECT count(*) FROM (SELECT 1 FROM events WHERE terms @> ARRAY[$1::bytea] LIMIT $2) d", t, dfCap).
				QueryRow(func(r pgx.Row) error { return r.Scan(&sp.df[i]) })
		}
	}
}

// searchSQL returns the statement of a filter with Search: its records,
// best first (BM25, then newest first), at most its limit.
func (s *Store) searchSQL(sp *spec, st search.Stats, now int64) (string, *args) {
	a := &args{}
	avg := a.add(st.AvgLen())
	var score []string
	for i, t := range sp.terms {
		idf := 1.0
		if sp.df != nil {
			idf = search.IDF(float64(max(st.Docs, 1)), float64(max(sp.df[i], 1)))
		}
		f := "c.tfreqs[array_position(c.terms, " + a.add(t) + "::bytea)]::float8"
		// idf * f*(k1+1) / (f + k1*(1-b+b*len/avg)): search.TF.
		score = append(score, a.add(idf)+"::float8*("+f+"*"+fmtFloat(search.K1+1)+")/("+f+"+"+
			fmtFloat(search.K1)+"*("+fmtFloat(1-search.B)+"+"+fmtFloat(search.B)+"*c.doc_len/"+avg+"::float8))")
	}
	cands := "SELECT e2.created_at, e2.id, e2.doc_len, e2.terms, e2.tfreqs FROM events e2" +
		where(sp.conds("e2", a, skip{tag: -1}, now)) + orderNewest("e2") + " LIMIT " + a.add(int64(s.opts.SearchCandidates))
	ranked := "SELECT c.created_at, c.id, (" + strings.Join(score, " + ") + ") AS score FROM (" + cands + ") c" +
		" ORDER BY score DESC, c.created_at DESC, c.id" + limitSQL(sp, a)
	return "SELECT " + recordCols + " FROM (" + ranked + ") top JOIN events e ON e.id = top.id" +
		" ORDER BY top.score DESC, top.created_at DESC, top.id", a
}

// fmtFloat formats a constant of the score expression.
func fmtFloat(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		f = 0
	}
	return strconv.FormatFloat(f, 'g', -1, 64) + "::float8"
}
