package main

// This file holds what the maintenance subcommands (import, export, scan,
// delete, sync, compact, backup, migrate) share: opening the store,
// reading filters from flags, gzip-aware input and output, progress bars,
// and the summary output.

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/petrel-relay/petrel/internal/cli"
	"github.com/petrel-relay/petrel/internal/config"
	"github.com/petrel-relay/petrel/internal/nip19"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/pebble"
	"github.com/petrel-relay/petrel/internal/store/postgres"
)

// errNoStore is wrapped by openToolStore when the data directory (or the
// PostgreSQL schema) holds no store and the command does not create one.
var errNoStore = errors.New("no store in the data directory (set --data or store.path)")

// errNotDir is wrapped by openError when the data directory is a file
// (or under one).
var errNotDir = errors.New("not a directory (set --data or store.path)")

// errNoPostgresStore is errNoStore's counterpart for the postgres backend.
var errNoPostgresStore = errors.New("no petrel store in this PostgreSQL schema (set store.postgres_schema)")

// toolQueryTimeout bounds each read of a tool on the postgres store (the
// store's default, 30 s, is a relay's bound for one REQ; a tool counts or
// lists a whole store). Interrupting the tool ends its reads at once.
const toolQueryTimeout = 24 * time.Hour

// toolStoreOptions says how a maintenance subcommand opens the store.
type toolStoreOptions struct {
	// create lets Open create a missing or empty data directory, or a
	// missing PostgreSQL schema (import, sync, migrate's destination).
	// Without it a missing or empty directory, or a schema without a
	// store, is refused, so that a typo in --data or the schema does not
	// export nothing or create a stray store.
	create bool
	// noSync commits without waiting for fsync (bulk import into the
	// pebble store); the caller must sync (syncToolStore) before it
	// reports success. The postgres store always commits durably.
	noSync bool
	// rebuildSearch rebuilds the search index at open (compact; pebble).
	rebuildSearch bool
	// readOnly opens a pebble store read-only (pebble.Options.ReadOnly):
	// nothing is written, and opening and closing cost a fraction of a
	// writable open (req and count --store).
	readOnly bool
}

// openToolStore opens the configured store (store.backend) for a
// maintenance command. The pebble store locks its directory, so this
// fails with errStoreLocked (openError) while `petrel serve` runs on it;
// the postgres store is shared, and a tool works beside running nodes.
// The background purge of expired events is off: tools change the store
// only as asked.
func openToolStore(cfg config.Config, log *slog.Logger, o toolStoreOptions) (store.Store, error) {
	switch cfg.Store.Backend {
	case "pebble":
		st, err := openPebbleTool(cfg, log, o)
		if err != nil {
			return nil, err // not a typed nil
		}
		return st, nil
	case "postgres":
		if cfg.Store.PostgresURL == "" {
			return nil, errors.New("store backend postgres: store.postgres_url (PETREL_STORE_POSTGRES_URL) is required")
		}
		opts := postgresOptions(cfg, log)
		opts.NoCreate = !o.create
		opts.PurgeInterval = -1
		opts.QueryTimeout = toolQueryTimeout
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		st, err := postgres.Open(ctx, opts)
		if errors.Is(err, postgres.ErrNoSchema) {
			return nil, fmt.Errorf("schema %q: %w", cfg.Store.PostgresSchema, errNoPostgresStore)
		}
		if err != nil {
			return nil, fmt.Errorf("open postgres store: %w", err)
		}
		return st, nil
	}
	return nil, fmt.Errorf("store backend %q: want pebble or postgres", cfg.Store.Backend)
}

