package storetest

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// SupportsSearch reports whether st supports NIP-50 search (implements
// store.Searcher and says so).
func SupportsSearch(st store.Store) bool {
	s, ok := st.(store.Searcher)
	return ok && s.SupportsSearch()
}

func requireSearch(t *testing.T, st store.Store) {
	t.Helper()
	if !SupportsSearch(st) {
		t.Skip("the store does not support search")
	}
}

// text builds an event with the given content.
func (h *h) text(author, kind int, createdAt int64, content string, tags ...nostr.Tag) *nostr.Event {
	return NewEvent(h.rng, Key(author), kind, createdAt, nostr.Tags(tags), content)
}

// expectSet checks that the query returns exactly want, in any order, each
// once and with the right fields, and that Count agrees when no filter has
// a limit.
func (h *h) expectSet(filters []nostr.Filter, want ...*nostr.Event) {
	h.t.Helper()
	got := h.query(filters...)
	if len(got) != len(want) {
		h.t.Fatalf("query %s: got %d events %.400s, want %d %.400s", fmtFilters(filters), len(got), fmtRecs(got), len(want), fmtEvs(want))
	}
	byID := make(map[nostr.ID]*nostr.Event, len(want))
	for _, ev := range want {
		byID[ev.ID] = ev
	}
	for i := range got {
		ev, ok := byID[got[i].ID]
		if !ok {
			h.t.Fatalf("query %s: got %s (twice, or not wanted); want %.400s", fmtFilters(filters), got[i].ID.Hex()[:8], fmtEvs(want))
		}
		checkRecord(h.t, &got[i], ev)
		delete(byID, got[i].ID)
	}
	for i := range filters {
		if filters[i].HasLimit {
			return
		}
	}
	if n := h.count(filters...); n != int64(len(want)) {
		h.t.Fatalf("Count %s = %d, want %d", fmtFilters(filters), n, len(want))
	}
}

// searchFor returns a filter searching for q.
func searchFor(q string) nostr.Filter { return nostr.Filter{Search: q} }

func testSearchUnsupported(t *testing.T, st store.Store) {
	if SupportsSearch(st) {
		t.Skip("the store supports search")
	}
	h := newH(t, st)
	e := h.text(1, 1, BaseTime, "orange")
	h.stored(e)
	h.expect(fs(searchFor("orange")))
	h.expect(fs(searchFor("orange"), nostr.Filter{Kinds: []int{1}}), e)
	if n := h.count(searchFor("orange")); n != 0 {
		t.Fatalf("Count of a search = %d without search support", n)
	}
}

// testSearchMatch checks what matches a search string: every term, case
// and punctuation aside; extensions ignored.
func testSearchMatch(t *testing.T, st store.Store) {
	requireSearch(t, st)
	h := newH(t, st)
	npub := "npub1" + strings.Repeat("x", 58)
	a := h.text(1, 1, BaseTime+1, "Orange purple sky")
	b := h.text(1, 1, BaseTime+2, "orange juice!")
	c := h.text(2, 1, BaseTime+3, "Purple rain, ORANGE sun")
	d := h.text(2, 1, BaseTime+4, "nothing here")
	e := h.text(3, 1, BaseTime+5, "東京都に行きました")
	f := h.text(3, 1, BaseTime+6, "see https://www.example.com/some/path and nostr:"+npub)
	g := h.text(3, 1, BaseTime+7, "Don't panic")
	h.stored(a, b, c, d, e, f, g)
	x := func(q string, want ...*nostr.Event) {
		t.Helper()
		h.expectSet(fs(searchFor(q)), want...)
	}
	x("orange", a, b, c)
	x("ORANGE", a, b, c)
	x("orange purple", a, c)
	x("purple, orange!", a, c)
	x("orange purple language:en include:spam", a, c)
	x("orange foo:bar", a, b, c)
	x("orange missing")
	x("missing")
	x("the a of")
	x("language:en")
	x("東京", e)
	x("大阪")
	x("京都", e)
	x("東京都", e)
	x("example.com", f)
	x("https://example.com/another/page", f)
	x("nostr:"+npub, f)
	x(npub, f)
	x("some path") // URL paths are not indexed
	x("don't", g)
	x("dont panic", g)
	x("here nothing", d)
}

// testSearchFields checks which fields of which kinds are searchable.
func testSearchFields(t *testing.T, st store.Store) {
	requireSearch(t, st)
	h := newH(t, st)
	profile := h.text(1, 0, BaseTime, `{"name":"Satoshi","about":"bitcoin creator","nip05":"sat@example.org","website":"https://hidden.net"}`)
	article := h.text(1, 30023, BaseTime+1, "Body of the article", nostr.Tag{"d", "x"}, nostr.Tag{"title", "Pebble Internals"}, nostr.Tag{"summary", "LSM trees"})
	hashtag := h.text(2, 1, BaseTime+2, "no words", nostr.Tag{"t", "Hashtagword"})
	reaction := h.text(2, 7, BaseTime+3, "creator")
	repost := h.text(2, 6, BaseTime+4, `{"content":"creator"}`)
	dm := h.text(2, 4, BaseTime+5, "creator")
	follows := h.text(3, 3, BaseTime+6, "creator")
	h.stored(profile, article, hashtag, reaction, repost, dm, follows)
	x := func(q string, want ...*nostr.Event) {
		t.Helper()
		h.expectSet(fs(searchFor(q)), want...)
	}
	x("satoshi", profile)
	x("creator", profile)
	x("example org", profile)
	x("website")
	x("hidden")
	x("name")
	x("internals", article)
	x("lsm trees", article)
	x("body article", article)
	x("hashtagword", hashtag)
	x("words", hashtag)
}

