package sync

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/store"
)

const base = 1_700_000_000

// The sets of the tests: common to both sides, only local, only remote,
// and events of another kind on each side. Timestamps overlap and tie.
func sets() (common, local, remote, otherLocal, otherRemote []*nostr.Event) {
	return signed("common", 300, 1, base, 7),
		signed("local", 120, 1, base+3, 11),
		signed("remote", 150, 1, base+1, 0), // one second: ties
		signed("other-local", 40, 7, base, 5),
		signed("other-remote", 30, 7, base, 5)
}

// TestSyncDirections syncs a local store with a relay holding overlapping
// sets, in each direction, and checks both sides end up as they should,
// and that a second run finds nothing left to do.
func TestSyncDirections(t *testing.T) {
	t.Parallel()
	common, local, remote, otherLocal, otherRemote := sets()
	kind1 := nostr.Filter{Kinds: []int{1}, Present: nostr.PresentKinds}
	f := func(dir Direction, frameLimit int) {
		t.Helper()
		st := modelWith(t, common, local, otherLocal)
		r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{NegFrameLimit: 4096}})
		fill(t, r.Store, common, remote, otherRemote)
		o := Options{Remote: r.URL, Store: st, Filter: kind1, Direction: dir, FrameLimit: frameLimit, Batch: 64, IDsPerReq: 100}
		res, err := Run(context.Background(), o)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if res.Have != len(local) || res.Need != len(remote) || res.Mode != "negentropy" {
			t.Fatalf("%s: %s", dir, res.String())
		}
		wantLocal, wantRemote := want(common, local), want(common, remote)
		if dir&Down != 0 {
			wantLocal = want(common, local, remote)
			if res.Down.Moved != len(remote) || res.Down.Wanted != len(remote) || res.Down.Invalid+res.Down.Missing != 0 {
				t.Fatalf("%s: down %+v", dir, res.Down)
			}
		}
		if dir&Up != 0 {
			wantRemote = want(common, local, remote)
			if res.Up.Moved != len(local) || res.Up.RefusedTotal() != 0 {
				t.Fatalf("%s: up %+v", dir, res.Up)
			}
		}
		sameItems(t, "local", st, kind1, wantLocal)
		sameItems(t, "remote", r.Store, kind1, wantRemote)
		sameItems(t, "local kind 7", st, nostr.Filter{Kinds: []int{7}}, want(otherLocal))
		sameItems(t, "remote kind 7", r.Store, nostr.Filter{Kinds: []int{7}}, want(otherRemote))
		if res.ReconcileSent == 0 || res.ReconcileReceived == 0 || res.Sent < res.ReconcileSent || res.Rounds == 0 {
			t.Fatalf("%s: bytes/rounds: %s", dir, res.String())
		}
		t.Logf("%s: %s", dir, res.String())

		again, err := Run(context.Background(), Options{Remote: r.URL, Store: st, Filter: kind1, Direction: Both})
		if err != nil {
			t.Fatal(err)
		}
		wantHave, wantNeed := 0, 0
		if dir&Up == 0 {
			wantHave = len(local)
		}
		if dir&Down == 0 {
			wantNeed = len(remote)
		}
		if again.Have != wantHave || again.Need != wantNeed {
			t.Fatalf("%s then both: %s", dir, again.String())
		}
		sameItems(t, "local after both", st, kind1, want(common, local, remote))
		sameItems(t, "remote after both", r.Store, kind1, want(common, local, remote))
	}
	f(Down, 0)
	f(Up, 0)
	f(Both, 4096)
}

// TestSyncAllEvents: the zero filter syncs everything, both kinds.
func TestSyncAllEvents(t *testing.T) {
	t.Parallel()
	common, local, remote, otherLocal, otherRemote := sets()
	st := modelWith(t, common, local, otherLocal)
	r := relaytest.Start(t, relaytest.Options{})
	fill(t, r.Store, common, remote, otherRemote)
	res, err := Run(context.Background(), Options{Remote: r.URL, Store: st, Direction: Both})
	if err != nil {
		t.Fatal(err)
	}
	all := want(common, local, remote, otherLocal, otherRemote)
	sameItems(t, "local", st, nostr.Filter{}, all)
	sameItems(t, "remote", r.Store, nostr.Filter{}, all)
	if res.Have != len(local)+len(otherLocal) || res.Need != len(remote)+len(otherRemote) {
		t.Fatal(res.String())
	}
}

