package stream

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/petrel-relay/petrel/internal/client"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/server"
	"github.com/petrel-relay/petrel/internal/store"
	psync "github.com/petrel-relay/petrel/internal/sync"
)

// authRelay starts a relay that requires NIP-42 authentication for
// every request and event, on st if set and at listen if set.
func authRelay(t *testing.T, st store.Store, listen string) *relaytest.Relay {
	return relaytest.Start(t, relaytest.Options{Relay: relay.Config{AuthRequired: true}, Store: st, Server: server.Config{Listen: listen}})
}

// guard bounds a test's waits: a guard against hangs, not a speed
// target.
func guard(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), relaytest.DefaultTimeout)
	t.Cleanup(cancel)
	return ctx
}

// awaitIDs waits for evs to arrive at the relay at url, authenticated
// as k.
func awaitIDs(t *testing.T, url string, k relaytest.Key, evs []*nostr.Event) {
	t.Helper()
	c := relaytest.DialAuthed(t, url, k)
	defer c.Close()
	relaytest.AwaitEvents(t, c, evs)
}

// TestStreamAuthWithoutKey: a relay requiring authentication stops a
// stream without a key at once (Run returns the relay's answer; it does
// not reconnect for ever), and nothing is mirrored.
func TestStreamAuthWithoutKey(t *testing.T) {
	t.Parallel()
	f := func(dir Direction) {
		t.Helper()
		local := relaytest.Start(t, relaytest.Options{})
		remote := authRelay(t, nil, "")
		evs := events("stream-auth-nokey-"+dir.String(), 5)
		// Events the stream would carry: the catch-up's reach.
		if _, err := local.Store.Save(context.Background(), evs[:2]); err != nil {
			t.Fatal(err)
		}
		if _, err := remote.Store.Save(context.Background(), evs[2:]); err != nil {
			t.Fatal(err)
		}
		s, err := New(fastOptions(local.URL, remote.URL, dir))
		if err != nil {
			t.Fatal(err)
		}
		err = s.Run(guard(t))
		if !errors.Is(err, client.ErrAuthRequired) {
			t.Fatalf("%s: Run returned %v, want the relay's auth-required", dir, err)
		}
		if st := s.Stats(); st.Connected || st.Failures != 1 || st.LastError != err.Error() {
			t.Fatalf("%s: %+v", dir, st)
		}
		if n := len(ids(t, local.Store)); n != 2 {
			t.Fatalf("%s: local holds %d events, want its own 2", dir, n)
		}
		if n := len(ids(t, remote.Store)); n != 3 {
			t.Fatalf("%s: remote holds %d events, want its own 3", dir, n)
		}
	}
	f(psync.Down)
	f(psync.Up)
}