// testSearchFilters checks that the other conditions of a filter apply to
// its search matches, and that filters combine as a union.
func testSearchFilters(t *testing.T, st store.Store) {
	requireSearch(t, st)
	h := newH(t, st)
	e1 := h.text(1, 1, BaseTime+1, "apple one", nostr.Tag{"t", "fruit"})
	e2 := h.text(2, 1, BaseTime+2, "apple two", nostr.Tag{"p", Key(9).Hex()})
	e3 := h.text(1, 30023, BaseTime+3, "apple three", nostr.Tag{"d", "a"})
	e4 := h.text(3, 1111, BaseTime+4, "apple four", nostr.Tag{"t", "fruit"})
	e5 := h.text(2, 1, BaseTime+5, "pear five")
	h.stored(e1, e2, e3, e4, e5)
	apple := func(mod func(f *nostr.Filter)) nostr.Filter {
		f := searchFor("apple")
		mod(&f)
		return f
	}
	x := func(filters []nostr.Filter, want ...*nostr.Event) {
		t.Helper()
		h.expectSet(filters, want...)
	}
	x(fs(apple(func(f *nostr.Filter) {})), e1, e2, e3, e4)
	x(fs(apple(func(f *nostr.Filter) { f.Kinds = []int{1} })), e1, e2)
	x(fs(apple(func(f *nostr.Filter) { f.Kinds = []int{30023, 1111, 7} })), e3, e4)
	x(fs(apple(func(f *nostr.Filter) { f.Kinds = []int{7} })))
	x(fs(apple(func(f *nostr.Filter) { f.Authors = []nostr.PubKey{Key(1)} })), e1, e3)
	x(fs(apple(func(f *nostr.Filter) { f.Authors = []nostr.PubKey{Key(1), Key(3)}; f.Kinds = []int{1, 1111} })), e1, e4)
	x(fs(apple(func(f *nostr.Filter) { f.Since, f.HasSince = BaseTime+2, true })), e2, e3, e4)
	x(fs(apple(func(f *nostr.Filter) { f.Until, f.HasUntil = BaseTime+2, true })), e1, e2)
	x(fs(apple(func(f *nostr.Filter) {
		f.Since, f.HasSince, f.Until, f.HasUntil = BaseTime+2, true, BaseTime+3, true
	})), e2, e3)
	x(fs(apple(func(f *nostr.Filter) { f.Tags = []nostr.TagFilter{{Name: 't', Values: []string{"fruit"}}} })), e1, e4)
	x(fs(apple(func(f *nostr.Filter) { f.Tags = []nostr.TagFilter{{Name: 'p', Values: []string{Key(9).Hex()}}} })), e2)
	x(fs(apple(func(f *nostr.Filter) { f.IDs = []nostr.ID{e3.ID, e5.ID} })), e3)
	x(fs(apple(func(f *nostr.Filter) { f.Present = nostr.PresentKinds })))
	// Unions: two searches; a search and a plain filter; duplicates once.
	x(fs(apple(func(f *nostr.Filter) { f.Kinds = []int{1} }), searchFor("pear")), e1, e2, e5)
	x(fs(apple(func(f *nostr.Filter) { f.Kinds = []int{1} }), nostr.Filter{Authors: []nostr.PubKey{Key(2)}}), e1, e2, e5)
	x(fs(apple(func(f *nostr.Filter) {}), searchFor("one"), nostr.Filter{Kinds: []int{1}}), e1, e2, e3, e4, e5)
	// Search results come first, then the plain filters' newest first.
	got := h.query(searchFor("three"), nostr.Filter{Kinds: []int{1}})
	var ids []nostr.ID
	for _, r := range got {
		ids = append(ids, r.ID)
	}
	if !slices.Equal(ids, []nostr.ID{e3.ID, e5.ID, e2.ID, e1.ID}) {
		t.Fatalf("search then plain filter: %s", fmtRecs(got))
	}
}

