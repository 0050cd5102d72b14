package storetest

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// Run runs the conformance suite. open must return a fresh, empty store
// each time it is called (it may register its own cleanups on t); Run
// closes it when the subtest ends, and ignores the ErrClosed of a store a
// subtest already closed. The Search subtests run only on a store that
// reports SupportsSearch (store.Searcher); SearchUnsupported runs only on
// one that does not.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, st store.Store)
	}{
		{"SaveDuplicate", testSaveDuplicate},
		{"EmptyRaw", testEmptyRaw},
		{"Invalid", testInvalid},
		{"Ordering", testOrdering},
		{"Limit", testLimit},
		{"MultipleFilters", testMultipleFilters},
		{"FilterFields", testFilterFields},
		{"TagValues", testTagValues},
		{"ManyAuthors", testManyAuthors},
		{"EmptyFilters", testEmptyFilters},
		{"Replaceable", testReplaceable},
		{"Addressable", testAddressable},
		{"DeleteByID", testDeleteByID},
		{"DeleteByAddress", testDeleteByAddress},
		{"DeleteDeletion", testDeleteDeletion},
		{"Vanish", testVanish},
		{"VanishGiftWraps", testVanishGiftWraps},
		{"Expiration", testExpiration},
		{"CountItems", testCountItems},
		{"HasDelete", testHasDelete},
		{"SaveBatch", testSaveBatch},
		{"CancelAfterHandOff", testCancelAfterHandOff},
		{"Submit", testSubmit},
		{"SubmitConcurrent", testSubmitConcurrent},
		{"Iterator", testIterator},
		{"IteratorSnapshot", testIteratorSnapshot},
		{"CommitPositions", testCommitPositions},
		{"SnapshotIncludes", testSnapshotIncludes},
		{"SnapshotExact", testSnapshotExact},
		{"Closed", testClosed},
		{"CloseFlushes", testCloseFlushes},
		{"Differential", testDifferential},
		{"SearchUnsupported", testSearchUnsupported},
		{"SearchMatch", testSearchMatch},
		{"SearchFields", testSearchFields},
		{"SearchFilters", testSearchFilters},
		{"SearchLimitOrder", testSearchLimitOrder},
		{"SearchRemoval", testSearchRemoval},
		{"SearchExpiration", testSearchExpiration},
		{"UnverifiedHidden", testUnverifiedHidden},
		{"UnverifiedRelease", testUnverifiedRelease},
		{"UnverifiedReject", testUnverifiedReject},
		{"UnverifiedConcurrent", testUnverifiedConcurrent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := open(t)
			t.Cleanup(func() {
				if err := st.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(t, st)
		})
	}
}

// h bundles the helpers the subtests use.
type h struct {
	t   *testing.T
	st  store.Store
	rng *rand.Rand
}

func newH(t *testing.T, st store.Store) *h {
	return &h{t: t, st: st, rng: rand.New(rand.NewPCG(uint64(len(t.Name())), 42))}
}

func (h *h) ev(author, kind int, createdAt int64, tags ...nostr.Tag) *nostr.Event {
	return NewEvent(h.rng, Key(author), kind, createdAt, nostr.Tags(tags), "content "+h.t.Name())
}

// save saves events in one batch and returns the outcomes.
func (h *h) save(evs ...*nostr.Event) []store.SaveResult {
	h.t.Helper()
	res, err := h.st.Save(context.Background(), evs)
	if err != nil {
		h.t.Fatalf("Save: %v", err)
	}
	if len(res) != len(evs) {
		h.t.Fatalf("Save returned %d results for %d events", len(res), len(evs))
	}
	return res
}

// outcomes saves events in one batch and checks their outcomes.
func (h *h) outcomes(evs []*nostr.Event, want ...store.Outcome) []store.SaveResult {
	h.t.Helper()
	res := h.save(evs...)
	for i := range res {
		if res[i].Outcome != want[i] {
			h.t.Fatalf("event %d (kind %d): outcome %v (err %v), want %v", i, evs[i].Kind, res[i].Outcome, res[i].Err, want[i])
		}
	}
	return res
}

// stored saves events in one batch and checks they are all Stored.
func (h *h) stored(evs ...*nostr.Event) {
	h.t.Helper()
	res := h.save(evs...)
	for i := range res {
		if res[i].Outcome != store.Stored {
			h.t.Fatalf("event %d (kind %d): outcome %v (err %v), want stored", i, evs[i].Kind, res[i].Outcome, res[i].Err)
		}
	}
}

// query runs a query and returns copies of the records.
func (h *h) query(filters ...nostr.Filter) []store.Record {
	h.t.Helper()
	it, err := h.st.Query(context.Background(), filters)
	if err != nil {
		h.t.Fatalf("Query: %v", err)
	}
	defer it.Close()
	var out []store.Record
	for it.Next() {
		r := *it.Record()
		r.Raw = slices.Clone(r.Raw)
		out = append(out, r)
	}
	if err := it.Err(); err != nil {
		h.t.Fatalf("iterator: %v", err)
	}
	return out
}

