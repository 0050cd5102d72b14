package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/cli"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// runningServe is a petrel serve process (the built binary) for a test.
type runningServe struct {
	URL  string
	Data string
	logs *relaytest.SyncBuffer
	cmd  *exec.Cmd
}

// runServe runs `bin serve --data data --listen 127.0.0.1:0 args...`,
// waits until it listens, and stops it (SIGTERM) at the end of the test.
func runServe(t *testing.T, bin, data string, args ...string) *runningServe {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--data", data, "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), "PETREL_CONFIG=")
	s := &runningServe{Data: data, logs: &relaytest.SyncBuffer{}, cmd: cmd}
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	re := regexp.MustCompile(`url=(ws://[0-9.:]+)`)
	for deadline := time.Now().Add(60 * time.Second); s.URL == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(s.logs.String()); m != nil {
			s.URL = m[1]
		}
	}
	if s.URL == "" {
		t.Fatalf("serve did not start:\n%s", s.logs.String())
	}
	return s
}

// stop ends the relay (once) and waits for it.
func (s *runningServe) stop() {
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

// serveToolEvents runs the built petrel serve on a new data directory
// (in dir) with the first n of toolEvents published through a client.
func serveToolEvents(t *testing.T, n int) (dir string, srv *runningServe, c *relaytest.Client, evs []*nostr.Event) {
	t.Helper()
	dir = t.TempDir()
	srv = runServe(t, petrelBin(t), filepath.Join(dir, "data"))
	c = relaytest.Dial(t, srv.URL)
	evs = toolEvents()
	for _, ev := range evs[:n] {
		c.MustPublish(ev)
	}
	return dir, srv, c, evs
}

// TestToolsOnRunningServe: scan, export and count read the store of a
// running petrel serve through its control socket (the store's lock is
// the relay's), and see what the relay serves, including what was
// published a moment before; the answers equal those read with the relay
// stopped.
func TestToolsOnRunningServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the petrel binary")
	}
	dir, srv, c, evs := serveToolEvents(t, 30)
	data := srv.Data
	tool := func(args ...string) (string, string) {
		t.Helper()
		cmd := scanCmd
		switch args[0] {
		case "export":
			cmd = exportCmd
		case "count":
			cmd = func() *cobra.Command { return cli.Command("count") }
		}
		out, errOut, err := runTool(t, cmd, "", args[1:]...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, errOut)
		}
		return out, errOut
	}
	lines := func(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }

	if out, _ := tool("scan", "--data", data, "--count"); out != "30\n" {
		t.Fatalf("scan --count: %q", out)
	}
	for _, ev := range evs[30:] { // kind 7, newer
		c.MustPublish(ev)
	}
	if out, _ := tool("scan", "--data", data, `{"kinds":[7]}`, "--count"); out != "10\n" {
		t.Fatalf("scan --count after more events: %q", out)
	}
	wantIDs := []string{evs[39].ID.Hex(), evs[38].ID.Hex(), evs[37].ID.Hex()}
	if out, _ := tool("scan", "--data", data, "--ids", `{"kinds":[7],"limit":3}`); !slices.Equal(lines(out), wantIDs) {
		t.Fatalf("scan --ids: %q, want %q", out, wantIDs)
	}
	out, errOut := tool("scan", "--data", data, "--explain", "--filter", `{"kinds":[7],"limit":2}`)
	if !slices.Equal(lines(out), []string{string(evs[39].Raw), string(evs[38].Raw)}) ||
		!strings.Contains(errOut, "filter 0: index kind (K)") || !strings.Contains(errOut, "2 events in") || !strings.Contains(errOut, "through the running relay") {
		t.Fatalf("scan --explain: stdout %q\nstderr %q", out, errOut)
	}
	if out, _ := tool("count", "--store", data, "--kind", "7"); !strings.Contains(out, "10") {
		t.Fatalf("count --store: %q", out)
	}
	// Unknown keys are refused before the relay is asked.
	if _, _, err := runTool(t, scanCmd, "", "--data", data, `{"kind":[7]}`); err == nil || !strings.Contains(err.Error(), "unknown filter key") {
		t.Fatalf("unknown key: %v", err)
	}

	newest := filepath.Join(dir, "live.jsonl")
	oldest := filepath.Join(dir, "live-oldest.jsonl.gz")
	if out, _ := tool("export", "--data", data, "-o", newest); !strings.Contains(out, "exported 40 events") {
		t.Fatalf("live export summary: %q", out)
	}
	tool("export", "--data", data, "-q", "--oldest-first", "-o", oldest)
	liveNewest, liveOldest := readLines(t, newest), readLines(t, oldest)
	if len(liveNewest) != 40 || liveNewest[0] != string(evs[39].Raw) || !sameSet(liveNewest, raws(evs)) {
		t.Fatalf("live export: %d lines, first %.80q", len(liveNewest), liveNewest[0])
	}
	if !sameSet(liveOldest, liveNewest) || liveOldest[39] != string(evs[39].Raw) {
		t.Fatalf("live --oldest-first export: %d lines, last %.80q", len(liveOldest), liveOldest[len(liveOldest)-1])
	}
	c.Close()

	// The same answers from the stopped relay's store, opened directly.
	srv.stop()
	offline, offlineOldest := filepath.Join(dir, "offline.jsonl"), filepath.Join(dir, "offline-oldest.jsonl")
	tool("export", "--data", data, "-q", "-o", offline)
	tool("export", "--data", data, "-q", "--oldest-first", "-o", offlineOldest)
	if !slices.Equal(readLines(t, offline), liveNewest) || !slices.Equal(readLines(t, offlineOldest), liveOldest) {
		t.Fatal("the exports through the running relay differ from those of the stopped relay's store")
	}
	if out, errOut := tool("scan", "--data", data, "--count", "--explain"); out != "40\n" || strings.Contains(errOut, "through the running relay") {
		t.Fatalf("offline scan: %q %q", out, errOut)
	}
}

