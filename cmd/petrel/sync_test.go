package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/cli"
	"github.com/petrel-relay/petrel/internal/client"
	"github.com/petrel-relay/petrel/internal/config"
	"github.com/petrel-relay/petrel/internal/nip19"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/storetest"
	psync "github.com/petrel-relay/petrel/internal/sync"
)

// runSyncCmd runs `petrel sync args...` with the local store st and
// returns stdout and the error.
func runSyncCmd(t *testing.T, st store.Store, args ...string) (string, error) {
	t.Helper()
	out, _, err := runSyncCmdStderr(t, st, args...)
	return out, err
}

// runSyncCmdStderr is runSyncCmd that also returns stderr.
func runSyncCmdStderr(t *testing.T, st store.Store, args ...string) (string, string, error) {
	t.Helper()
	syncOpenStore = func(config.Config, *slog.Logger, bool) (store.Store, error) { return nopClose{st}, nil }
	t.Cleanup(func() { syncOpenStore = openSyncStore })
	cmd := syncCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), errb.String(), err
}

// nopClose keeps the test's store open when the command closes it.
type nopClose struct{ store.Store }

func (nopClose) Close() error { return nil }

func syncEvents(seed string, n, kind int) []*nostr.Event {
	k := relaytest.NewKey(seed)
	out := make([]*nostr.Event, n)
	for i := range out {
		out[i] = k.Event(kind, fmt.Sprintf("%s %d", seed, i), nil, 1_700_000_000+int64(i))
	}
	return out
}

func saveAll(t *testing.T, st store.Store, events ...[]*nostr.Event) {
	t.Helper()
	if _, err := st.Save(context.Background(), slices.Concat(events...)); err != nil {
		t.Fatal(err)
	}
}

