package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/config"
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
