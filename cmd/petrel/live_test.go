package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/cli"
	"github.com/petrel-relay/petrel/internal/importer"
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

// TestImportOnRunningServe: petrel import beside a running petrel serve
// sends its input through the control socket and the relay saves it with
// the same outcomes as an import into a stopped store; one import runs at
// a time; Ctrl-C ends the input on a whole line and the summary is still
// printed; a relay that stops mid-import is reported as such.
func TestImportOnRunningServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the petrel binary")
	}
	dir, srv, _, _ := serveToolEvents(t, 10)
	data := srv.Data
	input, want := importCmdInput()
	plain := filepath.Join(dir, "events.jsonl")
	writeFile(t, plain, input)
	served := func(k relaytest.Key) []*nostr.Event {
		q := relaytest.Dial(t, srv.URL)
		defer q.Close()
		return q.Req("imp", `{"authors":["`+k.PK.Hex()+`"]}`)
	}
	out, _, err := runTool(t, importCmd, "", "--data", data, "--json", "-q", plain)
	var res importer.Result
	if err != nil || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("import beside the relay: %q %v", out, err)
	}
	if res.Counts != want || res.Bytes != int64(len(input)) || len(res.Errors) != 2 || res.Errors[0].Line != 6 || res.Errors[1].Line != 7 {
		t.Fatalf("import beside the relay:\n got %+v %+v\nwant %+v", res.Counts, res.Errors, want)
	}
	if got := served(relaytest.NewKey("import-cmd")); len(got) != 3 {
		t.Fatalf("the relay serves %d imported events, want 3", len(got))
	}
	if !strings.Contains(srv.logs.String(), `msg="events imported (petrel import)" lines=9 stored=3 duplicate=1`) {
		t.Fatalf("no log line for the import:\n%s", srv.logs.String())
	}
	// Again, from stdin, with --strict: all duplicates, the refused lines
	// fail the command.
	out, _, err = runTool(t, importCmd, string(input), "--data", data, "-q", "--strict", "-")
	if err == nil || err.Error() != "--strict: 2 of 9 lines refused (the others were saved)" || !strings.Contains(out, "stored 0, duplicate 4,") {
		t.Fatalf("import --strict again: %q %v", out, err)
	}
	// A truncated gzip file: the relay saves the whole lines before the
	// cut and answers, and import says what failed, as an import into a
	// store it opens does (not that the relay stopped answering).
	gk := relaytest.NewKey("import-gz")
	var gzIn bytes.Buffer
	zw := gzip.NewWriter(&gzIn)
	for i := range 400 {
		zw.Write(append(gk.Event(1, fmt.Sprintf("gz %d %s", i, strings.Repeat("x", i)), nil, fixtureBase+int64(i)).Raw, '\n'))
	}
	zw.Close()
	cutGz := filepath.Join(dir, "cut.jsonl.gz")
	writeFile(t, cutGz, gzIn.Bytes()[:gzIn.Len()*2/3])
	offline, _, offErr := runTool(t, importCmd, "", "--data", filepath.Join(t.TempDir(), "offline"), "--json", "-q", cutGz)
	var offRes importer.Result
	// (The output ends with cobra's usage after a failure: runTool runs
	// the command without the root's SilenceUsage.)
	if offErr == nil || json.NewDecoder(strings.NewReader(offline)).Decode(&offRes) != nil {
		t.Fatalf("offline import of a truncated file: %q %v", offline, offErr)
	}
	out, _, err = runTool(t, importCmd, "", "--data", data, "--json", "-q", cutGz)
	res = importer.Result{}
	if err == nil || json.NewDecoder(strings.NewReader(out)).Decode(&res) != nil || err.Error() != offErr.Error() ||
		!strings.Contains(err.Error(), "the gzip data ends early") || res.Lines != offRes.Lines || res.Stored != res.Lines || res.Lines == 0 {
		t.Fatalf("a truncated gzip file through the relay: %q %v\noffline: %q %v", out, err, offline, offErr)
	}
	if got := served(gk); len(got) != int(res.Stored) {
		t.Fatalf("the relay serves %d of the %d events it said it saved", len(got), res.Stored)
	}

	ctx := context.Background()
	if _, _, err := cli.PostControlStream(ctx, data, "import?batch=x", "application/x-ndjson", strings.NewReader(""), nil); err == nil || !strings.Contains(err.Error(), `batch: want a whole number of at least 0, not "x"`) {
		t.Fatalf("bad option: %v", err)
	}

	// One import at a time: a second is refused while one runs, and the
	// first goes on.
	k := relaytest.NewKey("import-live")
	evs := []*nostr.Event{k.Event(1, "a", nil, fixtureBase+1), k.Event(1, "b", nil, fixtureBase+2)}
	pr, pw := io.Pipe()
	first := make(chan error, 1)
	var firstRes *importer.Result
	startedBefore := strings.Count(srv.logs.String(), "import started")
	go func() {
		var err error
		firstRes, _, err = importThroughServe(ctx, data, &importFlags{batch: 1}, pr)
		first <- err
	}()
	if _, err := pw.Write(append(slices.Clone(evs[0].Raw), '\n')); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); strings.Count(srv.logs.String(), "import started") <= startedBefore; {
		if time.Now().After(deadline) {
			t.Fatalf("the first import does not start:\n%s", srv.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, _, err := runTool(t, importCmd, "", "--data", data, "-q", plain); err == nil || !strings.Contains(err.Error(), "another petrel import is running into this relay") {
		t.Fatalf("a second import while one runs: %v", err)
	}
	// A refusal does not wait for the input to end (a quiet pipe here).
	idleR, idleW := io.Pipe()
	refused := make(chan error, 1)
	go func() {
		_, _, err := importThroughServe(ctx, data, &importFlags{}, idleR)
		refused <- err
	}()
	go idleW.Write(append(slices.Clone(evs[1].Raw), '\n'))
	select {
	case err := <-refused:
		if err == nil || !strings.Contains(err.Error(), "another petrel import is running into this relay") {
			t.Fatalf("a second import from a pipe while one runs: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a second import from a quiet pipe is not refused")
	}
	idleW.Close()
	if _, err := pw.Write(append(slices.Clone(evs[1].Raw), '\n')); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if err := <-first; err != nil || firstRes.Stored != 2 || firstRes.Interrupted {
		t.Fatalf("the first import: %+v %v", firstRes, err)
	}
	if _, _, err := runTool(t, importCmd, "", "--data", data, "-q", plain); err != nil {
		t.Fatalf("an import after the first ended: %v", err)
	}

	// Interrupted while sending: the relay gets whole lines only (the
	// cut is tested exactly in TestImportBodyCut), saves them, and the
	// result says so.
	more := []*nostr.Event{k.Event(1, "c", nil, fixtureBase+3), k.Event(1, "d", nil, fixtureBase+4), k.Event(1, "e", nil, fixtureBase+5)}
	var all []byte
	for _, ev := range more {
		all = append(append(all, ev.Raw...), '\n')
	}
	ictx, cancel := context.WithCancel(ctx)
	cut := &cancelAfter{r: bytes.NewReader(all), at: len(more[0].Raw) + 10, cancel: cancel}
	ires, ok, err := importThroughServe(ictx, data, &importFlags{}, cut)
	if !ok || err != nil || !ires.Interrupted || ires.Lines > 2 || ires.Stored != ires.Lines || ires.Invalid != 0 {
		t.Fatalf("interrupted import: %+v served=%v %v", ires, ok, err)
	}
	if got := served(k); len(got) != 2+int(ires.Stored) {
		t.Fatalf("the relay serves %d of the live imports' events, want %d", len(got), 2+ires.Stored)
	}

	// The relay dies in the middle of an import (kill -9): the
	// connection breaks and import says so.
	midImport := func(stop func()) error {
		pr, pw := io.Pipe()
		defer pw.Close()
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			_, _ = pw.Write(append(slices.Clone(more[2].Raw), '\n'))
			stop()
		}()
		_, _, err := importThroughServe(ctx, data, &importFlags{}, pr)
		<-stopped
		return err
	}
	if err := midImport(func() { _ = srv.cmd.Process.Kill(); srv.stop() }); !errors.Is(err, errImportStopped) {
		t.Fatalf("import while the relay dies: %v", err)
	}
	// It stops (SIGTERM) in the middle of one: it answers what it
	// saved and that it is shutting down, before its store closes.
	srv = runServe(t, petrelBin(t), data)
	stopWhenStarted := func() {
		// Once the relay has the request: a SIGTERM before that finds a
		// connection it never accepted, which does break.
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(srv.logs.String(), "import started") && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		srv.stop()
	}
	if err := midImport(stopWhenStarted); err == nil || !strings.HasPrefix(err.Error(), stoppingPrefix+"it stopped the import after line ") {
		t.Fatalf("import while the relay stops: %v\n%s", err, srv.logs.String())
	}
	if !strings.Contains(srv.logs.String(), "import stopped by the shutdown (petrel import)") {
		t.Fatalf("no log line for the stopped import:\n%s", srv.logs.String())
	}
}

// cancelAfter reads r a few bytes at a time and calls cancel once at bytes
// have been read.
type cancelAfter struct {
	r      io.Reader
	at     int
	read   int
	cancel func()
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p[:min(len(p), 7)])
	c.read += n
	if c.read >= c.at {
		c.cancel()
	}
	return n, err
}

// TestImportBodyCut: an import's input, interrupted, ends at the end of
// the line it is in; an idle input is left when the relay goes away.
func TestImportBodyCut(t *testing.T) {
	read := func(b *importBody) (string, error) {
		t.Helper()
		p := make([]byte, 100)
		n, err := b.Read(p)
		return string(p[:n]), err
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	b := newImportBody(ctx, pr, 0)
	defer close(b.quit)
	// Whole lines only: a line begun is held until its line break.
	go pw.Write([]byte("line1\nli"))
	if s, err := read(b); s != "line1\n" || err != nil {
		t.Fatalf("first read: %q %v", s, err)
	}
	go pw.Write([]byte("ne2\nline3\nline4\nl"))
	if s, err := read(b); s != "line2\nline3\nline4\n" || err != nil {
		t.Fatalf("second read: %q %v", s, err)
	}
	cancel()
	if s, err := read(b); s != "" || err != io.EOF || !b.cut.Load() {
		t.Fatalf("after the interruption: %q %v cut=%v, want the end at once", s, err, b.cut.Load())
	}
	// Interrupted inside a line the transport took part of: the rest of
	// that line is sent, nothing after it.
	ctx, cancel = context.WithCancel(context.Background())
	b = newImportBody(ctx, strings.NewReader("line1\nline2\n"), 0)
	defer close(b.quit)
	p := make([]byte, 3)
	if n, err := b.Read(p); string(p[:n]) != "lin" || err != nil {
		t.Fatalf("short read: %q %v", p[:n], err)
	}
	cancel()
	if s, err := read(b); s != "e1\n" || err != nil {
		t.Fatalf("after the interruption: %q %v, want the rest of the line", s, err)
	}
	if s, err := read(b); s != "" || err != io.EOF {
		t.Fatalf("after the line: %q %v, want the end", s, err)
	}
	// An input that fails (a truncated gzip file) ends the body cleanly
	// at the last line break, its line begun dropped, and says why.
	boom := errors.New("boom")
	b = newImportBody(context.Background(), io.MultiReader(strings.NewReader("line1\nline2\nli"), iotest.ErrReader(boom)), 0)
	defer close(b.quit)
	var got string
	for {
		s, err := read(b)
		got += s
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("after %q: %v", got, err)
		}
	}
	if got != "line1\nline2\n" || !errors.Is(b.inputError(), boom) {
		t.Fatalf("a failing input sent %q, error %v", got, b.inputError())
	}
	b = newImportBody(context.Background(), strings.NewReader("line1\nlast"), 0)
	defer close(b.quit)
	for _, want := range []string{"line1\n", "last"} {
		if s, err := read(b); s != want || err != nil {
			t.Fatalf("read: %q %v, want %q", s, err, want)
		}
	}
	// The input's last line needs no line break; a line longer than the
	// import takes is sent as it comes (the relay refuses it whole).
	b = newImportBody(context.Background(), strings.NewReader("line1\nabcdefghij"), 5)
	defer close(b.quit)
	if s, err := read(b); s != "line1\nabcdefghij" || err != nil {
		t.Fatalf("read: %q %v", s, err)
	}
	if _, err := read(b); err != io.EOF || b.inputError() != nil {
		t.Fatalf("the end: %v %v", err, b.inputError())
	}

	// At a line break, the interruption ends the input at once, even
	// while the input has nothing to give.
	ctx, cancel = context.WithCancel(context.Background())
	pr2, pw2 := io.Pipe()
	defer pw2.Close()
	b = newImportBody(ctx, pr2, 0)
	defer close(b.quit)
	go pw2.Write([]byte("line1\n"))
	if s, _ := read(b); s != "line1\n" {
		t.Fatalf("first read: %q", s)
	}
	time.AfterFunc(10*time.Millisecond, cancel)
	if s, err := read(b); s != "" || err != io.EOF {
		t.Fatalf("interrupted while the input is idle: %q %v", s, err)
	}

	// The relay goes away while the input is idle (mid-line, or not).
	b = newImportBody(context.Background(), pr2, 0)
	defer close(b.quit)
	time.AfterFunc(10*time.Millisecond, func() { close(b.sig.Lost) })
	if _, err := read(b); !errors.Is(err, errRelayLost) {
		t.Fatalf("relay gone while the input is idle: %v", err)
	}
	// The relay answers before the input ends (a refusal, its
	// shutdown): the input ends there.
	b = newImportBody(context.Background(), pr2, 0)
	defer close(b.quit)
	time.AfterFunc(10*time.Millisecond, func() { close(b.sig.Answered) })
	if _, err := read(b); err != io.EOF {
		t.Fatalf("relay answered while the input is idle: %v", err)
	}
	pw.Close()
}

// TestImportNotServed: a control socket a stopped relay left behind is not
// a relay: import opens the store itself, with its input untouched.
func TestImportNotServed(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("unix", cli.ControlSocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	in := strings.NewReader(strings.Repeat("{}\n", 100_000))
	res, served, err := importThroughServe(context.Background(), dir, &importFlags{}, in)
	if served || err != nil || res != nil {
		t.Fatalf("import through a dead socket: %+v served=%v %v", res, served, err)
	}
	if in.Len() != 300_000 {
		t.Fatalf("%d bytes of the input read by a request never sent", 300_000-in.Len())
	}
}
