package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/stream"
)

// TestRouterCommand runs `petrel router FILE` with one group of two
// relays pulled down into the local relay, reloads it (SIGHUP) with a
// broken file, which keeps the streams running, and prints the counters
// of both streams as JSON when stopped.
func TestRouterCommand(t *testing.T) {
	local := relaytest.Start(t, relaytest.Options{})
	r1 := relaytest.Start(t, relaytest.Options{})
	r2 := relaytest.Start(t, relaytest.Options{})
	path := filepath.Join(t.TempDir(), "router.toml")
	text := fmt.Sprintf("local = %q\n[groups.pull]\ndir = \"down\"\nurls = [%q, %q]\n", local.URL, r1.URL, r2.URL)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	hup := make(chan os.Signal, 1)
	routerReload = func() (<-chan os.Signal, func()) { return hup, func() {} }
	defer func() { routerReload = defaultRouterReload }()

	stop := startRouterCmd(t, path)

	k := relaytest.NewKey("router-cmd")
	for i, url := range []string{r1.URL, r2.URL} {
		c := relaytest.Dial(t, url)
		for j := range 3 {
			c.MustPublish(k.Event(1, fmt.Sprintf("relay %d note %d", i, j), nil, time.Now().Unix()))
		}
		c.Close()
	}
	wait := func(what string, n int) { t.Helper(); awaitStored(t, local.Store, what, n) }
	wait("pulled", 6)

	if err := os.WriteFile(path, []byte("[groups.pull]\ndir = \"nowhere\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hup <- os.Interrupt // any value: the reload signal
	c := relaytest.Dial(t, r2.URL)
	c.MustPublish(k.Event(1, "after the failed reload", nil, time.Now().Unix()))
	c.Close()
	wait("still pulling after a failed reload", 7)

	stats := stop()
	if len(stats) != 2 || stats[0].Name != "pull" || stats[0].Sessions != 1 || stats[1].Sessions != 1 ||
		stats[0].Down.Forwarded+stats[0].Down.CaughtUp+stats[1].Down.Forwarded+stats[1].Down.CaughtUp != 7 {
		t.Fatalf("stats %+v", stats)
	}
}

// TestRouterCommandAuth: with --auth, `petrel router` answers the NIP-42
// challenge of a relay that requires authentication with the --sec key,
// and pulls what was published there into the local relay.
func TestRouterCommandAuth(t *testing.T) {
	local := relaytest.Start(t, relaytest.Options{})
	locked := relaytest.Start(t, relaytest.Options{Relay: relay.Config{AuthRequired: true}})
	path := filepath.Join(t.TempDir(), "router.toml")
	text := fmt.Sprintf("local = %q\n[groups.pull]\ndir = \"down\"\nurls = [%q]\n", local.URL, locked.URL)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	k := relaytest.NewKey("router-auth")
	evs := make([]*nostr.Event, 3)
	for i := range evs {
		evs[i] = k.Event(1, fmt.Sprintf("behind auth %d", i), nil, time.Now().Unix())
	}
	relaytest.PublishAuthed(t, locked.URL, k, evs)

	stop := startRouterCmd(t, path, "--auth", "--sec", hex.EncodeToString(k.SK[:]))
	awaitStored(t, local.Store, "the events behind auth", len(evs))
	stats := stop()
	if len(stats) != 1 || stats[0].LastError != "" || stats[0].Down.CaughtUp+stats[0].Down.Forwarded != int64(len(evs)) {
		t.Fatalf("stats %+v", stats)
	}
}

// startRouterCmd runs `petrel router` with args (and --json) until the
// function it returns is called, which stops it and returns the counters
// it printed.
func startRouterCmd(t *testing.T, args ...string) func() []stream.Stats {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cmd := routerCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs(append(args, "--json", "--log-level", "error"))
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	return func() []stream.Stats {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		var stats []stream.Stats
		if err := json.Unmarshal(out.Bytes(), &stats); err != nil {
			t.Fatalf("%v: %s", err, out.String())
		}
		return stats
	}
}

// awaitStored waits (a minute at most) until st holds n events.
func awaitStored(t *testing.T, st store.Store, what string, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for countItems(t, st, `{}`) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the store holds %d events, want %d", what, countItems(t, st, `{}`), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
