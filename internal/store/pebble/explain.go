package pebble

import (
	"fmt"
	"strings"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// Explain describes, for each filter, how Query would answer it: the index
// it scans, how many streams it merges, and which conditions are checked
// after the index (from the index entry's summary, or by reading the
// event's body). It is meant for operators (`petrel scan --explain`); it
// plans the query on a snapshot and reads no event (an ids filter looks
// its ids up). Safe for concurrent use.
func (s *Store) Explain(filters []nostr.Filter) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	q, err := s.newQuery()
	if err != nil {
		return nil, err
	}
	defer q.close()
	out := make([]string, len(filters))
	for i := range filters {
		if filters[i].Search != "" {
			out[i] = describeSearch(q.newSearch(&filters[i], true, false), s.opts.DisableSearch)
			continue
		}
		fs, err := q.plan(&filters[i], true, false)
		if err != nil {
			return nil, err
		}
		out[i] = describePlan(fs)
	}
	return out, nil
}

// tableNames names the index tables in Explain's output.
var tableNames = map[byte]string{
	pfxID:       "id (I, point lookups)",
	pfxCreated:  "created_at (C)",
	pfxAuthor:   "author (P)",
	pfxKind:     "kind (K)",
	pfxAuthKind: "author+kind (Q)",
	pfxTag:      "tag value (T)",
}

func describePlan(fs *filterStream) string {
	if fs == nil {
		return "matches nothing (empty list, since > until, or a limit of 0)"
	}
	var b strings.Builder
	b.WriteString("index ")
	b.WriteString(tableNames[fs.plannedIdx])
	if fs.budget >= 0 {
		table := "created_at (C)"
		if fs.laterKinds != nil {
			table = "kind (K)"
		}
		fmt.Fprintf(&b, ": first a scan of %d stream(s) of the %s index with the authors as a set, up to %d entries, then one stream per author", len(fs.srcs), table, fs.budget)
	} else {
		fmt.Fprintf(&b, ", %d stream(s)", len(fs.srcs))
	}
	var post []string
	if fs.checkTime {
		post = append(post, "since/until")
	}
	if fs.kinds != nil {
		post = append(post, "kinds (index summary)")
	}
	if fs.authors != nil {
		post = append(post, "authors (8-byte prefix from the index summary, then the body)")
	}
	if fs.parseTags {
		post = append(post, "tags (parses the body)")
	}
	if len(post) > 0 {
		b.WriteString("; then checks ")
		b.WriteString(strings.Join(post, ", "))
	}
	if fs.left >= 0 {
		fmt.Fprintf(&b, "; stops after %d", fs.left)
	}
	return b.String()
}

// describeSearch describes the stream of a filter with a NIP-50 search
// (nil when it cannot match: search turned off, an empty list, a limit of
// 0).
func describeSearch(ss *searchStream, disabled bool) string {
	if ss == nil {
		if disabled {
			return "matches nothing (store.disable_search is on: the search index is off)"
		}
		return "matches nothing (empty list, since > until, or a limit of 0)"
	}
	var b strings.Builder
	b.WriteString("search index (S): candidates that hold every term, ranked by BM25")
	var post []string
	if ss.ids != nil {
		post = append(post, "ids")
	}
	if ss.kinds != nil {
		post = append(post, "kinds")
	}
	post = append(post, "since/until")
	if ss.post.authors != nil {
		post = append(post, "authors (the body)")
	}
	if ss.post.parseTags {
		post = append(post, "tags (parses the body)")
	}
	b.WriteString("; then checks ")
	b.WriteString(strings.Join(post, ", "))
	if ss.left >= 0 {
		fmt.Fprintf(&b, "; stops after %d", ss.left)
	}
	return b.String()
}
