package main

// The control socket: petrel serve listens on a Unix socket inside its data
// directory, so that the maintenance commands that can work on a live store
// (petrel backup, delete, compact and import) ask the running relay
// instead of needing it stopped. The socket is mode 0600: the user serve runs as (and
// root) may use it, as they may read the data directory. petrel scan,
// export, and req and count --store read the store through it too (POST
// /query, storeread.go); delete is POST /delete (livedelete.go), import
// POST /import (liveimport.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/petrel-relay/petrel/internal/cli"
	"github.com/petrel-relay/petrel/internal/config"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store/pebble"
)

// controlServer serves the control socket.
type controlServer struct {
	path  string
	srv   *http.Server
	mu    sync.Mutex // one backup or compaction at a time
	holds deleteHolds
	// importing: one petrel import at a time (liveimport.go).
	importing atomic.Bool
	log       *slog.Logger
	// stopping is every request's context, cancelled when the relay
	// stops (close): a request in flight ends early and answers.
	stopping context.Context
	stop     context.CancelFunc
}

// startControl listens on the control socket of cfg's store. Without it
// (a path too long for a Unix socket, say) the relay runs as before and
// petrel backup needs it stopped: a warning says so.
func startControl(cfg config.Config, log *slog.Logger, st *pebble.Store) *controlServer {
	path := cli.ControlSocketPath(cfg.Store.Path)
	// A socket left by a serve that died: the store's lock, which this
	// process holds, says no other serve uses this directory.
	if cli.IsSocket(path) {
		_ = os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		log.Warn("no control socket: backup, delete, compact, import, scan and export will need the relay stopped", "path", path, "err", err)
		return nil
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		log.Warn("no control socket: backup, delete, compact, import, scan and export will need the relay stopped", "path", path, "err", err)
		return nil
	}
	c := &controlServer{path: path, log: log}
	c.stopping, c.stop = context.WithCancel(context.Background())
	mux := http.NewServeMux()
	mux.HandleFunc("POST /backup", func(w http.ResponseWriter, r *http.Request) {
		c.backup(w, r, cfg, log, st)
	})
	mux.HandleFunc("POST /query", func(w http.ResponseWriter, r *http.Request) {
		serveQuery(w, r, st) // petrel req/count --store (storeread.go)
	})
	mux.HandleFunc("POST /delete", func(w http.ResponseWriter, r *http.Request) {
		c.serveDelete(w, r, st) // petrel delete (livedelete.go)
	})
	mux.HandleFunc("POST /compact", func(w http.ResponseWriter, r *http.Request) {
		c.compact(w, r, cfg, log, st)
	})
	own, _ := nostr.ParseOwnURL(cfg.Relay.URL) // serve has checked it
	mux.HandleFunc("POST /import", func(w http.ResponseWriter, r *http.Request) {
		c.serveImport(w, r, st, own) // petrel import (liveimport.go)
	})
	c.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return c.stopping }}
	go func() { _ = c.srv.Serve(ln) }()
	return c
}

// controlReply answers a control socket request with v as JSON.
func controlReply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// close stops serving and removes the socket: the requests in flight are
// told to stop (a backup's checkpoint finishes, a compaction stops at the
// next level, a deletion between batches, an import after saving what it
// has read) and answered before the store closes, until ctx ends.
func (c *controlServer) close(ctx context.Context) {
	if c == nil {
		return
	}
	c.stop()
	if err := c.srv.Shutdown(ctx); err != nil {
		_ = c.srv.Close()
	}
	_ = os.Remove(c.path)
}

// stoppingPrefix starts what a request cut short by the relay's shutdown
// says, when the client does not put "the running relay: " before it.
const stoppingPrefix = "the running relay is shutting down: "

// stopReason is err, or msg (what was done) when the relay's shutdown cut
// the request short.
func (c *controlServer) stopReason(err error, msg string) error {
	if err != nil && c.stopping.Err() != nil && errors.Is(err, context.Canceled) {
		return errors.New(msg)
	}
	return err
}

// backupRequest asks the running relay for a checkpoint into Dest (an
// absolute path that must not exist).
type backupRequest struct {
	Dest   string `json:"dest"`
	Verify bool   `json:"verify"`
}

func (c *controlServer) backup(w http.ResponseWriter, r *http.Request, cfg config.Config, log *slog.Logger, st *pebble.Store) {
	var req backupRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil || !filepath.IsAbs(req.Dest) {
		controlReply(w, http.StatusBadRequest, cli.ControlError{Error: "want {\"dest\": an absolute path, \"verify\": bool}"})
		return
	}
	if !c.mu.TryLock() {
		controlReply(w, http.StatusConflict, cli.ControlError{Error: "another backup or a compaction is running"})
		return
	}
	defer c.mu.Unlock()
	res, err := liveBackup(r.Context(), cfg, log, st, req.Dest, req.Verify)
	if err != nil {
		err = c.stopReason(err, "it is shutting down: the backup in "+req.Dest+" was written but not verified (petrel scan --data "+req.Dest+" --count counts it)")
		controlReply(w, http.StatusInternalServerError, cli.ControlError{Error: err.Error()})
		return
	}
	log.Info("backup written", "dest", res.Dest, "bytes", res.Bytes, "seconds", res.Seconds)
	controlReply(w, http.StatusOK, res)
}

