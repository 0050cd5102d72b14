package stream

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/server"
	"github.com/petrel-relay/petrel/internal/store"
	psync "github.com/petrel-relay/petrel/internal/sync"
)

// ids returns the sorted ids of every event in st.
func ids(t testing.TB, st store.Store) []nostr.ID {
	t.Helper()
	it, err := st.Items(context.Background(), []nostr.Filter{{}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]nostr.ID, len(it))
	for i := range it {
		out[i] = it[i].ID
	}
	slices.SortFunc(out, func(a, b nostr.ID) int { return slices.Compare(a[:], b[:]) })
	return out
}

// waitFor polls cond until it holds or fails the test after a minute
// (the bound of a hang, not a speed target).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// events returns n signed notes by a key derived from seed, created now.
func events(seed string, n int) []*nostr.Event {
	k := relaytest.NewKey(seed)
	now := time.Now().Unix()
	out := make([]*nostr.Event, n)
	for i := range out {
		out[i] = k.Event(1, fmt.Sprintf("%s %d", seed, i), nil, now)
	}
	return out
}

// publish publishes events to the relay at url and fails unless each is
// accepted as new.
func publish(t testing.TB, url string, evs []*nostr.Event) {
	t.Helper()
	c := relaytest.Dial(t, url)
	defer c.Close()
	for _, ev := range evs {
		c.MustPublish(ev)
	}
}

// running starts s and returns a function that stops it and waits for
// Run to return.
func running(t testing.TB, s *Stream) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

func fastOptions(local, remote string, dir Direction) Options {
	return Options{Local: local, Remote: remote, Direction: dir,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		PingInterval: 2 * time.Second, Timeout: 10 * time.Second}
}

// TestStreamDirections: down copies what arrives at the remote to the
// local relay and nothing the other way; up the reverse; both both
// ways, and no event is sent back to where it came from.
func TestStreamDirections(t *testing.T) {
	t.Parallel()
	f := func(dir Direction) {
		t.Helper()
		local := relaytest.Start(t, relaytest.Options{})
		remote := relaytest.Start(t, relaytest.Options{})
		s, err := New(fastOptions(local.URL, remote.URL, dir))
		if err != nil {
			t.Fatal(err)
		}
		running(t, s)
		waitFor(t, "connection", func() bool { st := s.Stats(); return st.Connected && st.CatchUps == 1 })
		onL, onR := events(dir.String()+"-local", 15), events(dir.String()+"-remote", 12)
		publish(t, local.URL, onL)
		publish(t, remote.URL, onR)
		wantL, wantR := len(onL), len(onR)
		if dir&psync.Down != 0 {
			wantL += len(onR)
		}
		if dir&psync.Up != 0 {
			wantR += len(onL)
		}
		waitFor(t, "the mirrored events", func() bool {
			return len(ids(t, local.Store)) == wantL && len(ids(t, remote.Store)) == wantR
		})
		if dir == psync.Both {
			// Each side's events come back from the other once, as
			// echoes the stream drops: wait until it has seen every one
			// (an echo forwarded instead never counts, and this fails).
			waitFor(t, "the echoes", func() bool {
				st := s.Stats()
				return st.Down.Echoes == int64(len(onL)) && st.Up.Echoes == int64(len(onR))
			})
		} else {
			// One way only: nothing may go the other way, and nothing
			// marks the end of a send that should not happen; give one
			// the time to land.
			time.Sleep(300 * time.Millisecond)
		}
		if l, r := len(ids(t, local.Store)), len(ids(t, remote.Store)); l != wantL || r != wantR {
			t.Fatalf("%s: local %d events (want %d), remote %d (want %d)", dir, l, wantL, r, wantR)
		}
		st := s.Stats()
		t.Logf("%s: %+v", dir, st)
		if st.Down.Duplicate+st.Up.Duplicate != 0 || local.Stats().EventsDuplicate != 0 || remote.Stats().EventsDuplicate != 0 {
			t.Fatalf("%s: an event was sent twice: %+v", dir, st)
		}
		if dir == psync.Both && (st.Down.Echoes != int64(len(onL)) || st.Up.Echoes != int64(len(onR))) {
			t.Fatalf("both: echoes down %d (want %d), up %d (want %d)", st.Down.Echoes, len(onL), st.Up.Echoes, len(onR))
		}
		if dir&psync.Down != 0 && st.Down.Forwarded != int64(len(onR)) {
			t.Fatalf("%s: forwarded down %d", dir, st.Down.Forwarded)
		}
		if dir&psync.Up != 0 && st.Up.Forwarded != int64(len(onL)) {
			t.Fatalf("%s: forwarded up %d", dir, st.Up.Forwarded)
		}
	}
	f(psync.Down)
	f(psync.Up)
	f(psync.Both)
}