// TestSyncFromRelay syncs two relays (Options.From) both ways: one
// negentropy session on each relay, no id listing.
func TestSyncFromRelay(t *testing.T) {
	t.Parallel()
	common, local, remote, otherLocal, otherRemote := sets()
	f := func(dir Direction, negLimit int) {
		t.Helper()
		rcfg := relay.Config{NegFrameLimit: negLimit}
		a := relaytest.Start(t, relaytest.Options{Relay: rcfg})
		b := relaytest.Start(t, relaytest.Options{Relay: rcfg})
		fill(t, a.Store, common, local, otherLocal)
		fill(t, b.Store, common, remote, otherRemote)
		res, err := Run(context.Background(), Options{Remote: b.URL, From: a.URL, Direction: dir, IDsPerReq: 70, Window: 16})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s", dir, res.String())
		onlyA, onlyB := len(local)+len(otherLocal), len(remote)+len(otherRemote)
		if res.Mode != "bridge" || res.Have != onlyA || res.Need != onlyB {
			t.Fatalf("%s: %s", dir, res.String())
		}
		wantA, wantB := want(common, local, otherLocal), want(common, remote, otherRemote)
		all := want(common, local, remote, otherLocal, otherRemote)
		if dir&Down != 0 {
			wantA = all
			if res.Down.Moved != onlyB || res.Down.Wanted != onlyB {
				t.Fatalf("%s: down %+v", dir, res.Down)
			}
		}
		if dir&Up != 0 {
			wantB = all
			if res.Up.Moved != onlyA || res.Up.Wanted != onlyA {
				t.Fatalf("%s: up %+v", dir, res.Up)
			}
		}
		sameItems(t, "from", a.Store, nostr.Filter{}, wantA)
		sameItems(t, "remote", b.Store, nostr.Filter{}, wantB)
		for _, r := range []*relaytest.Relay{a, b} {
			if st := r.Relay.NegStats(); st.Opened != 1 || st.Refused != 0 {
				t.Fatalf("%s: negentropy sessions on %s: %+v", dir, r.URL, st)
			}
		}
	}
	f(Both, 0)
	f(Down, 4096)
	f(Up, 0)
}

// TestSyncFromRelaySmallDifference: two relays that share 3000 events
// and differ by 6 reconcile in bytes that follow the difference: a
// fraction of what listing either relay's ids (32 bytes each) would take.
func TestSyncFromRelaySmallDifference(t *testing.T) {
	t.Parallel()
	common := signed("bridge-common", 3000, 1, base, 13)
	onlyA := signed("bridge-a", 2, 1, base+500, 1000)
	onlyB := signed("bridge-b", 4, 1, base+700, 2000)
	a := relaytest.Start(t, relaytest.Options{})
	b := relaytest.Start(t, relaytest.Options{})
	fill(t, a.Store, common, onlyA)
	fill(t, b.Store, common, onlyB)
	res, err := Run(context.Background(), Options{Remote: b.URL, From: a.URL, Direction: Both})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res.String())
	sameItems(t, "from", a.Store, nostr.Filter{}, want(common, onlyA, onlyB))
	sameItems(t, "remote", b.Store, nostr.Filter{}, want(common, onlyA, onlyB))
	listing := int64(len(common)) * 32 * 2 // hex: 64 characters per id, one relay only
	if res.Have != 2 || res.Need != 4 || res.ReconcileReceived > listing/4 {
		t.Fatalf("reconcile received %d bytes (listing one relay: %d): %s", res.ReconcileReceived, listing, res.String())
	}
}

// cancelAfter is a Progress that cancels a context after n steps of a
// phase.
type cancelAfter struct {
	phase  string
	n      int64
	cancel context.CancelFunc
	cur    string
	done   int64
}

func (c *cancelAfter) Phase(name string, total int64) { c.cur, c.done = name, 0 }
func (c *cancelAfter) Done()                          {}
func (c *cancelAfter) Add(n int64) {
	c.done += n
	if c.cur == c.phase && c.done >= c.n {
		c.cancel()
	}
}

