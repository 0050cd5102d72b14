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

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := routerCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{path, "--json", "--log-level", "error"})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	k := relaytest.NewKey("router-cmd")
	for i, url := range []string{r1.URL, r2.URL} {
		c := relaytest.Dial(t, url)
		for j := range 3 {
			c.MustPublish(k.Event(1, fmt.Sprintf("relay %d note %d", i, j), nil, time.Now().Unix()))
		}
		c.Close()
	}
	wait := func(what string, n int) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for countItems(t, local.Store, `{}`) != n {
			if time.Now().After(deadline) {
				t.Fatalf("%s: local holds %d events, want %d", what, countItems(t, local.Store, `{}`), n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	wait("pulled", 6)

	if err := os.WriteFile(path, []byte("[groups.pull]\ndir = \"nowhere\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hup <- os.Interrupt // any value: the reload signal
	c := relaytest.Dial(t, r2.URL)
	c.MustPublish(k.Event(1, "after the failed reload", nil, time.Now().Unix()))
	c.Close()
	wait("still pulling after a failed reload", 7)

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var stats []stream.Stats
	if err := json.Unmarshal(out.Bytes(), &stats); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
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

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := routerCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{path, "--json", "--log-level", "error", "--auth", "--sec", hex.EncodeToString(k.SK[:])})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	deadline := time.Now().Add(time.Minute)
	for countItems(t, local.Store, `{}`) != len(evs) {
		if time.Now().After(deadline) {
			t.Fatalf("local holds %d events, want the %d behind auth", countItems(t, local.Store, `{}`), len(evs))
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var stats []stream.Stats
	if err := json.Unmarshal(out.Bytes(), &stats); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(stats) != 1 || stats[0].LastError != "" || stats[0].Down.CaughtUp+stats[0].Down.Forwarded != int64(len(evs)) {
		t.Fatalf("stats %+v", stats)
	}
}