// expect checks that the query returns exactly want, in order, with the
// right record fields and Raw.
func (h *h) expect(filters []nostr.Filter, want ...*nostr.Event) {
	h.t.Helper()
	got := h.query(filters...)
	if len(got) != len(want) {
		h.t.Fatalf("query %s: got %d events %.400s, want %d %.400s", fmtFilters(filters), len(got), fmtRecs(got), len(want), fmtEvs(want))
	}
	for i := range want {
		checkRecord(h.t, &got[i], want[i])
	}
	// Count agrees with the query when no filter has a limit.
	for i := range filters {
		if filters[i].HasLimit {
			return
		}
	}
	if n := h.count(filters...); n != int64(len(want)) {
		h.t.Fatalf("Count %s = %d, want %d", fmtFilters(filters), n, len(want))
	}
}

func checkRecord(t *testing.T, r *store.Record, want *nostr.Event) {
	t.Helper()
	if r.ID != want.ID {
		t.Fatalf("record id %s, want %s", r.ID.Hex()[:8], want.ID.Hex()[:8])
	}
	if r.PubKey != want.PubKey || r.CreatedAt != want.CreatedAt || r.Kind != want.Kind {
		t.Fatalf("record %s: fields (%s, %d, %d), want (%s, %d, %d)", r.ID.Hex()[:8],
			r.PubKey.Hex()[:8], r.CreatedAt, r.Kind, want.PubKey.Hex()[:8], want.CreatedAt, want.Kind)
	}
	if !bytes.Equal(r.Raw, want.Raw) {
		t.Fatalf("record %s: Raw %q, want %q", r.ID.Hex()[:8], r.Raw, want.Raw)
	}
}

func (h *h) count(filters ...nostr.Filter) int64 {
	h.t.Helper()
	n, err := h.st.Count(context.Background(), filters)
	if err != nil {
		h.t.Fatalf("Count: %v", err)
	}
	return n
}

func (h *h) has(id nostr.ID) bool {
	h.t.Helper()
	ok, err := h.st.Has(context.Background(), id)
	if err != nil {
		h.t.Fatalf("Has: %v", err)
	}
	return ok
}

func fs(filters ...nostr.Filter) []nostr.Filter { return filters }

func fmtEvs(evs []*nostr.Event) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, ev := range evs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(ev.ID.Hex()[:8])
	}
	b.WriteByte(']')
	return b.String()
}

func fmtRecs(recs []store.Record) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, r := range recs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(r.ID.Hex()[:8])
	}
	b.WriteByte(']')
	return b.String()
}

func testSaveDuplicate(t *testing.T, st store.Store) {
	h := newH(t, st)
	a := h.ev(1, 1, BaseTime)
	h.stored(a)
	h.outcomes([]*nostr.Event{a}, store.Duplicate)
	if !h.has(a.ID) {
		t.Fatal("Has = false after save")
	}
	h.expect(fs(nostr.Filter{}), a)
	// A copy with the same id (as if it arrived again) is a duplicate too.
	c := *a
	c.Raw = slices.Clone(a.Raw)
	h.outcomes([]*nostr.Event{&c}, store.Duplicate)
	// Saving nothing is fine.
	if res, err := st.Save(context.Background(), nil); err != nil || len(res) != 0 {
		t.Fatalf("Save(nil) = %v, %v", res, err)
	}
}

func testEmptyRaw(t *testing.T, st store.Store) {
	h := newH(t, st)
	a := h.ev(1, 1, BaseTime, nostr.Tag{"t", "x"})
	want := slices.Clone(a.Raw)
	a.Raw = nil
	h.stored(a)
	got := h.query(nostr.Filter{})
	if len(got) != 1 || !bytes.Equal(got[0].Raw, want) {
		t.Fatalf("query after saving an event without Raw: %q, want %q", fmtRecs(got), want)
	}
}

