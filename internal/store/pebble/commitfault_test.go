package pebble

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

var errInjected = errors.New("injected commit failure")

// commitFault is an Options.CommitFault that fails every commit while
// armed; the first failing call signals entered and waits for release,
// so that the test can queue requests behind the blocked writer.
type commitFault struct {
	armed   atomic.Bool
	calls   atomic.Int32 // failing calls
	entered chan struct{}
	release chan struct{}
}

func newCommitFault() *commitFault {
	return &commitFault{entered: make(chan struct{}), release: make(chan struct{})}
}

func (f *commitFault) fail() error {
	if !f.armed.Load() {
		return nil
	}
	if f.calls.Add(1) == 1 {
		close(f.entered)
		<-f.release
	}
	return errInjected
}

// TestCommitFailure fails the writer's commits while requests wait behind
// it: every waiting Submit gets Failed with the error, Save and Delete get
// the error, nothing of the failed batches is in the store (not the
// events, not their effects on older ones, not their search postings, not
// a commit position), and the commits after the failure store everything
// as if the failed batches had never been.
func TestCommitFailure(t *testing.T) {
	ctx := context.Background()
	fault := newCommitFault()
	s := openTest(t, Options{PurgeInterval: -1, CommitFault: fault.fail})
	defer s.Close()
	rng := rand.New(rand.NewPCG(7, 7))
	alice, bob := storetest.Key(1), storetest.Key(2)
	ts := int64(storetest.BaseTime)

	// Before: a profile, a note to be deleted, a note of an author who
	// will ask to vanish.
	profile := storetest.NewEvent(rng, alice, 0, ts, nil, `{"name":"old"}`)
	target := storetest.NewEvent(rng, alice, 1, ts, nil, "target note")
	bobs := storetest.NewEvent(rng, bob, 1, ts, nil, "bob was here")
	saveAll(t, s, profile, target, bobs)
	lastSeq := s.commits.Load()

	// Failing: the first event alone (the writer blocks in the fault with
	// it), then the rest queued behind it as one batch.
	failing := []*nostr.Event{
		storetest.NewEvent(rng, alice, 1, ts+1, nil, "first"),
		storetest.NewEvent(rng, alice, 0, ts+2, nil, `{"name":"new"}`),
		storetest.NewEvent(rng, alice, 5, ts+3, nostr.Tags{{"e", target.ID.Hex()}}, ""),
		storetest.NewEvent(rng, bob, 62, ts+4, nil, ""),
		storetest.NewEvent(rng, alice, 1, ts+5, nostr.Tags{{"t", "x"}}, "zanzibar quokka"),
	}
	results := make([]store.SaveResult, len(failing))
	var wg sync.WaitGroup
	submit := func(i int) {
		t.Helper()
		wg.Add(1)
		if err := s.Submit(ctx, failing[i], func(r store.SaveResult) { results[i] = r; wg.Done() }); err != nil {
			t.Fatal(err)
		}
	}
	fault.armed.Store(true)
	submit(0)
	<-fault.entered
	for i := 1; i < len(failing); i++ {
		submit(i)
	}
	// A Save and a Delete join the queue too.
	saveErr, delErr := make(chan error, 1), make(chan error, 1)
	saved := storetest.NewEvent(rng, alice, 1, ts+6, nil, "saved")
	go func() { _, err := s.Save(ctx, []*nostr.Event{saved}); saveErr <- err }()
	go func() { _, err := s.Delete(ctx, []nostr.ID{bobs.ID}); delErr <- err }()
	for len(s.queue) < len(failing)-1+2 { // the requests are queued behind the blocked writer
		runtime.Gosched()
	}
	close(fault.release)
	wg.Wait()
	for i, r := range results {
		if r.Outcome != store.Failed || !errors.Is(r.Err, errInjected) {
			t.Errorf("event %d: %v %v, want Failed with the injected error", i, r.Outcome, r.Err)
		}
	}
	if err := <-saveErr; !errors.Is(err, errInjected) {
		t.Errorf("Save in a failed batch: %v", err)
	}
	if err := <-delErr; !errors.Is(err, errInjected) {
		t.Errorf("Delete in a failed batch: %v", err)
	}
	if n := fault.calls.Load(); n != 2 {
		t.Fatalf("%d failed commits, want 2 (the first event alone, then everything queued behind it)", n)
	}
	fault.armed.Store(false)

	// Nothing of the failed batches is there.
	if n := countAll(t, s); n != 3 {
		t.Fatalf("%d events after the failed commits, want the 3 stored before", n)
	}
	for _, ev := range []*nostr.Event{profile, target, bobs} {
		if ok, err := s.Has(ctx, ev.ID); err != nil || !ok {
			t.Fatalf("%s lost to a failed commit: %v %v", ev.Content, ok, err)
		}
	}
	if got := searchIDs(t, s, nostr.Filter{Search: "quokka"}); len(got) != 0 {
		t.Fatalf("search finds %d events of a failed batch", len(got))
	}
	if s.commits.Load() != lastSeq {
		t.Fatalf("commit position moved from %d to %d without a commit", lastSeq, s.commits.Load())
	}
	// Bob's failed request to vanish does not refuse his older events.
	bobLater := storetest.NewEvent(rng, bob, 1, ts+2, nil, "bob again")
	if res, err := s.Save(ctx, []*nostr.Event{bobLater}); err != nil || res[0].Outcome != store.Stored {
		t.Fatalf("bob's event after his failed request to vanish: %v %v", res, err)
	}
	lastSeq++

	// The same events now commit, with the next position, and do what
	// they did not do before.
	res, err := s.Save(ctx, failing)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Outcome != store.Stored || r.Seq != lastSeq+1 {
			t.Fatalf("event %d after the failure: %v seq %d, want Stored at %d", i, r.Outcome, r.Seq, lastSeq+1)
		}
	}
	for ev, want := range map[*nostr.Event]bool{profile: false, target: false, bobs: false, bobLater: false, failing[1]: true} {
		if ok, err := s.Has(ctx, ev.ID); err != nil || ok != want {
			t.Fatalf("%s: present %v, want %v (%v)", ev.Content, ok, want, err)
		}
	}
	if got := searchIDs(t, s, nostr.Filter{Search: "quokka"}); len(got) != 1 || got[0] != failing[4].ID {
		t.Fatalf("search after the failure: %v", short(got))
	}
	if err := checkIntegrity(s.db); err != nil {
		t.Fatal(err)
	}
}
