package store

import (
	"slices"
	"testing"
)

// req is a request of n events and b bytes.
type req struct{ n, b int }

func (r req) Weight() (int, int) { return r.n, r.b }

// TestNextBatch: a batch takes what is queued while it holds fewer than
// maxEvents events and maxBytes bytes, so the caps are reached and passed
// by at most the last request; the first request goes alone however
// heavy; a closed queue ends the batch and reports it.
func TestNextBatch(t *testing.T) {
	queue := func(rs ...req) chan req {
		q := make(chan req, len(rs))
		for _, r := range rs {
			q <- r
		}
		return q
	}
	for _, c := range []struct {
		name      string
		queued    []req
		close     bool
		maxEvents int
		maxBytes  int
		want      []req
		open      bool
	}{
		{"at the event cap", []req{{1, 1}, {1, 1}, {1, 1}, {1, 1}}, false, 3, 100, []req{{1, 1}, {1, 1}, {1, 1}}, true},
		{"past it by the last", []req{{2, 1}, {2, 1}, {2, 1}}, false, 3, 100, []req{{2, 1}, {2, 1}}, true},
		{"at the byte cap", []req{{1, 40}, {1, 60}, {1, 1}}, false, 100, 100, []req{{1, 40}, {1, 60}}, true},
		{"just under it", []req{{1, 40}, {1, 59}, {1, 1}, {1, 1}}, false, 100, 100, []req{{1, 40}, {1, 59}, {1, 1}}, true},
		{"a heavy first alone", []req{{500, 1 << 20}, {1, 1}}, false, 100, 100, []req{{500, 1 << 20}}, true},
		{"all that is queued", []req{{1, 1}, {0, 0}}, false, 100, 100, []req{{1, 1}, {0, 0}}, true},
		{"closed behind", []req{{1, 1}, {1, 1}}, true, 100, 100, []req{{1, 1}, {1, 1}}, false},
		{"closed and empty", nil, true, 100, 100, []req{}, false},
	} {
		q := queue(c.queued...)
		if c.close {
			close(q)
		}
		got, open := NextBatch(q, make([]req, 0, 1), c.maxEvents, c.maxBytes)
		if !slices.Equal(got, c.want) || open != c.open {
			t.Errorf("%s: batch %v open %v, want %v open %v", c.name, got, open, c.want, c.open)
		}
		if !c.close && len(q) != len(c.queued)-len(c.want) {
			t.Errorf("%s: %d left queued, want %d", c.name, len(q), len(c.queued)-len(c.want))
		}
	}
}