func testInvalid(t *testing.T, st store.Store) {
	h := newH(t, st)
	f := func(ev *nostr.Event, want error) {
		t.Helper()
		res := h.save(ev)
		if res[0].Outcome != store.Failed || !errors.Is(res[0].Err, want) {
			t.Fatalf("kind %d created_at %d: %v (%v), want failed with %v", ev.Kind, ev.CreatedAt, res[0].Outcome, res[0].Err, want)
		}
	}
	f(h.ev(1, 20000, BaseTime), store.ErrEphemeral)
	f(h.ev(1, 29999, BaseTime), store.ErrEphemeral)
	f(h.ev(1, 22242, BaseTime), store.ErrEphemeral)
	f(h.ev(1, 65536, BaseTime), store.ErrInvalid)
	f(h.ev(1, -1, BaseTime), store.ErrInvalid)
	f(h.ev(1, 1, -1), store.ErrInvalid)
	f(h.ev(1, 1, nostr.MaxTimestamp+1), store.ErrInvalid)
	res := h.save(nil)
	if res[0].Outcome != store.Failed || !errors.Is(res[0].Err, store.ErrInvalid) {
		t.Fatalf("nil event: %v (%v)", res[0].Outcome, res[0].Err)
	}
	// A failed event does not fail the others in its batch.
	ok := h.ev(1, 1, BaseTime)
	h.outcomes([]*nostr.Event{h.ev(1, 20001, BaseTime), ok}, store.Failed, store.Stored)
	// The extremes of the ranges are fine.
	lo := h.ev(2, 0, 0)
	hi := h.ev(2, nostr.MaxKind, nostr.MaxTimestamp)
	h.stored(lo, hi)
	h.expect(fs(nostr.Filter{}), hi, ok, lo)
	h.expect(fs(nostr.Filter{Until: nostr.MaxTimestamp, HasUntil: true, Since: 0, HasSince: true}), hi, ok, lo)
	h.expect(fs(nostr.Filter{Until: 0, HasUntil: true}), lo)
	h.expect(fs(nostr.Filter{Since: nostr.MaxTimestamp, HasSince: true}), hi)
}

func testOrdering(t *testing.T, st store.Store) {
	h := newH(t, st)
	// Five events at the same created_at with known id order, plus older
	// and newer ones, saved in scrambled order.
	var tie []*nostr.Event
	for _, b := range []byte{0x50, 0x10, 0xf0, 0x00, 0x80} {
		tie = append(tie, WithID(h.ev(int(b)%3, 1, BaseTime+10), IDWithPrefix(h.rng, b)))
	}
	old := h.ev(1, 1, BaseTime)
	newer := h.ev(2, 1, BaseTime+20)
	h.stored(tie[0], old, tie[1])
	h.stored(newer, tie[2])
	h.stored(tie[3], tie[4])
	sorted := slices.Clone(tie)
	slices.SortFunc(sorted, CompareNewestFirst)
	if sorted[0].ID[0] != 0x00 || sorted[4].ID[0] != 0xf0 {
		t.Fatal("BUG: test ids not as intended")
	}
	want := append(append([]*nostr.Event{newer}, sorted...), old)
	h.expect(fs(nostr.Filter{}), want...)
	h.expect(fs(nostr.Filter{Kinds: []int{1}}), want...)
	h.expect(fs(nostr.Filter{Kinds: []int{1}, Limit: 3, HasLimit: true}), want[:3]...)
	// Ties straddling the limit keep the lowest ids.
	h.expect(fs(nostr.Filter{Until: BaseTime + 10, HasUntil: true, Limit: 2, HasLimit: true}), sorted[:2]...)
	authors := []nostr.PubKey{Key(0), Key(1), Key(2)}
	h.expect(fs(nostr.Filter{Authors: authors, Limit: 4, HasLimit: true}), want[:4]...)
	h.expect(fs(nostr.Filter{Authors: authors, Kinds: []int{1}, Limit: 4, HasLimit: true}), want[:4]...)
}

func testLimit(t *testing.T, st store.Store) {
	h := newH(t, st)
	var evs []*nostr.Event
	for i := 0; i < 30; i++ {
		evs = append(evs, h.ev(i%3, 1+i%2, BaseTime+int64(i/2), nostr.Tag{"t", "x"}))
	}
	h.stored(evs...)
	all := slices.Clone(evs)
	slices.SortFunc(all, CompareNewestFirst)
	for _, n := range []int{1, 2, 5, 29, 30, 31, 100} {
		want := all[:min(n, len(all))]
		h.expect(fs(nostr.Filter{Limit: n, HasLimit: true}), want...)
		h.expect(fs(nostr.Filter{Tags: []nostr.TagFilter{{Name: 't', Values: []string{"x"}}}, Limit: n, HasLimit: true}), want...)
	}
	h.expect(fs(nostr.Filter{}), all...)
	// Limit without HasLimit is ignored.
	h.expect(fs(nostr.Filter{Limit: 3}), all...)
	// Limit counts matches, not candidates.
	var kind2 []*nostr.Event
	for _, ev := range all {
		if ev.Kind == 2 && ev.PubKey == Key(1) {
			kind2 = append(kind2, ev)
		}
	}
	h.expect(fs(nostr.Filter{Authors: []nostr.PubKey{Key(1)}, Kinds: []int{2}, Limit: 3, HasLimit: true}), kind2[:3]...)
	h.expect(fs(nostr.Filter{Authors: []nostr.PubKey{Key(1)}, Tags: []nostr.TagFilter{{Name: 't', Values: []string{"x"}}}, Kinds: []int{2}, Limit: 3, HasLimit: true}), kind2[:3]...)
}