func countItems(t *testing.T, st store.Store, f string) int {
	t.Helper()
	flt, err := nostr.ParseFilter([]byte(f), nil)
	if err != nil {
		t.Fatal(err)
	}
	it, err := st.Items(context.Background(), []nostr.Filter{flt}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return len(it)
}

func TestSyncCommand(t *testing.T) {
	common, local, remote := syncEvents("cli-common", 50, 1), syncEvents("cli-local", 20, 1), syncEvents("cli-remote", 30, 1)
	other := syncEvents("cli-other", 10, 7)
	r := relaytest.Start(t, relaytest.Options{})
	saveAll(t, r.Store, common, remote, other)
	st := storetest.NewModel()
	saveAll(t, st, common, local)

	out, err := runSyncCmd(t, st, r.URL, "--quiet", "--filter", `{"kinds":[1]}`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "negentropy: local 70, have 20, need 30") || !strings.Contains(out, "downloaded 30/30") {
		t.Fatalf("output %q", out)
	}
	if n := countItems(t, st, `{}`); n != 100 {
		t.Fatalf("local store: %d events", n)
	}

	out, err = runSyncCmd(t, st, r.URL, "--dir", "both", "--json", "--until", "1700000010")
	if err != nil {
		t.Fatal(err)
	}
	var res psync.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	// Up to created_at 1700000010: the 11 first local-only events go up,
	// the kind 7 events (not synced before) come down.
	if res.Have != 11 || res.Need != 10 || res.Up.Moved != 11 || res.Down.Moved != 10 {
		t.Fatalf("result %+v", res)
	}
}

func TestSyncCommandRefuses(t *testing.T) {
	st := storetest.NewModel()
	f := func(want string, args ...string) {
		t.Helper()
		_, err := runSyncCmd(t, st, args...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%v: error %v, want %q", args, err, want)
		}
	}
	f("direction", "ws://127.0.0.1:1", "--dir", "sideways")
	f("--filter", "ws://127.0.0.1:1", "--filter", "{kinds")
	f("--since", "ws://127.0.0.1:1", "--since", "yesterday")
	f("accepts 1 arg", "--quiet")
}

// TestSyncCommandUpNeedsStore: an upload needs a store to upload from: a
// missing one is refused, not created; a download creates it (a new
// mirror).
func TestSyncCommandUpNeedsStore(t *testing.T) {
	for _, dir := range []string{"up", "down"} {
		data := filepath.Join(t.TempDir(), "data")
		_, _, err := runTool(t, syncCmd, "", "ws://127.0.0.1:1", "--data", data, "--dir", dir, "--quiet")
		_, statErr := os.Stat(data)
		switch {
		case dir == "up" && (err == nil || err.Error() != data+": no store in the data directory (set --data or store.path)" || statErr == nil):
			t.Fatalf("--dir up without a store: %v (stat %v)", err, statErr)
		case dir == "down" && statErr != nil:
			t.Fatalf("--dir down did not create the store: %v (%v)", statErr, err)
		}
	}
}

// TestSyncCommandFallbackPaging: a relay that refuses negentropy (here:
// more events than its max_neg_items) makes sync fail with a hint, and
// --fallback-paging (or its old name --fallback-scan) downloads by paging
// through the relay with REQ instead.
func TestSyncCommandFallbackPaging(t *testing.T) {
	events := syncEvents("cli-paging", 30, 1)
	r := relaytest.Start(t, relaytest.Options{Relay: relay.Config{MaxNegItems: 1}})
	saveAll(t, r.Store, events)

	out, errOut, err := runSyncCmdStderr(t, storetest.NewModel(), r.URL, "--quiet")
	if !errors.Is(err, psync.ErrRefused) || !strings.Contains(err.Error(), "--fallback-paging") {
		t.Fatalf("without the fallback: %v", err)
	}
	// A failed sync prints no success-looking summary: its figures go to
	// stderr, after a word that it failed.
	// (stdout holds cobra's usage here: the test runs the command without
	// the root's SilenceUsage.)
	if strings.Contains(out, "negentropy: local") || !strings.HasPrefix(errOut, "sync failed; done before the failure: negentropy: local 0") {
		t.Fatalf("failed sync: stdout %q, stderr %q", out, errOut)
	}
	out, _, err = runSyncCmdStderr(t, storetest.NewModel(), r.URL, "--quiet", "--json")
	out, _, _ = strings.Cut(out, "\n") // the JSON line, before the usage
	var failed struct {
		Complete *bool  `json:"complete"`
		Error    string `json:"error"`
	}
	if err == nil || json.Unmarshal([]byte(out), &failed) != nil || failed.Complete == nil || *failed.Complete || !strings.Contains(failed.Error, err.Error()[:20]) {
		t.Fatalf("failed sync --json: %v\n%s", err, out)
	}
	f := func(flag string, deprecated bool) {
		t.Helper()
		st := storetest.NewModel()
		out, errOut, err := runSyncCmdStderr(t, st, r.URL, "--quiet", flag)
		if err != nil {
			t.Fatalf("%s: %v", flag, err)
		}
		if strings.Contains(errOut, "deprecated, use --fallback-paging") != deprecated {
			t.Fatalf("%s: stderr %q", flag, errOut)
		}
		if !strings.HasPrefix(out, "paging: local 0, have 0, need 30") || !strings.Contains(out, "downloaded 30/30") {
			t.Fatalf("%s: output %q", flag, out)
		}
		if n := countItems(t, st, `{}`); n != 30 {
			t.Fatalf("%s: local store: %d events", flag, n)
		}
	}
	f("--fallback-paging", false)
	f("--fallback-scan", true)

	out, err = runSyncCmd(t, storetest.NewModel(), r.URL, "--fallback-scan", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		psync.Result
		Complete bool `json:"complete"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if res.Mode != psync.ModePaging || res.Down.Moved != 30 || !res.Complete {
		t.Fatalf("result %+v", res)
	}
}

// TestSyncCommandFrom syncs two running relays with --from: the events
// only on A arrive on B (--dir up), counts exact, one NEG-OPEN on each.
func TestSyncCommandFrom(t *testing.T) {
	common, onlyA, onlyB := syncEvents("from-common", 200, 1), syncEvents("from-a", 25, 1), syncEvents("from-b", 15, 1)
	a := relaytest.Start(t, relaytest.Options{})
	b := relaytest.Start(t, relaytest.Options{})
	saveAll(t, a.Store, common, onlyA)
	saveAll(t, b.Store, common, onlyB)
	// Both relays as people type them, host:port (completed to ws:// on
	// loopback, as the client commands do).
	out, err := runSyncCmd(t, nil, strings.TrimPrefix(b.URL, "ws://"), "--from", strings.TrimPrefix(a.URL, "ws://"), "--dir", "up", "--quiet")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "bridge: have 25, need 15") || !strings.Contains(out, "uploaded 25/25") || strings.Contains(out, "downloaded") {
		t.Fatalf("output %q", out)
	}
	if n := countItems(t, b.Store, `{}`); n != 240 {
		t.Fatalf("B: %d events, want 240", n)
	}
	if n := countItems(t, a.Store, `{}`); n != 225 {
		t.Fatalf("A: %d events, want 225 (nothing comes down with --dir up)", n)
	}
	for _, r := range []*relaytest.Relay{a, b} {
		if st := r.Relay.NegStats(); st.Opened != 1 {
			t.Fatalf("%s: %+v", r.URL, st)
		}
	}
}

// authRelayConfig makes a test relay require NIP-42 authentication for
// every request and event.
var authRelayConfig = relaytest.Options{Relay: relay.Config{AuthRequired: true}}

// wantAuthHint fails unless err says, on one line, that the relay
// requires authentication and how to give sync a key.
func wantAuthHint(t *testing.T, err error) {
	t.Helper()
	if err == nil || !errors.Is(err, client.ErrAuthRequired) || strings.Contains(err.Error(), "\n") ||
		!strings.Contains(err.Error(), "requires NIP-42 authentication") || !strings.Contains(err.Error(), "pass --auth and --sec") {
		t.Fatalf("error %v, want one line saying the relay requires auth and to pass --auth --sec", err)
	}
}

// TestSyncCommandAuth: sync down, up and --from against relays that
// require NIP-42 authentication. Without --auth each fails with one line
// saying so and moves nothing; with --auth (the key from --sec, hex or
// nsec, or $NOSTR_SECRET_KEY) everything moves.
func TestSyncCommandAuth(t *testing.T) {
	k := relaytest.NewKey("cli-sync-auth")
	evs := syncEvents("cli-sync-auth", 30, 1)

	// down
	r := relaytest.Start(t, authRelayConfig)
	saveAll(t, r.Store, evs)
	st := storetest.NewModel()
	_, err := runSyncCmd(t, st, r.URL, "--quiet")
	wantAuthHint(t, err)
	if n := countItems(t, st, `{}`); n != 0 {
		t.Fatalf("down without --auth: %d events saved", n)
	}
	_, err = runSyncCmd(t, st, r.URL, "--quiet", "--auth")
	if err == nil || !strings.Contains(err.Error(), "--auth: no secret key") {
		t.Fatalf("--auth without a key: %v", err)
	}
	out, err := runSyncCmd(t, st, r.URL, "--quiet", "--auth", "--sec", nip19.EncodeSecretKey(k.SK))
	if err != nil || !strings.Contains(out, "downloaded 30/30") {
		t.Fatalf("down --auth: %v %q", err, out)
	}
	if n := countItems(t, st, `{}`); n != len(evs) {
		t.Fatalf("down --auth: %d events saved, want %d", n, len(evs))
	}

	// up, the key from the environment
	r = relaytest.Start(t, authRelayConfig)
	st = storetest.NewModel()
	saveAll(t, st, evs)
	_, err = runSyncCmd(t, st, r.URL, "--quiet", "--dir", "up")
	wantAuthHint(t, err)
	if n := countItems(t, r.Store, `{}`); n != 0 {
		t.Fatalf("up without --auth: the relay holds %d events", n)
	}
	t.Setenv(cli.SecretEnv, k.SK.Hex())
	out, err = runSyncCmd(t, st, r.URL, "--quiet", "--dir", "up", "--auth")
	if err != nil || !strings.Contains(out, "uploaded 30/30") {
		t.Fatalf("up --auth: %v %q", err, out)
	}
	if n := countItems(t, r.Store, `{}`); n != len(evs) {
		t.Fatalf("up --auth: the relay holds %d events, want %d", n, len(evs))
	}

	// --from: both relays require it; one key serves both.
	a, b := relaytest.Start(t, authRelayConfig), relaytest.Start(t, authRelayConfig)
	saveAll(t, a.Store, evs)
	_, err = runSyncCmd(t, nil, a.URL, "--from", b.URL, "--quiet")
	wantAuthHint(t, err)
	if n := countItems(t, b.Store, `{}`); n != 0 {
		t.Fatalf("--from without --auth: B holds %d events", n)
	}
	out, err = runSyncCmd(t, nil, a.URL, "--from", b.URL, "--quiet", "--auth", "--sec", k.SK.Hex())
	if err != nil || !strings.Contains(out, "downloaded 30/30") {
		t.Fatalf("--from --auth: %v %q", err, out)
	}
	if n := countItems(t, b.Store, `{}`); n != len(evs) {
		t.Fatalf("--from --auth: B holds %d events, want %d", n, len(evs))
	}
	for _, r := range []*relaytest.Relay{a, b} {
		if n := r.Stats().AuthAccepted; n != 1 {
			t.Fatalf("%s: %d AUTHs accepted, want 1", r.URL, n)
		}
	}
}

// TestSyncDropsRecycledLogs: a sync that downloads into the pebble store
// leaves no write-ahead logs pebble kept for reuse, as import does.
func TestSyncDropsRecycledLogs(t *testing.T) {
	const memtable = 256 << 10
	t.Setenv("PETREL_STORE_MEMTABLE_BYTES", fmt.Sprint(memtable))
	k := relaytest.NewKey("sync-logs")
	const events = 3000 // about 3 MB: a dozen memtables
	evs := make([]*nostr.Event, events)
	for i := range evs {
		evs[i] = k.Event(1, fmt.Sprintf("note %d %s", i, strings.Repeat("x", 900)), nil, 1_700_000_000+int64(i))
	}
	r := relaytest.Start(t, relaytest.Options{})
	saveAll(t, r.Store, evs)
	data := filepath.Join(t.TempDir(), "data")
	out, _, err := runTool(t, syncCmd, "", r.URL, "--data", data, "--quiet")
	if err != nil || !strings.Contains(out, fmt.Sprintf("downloaded %d/%d", events, events)) {
		t.Fatalf("sync: %v %q", err, out)
	}
	checkNoRecycledLogs(t, data, memtable)
	if n := len(storedRaws(t, data)); n != events {
		t.Fatalf("store holds %d events, want %d", n, events)
	}
}
