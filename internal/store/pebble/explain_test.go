package pebble

import (
	"errors"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

func TestExplain(t *testing.T) {
	s := openTest(t, Options{})
	pk := storetest.Key(1).Hex()
	one := []nostr.PubKey{storetest.Key(1)}
	many := storetest.FixtureAuthors(100)
	f := func(fl nostr.Filter, want ...string) {
		t.Helper()
		got, err := s.Explain([]nostr.Filter{fl})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(got[0], w) {
				t.Fatalf("Explain(%+v) = %q, want it to contain %q", fl, got[0], w)
			}
		}
	}
	f(nostr.Filter{}, "index created_at (C), 1 stream(s)")
	f(nostr.Filter{Kinds: []int{1, 7}, Limit: 5, HasLimit: true}, "index kind (K), 2 stream(s)", "stops after 5")
	f(nostr.Filter{Authors: one, Kinds: []int{1}}, "index author+kind (Q), 1 stream(s)")
	f(nostr.Filter{Authors: one, Tags: []nostr.TagFilter{{Name: 't', Values: []string{"x"}}}}, "index author (P)", "tags (parses the body)")
	f(nostr.Filter{Kinds: []int{1}, Tags: []nostr.TagFilter{{Name: 'p', Values: []string{pk}}}}, "index tag value (T)", "kinds (index summary)")
	f(nostr.Filter{IDs: []nostr.ID{{1}}, Authors: one}, "index id (I", "since/until", "authors")
	f(nostr.Filter{Authors: many, Kinds: []int{1}, Limit: 10, HasLimit: true}, "index author+kind (Q): first a scan", "kind (K) index")
	f(nostr.Filter{Kinds: []int{}, Present: nostr.PresentKinds}, "matches nothing")
	// A search is answered by the search index, not the planner.
	f(nostr.Filter{Search: "hello", Limit: 2, HasLimit: true}, "search index (S)", "stops after 2")
	f(nostr.Filter{Search: "hello", Kinds: []int{1}, Authors: one}, "search index (S)", "kinds", "authors")
	f(nostr.Filter{Search: "hello", Limit: 0, HasLimit: true}, "matches nothing")
	off := openTest(t, Options{DisableSearch: true})
	if got, err := off.Explain([]nostr.Filter{{Search: "hello"}}); err != nil || !strings.Contains(got[0], "disable_search") {
		t.Fatalf("Explain with search off = %q, %v", got, err)
	}

	s.Close()
	if _, err := s.Explain([]nostr.Filter{{}}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Explain after Close: %v", err)
	}
}
