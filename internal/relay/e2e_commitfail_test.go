package relay_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/pebble"
)

var errInjectedCommit = errors.New("injected commit failure")

// commitFault is a pebble.Options.CommitFault that fails every commit
// while armed; the first failing call signals entered and waits for
// release, so that events can queue behind the blocked writer.
type commitFault struct {
	armed   atomic.Bool
	calls   atomic.Int32 // failing calls
	entered chan struct{}
	release chan struct{}
}

func (f *commitFault) fail() error {
	if !f.armed.Load() {
		return nil
	}
	if f.calls.Add(1) == 1 {
		close(f.entered)
		<-f.release
	}
	return errInjectedCommit
}

// submitCounter is the pebble store, counting the events the relay hands
// to its writer, so that the test knows when they all wait behind the
// blocked commit.
type submitCounter struct {
	*pebble.Store
	submitted atomic.Int32
}

func (s *submitCounter) Submit(ctx context.Context, ev *nostr.Event, done func(store.SaveResult)) error {
	err := s.Store.Submit(ctx, ev, done)
	if err == nil {
		s.submitted.Add(1)
	}
	return err
}

func (s *submitCounter) SubmitAfter(ctx context.Context, ev *nostr.Event, token uint64, done func(store.SaveResult)) error {
	err := s.Store.SubmitAfter(ctx, ev, token, done)
	if err == nil {
		s.submitted.Add(1)
	}
	return err
}

// TestCommitFailure: the store's commit fails (injected through
// pebble.Options.CommitFault, see there why not through the filesystem)
// while several events wait for it. Every one gets OK false with an
// "error:" message, a live subscriber receives none of them, and the
// relay then stores and fans out new events, the same ones included, as
// usual.
func TestCommitFailure(t *testing.T) {
	t.Parallel()
	fault := &commitFault{entered: make(chan struct{}), release: make(chan struct{})}
	st, err := pebble.Open(pebble.Options{Path: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), CommitFault: fault.fail})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() }) // after the relay's shutdown
	cs := &submitCounter{Store: st}
	r := relaytest.Start(t, relaytest.Options{Store: cs})

	sub := relaytest.Dial(t, r.URL)
	if got := sub.Req("live", `{"kinds":[1]}`); len(got) != 0 {
		t.Fatalf("%d stored events in a new relay", len(got))
	}
	pub := relaytest.Dial(t, r.URL)
	k := relaytest.NewKey("commit-failure")
	now := time.Now().Unix()
	const n = 8
	doomed := make(map[nostr.ID]*nostr.Event, n)
	var evs []*nostr.Event
	for i := range n {
		ev := k.Event(1, fmt.Sprint("doomed ", i), nil, now-int64(n-i))
		doomed[ev.ID] = ev
		evs = append(evs, ev)
	}

	fault.armed.Store(true)
	for _, ev := range evs {
		pub.SendRaw(`["EVENT",` + string(ev.Raw) + `]`)
	}
	// The writer blocks in the failing commit of its first batch; the
	// events not in it are verified and queue behind it.
	select {
	case <-fault.entered:
	case <-time.After(relaytest.DefaultTimeout):
		t.Fatal("no commit reached the store")
	}
	for deadline := time.Now().Add(relaytest.DefaultTimeout); cs.submitted.Load() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events reached the store's writer", cs.submitted.Load(), n)
		}
	}
	close(fault.release)
	for range n {
		m := pub.ExpectType("OK")
		if doomed[m.EventID] == nil {
			t.Fatalf("OK for an unknown event %s", m.EventID.Hex())
		}
		if m.OK || !strings.HasPrefix(m.Message, "error:") {
			t.Fatalf("OK %v %q for an event whose commit failed, want false \"error: ...\"", m.OK, m.Message)
		}
		delete(doomed, m.EventID)
	}
	// The first failing commit held the writer until every event had
	// reached it: the first batch and at most one more, holding the rest
	// together.
	if c := fault.calls.Load(); c < 1 || c > 2 {
		t.Fatalf("%d failed commits for %d events, want 1 or 2", c, n)
	}
	fault.armed.Store(false)
	if s := r.Stats(); s.DBErrors != n || s.EventsRejected["error"] != n || s.EventsAccepted != 0 {
		t.Fatalf("stats: db_errors %d, rejected error %d, accepted %d; want %d, %d, 0", s.DBErrors, s.EventsRejected["error"], s.EventsAccepted, n, n)
	}

	// The relay keeps serving: a new event is stored and fanned out, and
	// it is the subscriber's first delivery (the dispatcher handles
	// events in commit order, so a failed event fanned out would have
	// come first).
	after := k.Event(1, "after the failure", nil, now)
	pub.MustPublish(after)
	if m := sub.ExpectType("EVENT"); m.SubID != "live" || m.Event.ID != after.ID {
		t.Fatalf("first delivery after the failure: %s %q, want %s", m.SubID, m.Event.Content, after.ID.Hex())
	}
	// A failed event is not a duplicate: it can be sent again.
	pub.MustPublish(evs[0])
	if m := sub.ExpectType("EVENT"); m.Event.ID != evs[0].ID {
		t.Fatalf("delivery of the republished event: %q", m.Event.Content)
	}
	q := relaytest.Dial(t, r.URL)
	got := q.Req("q", `{"kinds":[1]}`)
	if len(got) != 2 || got[0].ID != after.ID || got[1].ID != evs[0].ID {
		t.Fatalf("stored after the failure: %d events, want the new one and the republished one", len(got))
	}
}