// openPebbleTool is openToolStore for the pebble store of cfg.Store.Path,
// whatever store.backend says (backup, compact and req --store work on
// a pebble data directory).
func openPebbleTool(cfg config.Config, log *slog.Logger, o toolStoreOptions) (*pebble.Store, error) {
	path := cfg.Store.Path
	opts := pebbleOptions(cfg, log)
	opts.Path = path
	// Without create, a directory that holds no store (missing, empty,
	// or of other files, as a mistyped --data may be) is refused
	// untouched: no stray store, no lock file.
	opts.NoCreate = !o.create
	opts.NoSync = o.noSync
	opts.RebuildSearch = o.rebuildSearch
	opts.ReadOnly = o.readOnly
	opts.PurgeInterval = -1
	// No body cache: a tool reads each event once, and import would copy
	// every body it writes into it for nothing.
	opts.BodyCacheBytes = -1
	// No write-ahead log spares: a tool's commits are few (one a batch of
	// an import) or unsynced, and a spare is 1.1 memtables of zeros to
	// write. The spares serve keeps are left as they are, for it.
	opts.WALSpares = 0
	st, err := pebble.Open(opts)
	if errors.Is(err, pebble.ErrNoStore) {
		return nil, fmt.Errorf("%s: %w", path, errNoStore)
	}
	if err != nil {
		return nil, openError(path, err)
	}
	return st, nil
}

// syncToolStore makes every write committed so far durable, for a pebble
// store opened with noSync (pebble.Store.Sync); other stores commit
// durably already.
func syncToolStore(st store.Store) error {
	p, ok := st.(*pebble.Store)
	if !ok {
		return nil
	}
	if err := p.Sync(); err != nil {
		return fmt.Errorf("sync store: %w", err)
	}
	return nil
}

// dropRecycledLogs opens the closed store st, of cfg, once more and
// closes it again, when it is a pebble store. pebble keeps the
// write-ahead logs of flushed memtables for reuse (up to five: 111 MB
// after importing 100,000 notes with 64 MiB memtables) and leaves them on
// disk at Close; the next writable open deletes them. A bulk write (import,
// migrate) would otherwise leave them in the data directory until the
// relay next starts.
func dropRecycledLogs(st store.Store, cfg config.Config, log *slog.Logger) error {
	if _, ok := st.(*pebble.Store); !ok {
		return nil
	}
	st, err := openToolStore(cfg, log, toolStoreOptions{})
	if err != nil {
		return fmt.Errorf("reopen store: %w", err)
	}
	if err := st.Close(); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

// storeLabel names the configured store in messages: the pebble data
// directory, or the PostgreSQL schema and server (without credentials).
func storeLabel(cfg config.Config) string {
	if cfg.Store.Backend == "postgres" {
		return fmt.Sprintf("postgres schema %s at %s", cfg.Store.PostgresSchema, redactURL(cfg.Store.PostgresURL))
	}
	return cfg.Store.Path
}

// redactURL returns a PostgreSQL connection string fit to print: a URL
// without its password and query, or for a key=value DSN its host and
// dbname only.
func redactURL(s string) string {
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		u, err := url.Parse(s)
		if err != nil {
			return "postgres://?"
		}
		r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
		if u.User != nil {
			r.User = url.User(u.User.Username())
		}
		return r.String()
	}
	var keep []string
	for _, f := range strings.Fields(s) {
		if k, _, ok := strings.Cut(f, "="); ok && (k == "host" || k == "port" || k == "dbname" || k == "user") {
			keep = append(keep, f)
		}
	}
	return strings.Join(keep, " ")
}

// backendRefusal is the one-line error of a pebble-only command run with
// store.backend postgres.
func backendRefusal(cfg config.Config, cmd, instead string) error {
	if cfg.Store.Backend == "pebble" {
		return nil
	}
	return fmt.Errorf("%s works on the embedded pebble store only, and store.backend is %q: %s (docs/operations.md, \"The PostgreSQL store\")", cmd, cfg.Store.Backend, instead)
}

// dirSize returns the bytes used by the regular files under dir. Files
// that vanish during the walk (pebble deletes obsolete files in the
// background) are not counted.
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path != dir {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	return n, err
}

// filterFlags are the flags selecting events: --filter, --since, --until
// (and, for scan, the filter as a positional argument).
type filterFlags struct {
	filter       string
	since, until string
}

