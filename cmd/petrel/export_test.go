package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
)

// toolEvents are the events the export, scan, delete, compact and backup
// tests start from: 30 notes by one author (two per created_at second,
// so that ties occur) and 10 reactions by another.
func toolEvents() []*nostr.Event {
	k1, k2 := relaytest.NewKey("tool-notes"), relaytest.NewKey("tool-reactions")
	var evs []*nostr.Event
	for i := range 30 {
		evs = append(evs, k1.Event(1, fmt.Sprintf("note %d", i), nil, fixtureBase+int64(i/2)))
	}
	for i := range 10 {
		evs = append(evs, k2.Event(7, "+", nostr.Tags{{"e", evs[i].ID.Hex()}}, fixtureBase+100+int64(i)))
	}
	return evs
}

// fillStore creates a store in a new directory holding events, closed,
// and returns the directory.
func fillStore(t *testing.T, events []*nostr.Event) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	st := openStoreAt(t, dir)
	res, err := st.Save(context.Background(), events)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Outcome.String() != "stored" {
			t.Fatalf("event %d: %v %v", i, r.Outcome, r.Err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func raws(events []*nostr.Event) []string {
	out := make([]string, len(events))
	for i, ev := range events {
		out[i] = string(ev.Raw)
	}
	return out
}

// checkOrder fails unless lines are events in the given order:
// created_at descending (newest) or ascending, ties by id ascending.
func checkOrder(t *testing.T, lines []string, newest bool) {
	t.Helper()
	var prev *nostr.Event
	for i, l := range lines {
		ev, err := nostr.ParseEvent([]byte(l), nil)
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if prev != nil {
			c := ev.CreatedAt - prev.CreatedAt
			if newest {
				c = -c
			}
			if c < 0 || (c == 0 && strings.Compare(ev.ID.Hex(), prev.ID.Hex()) <= 0) {
				t.Fatalf("line %d (created_at %d) out of order after created_at %d", i+1, ev.CreatedAt, prev.CreatedAt)
			}
		}
		prev = ev
	}
}

func TestExportCommand(t *testing.T) {
	evs := toolEvents()
	data := fillStore(t, evs)
	dir := t.TempDir()
	f := func(wantEvents []*nostr.Event, newest bool, args ...string) {
		t.Helper()
		for _, name := range []string{"out.jsonl", "out.jsonl.gz"} {
			path := filepath.Join(dir, name)
			out, _, err := runTool(t, exportCmd, "", append([]string{"--data", data, "-o", path}, args...)...)
			if err != nil {
				t.Fatalf("%v: %v", args, err)
			}
			if want := fmt.Sprintf("exported %d events", len(wantEvents)); !strings.HasPrefix(out, want) {
				t.Fatalf("%v: summary %q, want %q", args, out, want)
			}
			lines := readLines(t, path)
			if !sameSet(lines, raws(wantEvents)) {
				t.Fatalf("%v -o %s: %d lines, not the %d events wanted", args, name, len(lines), len(wantEvents))
			}
			checkOrder(t, lines, newest)
		}
	}
	f(evs, true)
	f(evs, false, "--oldest-first")
	f(evs[30:], true, "--filter", `{"kinds":[7]}`)
	f(evs[28:30], true, "--filter", `{"kinds":[1],"limit":2}`)
	f(evs[28:30], false, "--filter", `{"kinds":[1],"limit":2}`, "--oldest-first")
	f(append(slices.Clone(evs[4:6]), evs[30:32]...), true, "--filter", `[{"kinds":[1],"until":1700000002,"limit":2},{"kinds":[7],"until":1700000101}]`)
	f(evs[0:6], false, "--since", "1700000000", "--until", "1700000002", "--oldest-first")
	f(nil, true, "--filter", `{"kinds":[]}`)

	// To stdout: events there, the summary on stderr; -q drops it.
	out, errOut, err := runTool(t, exportCmd, "", "--data", data, "--filter", `{"kinds":[7]}`)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if !sameSet(lines, raws(evs[30:])) || !strings.HasPrefix(errOut, "exported 10 events") {
		t.Fatalf("stdout %d lines, stderr %q", len(lines), errOut)
	}
	if _, errOut, _ := runTool(t, exportCmd, "", "--data", data, "-q"); errOut != "" {
		t.Fatalf("-q: stderr %q", errOut)
	}

	// Refusals: a bad filter, a missing store, a held store.
	f2 := func(want string, args ...string) {
		t.Helper()
		_, _, err := runTool(t, exportCmd, "", args...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%v: error %v, want %q", args, err, want)
		}
	}
	f2("--filter", "--data", data, "--filter", `{"kinds":1}`)
	f2("--until", "--data", data, "--until", "soon")
	f2("no store", "--data", filepath.Join(dir, "nothing"))
	// -o naming a directory: refused before anything is written, and no
	// temporary file is left beside it.
	outDir := filepath.Join(dir, "out")
	if err := os.Mkdir(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadDir(dir)
	f2("is a directory", "--data", data, "-o", outDir)
	if after, _ := os.ReadDir(dir); len(after) != len(before) {
		t.Fatalf("a refused -o left files: %v, was %v", after, before)
	}
	// -o in a directory that does not exist: told by the name given, not
	// the temporary file's.
	missing := filepath.Join(dir, "missing", "events.jsonl")
	if _, _, err := runTool(t, exportCmd, "", "--data", data, "-o", missing); err == nil || err.Error() != "create "+missing+": no such file or directory" {
		t.Fatalf("-o in a missing directory: %v", err)
	}
	openStoreAt(t, data)
	f2("is petrel serve running?", "--data", data)
}

// TestExportImportRoundTrip: what export writes, import loads into an
// empty store, and that store exports the same lines in the same order.
func TestExportImportRoundTrip(t *testing.T) {
	evs := toolEvents()
	evs = append(evs, relaytest.NewKey("tool-profile").Event(0, `{"name":"x"}`, nil, fixtureBase+7))
	data := fillStore(t, evs)
	dir := t.TempDir()
	first := filepath.Join(dir, "first.jsonl.gz")
	if _, _, err := runTool(t, exportCmd, "", "--data", data, "-o", first); err != nil {
		t.Fatal(err)
	}
	data2 := filepath.Join(dir, "data2")
	out, _, err := runTool(t, importCmd, "", "--data", data2, "-q", first)
	if err != nil || !strings.Contains(out, fmt.Sprintf("stored %d, duplicate 0", len(evs))) {
		t.Fatalf("import: %v\n%s", err, out)
	}
	second := filepath.Join(dir, "second.jsonl")
	if _, _, err := runTool(t, exportCmd, "", "--data", data2, "-o", second); err != nil {
		t.Fatal(err)
	}
	a, b := readLines(t, first), readLines(t, second)
	if !slices.Equal(a, b) || !sameSet(a, raws(evs)) {
		t.Fatalf("round trip: %d lines, then %d lines", len(a), len(b))
	}
}

// cancelOnWrite cancels a run at its first write: the export's first
// buffer flush, cut mid-line.
type cancelOnWrite struct {
	strings.Builder
	cancel context.CancelFunc
}

func (w *cancelOnWrite) Write(p []byte) (int, error) {
	w.cancel()
	return w.Builder.Write(p)
}

// TestExportInterrupted: an export to stdout stopped by Ctrl-C leaves
// whole lines, as many as it says, not a buffer cut mid-line or an
// unexplained "context canceled".
func TestExportInterrupted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	st := openStoreAt(t, dir)
	k := relaytest.NewKey("export-cut")
	var evs []*nostr.Event
	for i := range 3000 {
		evs = append(evs, k.Event(1, strings.Repeat("x", 1000)+fmt.Sprint(i), nil, fixtureBase+int64(i)))
	}
	if _, err := st.Save(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	st.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &cancelOnWrite{cancel: cancel}
	cmd := exportCmd()
	cmd.SetOut(out)
	cmd.SetErr(new(strings.Builder))
	cmd.SetArgs([]string{"--data", dir, "-q"})
	cmd.SilenceUsage = true // the root command's setting
	err := cmd.ExecuteContext(ctx)
	lines := strings.Split(out.String(), "\n")
	if last := lines[len(lines)-1]; last != "" {
		t.Fatalf("the output ends mid-line: %q", last[:min(len(last), 60)])
	}
	lines = lines[:len(lines)-1]
	if err == nil || err.Error() != fmt.Sprintf("interrupted after %d events (written, whole lines)", len(lines)) || len(lines) >= len(evs) {
		t.Fatalf("%d lines written of %d, error %v", len(lines), len(evs), err)
	}
	for i, l := range lines {
		if _, perr := nostr.ParseEvent([]byte(l), nil); perr != nil {
			t.Fatalf("line %d: %v", i+1, perr)
		}
	}
}