func testMultipleFilters(t *testing.T, st store.Store) {
	h := newH(t, st)
	var a1, a2 []*nostr.Event
	for i := 0; i < 10; i++ {
		a1 = append(a1, h.ev(1, 1, BaseTime+int64(2*i)))
		a2 = append(a2, h.ev(2, 1, BaseTime+int64(2*i+1)))
	}
	h.stored(a1...)
	h.stored(a2...)
	slices.SortFunc(a1, CompareNewestFirst)
	slices.SortFunc(a2, CompareNewestFirst)
	f1 := nostr.Filter{Authors: []nostr.PubKey{Key(1)}, Limit: 2, HasLimit: true}
	f2 := nostr.Filter{Authors: []nostr.PubKey{Key(2)}, Limit: 3, HasLimit: true}
	want := append(slices.Clone(a1[:2]), a2[:3]...)
	slices.SortFunc(want, CompareNewestFirst)
	h.expect(fs(f1, f2), want...)
	h.expect(fs(f2, f1), want...)
	// Overlapping filters: no duplicates, and each filter's limit applies to
	// its own matches.
	all := append(slices.Clone(a1), a2...)
	slices.SortFunc(all, CompareNewestFirst)
	fAll := nostr.Filter{Limit: 4, HasLimit: true}
	want = append(slices.Clone(all[:4]), a1[:2]...)
	want = dedupSorted(want)
	h.expect(fs(fAll, f1), want...)
	h.expect(fs(f1, fAll, f1), want...)
	h.expect(fs(nostr.Filter{}, nostr.Filter{}), all...)
	// An empty filter next to a real one contributes nothing.
	h.expect(fs(nostr.Filter{Present: nostr.PresentKinds}, f2), a2[:3]...)
}

func dedupSorted(evs []*nostr.Event) []*nostr.Event {
	slices.SortFunc(evs, CompareNewestFirst)
	return slices.CompactFunc(evs, func(a, b *nostr.Event) bool { return a.ID == b.ID })
}

