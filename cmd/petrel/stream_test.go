package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/config"
	"github.com/petrel-relay/petrel/internal/nip19"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// TestStreamCommand runs `petrel stream --dir both` between two running
// relays: events published on either side reach the other, and the
// final counters are printed when the command is stopped.
func TestStreamCommand(t *testing.T) {
	local := relaytest.Start(t, relaytest.Options{})
	remote := relaytest.Start(t, relaytest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := streamCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs([]string{remote.URL, "--dir", "both", "--local", local.URL, "--filter", `{"kinds":[1]}`, "--log-level", "error"})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	k := relaytest.NewKey("stream-cmd")
	// Published before the stream is surely connected: the first
	// catch-up or the live feed brings them over.
	publishAll := func(url, what string, n, kind int) {
		c := relaytest.Dial(t, url)
		defer c.Close()
		for i := range n {
			c.MustPublish(k.Event(kind, fmt.Sprintf("%s %d", what, i), nil, time.Now().Unix()))
		}
	}
	publishAll(local.URL, "on local", 6, 1)
	publishAll(remote.URL, "on remote", 4, 1)
	publishAll(remote.URL, "not mirrored", 3, 7) // outside the filter
	deadline := time.Now().Add(time.Minute)
	for countItems(t, local.Store, `{"kinds":[1]}`) != 10 || countItems(t, remote.Store, `{"kinds":[1]}`) != 10 {
		if time.Now().After(deadline) {
			t.Fatalf("not mirrored: local %d, remote %d; stderr: %s",
				countItems(t, local.Store, `{}`), countItems(t, remote.Store, `{}`), errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := countItems(t, local.Store, `{"kinds":[7]}`); n != 0 {
		t.Fatalf("%d kind-7 events mirrored", n)
	}
	if !strings.Contains(out.String(), remote.URL+" (both): 1 sessions, 0 failures") {
		t.Fatalf("output %q", out.String())
	}
}

// TestStreamCommandFlags: --dir is required and checked; the local relay
// defaults to the config's listen address.
func TestStreamCommandFlags(t *testing.T) {
	f := func(want string, args ...string) {
		t.Helper()
		cmd := streamCmd()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(args)
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%q: %v, want %q", args, err, want)
		}
	}
	f(`required flag(s) "dir"`, "ws://127.0.0.1:1")
	f("direction", "ws://127.0.0.1:1", "--dir", "sideways")
	f("--filter", "ws://127.0.0.1:1", "--dir", "up", "--filter", `{"kinds":`)

	g := func(listen, want string) {
		t.Helper()
		var cfg config.Config
		cfg.Server.Listen = listen
		got, err := localRelayURL(cfg)
		if err != nil || got != want {
			t.Fatalf("%q: %q %v, want %q", listen, got, err, want)
		}
	}
	g("127.0.0.1:7447", "ws://127.0.0.1:7447")
	g("0.0.0.0:7447", "ws://127.0.0.1:7447")
	g(":8080", "ws://127.0.0.1:8080")
	g("[::]:7447", "ws://[::1]:7447")
}

// TestStreamCommandAuth: petrel stream between two relays that require
// NIP-42 authentication. Without --auth it stops by itself with one line
// saying so, having mirrored nothing; with --auth --sec the catch-up and
// the live feed both come through.
func TestStreamCommandAuth(t *testing.T) {
	k := relaytest.NewKey("stream-cmd-auth")
	local := relaytest.Start(t, authRelayConfig)
	remote := relaytest.Start(t, authRelayConfig)
	now := time.Now().Unix()
	var old, live []*nostr.Event
	for i := range 6 {
		old = append(old, k.Event(1, fmt.Sprintf("before %d", i), nil, now))
		live = append(live, k.Event(1, fmt.Sprintf("live %d", i), nil, now))
	}
	saveAll(t, remote.Store, old) // for the catch-up

	args := []string{remote.URL, "--dir", "down", "--local", local.URL, "--log-level", "error"}
	cmd := streamCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(args)
	wantAuthHint(t, cmd.Execute())
	if n := countItems(t, local.Store, `{}`); n != 0 {
		t.Fatalf("without --auth: %d events mirrored", n)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd = streamCmd()
	out.Reset()
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(append(args, "--auth", "--sec", nip19.EncodeSecretKey(k.SK)))
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	watch := relaytest.DialAuthed(t, local.URL, k)
	relaytest.AwaitEvents(t, watch, old)
	relaytest.PublishAuthed(t, remote.URL, k, live)
	relaytest.AwaitEvents(t, watch, live)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := countItems(t, local.Store, `{}`); n != len(old)+len(live) {
		t.Fatalf("with --auth: %d events mirrored, want %d", n, len(old)+len(live))
	}
	if !strings.Contains(out.String(), remote.URL+" (down): 1 sessions, 0 failures") {
		t.Fatalf("output %q", out.String())
	}
}