// TestDeleteOnRunningServe: petrel delete beside a running petrel serve
// asks it through its control socket instead of failing on the store's
// lock: the relay deletes through its own writer and goes on serving, a
// dry run only counts, and without --yes or a terminal nothing goes. On
// confirmation the list confirmed is the list deleted: an event that
// matches but arrives between the listing and the confirmation stays.
// petrel compact runs through the relay as well.
func TestDeleteOnRunningServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the petrel binary")
	}
	_, srv, c, evs := serveToolEvents(t, 40)
	data := srv.Data
	// Each query on a connection of its own (a subscription stays open).
	reactions := func() []*nostr.Event {
		q := relaytest.Dial(t, srv.URL)
		defer q.Close()
		return q.Req("k7", `{"kinds":[7]}`)
	}
	del := func(stdin string, args ...string) (string, error) {
		t.Helper()
		out, _, err := runTool(t, deleteCmd, stdin, append([]string{"--data", data, "-q"}, args...)...)
		return out, err
	}
	if out, err := del("", "--filter", `{"kinds":[7]}`, "--dry-run"); err != nil || out != "10 events match (dry run: nothing deleted)\n" {
		t.Fatalf("dry run: %q %v", out, err)
	}
	if _, err := del("", "--filter", `{"kinds":[7]}`); err == nil || !strings.Contains(err.Error(), "10 events match; refusing to delete without confirmation") {
		t.Fatalf("without --yes or a terminal: %v", err)
	}
	if got := reactions(); len(got) != 10 {
		t.Fatalf("%d reactions after the refused delete, want 10", len(got))
	}
	out, err := del("", "--filter", `{"kinds":[7],"limit":4}`, "--yes")
	if err != nil || !strings.HasPrefix(out, "deleted 4 of 4 matching events in ") {
		t.Fatalf("delete --yes: %q %v", out, err)
	}
	got := reactions()
	if len(got) != 6 || got[0].ID != evs[35].ID {
		t.Fatalf("after deleting the 4 newest reactions the relay serves %d, the newest %v", len(got), got[0].ID)
	}
	// The relay goes on taking events, the deleted ones too (nothing is
	// remembered).
	c.MustPublish(evs[39])

	// Confirmation: the held list is what goes.
	ctx := context.Background()
	late := relaytest.NewKey("tool-reactions").Event(7, "+", nil, fixtureBase+500)
	o := deleteOptions{Confirm: func(n int) (bool, error) {
		if n != 7 {
			t.Errorf("asked to confirm %d, want 7", n)
		}
		c.MustPublish(late) // matches, arrives after the listing
		return true, nil
	}}
	res, served, err := deleteThroughServe(ctx, data, []nostr.Filter{{Kinds: []int{7}}}, o)
	if !served || err != nil || res.Matched != 7 || res.Deleted != 7 {
		t.Fatalf("confirmed delete: %+v served=%v %v", res, served, err)
	}
	if got := reactions(); len(got) != 1 || got[0].ID != late.ID {
		t.Fatalf("after the confirmed delete the relay serves %d reactions, want only the late one", len(got))
	}
	// Declined: nothing goes, and the held list cannot be used later.
	o.Confirm = func(int) (bool, error) { return false, nil }
	if res, _, err := deleteThroughServe(ctx, data, []nostr.Filter{{Kinds: []int{7}}}, o); !errors.Is(err, errNotConfirmed) || res.Deleted != 0 {
		t.Fatalf("declined: %+v %v", res, err)
	}
	if _, _, err := askDelete(ctx, data, deleteRequest{Token: "0123"}, nil); err == nil || !strings.Contains(err.Error(), "run delete again") {
		t.Fatalf("unknown token: %v", err)
	}
	if got := reactions(); len(got) != 1 {
		t.Fatalf("%d reactions after the declined delete, want 1", len(got))
	}
	if !strings.Contains(srv.logs.String(), `msg="events deleted (petrel delete)" matched=7 deleted=7`) {
		t.Fatalf("no log line for the delete:\n%s", srv.logs.String())
	}

	// compact runs beside it too (the relay compacts its own store); a
	// rebuild of the search index needs it stopped. Its tables are
	// measured: before, the events may all be in the memtable (no table
	// yet); after, the compaction has flushed them into one.
	out, _, err = runTool(t, compactCmd, "", "--data", data, "-q", "--json")
	var cres compactResult
	if err != nil || json.Unmarshal([]byte(out), &cres) != nil || !cres.Online || cres.SizeAfter <= 0 {
		t.Fatalf("compact beside the relay: %q %v", out, err)
	}
	if _, _, err := runTool(t, compactCmd, "", "--data", data, "-q", "--rebuild-search"); err == nil || !strings.Contains(err.Error(), "stop petrel serve first") {
		t.Fatalf("compact --rebuild-search beside the relay: %v", err)
	}
	if got := reactions(); len(got) != 1 {
		t.Fatalf("%d reactions after the compaction, want 1", len(got))
	}
	c.MustPublish(relaytest.NewKey("tool-reactions").Event(7, "+", nil, fixtureBase+600))
	if !strings.Contains(srv.logs.String(), `msg="store compacted (petrel compact)"`) {
		t.Fatalf("no log line for the compaction:\n%s", srv.logs.String())
	}
}