func testFilterFields(t *testing.T, st store.Store) {
	h := newH(t, st)
	hexA := Key(100).Hex()
	hexB := Key(101).Hex()
	e1 := h.ev(1, 1, BaseTime+1, nostr.Tag{"p", hexA}, nostr.Tag{"t", "nostr"})
	e2 := h.ev(1, 7, BaseTime+2, nostr.Tag{"p", hexB}, nostr.Tag{"e", e1.ID.Hex()})
	e3 := h.ev(2, 1, BaseTime+3, nostr.Tag{"t", "go"}, nostr.Tag{"t", "nostr"})
	e4 := h.ev(2, 7, BaseTime+4, nostr.Tag{"p", hexA, "wss://relay", "mention"}, nostr.Tag{"e", e1.ID.Hex()})
	e5 := h.ev(3, 30023, BaseTime+5, nostr.Tag{"d", "article"}, nostr.Tag{"T", "upper"})
	e6 := h.ev(3, 1, BaseTime+6, nostr.Tag{"title", "multi-letter"}, nostr.Tag{"x"})
	h.stored(e1, e2, e3, e4, e5, e6)
	k := func(ns ...int) []nostr.PubKey {
		var out []nostr.PubKey
		for _, n := range ns {
			out = append(out, Key(n))
		}
		return out
	}
	tag := func(name byte, values ...string) []nostr.TagFilter {
		return []nostr.TagFilter{{Name: name, Values: values}}
	}
	f := func(fl nostr.Filter, want ...*nostr.Event) {
		t.Helper()
		h.expect(fs(fl), want...)
	}
	f(nostr.Filter{IDs: []nostr.ID{e1.ID}}, e1)
	f(nostr.Filter{IDs: []nostr.ID{e1.ID, e3.ID, {1, 2, 3}}}, e3, e1)
	f(nostr.Filter{IDs: []nostr.ID{e1.ID, e1.ID}}, e1)
	f(nostr.Filter{IDs: []nostr.ID{e1.ID, e3.ID}, Authors: k(2)}, e3)
	f(nostr.Filter{IDs: []nostr.ID{e1.ID, e3.ID}, Kinds: []int{7}})
	f(nostr.Filter{IDs: []nostr.ID{e1.ID, e3.ID, e4.ID}, Since: BaseTime + 2, HasSince: true, Until: BaseTime + 3, HasUntil: true}, e3)
	f(nostr.Filter{IDs: []nostr.ID{e1.ID, e3.ID, e4.ID}, Tags: tag('t', "nostr")}, e3, e1)
	f(nostr.Filter{IDs: []nostr.ID{e1.ID, e3.ID, e4.ID}, Limit: 1, HasLimit: true}, e4)
	f(nostr.Filter{Authors: k(1)}, e2, e1)
	f(nostr.Filter{Authors: k(1, 3, 9)}, e6, e5, e2, e1)
	f(nostr.Filter{Authors: k(1, 1)}, e2, e1)
	f(nostr.Filter{Authors: k(9)})
	f(nostr.Filter{Kinds: []int{7}}, e4, e2)
	f(nostr.Filter{Kinds: []int{7, 30023, 5}}, e5, e4, e2)
	f(nostr.Filter{Kinds: []int{7, 7}}, e4, e2)
	f(nostr.Filter{Authors: k(1, 2), Kinds: []int{1}}, e3, e1)
	f(nostr.Filter{Authors: k(2), Kinds: []int{1, 7}}, e4, e3)
	f(nostr.Filter{Tags: tag('p', hexA)}, e4, e1)
	f(nostr.Filter{Tags: tag('p', hexA, hexB)}, e4, e2, e1)
	f(nostr.Filter{Tags: tag('p', strings.ToUpper(hexA))})
	f(nostr.Filter{Tags: tag('e', e1.ID.Hex())}, e4, e2)
	f(nostr.Filter{Tags: tag('t', "nostr", "go")}, e3, e1)
	f(nostr.Filter{Tags: tag('t', "go", "rust")}, e3)
	f(nostr.Filter{Tags: tag('d', "article")}, e5)
	f(nostr.Filter{Tags: tag('T', "upper")}, e5)
	f(nostr.Filter{Tags: tag('t', "upper")})
	f(nostr.Filter{Tags: tag('x', "")})
	f(nostr.Filter{Tags: []nostr.TagFilter{{Name: 't', Values: []string{"nostr"}}, {Name: 'p', Values: []string{hexA}}}}, e1)
	f(nostr.Filter{Tags: []nostr.TagFilter{{Name: 'p', Values: []string{hexA}}, {Name: 'e', Values: []string{e1.ID.Hex()}}}}, e4)
	f(nostr.Filter{Tags: tag('p', hexA), Kinds: []int{7}}, e4)
	f(nostr.Filter{Tags: tag('p', hexA), Authors: k(1)}, e1)
	f(nostr.Filter{Tags: tag('p', hexA), Authors: k(1), Kinds: []int{1}}, e1)
	f(nostr.Filter{Tags: tag('t', "nostr"), Authors: k(1, 2), Kinds: []int{1}, Until: BaseTime + 2, HasUntil: true}, e1)
	f(nostr.Filter{Since: BaseTime + 3, HasSince: true}, e6, e5, e4, e3)
	f(nostr.Filter{Until: BaseTime + 3, HasUntil: true}, e3, e2, e1)
	f(nostr.Filter{Since: BaseTime + 2, HasSince: true, Until: BaseTime + 4, HasUntil: true}, e4, e3, e2)
	f(nostr.Filter{Since: BaseTime + 4, HasSince: true, Until: BaseTime + 4, HasUntil: true}, e4)
	f(nostr.Filter{Since: BaseTime + 7, HasSince: true})
	f(nostr.Filter{Until: BaseTime, HasUntil: true})
	f(nostr.Filter{Since: -5, HasSince: true, Until: 1 << 62, HasUntil: true}, e6, e5, e4, e3, e2, e1)
	f(nostr.Filter{Until: -1, HasUntil: true})
	f(nostr.Filter{Authors: k(1, 2), Since: BaseTime + 2, HasSince: true, Until: BaseTime + 3, HasUntil: true}, e3, e2)
	f(nostr.Filter{Kinds: []int{1}, Since: BaseTime + 2, HasSince: true}, e6, e3)
	f(nostr.Filter{Authors: k(2), Kinds: []int{7}, Until: BaseTime + 3, HasUntil: true})
	f(nostr.Filter{Tags: tag('e', e1.ID.Hex()), Since: BaseTime + 3, HasSince: true}, e4)
	f(nostr.Filter{Authors: k(3), Kinds: []int{30023}, Tags: tag('d', "article")}, e5)
	f(nostr.Filter{Authors: k(3), Kinds: []int{30023}, Tags: tag('d', "other")})
	f(nostr.Filter{Authors: k(3), Kinds: []int{30023}, Tags: tag('d', "article"), Until: BaseTime + 4, HasUntil: true})
}

