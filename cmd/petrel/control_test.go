package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/cli"
	"github.com/petrel-relay/petrel/internal/config"
	"github.com/petrel-relay/petrel/internal/importer"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/store/pebble"
)

// startTestControl opens a store in a new directory and serves its
// control socket, closed at the end of the test.
func startTestControl(t *testing.T) (dir string, cfg config.Config, st *pebble.Store, c *controlServer) {
	t.Helper()
	dir = t.TempDir()
	cfg = config.Config{}.Normalize()
	cfg.Store.Path = filepath.Join(dir, "data")
	st = openStoreAt(t, cfg.Store.Path)
	if c = startControl(cfg, quietLog, st); c == nil {
		t.Fatal("no control socket")
	}
	t.Cleanup(func() { c.close(context.Background()) })
	return dir, cfg, st, c
}

// TestControlBackup drives the control socket in process: one backup at a
// time (a second, while one runs, is refused and writes nothing; the next
// is served), a destination that exists is refused, and the socket is
// private to its user and gone after close.
func TestControlBackup(t *testing.T) {
	dir, cfg, _, c := startTestControl(t)
	fi, err := os.Stat(c.path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	ctx := context.Background()

	// At the limit of one: a request while a backup runs is refused.
	c.mu.Lock()
	busy := filepath.Join(dir, "busy")
	_, served, err := askBackup(ctx, cfg.Store.Path, busy, false)
	_, cserved, cerr := askCompact(ctx, cfg.Store.Path, false)
	c.mu.Unlock()
	if !served || err == nil || !strings.Contains(err.Error(), "another backup or a compaction is running") {
		t.Fatalf("backup while one runs: served %v, err %v", served, err)
	}
	if !cserved || cerr == nil || !strings.Contains(cerr.Error(), "a backup or another compaction is running") {
		t.Fatalf("compaction while a backup runs: served %v, err %v", cserved, cerr)
	}
	if _, err := os.Stat(busy); !os.IsNotExist(err) {
		t.Fatalf("a refused backup wrote %s (%v)", busy, err)
	}
	// Then served.
	res, served, err := askBackup(ctx, cfg.Store.Path, busy, true)
	if !served || err != nil || !res.Online || res.Dest != busy || res.Events != 0 {
		t.Fatalf("backup: served %v, err %v, result %+v", served, err, res)
	}
	// An existing destination is refused by the relay.
	if _, _, err := askBackup(ctx, cfg.Store.Path, busy, false); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("backup into an existing directory: %v", err)
	}
	// A compaction, with nothing else running, is served.
	if cres, served, err := askCompact(ctx, cfg.Store.Path, true); !served || err != nil || !cres.Online {
		t.Fatalf("compaction: served %v, err %v, result %+v", served, err, cres)
	}
	c.close(context.Background())
	if _, err := os.Stat(c.path); !os.IsNotExist(err) {
		t.Fatalf("socket left after close: %v", err)
	}
	// No socket: not served, so the caller opens the store itself.
	if _, served, err := askBackup(ctx, cfg.Store.Path, filepath.Join(dir, "b2"), false); served || err != nil {
		t.Fatalf("without a socket: served %v, err %v", served, err)
	}
}

