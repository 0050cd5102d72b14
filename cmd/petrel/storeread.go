package main

// req and count with --store: read a local petrel store. While petrel
// serve holds the store, the query goes through its control socket
// (POST /query, served here too); otherwise the command opens the store
// itself, read-only.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/config"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// storeFlags are --store and --config of req and count.
type storeFlags struct {
	dir    string
	config string
}

func (s *storeFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&s.dir, "store", "", "read the petrel store in this data directory instead of relays")
	cmd.Flags().StringVar(&s.config, "config", os.Getenv("PETREL_CONFIG"), "with --store: the config file petrel serve uses (env PETREL_CONFIG)")
}

// queryRequest is the body of POST /query on the control socket.
type queryRequest struct {
	Filters []json.RawMessage `json:"filters"`
	// Count answers {"count": N} (limits ignored, as COUNT).
	Count bool `json:"count"`
	// IDs answers the ids of the matches, one per line (petrel scan --ids).
	IDs bool `json:"ids,omitempty"`
	// OldestFirst answers the matches oldest first (petrel export
	// --oldest-first).
	OldestFirst bool `json:"oldest_first,omitempty"`
	// Explain answers {"explain": "..."}: how the store answers the
	// filters (petrel scan --explain; with Count, the count's plan).
	Explain bool `json:"explain,omitempty"`
}

// explainAnswer is the answer to an Explain request.
type explainAnswer struct {
	Explain string `json:"explain"`
}

// countAnswer is the answer to a counting query.
type countAnswer struct {
	Count int64 `json:"count"`
}

// maxQueryBody caps the body of POST /query.
const maxQueryBody = 1 << 20

// serveQuery answers POST /query on the control socket: the raw events
// matching the filters, one per line, newest first (or {"count": N}).
// An error after the first event aborts the response, so the client sees
// a broken stream, never a short one that looks complete.
func serveQuery(w http.ResponseWriter, r *http.Request, st store.Store) {
	reply := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	var req queryRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, maxQueryBody)).Decode(&req); err != nil || len(req.Filters) == 0 {
		reply(http.StatusBadRequest, controlError{`want {"filters": [filter, ...], "count": bool}`})
		return
	}
	filters := make([]nostr.Filter, len(req.Filters))
	for i, raw := range req.Filters {
		f, err := nostr.ParseFilterStrict(raw, nil)
		if err != nil {
			reply(http.StatusBadRequest, controlError{fmt.Sprintf("filter %d: %v", i, err)})
			return
		}
		filters[i] = f
	}
	if req.Explain {
		var b bytes.Buffer
		if err := explainScan(r.Context(), st, filters, req.Count, &b); err != nil {
			reply(http.StatusInternalServerError, controlError{err.Error()})
			return
		}
		reply(http.StatusOK, explainAnswer{b.String()})
		return
	}
	if req.Count {
		n, err := st.Count(r.Context(), filters)
		if err != nil {
			reply(http.StatusInternalServerError, controlError{err.Error()})
			return
		}
		reply(http.StatusOK, countAnswer{n})
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	bw := bufio.NewWriterSize(w, 64<<10)
	var err error
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

// askQuery runs a query through the control socket of the petrel serve
// holding dir. served is false when no relay answers there: the caller
// then opens the store itself. each gets every line (count: the one
// JSON answer).
func askQuery(ctx context.Context, dir string, filters []nostr.Filter, count bool, each func([]byte) error) (served bool, err error) {
	return askControlQuery(ctx, dir, filters, queryRequest{Count: count}, each)
}

// askControlQuery is askQuery with the request's options (req.Filters is
// set from filters).
func askControlQuery(ctx context.Context, dir string, filters []nostr.Filter, req queryRequest, each func([]byte) error) (served bool, err error) {
	path := controlSocketPath(dir)
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&fs.ModeSocket == 0 {
		return false, nil
	}
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		DisableCompression: true,
	}}
	req.Filters = nil
	for i := range filters {
		req.Filters = append(req.Filters, nostr.AppendFilter(nil, &filters[i]))
	}
	body, _ := json.Marshal(req)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://petrel/query", bytes.NewReader(body))
	if err != nil {
		return true, err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(hr)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return true, fmt.Errorf("ask the running relay (%s): %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return true, errors.New("the running petrel serve is older and cannot answer queries: stop it, or query it over WebSocket")
	}
	if resp.StatusCode != http.StatusOK {
		var ce controlError
		if json.NewDecoder(resp.Body).Decode(&ce) != nil || ce.Error == "" {
			ce.Error = resp.Status
		}
		return true, fmt.Errorf("the running relay: %s", ce.Error)
	}
	sc := bufio.NewScanner(resp.Body)
	// The buffer starts small and doubles for a longer line: the lines
	// arrive a few KiB a read whatever its size, and every page of it
	// the scanner fills is fresh memory, a page fault in a short command
	// (a 256 KiB buffer was 55 faults of the 500-event feed).
	sc.Buffer(make([]byte, 16<<10), 64<<20)
	for sc.Scan() {
		if err := each(sc.Bytes()); err != nil {
			return true, err
		}
	}
	if err := sc.Err(); err != nil {
		return true, fmt.Errorf("the running relay's answer: %w", err)
	}
	return true, nil
}

// open opens the store of s.dir read-only, for this process's exclusive
// use. --store
// names a pebble data directory, whatever store.backend says (a
// postgres store is read over WebSocket from any node, or with petrel
// scan).
func (s *storeFlags) open() (store.Store, error) {
	cfg, err := config.Load(s.config, os.Environ())
	if err != nil {
		return nil, err
	}
	cfg.Store.Backend, cfg.Store.Path = "pebble", s.dir
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
		return nil, fmt.Errorf("--store %s: no petrel store there", s.dir)
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}

// storeReadCacheBytes is the block cache of a store opened by req or
// count (see storeFlags.open).
const storeReadCacheBytes = 64 << 10

// query writes the events of filters in the store to sink.
func (s *storeFlags) query(ctx context.Context, filters []nostr.Filter, sink *eventSink) error {
	putRaw := func(raw []byte) error { return sink.putStored(raw, s.dir) }
	if served, err := askQuery(ctx, s.dir, filters, false, putRaw); served {
		return err
	}
	st, err := s.open()
	if err != nil {
		return err
	}
	defer st.Close()
	return queryEach(ctx, st, filters, func(r *store.Record) error { return putRaw(r.Raw) })
}

// count counts the events of filters in the store.
func (s *storeFlags) count(ctx context.Context, filters []nostr.Filter) (int64, error) {
	var n int64
	served, err := askQuery(ctx, s.dir, filters, true, func(line []byte) error {
		var a countAnswer
		if err := json.Unmarshal(line, &a); err != nil {
			return fmt.Errorf("the running relay's answer: %w", err)
		}
		n = a.Count
		return nil
	})
	if served {
		return n, err
	}
	st, err := s.open()
	if err != nil {
		return 0, err
	}
	defer st.Close()
	return st.Count(ctx, filters)
}