// testSearchLimitOrder checks limits and the one ranking rule every store
// agrees on: a term found twice ranks above the same term found once in a
// document of the same length.
func testSearchLimitOrder(t *testing.T, st store.Store) {
	requireSearch(t, st)
	h := newH(t, st)
	once := h.text(1, 1, BaseTime+5, "apple pear plum")
	twice := h.text(1, 1, BaseTime+1, "apple apple pear")
	var many []*nostr.Event
	for i := 0; i < 30; i++ {
		many = append(many, h.text(2, 1, BaseTime+10+int64(i), "kiwi number "+strconv.Itoa(i)+" filler words here"))
	}
	h.stored(append([]*nostr.Event{once, twice}, many...)...)
	h.expect(fs(searchFor("apple")), twice, once)
	h.expect(fs(nostr.Filter{Search: "apple", Limit: 1, HasLimit: true}), twice)
	h.expect(fs(nostr.Filter{Search: "apple", Limit: 0, HasLimit: true}))
	for _, limit := range []int{1, 7, 30, 100} {
		got := h.query(nostr.Filter{Search: "kiwi", Limit: limit, HasLimit: true})
		if len(got) != min(limit, len(many)) {
			t.Fatalf("limit %d: got %d", limit, len(got))
		}
		seen := make(map[nostr.ID]bool)
		for _, r := range got {
			if seen[r.ID] || !slices.ContainsFunc(many, func(ev *nostr.Event) bool { return ev.ID == r.ID }) {
				t.Fatalf("limit %d: unexpected or repeated %s", limit, r.ID.Hex()[:8])
			}
			seen[r.ID] = true
		}
	}
	// Count ignores the limit.
	if n := h.count(nostr.Filter{Search: "kiwi", Limit: 3, HasLimit: true}); n != int64(len(many)) {
		t.Fatalf("Count = %d, want %d", n, len(many))
	}
	items, err := st.Items(context.Background(), fs(searchFor("kiwi")), 0)
	if err != nil || len(items) != len(many) || !slices.IsSortedFunc(items, store.CompareItems) {
		t.Fatalf("Items: %d items, %v", len(items), err)
	}
}

// testSearchRemoval checks that removed events are no longer found:
// deletion by id and by address, replacement, vanish, operator Delete.
func testSearchRemoval(t *testing.T, st store.Store) {
	requireSearch(t, st)
	h := newH(t, st)
	ctx := context.Background()
	x := func(q string, want ...*nostr.Event) {
		t.Helper()
		h.expectSet(fs(searchFor(q)), want...)
	}
	// NIP-09 by id.
	banana := h.text(1, 1, BaseTime, "banana split")
	h.stored(banana)
	x("banana", banana)
	h.stored(h.text(1, 5, BaseTime+1, "", eTag(banana)))
	x("banana")
	x("split")
	// Replacement.
	p1 := h.text(1, 0, BaseTime, `{"name":"oldname","about":"same"}`)
	p2 := h.text(1, 0, BaseTime+1, `{"name":"newname","about":"same"}`)
	h.stored(p1)
	x("oldname", p1)
	h.stored(p2)
	x("oldname")
	x("newname", p2)
	x("same", p2)
	a1 := h.text(1, 30023, BaseTime, "body", nostr.Tag{"d", "post"}, nostr.Tag{"title", "first draft"})
	a2 := h.text(1, 30023, BaseTime+1, "body", nostr.Tag{"d", "post"}, nostr.Tag{"title", "final version"})
	h.stored(a1, a2)
	x("draft")
	x("final", a2)
	// NIP-09 by address.
	h.stored(h.text(1, 5, BaseTime+2, "", nostr.Tag{"a", ATag(30023, Key(1), "post")}))
	x("final")
	// Vanish.
	c1 := h.text(2, 1, BaseTime, "cherry pie")
	c2 := h.text(2, 30023, BaseTime+1, "cherry tart", nostr.Tag{"d", "c"})
	c3 := h.text(3, 1, BaseTime, "cherry jam")
	h.stored(c1, c2, c3)
	x("cherry", c1, c2, c3)
	h.stored(h.text(2, 62, BaseTime+5, "", nostr.Tag{"relay", "ALL_RELAYS"}))
	x("cherry", c3)
	// Operator Delete, then saved again.
	mango := h.text(3, 1, BaseTime, "mango lassi")
	h.stored(mango)
	x("mango", mango)
	if n, err := st.Delete(ctx, []nostr.ID{mango.ID}); err != nil || n != 1 {
		t.Fatalf("Delete = %d, %v", n, err)
	}
	x("mango")
	h.stored(mango)
	x("mango", mango)
}

// testSearchExpiration checks that expired events are never found, before
// and after the purge.
func testSearchExpiration(t *testing.T, st store.Store) {
	requireSearch(t, st)
	h := newH(t, st)
	now := time.Now().Unix()
	gone := h.text(1, 1, BaseTime, "grape soda", nostr.Tag{"expiration", strconv.FormatInt(now-1000, 10)})
	later := h.text(1, 1, BaseTime+1, "grape juice", nostr.Tag{"expiration", strconv.FormatInt(now+1_000_000, 10)})
	h.stored(gone, later)
	h.expectSet(fs(searchFor("grape")), later)
	h.expectSet(fs(searchFor("soda")))
	if n, err := st.PurgeExpired(context.Background(), now); err != nil || n != 1 {
		t.Fatalf("PurgeExpired = %d, %v", n, err)
	}
	h.expectSet(fs(searchFor("grape")), later)
	h.expectSet(fs(searchFor("soda")))
}