func (f *filterFlags) register(cmd *cobra.Command, def string) {
	fs := cmd.Flags()
	fs.StringVar(&f.filter, "filter", def, `NIP-01 filter as JSON, or a JSON array of filters (matches any); "limit" keeps that filter's newest matches; "since"/"until" may also be "now", RFC 3339 or an age ("1h")`)
	fs.StringVar(&f.since, "since", "", "only events created at or after: unix time, now, RFC 3339, or an age like 30m, 1h, 2d, 1w; applies to every filter")
	fs.StringVar(&f.until, "until", "", "only events created at or before (same forms as --since); applies to every filter")
}

// filters parses the flags.
func (f *filterFlags) filters() ([]nostr.Filter, error) {
	now := time.Now()
	filters, err := parseFiltersAt(f.filter, now)
	if err != nil {
		return nil, fmt.Errorf("--filter: %s", nostr.Reason(err))
	}
	if f.since != "" {
		t, err := cli.ParseWhen(f.since, now)
		if err != nil {
			return nil, fmt.Errorf("--since: %w", err)
		}
		for i := range filters {
			filters[i].Since, filters[i].HasSince = t, true
		}
	}
	if f.until != "" {
		t, err := cli.ParseWhen(f.until, now)
		if err != nil {
			return nil, fmt.Errorf("--until: %w", err)
		}
		for i := range filters {
			filters[i].Until, filters[i].HasUntil = t, true
		}
	}
	return filters, nil
}

// parseFilters is parseFiltersAt now.
func parseFilters(s string) ([]nostr.Filter, error) { return parseFiltersAt(s, time.Now()) }

// parseFiltersAt reads one filter object or an array of filter objects as
// the tools take them from people: npub/note/nevent/nprofile/naddr values
// are read as hex (nip19.HexFilter); "since" and "until" may be strings,
// "now", RFC 3339 or an age before now ("1h", "2d": cli.ParseWhen); and an
// unknown key is an error (nostr.ParseFilterStrict), so a typo such as
// "kind" cannot widen the filter to every event.
func parseFiltersAt(s string, now time.Time) ([]nostr.Filter, error) {
	hex, err := nip19.HexFilter([]byte(strings.TrimSpace(s)))
	if err != nil {
		return nil, err
	}
	s = string(hex)
	one := func(raw []byte) (nostr.Filter, error) {
		raw, err := resolveFilterTimes(raw, now)
		if err != nil {
			return nostr.Filter{}, err
		}
		return nostr.ParseFilterStrict(raw, nil)
	}
	if !strings.HasPrefix(s, "[") {
		f, err := one([]byte(s))
		if err != nil {
			return nil, err
		}
		return []nostr.Filter{f}, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal([]byte(s), &raws); err != nil {
		return nil, fmt.Errorf("not a JSON array of filters: %w", err)
	}
	if len(raws) == 0 {
		return nil, errors.New("empty array of filters")
	}
	out := make([]nostr.Filter, len(raws))
	for i, r := range raws {
		f, err := one(r)
		if err != nil {
			return nil, fmt.Errorf("filter %d: %s", i, nostr.Reason(err))
		}
		out[i] = f
	}
	return out, nil
}

// resolveFilterTimes returns the filter object obj with a "since" or
// "until" given as a string ("now", RFC 3339, an age such as "1h")
// replaced by its unix time. Anything it cannot read is left for the
// filter parser to refuse.
func resolveFilterTimes(obj []byte, now time.Time) ([]byte, error) {
	if !bytes.Contains(obj, []byte(`"since"`)) && !bytes.Contains(obj, []byte(`"until"`)) {
		return obj, nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil {
		return obj, nil
	}
	changed := false
	for _, k := range []string{"since", "until"} {
		v, ok := m[k]
		if !ok || len(v) == 0 || v[0] != '"' {
			continue
		}
		var w string
		if json.Unmarshal(v, &w) != nil {
			return obj, nil
		}
		t, err := cli.ParseWhen(w, now)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		m[k] = json.RawMessage(strconv.FormatInt(t, 10))
		changed = true
	}
	if !changed {
		return obj, nil
	}
	// The map keeps one of a key given twice: refuse that here, as the
	// filter parser would.
	d := json.NewDecoder(bytes.NewReader(obj))
	seen := map[string]bool{}
	if _, err := d.Token(); err != nil {
		return obj, nil
	}
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return obj, nil
		}
		if key, _ := k.(string); seen[key] {
			return nil, fmt.Errorf("duplicate key %q", key)
		} else {
			seen[key] = true
		}
		var skip json.RawMessage
		if d.Decode(&skip) != nil {
			return obj, nil
		}
	}
	return json.Marshal(m)
}