// TestStreamReconnect mirrors both ways, stops the remote relay
// mid-stream and starts it again on the same address and store: the
// events published on either side meanwhile arrive after the
// reconnection (the catch-up), each relay ends with exactly the union,
// and no event reached a relay twice.
func TestStreamReconnect(t *testing.T) {
	t.Parallel()
	local := relaytest.Start(t, relaytest.Options{})
	rst, err := relaytest.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rst.Close() })
	remote := relaytest.Start(t, relaytest.Options{Store: rst})
	addr := remote.Server.Addr().String()

	o := fastOptions(local.URL, remote.URL, psync.Both)
	o.CatchUp = 10 * time.Minute
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	running(t, s)
	waitFor(t, "connection", func() bool { return s.Stats().CatchUps == 1 })

	before := slices.Concat(events("before-local", 10), events("before-remote", 10))
	publish(t, local.URL, before[:10])
	publish(t, remote.URL, before[10:])
	waitFor(t, "the first events", func() bool { return len(ids(t, local.Store)) == 20 && len(ids(t, remote.Store)) == 20 })

	remote.Stop()
	waitFor(t, "the disconnection", func() bool { return !s.Stats().Connected })
	duringL := events("during-local", 25)
	publish(t, local.URL, duringL)
	// Published straight into the remote's store while it is down: an
	// event the stream can only learn of by catching up.
	if _, err := rst.Save(context.Background(), events("during-remote", 7)); err != nil {
		t.Fatal(err)
	}

	remote = relaytest.Start(t, relaytest.Options{Store: rst, Server: server.Config{Listen: addr}})
	afterR := events("after-remote", 5)
	publish(t, remote.URL, afterR)

	want := 20 + 25 + 7 + 5
	waitFor(t, "everything on both sides", func() bool {
		return len(ids(t, local.Store)) == want && len(ids(t, remote.Store)) == want
	})
	time.Sleep(300 * time.Millisecond)
	l, r := ids(t, local.Store), ids(t, remote.Store)
	if !slices.Equal(l, r) || len(l) != want {
		t.Fatalf("local %d events, remote %d, want %d each, the same", len(l), len(r), want)
	}
	st := s.Stats()
	t.Logf("%+v", st)
	if st.Sessions < 2 || st.Failures < 1 || st.CatchUps < 2 {
		t.Fatalf("no reconnection seen: %+v", st)
	}
	if st.Up.CaughtUp+st.Up.Forwarded != 10+25 || st.Down.CaughtUp+st.Down.Forwarded != 10+7+5 {
		t.Fatalf("moved up %d+%d (want 35), down %d+%d (want 22)", st.Up.CaughtUp, st.Up.Forwarded, st.Down.CaughtUp, st.Down.Forwarded)
	}
	if st.Down.Duplicate+st.Up.Duplicate != 0 || local.Stats().EventsDuplicate != 0 || remote.Stats().EventsDuplicate != 0 {
		t.Fatalf("an event was sent twice: stream %+v, local duplicates %d, remote %d",
			st, local.Stats().EventsDuplicate, remote.Stats().EventsDuplicate)
	}
	if st.LastError == "" {
		t.Fatal("no last error after a reconnection")
	}
}

// TestStreamOptions: what New refuses.
func TestStreamOptions(t *testing.T) {
	t.Parallel()
	f := func(o Options, want string) {
		t.Helper()
		_, err := New(o)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%+v: %v, want %q", o, err, want)
		}
	}
	f(Options{Remote: "ws://a", Direction: psync.Down}, "no local relay")
	f(Options{Local: "ws://a", Direction: psync.Down}, "no remote relay")
	f(Options{Local: "http://a", Remote: "ws://b", Direction: psync.Down}, "local")
	f(Options{Local: "ws://a", Remote: "ws://a", Direction: psync.Down}, "the same")
	f(Options{Local: "ws://a", Remote: "ws://b"}, "direction")
	f(Options{Local: "ws://a", Remote: "ws://b", Direction: psync.Down, Filter: nostr.Filter{Search: "x"}}, "search")
}

// TestStreamCatchUpSplits: a catch-up window holding more events than
// a relay allows in one negentropy session (relay.max_neg_items) is
// halved until each part passes, and every event arrives.
func TestStreamCatchUpSplits(t *testing.T) {
	t.Parallel()
	local := relaytest.Start(t, relaytest.Options{Relay: relay.Config{MaxNegItems: 25}})
	remote := relaytest.Start(t, relaytest.Options{})
	k := relaytest.NewKey("catch-up-split")
	now := time.Now().Unix()
	var evs []*nostr.Event
	for i := range 90 { // one every 6 seconds over the last 9 minutes
		evs = append(evs, k.Event(1, fmt.Sprintf("old %d", i), nil, now-int64(6*i)))
	}
	if _, err := local.Store.Save(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	o := fastOptions(local.URL, remote.URL, psync.Up)
	o.CatchUp = 20 * time.Minute
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	running(t, s)
	waitFor(t, "the catch-up", func() bool { return s.Stats().CatchUps == 1 })
	st := s.Stats()
	if got := len(ids(t, remote.Store)); got != 90 || st.Up.CaughtUp != 90 || st.CatchUpGaps != 0 {
		t.Fatalf("remote holds %d events; %+v", got, st)
	}
	if local.Relay.NegStats().Refused == 0 {
		t.Fatal("the remote never refused a window: the test did not split anything")
	}
}