func testTagValues(t *testing.T, st store.Store) {
	h := newH(t, st)
	long := strings.Repeat("long value ", 40)
	long2 := long + "!"
	hexUpper := strings.ToUpper(Key(5).Hex())
	hex63 := Key(5).Hex()[:63]
	evs := []*nostr.Event{
		h.ev(1, 1, BaseTime+1, nostr.Tag{"r", long}),
		h.ev(1, 1, BaseTime+2, nostr.Tag{"r", long2}),
		h.ev(1, 1, BaseTime+3, nostr.Tag{"r", ""}),
		h.ev(1, 1, BaseTime+4, nostr.Tag{"r", hexUpper}),
		h.ev(1, 1, BaseTime+5, nostr.Tag{"r", hex63}),
		h.ev(1, 1, BaseTime+6, nostr.Tag{"r", Key(5).Hex()}),
		h.ev(1, 1, BaseTime+7, nostr.Tag{"r", "a\x00b\"c\\d\n€"}),
		h.ev(1, 1, BaseTime+8, nostr.Tag{"r", "x"}, nostr.Tag{"r", "x"}, nostr.Tag{"r", "y"}),
		h.ev(1, 1, BaseTime+9, nostr.Tag{"r"}),
	}
	h.stored(evs...)
	f := func(value string, want ...*nostr.Event) {
		t.Helper()
		h.expect(fs(nostr.Filter{Tags: []nostr.TagFilter{{Name: 'r', Values: []string{value}}}}), want...)
	}
	f(long, evs[0])
	f(long2, evs[1])
	f(long[:len(long)-1])
	f("", evs[2])
	f(hexUpper, evs[3])
	f(hex63, evs[4])
	f(Key(5).Hex(), evs[5])
	f("a\x00b\"c\\d\n€", evs[6])
	f("x", evs[7])
	f("y", evs[7])
	h.expect(fs(nostr.Filter{Tags: []nostr.TagFilter{{Name: 'r', Values: []string{"x", "y", long}}}}), evs[7], evs[0])
	// Deleting an event removes its tag entries.
	if n, err := st.Delete(context.Background(), []nostr.ID{evs[0].ID, evs[7].ID}); err != nil || n != 2 {
		t.Fatalf("Delete = %d, %v", n, err)
	}
	f(long)
	f("x")
	f(long2, evs[1])
}

// likeModel checks that the store answers filters as the model does after
// saving the same events.
func (h *h) likeModel(evs []*nostr.Event, filters ...nostr.Filter) {
	h.t.Helper()
	m := NewModel()
	if _, err := m.Save(context.Background(), evs); err != nil {
		h.t.Fatal(err)
	}
	it, _ := m.Query(context.Background(), filters)
	byID := make(map[nostr.ID]*nostr.Event)
	for _, ev := range evs {
		byID[ev.ID] = ev
	}
	var want []*nostr.Event
	for it.Next() {
		want = append(want, byID[it.Record().ID])
	}
	if len(want) == 0 {
		h.t.Fatalf("BUG: test query %s matches nothing", fmtFilters(filters))
	}
	h.expect(filters, want...)
}

func testManyAuthors(t *testing.T, st store.Store) {
	h := newH(t, st)
	// A follow list of 300 authors, with events of several kinds.
	var evs []*nostr.Event
	var authors []nostr.PubKey
	for a := 0; a < 300; a++ {
		authors = append(authors, Key(a))
		for j := 0; j < 4; j++ {
			evs = append(evs, h.ev(a, []int{1, 6, 7, 1}[j], BaseTime+int64(h.rng.IntN(500))))
		}
	}
	// Busy authors nobody follows, whose events crowd the recent past
	// (with many created_at ties), so that a planner scanning recent
	// events for the followed ones has to give up and seek them.
	for i := 0; i < 4000; i++ {
		evs = append(evs, h.ev(1000+i%7, []int{1, 6, 7}[i%3], BaseTime+300+int64(h.rng.IntN(400))))
	}
	h.stored(evs...)
	f := func(fl nostr.Filter) {
		t.Helper()
		h.likeModel(evs, fl)
	}
	f(nostr.Filter{Authors: authors, Limit: 60, HasLimit: true})
	f(nostr.Filter{Authors: authors, Kinds: []int{1, 6}, Limit: 60, HasLimit: true})
	f(nostr.Filter{Authors: authors, Kinds: []int{1, 6}, Limit: 500, HasLimit: true})
	f(nostr.Filter{Authors: authors[:150], Kinds: []int{1, 6}, Until: BaseTime + 250, HasUntil: true, Limit: 100, HasLimit: true})
	f(nostr.Filter{Authors: authors[:150], Kinds: []int{1, 6}, Since: BaseTime + 250, HasSince: true, Limit: 100, HasLimit: true})
	f(nostr.Filter{Authors: authors[100:], Kinds: []int{7}})
	f(nostr.Filter{Authors: authors[:20], Kinds: []int{1}, Since: BaseTime + 100, HasSince: true})
	f(nostr.Filter{Authors: append(slices.Clone(authors[:100]), Key(1003)), Kinds: []int{1, 7}, Limit: 300, HasLimit: true})
	f(nostr.Filter{Authors: append(slices.Clone(authors[50:250]), Key(1001)), Limit: 1000, HasLimit: true})
	f(nostr.Filter{Authors: authors[:80], Tags: nil, Kinds: []int{6}, Limit: 1, HasLimit: true})
	// More (author, kind) pairs than a planner may want to stream.
	kinds := []int{1, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}
	f(nostr.Filter{Authors: authors, Kinds: kinds, Limit: 100, HasLimit: true})
	f(nostr.Filter{Authors: authors, Kinds: kinds, Until: BaseTime + 400, HasUntil: true})
	f(nostr.Filter{Authors: authors, Kinds: kinds[1:], Limit: 700, HasLimit: true})
}