// anyLimit reports whether one of filters has a limit.
func anyLimit(filters []nostr.Filter) bool {
	for i := range filters {
		if filters[i].HasLimit {
			return true
		}
	}
	return false
}

// matchesAll reports whether filters select every event (a filter with no
// condition at all).
func matchesAll(filters []nostr.Filter) bool {
	for i := range filters {
		f := &filters[i]
		if !f.HasIDs() && !f.HasAuthors() && !f.HasKinds() && len(f.Tags) == 0 &&
			!f.HasSince && !f.HasUntil && !f.HasLimit && f.Search == "" {
			return true
		}
	}
	return false
}

// gzipMagic starts every gzip stream.
var gzipMagic = []byte{0x1f, 0x8b}

// openInput opens path ("-" or "" for stdin) for reading, decompressing it
// when forceGzip is set, when the name ends in .gz, or when it starts with
// the gzip magic bytes. counted, if not nil, is told of every compressed
// byte read (progress). size is the file's size, or -1 when unknown.
func openInput(path string, stdin io.Reader, forceGzip bool, counted func(int64)) (r io.Reader, size int64, closeFn func() error, err error) {
	var src io.Reader
	size = -1
	if path == "" || path == "-" {
		src = stdin
		closeFn = func() error { return nil }
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, 0, nil, err
		}
		src, closeFn = f, f.Close
	}
	if f, ok := src.(*os.File); ok {
		fi, err := f.Stat()
		switch {
		case err != nil:
		case fi.IsDir():
			// A directory opens, and would fail only at the first
			// read: after import has made its store.
			closeFn()
			return nil, 0, nil, fmt.Errorf("%s is a directory: give a file of events (or - for stdin)", f.Name())
		case fi.Mode().IsRegular():
			size = fi.Size()
		}
	}
	if counted != nil {
		src = &countingReader{r: src, fn: counted}
	}
	br := bufio.NewReaderSize(src, 1<<20)
	magic, _ := br.Peek(2)
	if forceGzip || strings.HasSuffix(path, ".gz") || string(magic) == string(gzipMagic) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			closeFn()
			return nil, 0, nil, fmt.Errorf("gzip %s: %w", path, err)
		}
		return skipBOM(bufio.NewReaderSize(gzipInput{zr}, 64<<10)), size, closeFn, nil
	}
	return skipBOM(br), size, closeFn, nil
}

// gzipInput says what a gzip reader's errors mean for a file of events.
type gzipInput struct{ r io.Reader }

func (g gzipInput) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	var corrupt flate.CorruptInputError
	switch {
	case err == nil, err == io.EOF:
	case errors.Is(err, io.ErrUnexpectedEOF):
		err = fmt.Errorf("the gzip data ends early: a truncated file? (%w)", err)
	case errors.Is(err, gzip.ErrChecksum), errors.As(err, &corrupt):
		err = fmt.Errorf("the gzip data is corrupt (%w)", err)
	case errors.Is(err, gzip.ErrHeader):
		// At the start openInput reports it; here it is after a whole
		// gzip stream.
		err = fmt.Errorf("the data after the gzip stream's end is not gzip (%w)", err)
	}
	return n, err
}

// skipBOM drops a byte order mark (cli.UTF8BOM) at the start of br: it
// is not part of the first event.
func skipBOM(br *bufio.Reader) *bufio.Reader {
	if b, _ := br.Peek(len(cli.UTF8BOM)); string(b) == cli.UTF8BOM {
		br.Discard(len(cli.UTF8BOM))
	}
	return br
}

// countingReader reports the bytes read through it.
type countingReader struct {
	r  io.Reader
	fn func(int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.fn(int64(n))
	}
	return n, err
}