// TestSyncResume interrupts a download and an upload midway: what was
// done is kept, the next run does only the rest, and nothing is uploaded
// twice.
func TestSyncResume(t *testing.T) {
	t.Parallel()
	common := signed("resume-common", 100, 1, base, 3)
	local := signed("resume-local", 400, 1, base, 5)
	remote := signed("resume-remote", 450, 1, base+1, 2)
	st := modelWith(t, common, local)
	r := relaytest.Start(t, relaytest.Options{})
	fill(t, r.Store, common, remote)
	f := func(phase string, dir Direction, total int) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		o := Options{Remote: r.URL, Store: st, Direction: dir, Batch: 50, IDsPerReq: 50, Window: 8,
			Progress: &cancelAfter{phase: phase, n: 100, cancel: cancel}}
		res, err := Run(ctx, o)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: interrupted run: %v (%s)", phase, err, res.String())
		}
		tr := res.Down
		if dir == Up {
			tr = res.Up
		}
		if tr.Moved < 100 || tr.Moved >= total {
			t.Fatalf("%s: interrupted after %d of %d", phase, tr.Moved, total)
		}
		res2, err := Run(context.Background(), Options{Remote: r.URL, Store: st, Direction: dir})
		if err != nil {
			t.Fatal(err)
		}
		tr2 := res2.Down
		if dir == Up {
			tr2 = res2.Up
		}
		// Uploads in flight when the first run stopped may have been
		// stored without their OK being read: the second run does not see
		// them as missing, so at most that many are not counted twice.
		if tr2.Wanted > total-tr.Moved || tr2.Wanted < total-tr.Moved-o.Window || tr2.Moved != tr2.Wanted {
			t.Fatalf("%s: resumed run %s after %d moved", phase, res2.String(), tr.Moved)
		}
		t.Logf("%s: first run moved %d, second %d", phase, tr.Moved, tr2.Moved)
	}
	f("download", Down, len(remote))
	sameItems(t, "local", st, nostr.Filter{}, want(common, local, remote))
	f("upload", Up, len(local))
	sameItems(t, "remote", r.Store, nostr.Filter{}, want(common, local, remote))
	if d := r.Stats().EventsDuplicate; d != 0 {
		t.Fatalf("%d events uploaded twice", d)
	}
}

// TestSyncUnsupported: a remote that answers NEG-OPEN with NOTICE,
// CLOSED, NEG-ERR or nothing makes Run fail clearly; with FallbackPaging
// it pages through the remote with REQ instead.
func TestSyncUnsupported(t *testing.T) {
	t.Parallel()
	events := signed("unsupported", 200, 1, base, 1)
	f := func(neg string, wantErr error) {
		t.Helper()
		fr := newFakeRelay(t, neg, "", events)
		st := modelWith(t)
		_, err := Run(context.Background(), Options{Remote: fr.URL, Store: st, OpenTimeout: 300 * time.Millisecond})
		if !errors.Is(err, wantErr) {
			t.Fatalf("%s: %v, want %v", neg, err, wantErr)
		}
		t.Logf("%s: %v", neg, err)
		if n := len(items(t, st, nostr.Filter{})); n != 0 {
			t.Fatalf("%s: %d events saved", neg, n)
		}
		res, err := Run(context.Background(), Options{Remote: fr.URL, Store: st, OpenTimeout: 300 * time.Millisecond, FallbackPaging: true})
		if err != nil {
			t.Fatalf("%s: paging: %v", neg, err)
		}
		if res.Mode != ModePaging || res.Need != len(events) || res.Down.Moved != len(events) {
			t.Fatalf("%s: paging: %s", neg, res.String())
		}
		sameItems(t, "paged", st, nostr.Filter{}, want(events))
		_, err = Run(context.Background(), Options{Remote: fr.URL, Store: st, OpenTimeout: 300 * time.Millisecond, FallbackPaging: true, Direction: Both})
		if !errors.Is(err, wantErr) {
			t.Fatalf("%s: paging both ways: %v", neg, err)
		}
	}
	f("notice", ErrUnsupported)
	f("closed", ErrUnsupported)
	f("silent", ErrUnsupported)
	f("negerr", ErrRefused)
}