// TestControlShutdown: a request in flight when the relay stops is told
// to stop and answered before the store closes: an import waiting on a
// quiet input saves what it read and says the relay is shutting down;
// close does not wait for the input.
func TestControlShutdown(t *testing.T) {
	_, cfg, st, c := startTestControl(t)
	evs := toolEvents()
	var lines []byte
	for _, ev := range evs[:3] {
		lines = append(append(lines, ev.Raw...), '\n')
	}
	pr, pw := io.Pipe()
	defer pw.Close()
	type answer struct {
		res *importer.Result
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, _, err := importThroughServe(context.Background(), cfg.Store.Path, &importFlags{}, pr)
		done <- answer{res, err}
	}()
	// The three lines are sent, then the input is quiet: the importer
	// waits for a chunk's worth, or the end.
	if _, err := pw.Write(lines); err != nil {
		t.Fatal(err)
	}
	for !c.importing.Load() {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	c.close(ctx)
	if ctx.Err() != nil {
		t.Fatalf("close waited %v: the import did not stop", time.Since(start))
	}
	a := <-done
	if a.res == nil || !a.res.Interrupted || !strings.HasPrefix(fmt.Sprint(a.err), stoppingPrefix+"it stopped the import after line ") {
		t.Fatalf("import when the relay stops: %+v %v", a.res, a.err)
	}
	// The lines that reached the relay's reader (all three, or none if
	// the stop came first) are saved, and the answer says so.
	if a.res.Lines > 3 || a.res.Stored != a.res.Lines {
		t.Fatalf("counts %+v", a.res.Counts)
	}
	t.Logf("%d of the 3 lines saved", a.res.Stored)
	if n, err := st.Count(context.Background(), []nostr.Filter{{}}); err != nil || n != a.res.Stored {
		t.Fatalf("the store holds %d events (%v), the answer says %d saved", n, err, a.res.Stored)
	}
}

// TestControlShutdownDelete: a deletion in flight when the relay stops
// ends between batches and says how far it got, which is what the store
// shows.
func TestControlShutdownDelete(t *testing.T) {
	_, cfg, st, c := startTestControl(t)
	k := relaytest.NewKey("shutdown-delete")
	var evs []*nostr.Event
	for i := range 300 {
		evs = append(evs, k.Event(1, fmt.Sprint("n", i), nil, fixtureBase+int64(i)))
	}
	ctx := context.Background()
	if _, err := st.Save(ctx, evs); err != nil {
		t.Fatal(err)
	}
	first := make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	var last deleteLine
	go func() {
		var err error
		last, _, err = askDelete(ctx, cfg.Store.Path, deleteRequest{Filters: []json.RawMessage{json.RawMessage(`{"kinds":[1]}`)}, Batch: 1},
			func(deleteLine) { once.Do(func() { close(first) }) })
		done <- err
	}()
	<-first
	c.close(ctx)
	err := <-done
	if err == nil || !strings.HasPrefix(err.Error(), stoppingPrefix+"it stopped after deleting ") {
		t.Fatalf("delete when the relay stops: %+v %v", last, err)
	}
	n, cerr := st.Count(ctx, []nostr.Filter{{}})
	if cerr != nil || last.Deleted == 0 || last.Deleted >= 300 || n != int64(300-last.Deleted) {
		t.Fatalf("deleted %d by the answer, %d left in the store (%v)", last.Deleted, n, cerr)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("deleting %d of 300 events", last.Deleted)) {
		t.Fatalf("the message's count: %v, answer %+v", err, last)
	}
}

// TestImportAnswerDrainBound: an import refused while another runs is
// answered at once, and a client that then goes on sending for ever is
// read no longer than answerDrain: the handler ends and the connection
// is closed, so the client's writes fail. (A raw client: Go's transport
// would itself stop sending once the answer came.)
func TestImportAnswerDrainBound(t *testing.T) {
	_, cfg, _, c := startTestControl(t)
	defer func(d time.Duration) { answerDrain = d }(answerDrain)
	answerDrain = 100 * time.Millisecond
	c.importing.Store(true) // another import runs
	defer c.importing.Store(false)
	conn, err := net.Dial("unix", cli.ControlSocketPath(cfg.Store.Path))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /import HTTP/1.1\r\nHost: petrel\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	writing := make(chan error, 1)
	go func() {
		line := strings.Repeat("{}\n", 341) + "\n" // 1,024 bytes
		chunk := []byte(fmt.Sprintf("%x\r\n%s\r\n", len(line), line))
		for {
			if _, err := conn.Write(chunk); err != nil {
				writing <- err
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || res.StatusCode != http.StatusConflict {
		t.Fatalf("a second import: %v %v, want 409 at once", res, err)
	}
	select {
	case err := <-writing:
		t.Logf("the endless input stopped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the relay still reads a refused import's input 30s after refusing it")
	}
}