// output is where a command writes its events: stdout, or a file written
// under a temporary name and renamed into place by commit, so that an
// interrupted export never leaves a truncated file under the final name.
// Names ending in .gz are gzip-compressed.
type output struct {
	w    *bufio.Writer
	zw   *gzip.Writer
	f    *os.File // nil for stdout
	path string
	tmp  string
	n    int64 // bytes written (uncompressed)
}

func createOutput(path string, stdout io.Writer) (*output, error) {
	o := &output{path: path}
	var dst io.Writer = stdout
	if path != "" && path != "-" {
		// Refused before the first event is read, not at the rename
		// after the last.
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			return nil, fmt.Errorf("%s is a directory: -o names the file to write", path)
		}
		f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
		if err != nil {
			// The temporary file's name is not the user's: tell the cause.
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, fmt.Errorf("create %s: %w", path, err)
		}
		if err := f.Chmod(0o644); err != nil { // CreateTemp makes it 0600
			f.Close()
			os.Remove(f.Name())
			return nil, err
		}
		o.f, o.tmp, dst = f, f.Name(), f
	}
	o.w = bufio.NewWriterSize(dst, 1<<20)
	if strings.HasSuffix(path, ".gz") {
		o.zw, _ = gzip.NewWriterLevel(o.w, gzip.BestSpeed) // ~2x faster than the default level, ~10% larger
	}
	return o, nil
}

// Write implements io.Writer.
func (o *output) Write(p []byte) (int, error) {
	o.n += int64(len(p))
	if o.zw != nil {
		return o.zw.Write(p)
	}
	return o.w.Write(p)
}

// toFile reports whether the output is a file (not stdout).
func (o *output) toFile() bool { return o.f != nil }

// commit flushes everything and, for a file, syncs it and renames it into
// place.
func (o *output) commit() error {
	if o.zw != nil {
		if err := o.zw.Close(); err != nil {
			o.abort()
			return err
		}
	}
	if err := o.w.Flush(); err != nil {
		o.abort()
		return err
	}
	if o.f == nil {
		return nil
	}
	if err := o.f.Sync(); err != nil {
		o.abort()
		return err
	}
	if err := o.f.Close(); err != nil {
		os.Remove(o.tmp)
		return err
	}
	if err := os.Rename(o.tmp, o.path); err != nil {
		os.Remove(o.tmp)
		return err
	}
	return nil
}

// abort drops a file output.
func (o *output) abort() {
	if o.f != nil {
		o.f.Close()
		os.Remove(o.tmp)
	}
}

// newBar returns a progress bar on w, or nil when w is not a terminal or
// quiet is set. total < 0 makes a spinner; bytes shows byte sizes.
func newBar(w io.Writer, quiet bool, desc string, total int64, bytes bool) *progressbar.ProgressBar {
	if quiet || !isTerminal(w) {
		return nil
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionSetWidth(30),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(total > 0),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionClearOnFinish(),
	}
	if bytes {
		opts = append(opts, progressbar.OptionShowBytes(true), progressbar.OptionShowTotalBytes(true), progressbar.OptionShowCount())
	} else {
		opts = append(opts, progressbar.OptionShowCount(), progressbar.OptionShowIts())
	}
	return progressbar.NewOptions64(total, opts...)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// finishBar clears a bar made by newBar (nil is fine).
func finishBar(b *progressbar.ProgressBar) {
	if b != nil {
		b.Finish()
		b.Clear()
	}
}

// printJSON writes v as one JSON line.
func printJSON(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// toolSetup loads the config and makes the logger of a maintenance
// command.
func toolSetup(cf *commonFlags) (config.Config, *slog.Logger, error) {
	cfg, err := cf.load()
	if err != nil {
		return cfg, nil, err
	}
	log, err := newLogger(cfg.Log)
	if err != nil {
		return cfg, nil, err
	}
	return cfg, log, nil
}

// rate returns n per second over d, 0 for a zero duration.
func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// humanBytes formats a byte count with binary units.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