// compactRequest asks the running relay to compact its store.
type compactRequest struct {
	PurgeExpired bool `json:"purge_expired"`
}

// compact answers POST /compact: petrel compact on the live store (its
// expired events purged first if asked), pebble compacting beside the
// relay's writes. A client that goes away stops it at the next level.
func (c *controlServer) compact(w http.ResponseWriter, r *http.Request, cfg config.Config, log *slog.Logger, st *pebble.Store) {
	var req compactRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
		controlReply(w, http.StatusBadRequest, cli.ControlError{Error: `want {"purge_expired": bool}`})
		return
	}
	if !c.mu.TryLock() {
		controlReply(w, http.StatusConflict, cli.ControlError{Error: "a backup or another compaction is running"})
		return
	}
	defer c.mu.Unlock()
	start := time.Now()
	res := compactResult{Online: true}
	var err error
	if res.SizeBefore, err = tablesSize(cfg.Store.Path); err == nil {
		res.Purged, err = compactStore(r.Context(), st, req.PurgeExpired, time.Now().Unix())
	}
	if err == nil {
		res.SizeAfter, err = settledTablesSize(r.Context(), cfg.Store.Path)
	}
	res.Seconds = time.Since(start).Seconds()
	if err != nil {
		err = c.stopReason(err, "it is shutting down: the compaction stopped (what it compacted is kept); run it again once the relay is back")
		controlReply(w, http.StatusInternalServerError, cli.ControlError{Error: err.Error()})
		return
	}
	log.Info("store compacted (petrel compact)", "size_before", res.SizeBefore, "size_after", res.SizeAfter, "purged", res.Purged, "seconds", res.Seconds)
	controlReply(w, http.StatusOK, res)
}

// tablesSize is the size of the pebble tables (.sst) in dir.
func tablesSize(dir string) (int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range ents {
		if filepath.Ext(e.Name()) != ".sst" {
			continue
		}
		if fi, err := e.Info(); err == nil {
			n += fi.Size()
		}
	}
	return n, nil
}

// settledTablesSize is tablesSize once pebble has removed the tables a
// compaction made obsolete (it does so in the background, within
// milliseconds): two readings 50 ms apart agree, or 3 s have passed.
func settledTablesSize(ctx context.Context, dir string) (int64, error) {
	last, err := tablesSize(dir)
	for deadline := time.Now().Add(3 * time.Second); err == nil && time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		var n int64
		if n, err = tablesSize(dir); err == nil && n == last {
			return n, nil
		}
		last = n
	}
	return last, err
}

// askCompact asks a running petrel serve to compact its store through its
// control socket; served is false when no relay answers on it.
func askCompact(ctx context.Context, storePath string, purge bool) (res compactResult, served bool, err error) {
	served, err = askControlJSON(ctx, storePath, "compact", compactRequest{PurgeExpired: purge}, &res)
	return res, served, err
}

// askControlJSON posts req as JSON to route on the control socket of the
// petrel serve holding the store in storePath and decodes its answer into
// res; served is false when no relay answers there.
func askControlJSON(ctx context.Context, storePath, route string, req, res any) (served bool, err error) {
	body, _ := json.Marshal(req)
	resp, served, err := cli.PostControl(ctx, storePath, route, body)
	if !served || err != nil {
		return served, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(res); err != nil {
		return true, fmt.Errorf("the running relay's answer: %w", err)
	}
	return true, nil
}

// liveBackup writes a checkpoint of the running store into dest and, with
// verify, opens the copy and counts its events. The store keeps moving, so
// the count is the copy's own: there is nothing fixed to compare it with.
func liveBackup(ctx context.Context, cfg config.Config, log *slog.Logger, st *pebble.Store, dest string, verify bool) (backupResult, error) {
	start := time.Now()
	res := backupResult{Dest: dest}
	if err := checkNewDir(dest); err != nil {
		return res, err
	}
	if err := backupStore(st, dest); err != nil {
		return res, err
	}
	var err error
	if verify {
		if res.Events, err = countCopy(ctx, cfg, log, dest); err != nil {
			return res, err
		}
	}
	if res.Bytes, err = dirSize(dest); err != nil {
		return res, err
	}
	res.Seconds = time.Since(start).Seconds()
	res.Online = true
	return res, nil
}

// askBackup asks a running petrel serve for a backup through its control
// socket. served is false when no relay answers on it (no socket, or one
// a stopped relay left behind): the caller then opens the store itself.
func askBackup(ctx context.Context, storePath, dest string, verify bool) (res backupResult, served bool, err error) {
	served, err = askControlJSON(ctx, storePath, "backup", backupRequest{Dest: dest, Verify: verify}, &res)
	return res, served, err
}
