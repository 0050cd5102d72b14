package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/cli"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

func init() { extraCommands = append(extraCommands, exportCmd) }

// exportFlags are the flags of `petrel export`.
type exportFlags struct {
	common      commonFlags
	sel         filterFlags
	out         string
	oldestFirst bool
	quiet       bool
}

func exportCmd() *cobra.Command {
	var f exportFlags
	cmd := &cobra.Command{
		Use:   "export [--filter JSON] [-o file]",
		Short: "Write stored events as JSONL (newest first), to stdout or a file",
		Long: `Export writes the stored events matching --filter (all by default), one
event JSON per line, exactly as stored (the raw JSON the author signed).
The output loads back with petrel import, and with the import tools of
most relays.

Events come newest first (created_at descending), the store's natural
order. --oldest-first writes them oldest first instead; it first collects
the (created_at, id) of every match, 40 bytes per event in memory, then
reads the events in that order.

With -o, the file is written under a temporary name and renamed into
place when complete; a name ending in .gz is gzip-compressed. A summary
goes to stderr when the events go to stdout.

Export reads the configured store (store.backend), and writes the same
lines from the pebble and the postgres store holding the same events.
On the pebble store of a running petrel serve, export asks the relay
through its control socket (<store.path>/petrel.sock, read-only), which
reads one snapshot of the store and streams it; otherwise it opens the
store itself. The postgres store is shared: export reads one snapshot of
it (streamed, so memory does not grow with the store) while the relay's
nodes run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExportCmd(cmd.Context(), &f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f.common.register(cmd)
	f.sel.register(cmd, "{}")
	fs := cmd.Flags()
	fs.StringVarP(&f.out, "output", "o", "-", `output file ("-": stdout); .gz compresses`)
	fs.BoolVar(&f.oldestFirst, "oldest-first", false, "write the oldest events first")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress bar and no summary")
	return cmd
}

// exportOptions configures exportEvents.
type exportOptions struct {
	// OldestFirst writes created_at ascending (ties by id) instead of the
	// store's newest-first order.
	OldestFirst bool
	// Progress, if not nil, is called with the number of events written
	// since its last call.
	Progress func(n int64)
}

// exportResult is what exportEvents wrote.
type exportResult struct {
	Events  int64   `json:"events"`
	Bytes   int64   `json:"bytes"` // uncompressed
	Seconds float64 `json:"seconds"`
}

func runExportCmd(ctx context.Context, f *exportFlags, stdout, stderr io.Writer) error {
	filters, err := f.sel.filters()
	if err != nil {
		return err
	}
	cfg, log, err := toolSetup(&f.common)
	if err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	// The store of a running petrel serve is read through its control
	// socket (read-only); otherwise export opens the store itself.
	var src exportSource
	if cfg.Store.Backend == "pebble" {
		if s := (serveSource{dir: cfg.Store.Path}); s.running() {
			src = s
		}
	}
	if src == nil {
		st, err := openToolStore(cfg, log, toolStoreOptions{})
		if err != nil {
			return err
		}
		defer st.Close()
		src = storeSource{st}
	}
	out, err := createOutput(f.out, stdout)
	if err != nil {
		return err
	}
	ctx, stop := cli.Interruptible(ctx)
	defer stop()
	var total int64 = -1
	if !f.quiet && isTerminal(stderr) && !anyLimit(filters) {
		// Counting reads the indexes only: cheap next to the export.
		if n, err := src.count(ctx, filters); err == nil {
			total = n
		}
	}
	bar := newBar(stderr, f.quiet, "exporting", total, false)
	o := exportOptions{OldestFirst: f.oldestFirst}
	if bar != nil {
		o.Progress = func(n int64) { bar.Add64(n) }
	}
	res, err := src.export(ctx, out, filters, o)
	finishBar(bar)
	if err != nil && ctx.Err() != nil {
		// Interrupted (Ctrl-C): a file is written whole or not at all;
		// stdout gets the lines written so far, whole (the buffer is
		// flushed between lines, not cut mid-line).
		if out.toFile() {
			out.abort()
			return fmt.Errorf("interrupted after %d events: %s was not written (an export to a file is written whole or not at all)", res.Events, f.out)
		}
		if cerr := out.commit(); cerr != nil {
			return fmt.Errorf("write: %w", cerr)
		}
		return fmt.Errorf("interrupted after %d events (written, whole lines)", res.Events)
	}
	if err != nil {
		out.abort()
		return err
	}
	if err := out.commit(); err != nil {
		return fmt.Errorf("write %s: %w", f.out, err)
	}
	if !f.quiet {
		w := stdout
		if !out.toFile() {
			w = stderr
		}
		fmt.Fprintf(w, "exported %d events (%s) in %.1fs\n", res.Events, humanBytes(res.Bytes), res.Seconds)
	}
	return nil
}

// exportSource is where export reads: a store it opened, or the running
// petrel serve that holds the store.
type exportSource interface {
	count(ctx context.Context, filters []nostr.Filter) (int64, error)
	export(ctx context.Context, w io.Writer, filters []nostr.Filter, o exportOptions) (exportResult, error)
}

// storeSource reads a store this process opened.
type storeSource struct{ st store.Store }

func (s storeSource) count(ctx context.Context, filters []nostr.Filter) (int64, error) {
	return s.st.Count(ctx, filters)
}

func (s storeSource) export(ctx context.Context, w io.Writer, filters []nostr.Filter, o exportOptions) (exportResult, error) {
	return exportEvents(ctx, s.st, w, filters, o)
}

// serveSource reads the store of the petrel serve running on dir through
// its control socket: the relay runs exportEvents on its store and
// streams the lines.
type serveSource struct{ dir string }

// running reports whether a relay answers on dir's control socket.
func (s serveSource) running() bool { return cli.ControlServed(s.dir) }

func (s serveSource) count(ctx context.Context, filters []nostr.Filter) (int64, error) {
	n, served, err := cli.AskControlCount(ctx, s.dir, filters)
	if err == nil && !served {
		err = errNoServe
	}
	return n, err
}

func (s serveSource) export(ctx context.Context, w io.Writer, filters []nostr.Filter, o exportOptions) (exportResult, error) {
	start := time.Now()
	var res exportResult
	served, err := cli.AskControlQuery(ctx, s.dir, filters, cli.QueryRequest{OldestFirst: o.OldestFirst}, func(line []byte) error {
		if _, err := w.Write(line); err != nil {
			return err
		}
		if _, err := w.Write(newline); err != nil {
			return err
		}
		res.Events++
		res.Bytes += int64(len(line)) + 1
		if o.Progress != nil && res.Events%256 == 0 {
			o.Progress(256)
		}
		return nil
	})
	if err == nil && !served {
		err = errNoServe
	}
	if o.Progress != nil {
		o.Progress(res.Events % 256)
	}
	res.Seconds = time.Since(start).Seconds()
	return res, err
}

// errNoServe: the relay stopped answering on its control socket.
var errNoServe = errors.New("the running petrel serve stopped answering on its control socket")

// exportEvents writes the events of st matching filters to w, one raw
// event JSON and a newline each. It reads one store snapshot (newest
// first) or, with OldestFirst, the list of matches and then their bodies
// by id.
func exportEvents(ctx context.Context, st store.Store, w io.Writer, filters []nostr.Filter, o exportOptions) (exportResult, error) {
	start := time.Now()
	var res exportResult
	write := func(raw []byte) error {
		if _, err := w.Write(raw); err != nil {
			return err
		}
		if _, err := w.Write(newline); err != nil {
			return err
		}
		res.Events++
		res.Bytes += int64(len(raw)) + 1
		if o.Progress != nil && res.Events%256 == 0 {
			o.Progress(256)
		}
		return nil
	}
	var err error
	if o.OldestFirst {
		err = exportOldestFirst(ctx, st, filters, write)
	} else {
		err = queryEach(ctx, st, filters, func(r *store.Record) error { return write(r.Raw) })
	}
	if o.Progress != nil {
		o.Progress(res.Events % 256)
	}
	res.Seconds = time.Since(start).Seconds()
	return res, err
}

var newline = []byte{'\n'}

// scanner is a store whose Query reads its whole answer into memory
// before it returns (postgres), and that can stream the matches of
// filters without limits instead (postgres.Store.Scan).
type scanner interface {
	Scan(ctx context.Context, filters []nostr.Filter, fn func(*store.Record) error) error
}

// streamable reports whether filters have no limit and no search: their
// answer is every match, newest first, which a scanner streams.
func streamable(filters []nostr.Filter) bool {
	for i := range filters {
		if filters[i].HasLimit || filters[i].Search != "" {
			return false
		}
	}
	return true
}

// queryEach calls fn for each event matching filters, newest first (a
// search filter: by relevance). The record is valid during the call
// only. A store whose Query holds its whole answer in memory streams
// filters without limits through its Scan, so that a tool's memory does
// not grow with the store.
func queryEach(ctx context.Context, st store.Store, filters []nostr.Filter, fn func(*store.Record) error) error {
	if sc, ok := st.(scanner); ok && streamable(filters) {
		n := 0
		var fnErr error
		err := sc.Scan(ctx, filters, func(r *store.Record) error {
			if n++; n&1023 == 0 {
				if fnErr = ctx.Err(); fnErr != nil {
					return fnErr
				}
			}
			fnErr = fn(r)
			return fnErr
		})
		if err != nil && fnErr == nil {
			return fmt.Errorf("query: %w", err)
		}
		return err
	}
	it, err := st.Query(ctx, filters)
	if err != nil {
		return fmt.Errorf("query: %w", err)
	}
	defer it.Close()
	for n := 0; it.Next(); n++ {
		if n&1023 == 1023 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if err := fn(it.Record()); err != nil {
			return err
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("query: %w", err)
	}
	return nil
}

// exportFetch is how many events one by-id query reads.
const exportFetch = 512

// exportOldestFirst lists the matches oldest first, then reads their
// bodies by id, exportFetch at a time, and passes them to write in that
// order.
func exportOldestFirst(ctx context.Context, st store.Store, filters []nostr.Filter, write func([]byte) error) error {
	items, err := matchingItems(ctx, st, filters)
	if err != nil {
		return err
	}
	slices.SortFunc(items, store.CompareItems)
	raws := make(map[nostr.ID][]byte, exportFetch)
	ids := make([]nostr.ID, 0, exportFetch)
	for len(items) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(len(items), exportFetch)
		ids = ids[:0]
		for _, it := range items[:n] {
			ids = append(ids, it.ID)
		}
		clear(raws)
		err := queryEach(ctx, st, []nostr.Filter{{IDs: ids, Present: nostr.PresentIDs}}, func(r *store.Record) error {
			raws[r.ID] = slices.Clone(r.Raw)
			return nil
		})
		if err != nil {
			return err
		}
		for _, it := range items[:n] {
			raw, ok := raws[it.ID]
			if !ok {
				continue // removed meanwhile (expired, or removed from a shared store by another process)
			}
			if err := write(raw); err != nil {
				return err
			}
		}
		items = items[n:]
	}
	return nil
}

// matchingItems returns the (created_at, id) of the events matching
// filters, honouring each filter's limit (its newest matches), in no
// particular order. Without limits it reads only the indexes.
func matchingItems(ctx context.Context, st store.Store, filters []nostr.Filter) ([]store.Item, error) {
	if !anyLimit(filters) {
		items, err := st.Items(ctx, filters, 0)
		if err != nil {
			return nil, fmt.Errorf("list matches: %w", err)
		}
		return items, nil
	}
	var items []store.Item
	err := queryEach(ctx, st, filters, func(r *store.Record) error {
		items = append(items, store.Item{CreatedAt: r.CreatedAt, ID: r.ID})
		return nil
	})
	return items, err
}