func testEmptyFilters(t *testing.T, st store.Store) {
	h := newH(t, st)
	e := h.ev(1, 1, BaseTime, nostr.Tag{"t", "x"})
	h.stored(e)
	f := func(fl nostr.Filter, want ...*nostr.Event) {
		t.Helper()
		h.expect(fs(fl), want...)
		items, err := st.Items(context.Background(), fs(fl), 0)
		if err != nil || len(items) != len(want) {
			t.Fatalf("Items = %v, %v; want %d items", items, err, len(want))
		}
	}
	f(nostr.Filter{}, e)
	f(nostr.Filter{Present: nostr.PresentIDs})
	f(nostr.Filter{Present: nostr.PresentAuthors})
	f(nostr.Filter{Present: nostr.PresentKinds})
	f(nostr.Filter{Present: nostr.PresentKinds, Authors: []nostr.PubKey{Key(1)}})
	f(nostr.Filter{Tags: []nostr.TagFilter{{Name: 't'}}})
	f(nostr.Filter{Tags: []nostr.TagFilter{{Name: 't', Values: []string{}}}})
	f(nostr.Filter{Since: BaseTime + 1, HasSince: true, Until: BaseTime, HasUntil: true})
	if SupportsSearch(st) {
		f(nostr.Filter{Search: "content"}, e)
		f(nostr.Filter{Search: "content", Kinds: []int{1}}, e)
		f(nostr.Filter{Search: "content", Kinds: []int{2}})
	} else {
		f(nostr.Filter{Search: "content"})
		f(nostr.Filter{Search: "content", Kinds: []int{1}})
	}
	// A limit of zero returns nothing from Query, but Count and Items
	// ignore limits.
	h.expect(fs(nostr.Filter{Limit: 0, HasLimit: true}))
	h.expect(fs(nostr.Filter{Limit: -1, HasLimit: true}))
	if n := h.count(nostr.Filter{Limit: 0, HasLimit: true}); n != 1 {
		t.Fatalf("Count with limit 0 = %d, want 1", n)
	}
	h.expect(nil)
}

func testReplaceable(t *testing.T, st store.Store) {
	h := newH(t, st)
	for _, kind := range []int{0, 3, 10000, 10002, 19999} {
		v1 := h.ev(1, kind, BaseTime+10)
		h.stored(v1)
		// Older: superseded, nothing changes.
		older := h.ev(1, kind, BaseTime+5)
		h.outcomes([]*nostr.Event{older}, store.Superseded)
		// Newer: replaces, Removed names v1.
		v2 := WithID(h.ev(1, kind, BaseTime+20), IDWithPrefix(h.rng, 0x80))
		res := h.outcomes([]*nostr.Event{v2}, store.Stored)
		if !slices.Equal(res[0].Removed, []nostr.ID{v1.ID}) {
			t.Fatalf("kind %d: Removed = %v, want [v1]", kind, res[0].Removed)
		}
		if h.has(v1.ID) {
			t.Fatalf("kind %d: replaced version still stored", kind)
		}
		// The replaced version cannot come back.
		h.outcomes([]*nostr.Event{v1}, store.Superseded)
		// Same created_at: the lower id wins.
		hi := WithID(h.ev(1, kind, BaseTime+20), IDWithPrefix(h.rng, 0xff))
		lo := WithID(h.ev(1, kind, BaseTime+20), IDWithPrefix(h.rng, 0x00))
		h.outcomes([]*nostr.Event{hi}, store.Superseded)
		res = h.outcomes([]*nostr.Event{lo}, store.Stored)
		if !slices.Equal(res[0].Removed, []nostr.ID{v2.ID}) {
			t.Fatalf("kind %d: tie Removed = %v, want [v2]", kind, res[0].Removed)
		}
		// Other authors and the d tag do not matter: the address is (pubkey, kind).
		other := h.ev(2, kind, BaseTime+1)
		withD := h.ev(1, kind, BaseTime+30, nostr.Tag{"d", "x"})
		h.stored(other, withD)
		h.expect(fs(nostr.Filter{Kinds: []int{kind}}), withD, other)
		h.expect(fs(nostr.Filter{Authors: []nostr.PubKey{Key(1)}, Kinds: []int{kind}}), withD)
		h.expect(fs(nostr.Filter{Authors: []nostr.PubKey{Key(1)}, Kinds: []int{kind}, Tags: []nostr.TagFilter{{Name: 'd', Values: []string{"x"}}}}), withD)
		h.expect(fs(nostr.Filter{Authors: []nostr.PubKey{Key(1)}, Kinds: []int{kind}, Tags: []nostr.TagFilter{{Name: 'd', Values: []string{""}}}}))
		h.expect(fs(nostr.Filter{IDs: []nostr.ID{lo.ID, withD.ID}}), withD)
	}
	// Regular kinds are not replaced.
	a := h.ev(1, 1, BaseTime)
	b := h.ev(1, 1, BaseTime+1)
	h.stored(a, b)
	h.expect(fs(nostr.Filter{Kinds: []int{1}}), b, a)
}

