package relaytest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/policy"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/server"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/pebble"
)

// Options configure a test relay. Zero values give defaults (with the
// listen address forced to 127.0.0.1:0).
type Options struct {
	Relay  relay.Config
	Server server.Config
	Info   relay.Info
	// Store is used if set (and not closed by the relay); otherwise
	// OpenStore opens one in a temporary directory.
	Store store.Store
	// Logger defaults to a discarding logger (set PETREL_TEST_LOG=1 to see
	// logs).
	Logger *slog.Logger
	// Policy, Persister and Plugin are passed to the relay (relay.Options).
	Policy    policy.Config
	Persister policy.Persister
	Plugin    *policy.Plugin
	// Bus is passed to the relay (relay.Options.Bus).
	Bus relay.Bus
	// Verifier is passed to the relay (relay.Options.Verifier): nil for
	// the default.
	Verifier nostr.Verifier
	// Now is the relay's clock (relay.Options.Now): nil for time.Now.
	Now func() time.Time
	// PolicyRefresh is passed to the relay (relay.Options.PolicyRefresh).
	PolicyRefresh time.Duration
}

// OpenStore opens the default store for test relays in dir: the embedded
// pebble store, synced like production, so end-to-end tests exercise the
// real write path.
var OpenStore = func(dir string) (store.Store, error) {
	return pebble.Open(pebble.Options{Path: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// Relay is a running test relay.
type Relay struct {
	URL    string
	Relay  *relay.Relay
	Server *server.Server
	Store  store.Store
	Dir    string
	t      testing.TB
	closed bool
}

// Start starts a relay on 127.0.0.1 with a random port and registers its
// shutdown with t.Cleanup.
func Start(t testing.TB, opts Options) *Relay {
	t.Helper()
	dir := t.TempDir()
	st := opts.Store
	ownStore := false
	if st == nil {
		var err error
		st, err = OpenStore(dir)
		if err != nil {
			t.Fatalf("open store: %v", err)
		}
		ownStore = true
	}
	log := opts.Logger
	if log == nil {
		log = testLogger()
	}
	if opts.Relay.MaxEventWait == 0 {
		// The time valve refuses by how long EVENTs wait, which on a
		// loaded test machine has nothing to do with what a test checks:
		// off unless the test sets it (tests use no wall-clock bounds).
		opts.Relay.MaxEventWait = -1
	}
	rl, err := relay.New(opts.Relay, relay.Options{Store: st, Logger: log, Info: opts.Info,
		Policy: opts.Policy, Persister: opts.Persister, Plugin: opts.Plugin, Bus: opts.Bus, Verifier: opts.Verifier, Now: opts.Now,
		PolicyRefresh: opts.PolicyRefresh})
	if err != nil {
		t.Fatalf("relay: %v", err)
	}
	scfg := opts.Server
	if scfg.Listen == "" {
		scfg.Listen = "127.0.0.1:0"
	}
	if scfg.MaxConnectionsPerIP == 0 {
		scfg.MaxConnectionsPerIP = -1
	}
	srv, err := server.New(scfg, server.Options{Relay: rl, Logger: log, Version: "test"})
	if err != nil {
		t.Fatalf("server: %v", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	r := &Relay{URL: srv.URL(), Relay: rl, Server: srv, Store: st, Dir: dir, t: t}
	running.Store(r.URL, r)
	t.Cleanup(func() {
		running.Delete(r.URL)
		r.Stop()
		if ownStore {
			st.Close()
		}
	})
	return r
}

// Stop shuts the relay down (idempotent).
func (r *Relay) Stop() {
	if r.closed {
		return
	}
	r.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Server.Shutdown(ctx); err != nil {
		r.t.Logf("shutdown: %v", err)
	}
}

// Stats returns the relay's counters.
func (r *Relay) Stats() relay.Snapshot { return r.Relay.Stats() }

// HTTPURL returns the http:// base URL of the relay.
func (r *Relay) HTTPURL() string { return "http://" + r.Server.Addr().String() }

func testLogger() *slog.Logger {
	if v := getenv("PETREL_TEST_LOG"); v != "" {
		return slog.New(slog.NewTextHandler(stderr(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