// TestStreamAuth mirrors both ways between two relays that both require
// authentication, with one key: the catch-up, the live subscriptions and
// the forwarded events are answered with AUTH, and again after the
// remote relay restarts (a new session, new connections).
func TestStreamAuth(t *testing.T) {
	t.Parallel()
	k := relaytest.NewKey("stream-auth")
	local := authRelay(t, nil, "")
	rst, err := relaytest.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rst.Close() })
	remote := authRelay(t, rst, "")
	addr := remote.Server.Addr().String()

	// Before the start: for the first catch-up.
	oldL, oldR := events("stream-auth-old-local", 6), events("stream-auth-old-remote", 4)
	if _, err := local.Store.Save(context.Background(), oldL); err != nil {
		t.Fatal(err)
	}
	if _, err := rst.Save(context.Background(), oldR); err != nil {
		t.Fatal(err)
	}
	o := fastOptions(local.URL, remote.URL, psync.Both)
	o.AuthKey = &k.SK
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	running(t, s)
	awaitIDs(t, local.URL, k, oldR)
	awaitIDs(t, remote.URL, k, oldL)

	// Live: published (as any authenticated client) while it runs.
	liveL, liveR := events("stream-auth-live-local", 5), events("stream-auth-live-remote", 7)
	relaytest.PublishAuthed(t, local.URL, k, liveL)
	relaytest.PublishAuthed(t, remote.URL, k, liveR)
	awaitIDs(t, local.URL, k, liveR)
	awaitIDs(t, remote.URL, k, liveL)
	// Had the forwarding failed (an AUTH not answered), the session
	// would have ended, counted, before a new one's catch-up brought
	// them.
	if st := s.Stats(); st.Failures != 0 || st.Sessions != 1 {
		t.Fatalf("the first session did not carry everything: %+v", st)
	}

	// The remote restarts: the next session authenticates again.
	remote.Stop()
	remote = authRelay(t, rst, addr)
	afterL, afterR := events("stream-auth-after-local", 3), events("stream-auth-after-remote", 8)
	relaytest.PublishAuthed(t, local.URL, k, afterL)
	relaytest.PublishAuthed(t, remote.URL, k, afterR)
	awaitIDs(t, local.URL, k, afterR)
	awaitIDs(t, remote.URL, k, afterL)

	all := slices.Concat(oldL, oldR, liveL, liveR, afterL, afterR)
	for _, r := range []*relaytest.Relay{local, remote} {
		if got := ids(t, r.Store); len(got) != len(all) {
			t.Fatalf("%s holds %d events, want %d", r.URL, len(got), len(all))
		}
	}
	if st := s.Stats(); st.Sessions < 2 {
		t.Fatalf("no second session: %+v", st)
	}
}

// errorCounter is a slog handler that counts the records logged at error
// level.
type errorCounter struct{ n *atomic.Int64 }

func (h errorCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (h errorCounter) Handle(context.Context, slog.Record) error    { h.n.Add(1); return nil }
func (h errorCounter) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h errorCounter) WithGroup(string) slog.Handler                { return h }

// TestRouterRestartsEnded: a routed stream that stopped by itself (its
// relay requires authentication and it has no key) is started again by
// the next Apply, its options unchanged, so that a reload retries it;
// a stream that still runs is kept, its session untouched.
func TestRouterRestartsEnded(t *testing.T) {
	t.Parallel()
	local := relaytest.Start(t, relaytest.Options{})
	locked := authRelay(t, nil, "")
	open := relaytest.Start(t, relaytest.Options{})
	var stops atomic.Int64
	opts := func() []Options {
		a := fastOptions(local.URL, locked.URL, psync.Down)
		a.Logger = slog.New(errorCounter{&stops})
		return []Options{a, fastOptions(local.URL, open.URL, psync.Down)}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := NewRouter(ctx, nil)
	if started, _, _, err := r.Apply(opts()); err != nil || started != 2 {
		t.Fatalf("apply: %d started, %v", started, err)
	}
	openStats := func() Stats {
		for _, st := range r.Stats() {
			if st.Remote == open.URL {
				return st
			}
		}
		t.Fatalf("no stream to %s in %+v", open.URL, r.Stats())
		return Stats{}
	}
	waitFor(t, "the stream to the locked relay to stop", func() bool { return stops.Load() == 1 })
	waitFor(t, "the stream to the open relay to connect", func() bool { return openStats().Connected })
	openStream := func() *Stream {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.running[key(&Options{Remote: open.URL})].s
	}
	before := openStream()

	started, stopped, kept, err := r.Apply(opts())
	if err != nil || started != 1 || stopped != 0 || kept != 1 {
		t.Fatalf("re-apply: started %d, stopped %d, kept %d, %v; want the stopped stream started again and the other kept", started, stopped, kept, err)
	}
	waitFor(t, "the restarted stream to stop again", func() bool { return stops.Load() == 2 })
	if openStream() != before {
		t.Fatal("the stream to the open relay was replaced, not kept")
	}
	cancel()
	r.Wait()
}
