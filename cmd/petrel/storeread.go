package main

// req and count with --store (internal/cli): while petrel serve holds the
// store, the query goes through its control socket (POST /query, served
// here); otherwise the command opens the store itself, read-only
// (storeReader).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"

	"github.com/petrel-relay/petrel/internal/cli"
	"github.com/petrel-relay/petrel/internal/config"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// serveQuery answers POST /query on the control socket: the raw events
// matching the filters, one per line, newest first (or {"count": N}).
// An error after the first event aborts the response, so the client sees
// a broken stream, never a short one that looks complete.
// parseControlFilters parses the filters of a control socket request,
// refusing unknown keys as the tools do.
func parseControlFilters(raws []json.RawMessage) ([]nostr.Filter, error) {
	filters := make([]nostr.Filter, len(raws))
	for i, raw := range raws {
		f, err := nostr.ParseFilterStrict(raw, nil)
		if err != nil {
			return nil, fmt.Errorf("filter %d: %v", i, err)
		}
		filters[i] = f
	}
	return filters, nil
}

func serveQuery(w http.ResponseWriter, r *http.Request, st store.Store) {
	var req cli.QueryRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, cli.MaxQueryBody)).Decode(&req); err != nil || len(req.Filters) == 0 {
		controlReply(w, http.StatusBadRequest, cli.ControlError{Error: `want {"filters": [filter, ...], "count": bool}`})
		return
	}
	filters, err := parseControlFilters(req.Filters)
	if err != nil {
		controlReply(w, http.StatusBadRequest, cli.ControlError{Error: err.Error()})
		return
	}
	if req.Explain {
		var b bytes.Buffer
		if err := explainScan(r.Context(), st, filters, req.Count, &b); err != nil {
			controlReply(w, http.StatusInternalServerError, cli.ControlError{Error: err.Error()})
			return
		}
		controlReply(w, http.StatusOK, cli.ExplainAnswer{Explain: b.String()})
		return
	}
	if req.Count {
		n, err := st.Count(r.Context(), filters)
		if err != nil {
			controlReply(w, http.StatusInternalServerError, cli.ControlError{Error: err.Error()})
			return
		}
		controlReply(w, http.StatusOK, cli.CountAnswer{Count: n})
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	bw := bufio.NewWriterSize(w, 64<<10)
	if req.IDs {
		hexBuf := make([]byte, 0, 65)
		err = queryEach(r.Context(), st, filters, func(rec *store.Record) error {
			hexBuf = append(append(hexBuf[:0], rec.ID.Hex()...), '\n')
			_, err := bw.Write(hexBuf)
			return err
		})
	} else {
		// export's own reader: one snapshot newest first, or the list
		// of matches and then their bodies oldest first.
		_, err = exportEvents(r.Context(), st, bw, filters, exportOptions{OldestFirst: req.OldestFirst})
	}
	if err != nil || bw.Flush() != nil {
		// An error after the first line aborts the response: the client
		// sees a broken stream, never a short one that looks complete.
		panic(http.ErrAbortHandler)
	}
}

// storeReader is cli.LocalStore: req and count --store read a store no
// running relay serves through it.
type storeReader struct{}

func init() { cli.LocalStore = storeReader{} }

// Query is cli.StoreReader's.
func (storeReader) Query(ctx context.Context, dir, config string, filters []nostr.Filter, each func(raw []byte) error) error {
	st, err := openForRead(dir, config)
	if err != nil {
		return err
	}
	defer st.Close()
	return queryEach(ctx, st, filters, func(r *store.Record) error { return each(r.Raw) })
}

// Count is cli.StoreReader's.
func (storeReader) Count(ctx context.Context, dir, config string, filters []nostr.Filter) (int64, error) {
	st, err := openForRead(dir, config)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	return st.Count(ctx, filters)
}

// openForRead opens the store in dir read-only, for this process's
// exclusive use, with the config file configPath ("" for none). --store
// names a pebble data directory, whatever store.backend says (a
// postgres store is read over WebSocket from any node, or with petrel
// scan).
func openForRead(dir, configPath string) (store.Store, error) {
	cfg, err := config.Load(configPath, os.Environ())
	if err != nil {
		return nil, err
	}
	cfg.Store.Backend, cfg.Store.Path = "pebble", dir
	cfg = cfg.Normalize()
	// A block cache smaller than the memtable pebble reserves in it
	// (256 KiB at open) keeps no block: each block read is freed when
	// the iterator leaves it, and the next read reuses that memory.
	// Every block a cache keeps is fresh memory, a page fault per 4 KiB
	// (about 12 µs on a guest where page faults are dear): a 500-event
	// feed read about 2.5 MB of blocks into an 8 MiB cache, 490 faults,
	// against 120 more reads of blocks the kernel holds anyway
	// (docs/BENCHMARKS.md, issue 15). A command reads each block about
	// once; petrel serve keeps its own large cache. Pebble's own
	// messages below warnings are noise here.
	cfg.Store.CacheBytes = storeReadCacheBytes
	cfg.Store.IDFilterBytes = -1
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	st, err := openPebbleTool(cfg, log, toolStoreOptions{readOnly: true})
	if errors.Is(err, errNoStore) {
		return nil, fmt.Errorf("--store %s: no petrel store there", dir)
	}
	if errors.Is(err, errNotDir) {
		return nil, fmt.Errorf("--store %s: not a directory", dir)
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}

// storeReadCacheBytes is the block cache of a store opened by req or
// count (see openForRead).
const storeReadCacheBytes = 64 << 10