func testAddressable(t *testing.T, st store.Store) {
	h := newH(t, st)
	kind := 30023
	d := func(v string) nostr.Tag { return nostr.Tag{"d", v} }
	x1 := h.ev(1, kind, BaseTime+10, d("x"))
	y1 := WithID(h.ev(1, kind, BaseTime+10, d("y")), IDWithPrefix(h.rng, 0x80))
	none1 := h.ev(1, kind, BaseTime+10)
	h.stored(x1, y1, none1)
	// Different d values are different addresses.
	h.expect(fs(nostr.Filter{Kinds: []int{kind}}), sortEvs(x1, y1, none1)...)
	// A missing d tag and an empty one are the same address; so are a d tag
	// with no value and one with "".
	empty := h.ev(1, kind, BaseTime+11, d(""))
	res := h.outcomes([]*nostr.Event{empty}, store.Stored)
	if !slices.Equal(res[0].Removed, []nostr.ID{none1.ID}) {
		t.Fatalf("Removed = %v, want [none1]", res[0].Removed)
	}
	bare := h.ev(1, kind, BaseTime+12, nostr.Tag{"d"})
	res = h.outcomes([]*nostr.Event{bare}, store.Stored)
	if !slices.Equal(res[0].Removed, []nostr.ID{empty.ID}) {
		t.Fatalf("Removed = %v, want [empty]", res[0].Removed)
	}
	// Only the first d tag counts.
	twoD := h.ev(1, kind, BaseTime+13, d("x"), d("y"))
	res = h.outcomes([]*nostr.Event{twoD}, store.Stored)
	if !slices.Equal(res[0].Removed, []nostr.ID{x1.ID}) {
		t.Fatalf("Removed = %v, want [x1]", res[0].Removed)
	}
	h.outcomes([]*nostr.Event{h.ev(1, kind, BaseTime+9, d("y"))}, store.Superseded)
	h.outcomes([]*nostr.Event{WithID(h.ev(1, kind, BaseTime+10, d("y")), IDWithPrefix(h.rng, 0xf0))}, store.Superseded)
	y2 := WithID(h.ev(1, kind, BaseTime+10, d("y")), IDWithPrefix(h.rng, 0x01))
	res = h.outcomes([]*nostr.Event{y2}, store.Stored)
	if !slices.Equal(res[0].Removed, []nostr.ID{y1.ID}) {
		t.Fatalf("Removed = %v, want [y1]", res[0].Removed)
	}
	// Other kinds and authors are other addresses.
	h.stored(h.ev(1, 30000, BaseTime, d("x")), h.ev(2, kind, BaseTime, d("x")))
	h.expect(fs(nostr.Filter{Authors: []nostr.PubKey{Key(1)}, Kinds: []int{kind}, Tags: []nostr.TagFilter{{Name: 'd', Values: []string{"x"}}}}), twoD)
	// A d tag without a value gives the address "" but does not match #d "".
	h.expect(fs(nostr.Filter{Authors: []nostr.PubKey{Key(1)}, Kinds: []int{kind}, Tags: []nostr.TagFilter{{Name: 'd', Values: []string{""}}}}))
	h.expect(fs(nostr.Filter{Authors: []nostr.PubKey{Key(1)}, Kinds: []int{kind}, Tags: []nostr.TagFilter{{Name: 'd', Values: []string{"y"}}}}), twoD, y2)
	if n := h.count(nostr.Filter{Authors: []nostr.PubKey{Key(1)}, Kinds: []int{kind}}); n != 3 {
		t.Fatalf("count of author 1's kind %d = %d, want 3 (x, y, \"\")", kind, n)
	}
	// Replacing within one batch.
	z1 := h.ev(3, kind, BaseTime, d("z"))
	z2 := h.ev(3, kind, BaseTime+1, d("z"))
	z0 := h.ev(3, kind, BaseTime-1, d("z"))
	res = h.outcomes([]*nostr.Event{z1, z2, z0}, store.Stored, store.Stored, store.Superseded)
	if !slices.Equal(res[1].Removed, []nostr.ID{z1.ID}) {
		t.Fatalf("in-batch Removed = %v, want [z1]", res[1].Removed)
	}
	h.expect(fs(nostr.Filter{Authors: []nostr.PubKey{Key(3)}}), z2)
}

func sortEvs(evs ...*nostr.Event) []*nostr.Event {
	out := slices.Clone(evs)
	slices.SortFunc(out, CompareNewestFirst)
	return out
}