// TestSyncPaging: the fallback paging gets through ties at page boundaries
// without losing or repeating events, keeps events the local store
// already has, honours since/until, and counts a second holding more
// events than a page as a gap.
func TestSyncPaging(t *testing.T) {
	t.Parallel()
	// 7 events a second over 40 seconds, pages of 10: every page boundary
	// falls inside a second.
	var events []*nostr.Event
	for s := range int64(40) {
		events = append(events, signed("paging", 7, 1, base+s, 0)...)
	}
	// Distinct content per second: signed caches by parameters.
	seen := map[nostr.ID]bool{}
	for _, ev := range events {
		if seen[ev.ID] {
			t.Fatal("duplicate test event")
		}
		seen[ev.ID] = true
	}
	info := `{"limitation":{"max_limit":10}}`
	fr := newFakeRelay(t, "notice", info, events)
	st := modelWith(t, events[:30])
	res, err := Run(context.Background(), Options{Remote: fr.URL, Store: st, FallbackPaging: true, Batch: 16})
	if err != nil {
		t.Fatal(err)
	}
	sameItems(t, "paged", st, nostr.Filter{}, want(events))
	if res.Need != len(events)-30 || res.Down.Moved != res.Need || res.PagingGaps != 0 {
		t.Fatal(res.String())
	}
	t.Logf("%s", res.String())

	// since/until bound the paging.
	st2 := modelWith(t)
	window := nostr.Filter{Since: base + 10, HasSince: true, Until: base + 19, HasUntil: true}
	if _, err := Run(context.Background(), Options{Remote: fr.URL, Store: st2, FallbackPaging: true, Filter: window}); err != nil {
		t.Fatal(err)
	}
	sameItems(t, "window", st2, nostr.Filter{}, want(events[70:140]))

	// A second with more events than a page.
	crowd := signed("crowd", 25, 1, base+100, 0)
	fr2 := newFakeRelay(t, "notice", info, slices.Concat(events[:20], crowd))
	st3 := modelWith(t)
	res, err = Run(context.Background(), Options{Remote: fr2.URL, Store: st3, FallbackPaging: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.PagingGaps != 1 || res.Down.Moved != 20+10 {
		t.Fatalf("crowded second: %s", res.String())
	}
}

// TestSyncOptions: inconsistent options are refused before anything is
// sent.
func TestSyncOptions(t *testing.T) {
	t.Parallel()
	f := func(o Options) {
		t.Helper()
		if _, err := Run(context.Background(), o); !errors.Is(err, ErrOptions) {
			t.Fatalf("%+v: %v", o, err)
		}
	}
	st := modelWith(t)
	f(Options{Store: st})
	f(Options{Remote: "ws://127.0.0.1:1"})
	f(Options{Remote: "ws://127.0.0.1:1", Store: st, From: "ws://127.0.0.1:2"})
	f(Options{Remote: "ws://127.0.0.1:1", From: "ws://127.0.0.1:2", FallbackPaging: true})
	f(Options{Remote: "ws://127.0.0.1:1", Store: st, Filter: nostr.Filter{Search: "x"}})
	f(Options{Remote: "http://127.0.0.1:1", Store: st})
	// Negative counts are refused (they used to pass for the default).
	f(Options{Remote: "ws://127.0.0.1:1", Store: st, Batch: -1})
	f(Options{Remote: "ws://127.0.0.1:1", Store: st, Window: -1})
	if _, err := ParseDirection("sideways"); !errors.Is(err, ErrOptions) {
		t.Fatal(err)
	}
}

// cancelDuringSave is a store whose nth Save is interrupted while it
// commits: the batch it took is saved and answered (store.Store), and the
// run is cancelled meanwhile.
type cancelDuringSave struct {
	store.Store
	n, saves int
	cancel   context.CancelFunc
}

func (s *cancelDuringSave) Save(ctx context.Context, events []*nostr.Event) ([]store.SaveResult, error) {
	res, err := s.Store.Save(ctx, events) // taken with ctx live
	if s.saves++; s.saves == s.n {
		s.cancel() // lands while the batch commits
	}
	return res, err
}

// TestSyncInterruptedCount: an interrupted download counts every event it
// saved, the batch in flight at the interruption included, and saves no
// batch after it.
func TestSyncInterruptedCount(t *testing.T) {
	t.Parallel()
	remote := signed("interrupted-count", 450, 1, base, 2)
	m := modelWith(t)
	r := relaytest.Start(t, relaytest.Options{})
	fill(t, r.Store, remote)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dst := &cancelDuringSave{Store: m, n: 2, cancel: cancel}
	res, err := Run(ctx, Options{Remote: r.URL, Store: dst, Direction: Down, Batch: 50, IDsPerReq: 50, Window: 8})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v (%s)", err, res.String())
	}
	n, err := m.Count(context.Background(), []nostr.Filter{{}})
	if err != nil || int64(res.Down.Moved) != n || n != 100 || dst.saves != 2 {
		t.Fatalf("downloaded %d by the result, %d in the store (%v)", res.Down.Moved, n, err)
	}
}
