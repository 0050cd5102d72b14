package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/cli"
	"github.com/petrel-relay/petrel/internal/config"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/postgres"
)

func init() { extraCommands = append(extraCommands, migrateCmd) }

// migrateFlags are the flags of `petrel migrate`.
type migrateFlags struct {
	common   commonFlags
	from, to string
	force    bool
	batch    int
	quiet    bool
	jsonOut  bool
}

func migrateCmd() *cobra.Command {
	var f migrateFlags
	cmd := &cobra.Command{
		Use:   "migrate --from STORE --to STORE",
		Short: "Copy a whole store into another (pebble to PostgreSQL and back): events, tombstones, NIP-86 state",
		Long: `Migrate copies everything a store holds into another, empty one: every
stored event (byte for byte), the deletion records (NIP-09 deleted ids
and addresses, NIP-62 requests to vanish), so that the copy refuses
what the original refuses, and the NIP-86 state (ban and allow lists,
the relay's name, description and icon). It is how a single node moves
to a cluster's PostgreSQL store, and back.

A store is named as:
  pebble:DIR             the embedded store in data directory DIR
  pebble                 the one of store.path (--config, --data)
  postgres:URL[#schema]  a PostgreSQL store (a postgres:// URL or a
                         key=value DSN; schema default store.postgres_schema)
  postgres[:#schema]     the one of store.postgres_url (keeps the
                         password off the command line)

The events are saved through the destination's own rules (the deletion
and vanish requests are events, so their effects are derived again), then
the source's deletion records are added, which carries over those whose
request is gone (removed by petrel delete, or expired). Expired events
are not copied. At the end migrate counts both stores and fails if they
differ.

The destination must be empty: --force copies into a store that holds
events already (they are kept; events the copy holds too are skipped as
duplicates), which is also how an interrupted migrate carries on. The
source must not change meanwhile: stop petrel serve (a pebble store is
locked while it runs anyway), or every node of the cluster.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMigrateCmd(cmd.Context(), &f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f.common.register(cmd)
	fs := cmd.Flags()
	fs.StringVar(&f.from, "from", "", "the store to copy: pebble:DIR, pebble, postgres:URL[#schema] or postgres[:#schema]")
	fs.StringVar(&f.to, "to", "", "the store to fill (created if missing), named as --from")
	fs.BoolVar(&f.force, "force", false, "copy into a destination that is not empty")
	fs.IntVar(&f.batch, "batch", 1000, "events per destination commit")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress bar")
	fs.BoolVar(&f.jsonOut, "json", false, "print the result as one JSON object instead of the summary")
	_ = cmd.MarkFlagRequired("from")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}

// storeSpec names one store on petrel migrate's command line.
type storeSpec struct {
	Backend string // "pebble" or "postgres"
	Path    string // pebble: the data directory (absolute)
	URL     string // postgres: the connection string
	Schema  string // postgres: the schema
}

// samePebbleDir reports whether a and b are pebble stores in one
// directory under two names (a symbolic link, a bind mount): the second
// open would fail on the first's lock as if another process held it.
func samePebbleDir(a, b storeSpec) bool {
	if a.Backend != "pebble" || b.Backend != "pebble" {
		return false
	}
	ai, err := os.Stat(a.Path)
	if err != nil {
		return false
	}
	bi, err := os.Stat(b.Path)
	return err == nil && os.SameFile(ai, bi)
}

// parseStoreSpec reads pebble:DIR, pebble, postgres:URL[#schema],
// postgres[:#schema] or a bare postgres:// URL; what is left out comes
// from cfg (store.path, store.postgres_url, store.postgres_schema).
func parseStoreSpec(s string, cfg config.Config) (storeSpec, error) {
	kind, rest, _ := strings.Cut(s, ":")
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		kind, rest = "postgres", s
	}
	switch kind {
	case "pebble":
		path := rest
		if path == "" {
			path = cfg.Store.Path
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return storeSpec{}, err
		}
		return storeSpec{Backend: "pebble", Path: abs}, nil
	case "postgres", "postgresql":
		url, schema := rest, ""
		if i := strings.LastIndexByte(rest, '#'); i >= 0 {
			url, schema = rest[:i], rest[i+1:]
			if schema != "" && !postgres.ValidSchemaName(schema) {
				return storeSpec{}, fmt.Errorf("%q: schema %q: letters, digits and underscores only, not starting with a digit", redactURL(url)+"#"+schema, schema)
			}
		}
		if url == "" {
			url = cfg.Store.PostgresURL
		}
		if url == "" {
			return storeSpec{}, fmt.Errorf("%q: no URL, and store.postgres_url (PETREL_STORE_POSTGRES_URL) is not set", s)
		}
		if schema == "" {
			schema = cfg.Store.PostgresSchema
		}
		return storeSpec{Backend: "postgres", URL: url, Schema: schema}, nil
	}
	if !strings.Contains(s, ":") {
		// A bare path: say how to name it rather than call it a kind.
		return storeSpec{}, fmt.Errorf("%q: say which store: pebble:%s for a directory, or postgres:URL[#schema]", s, s)
	}
	return storeSpec{}, fmt.Errorf("store kind %q: want pebble:DIR or postgres:URL[#schema]", kind)
}

// config returns cfg set to open the store sp names.
func (sp storeSpec) config(cfg config.Config) config.Config {
	cfg.Store.Backend = sp.Backend
	if sp.Backend == "pebble" {
		cfg.Store.Path = sp.Path
	} else {
		cfg.Store.PostgresURL, cfg.Store.PostgresSchema = sp.URL, sp.Schema
	}
	return cfg
}

// String names the store for people (no credentials).
func (sp storeSpec) String() string {
	if sp.Backend == "pebble" {
		return "pebble " + sp.Path
	}
	return storeLabel(sp.config(config.Config{}))
}

// migrateOptions configures migrateStores.
type migrateOptions struct {
	// Batch is the number of events per destination Save. Default 1000.
	Batch int
	// Force copies into a destination that is not empty.
	Force bool
	// Start, if not nil, is called with the source's event count before
	// the copy; Progress, if not nil, with the number of events of each
	// batch once it is saved.
	Start    func(total int64)
	Progress func(n int64)
}

// migrateResult is what migrateStores did.
type migrateResult struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Events is the number of events copied: read from the source and
	// handed to the destination, which stored each, found it there
	// already, or refused it. An interrupted copy counts the batches the
	// destination answered.
	Events     int64    `json:"events"`
	Stored     int64    `json:"stored"`
	Duplicate  int64    `json:"duplicate"`
	Refused    int64    `json:"refused"`
	RefusedIDs []string `json:"refused_ids,omitempty"` // the first few, with the reason
	// Tombstones copied, by type.
	DeletedIDs   int64 `json:"deleted_ids"`
	DeletedAddrs int64 `json:"deleted_addresses"`
	Vanished     int64 `json:"vanished"`
	// Meta is the number of named blobs (NIP-86 state) copied.
	Meta int `json:"policy_entries"`
	// Held is the number of events held unverified (relay.verify_mode
	// "optimistic", store.Unverified) copied as held: a relay started on
	// the destination checks them.
	Held int64 `json:"held"`
	// The counts verified at the end: the source's events before and
	// after the copy, the destination's before and after.
	SourceBefore int64 `json:"source_before"`
	SourceAfter  int64 `json:"source_after"`
	DestBefore   int64 `json:"destination_before"`
	DestAfter    int64 `json:"destination_after"`
	Verified     bool  `json:"verified"`
	// Interrupted: the copy was stopped (Ctrl-C) before its end, so the
	// counts after it were not taken.
	Interrupted  bool    `json:"interrupted,omitempty"`
	Seconds      float64 `json:"seconds"`
	EventsPerSec float64 `json:"events_per_sec"`
}

// Sentinel errors of migrate.
var (
	// errDestNotEmpty: the destination holds events, tombstones or
	// policy state, and --force was not given.
	errDestNotEmpty = errors.New("the destination is not empty")
	// errVerify: the counts at the end do not match.
	errVerify = errors.New("verify")
)

// migrateMeta is a store that keeps named blobs and lists them (both
// backends): the NIP-86 state petrel serve keeps in the store.
type migrateMeta interface {
	MetaNames(ctx context.Context) ([]string, error)
	LoadMeta(ctx context.Context, name string) ([]byte, error)
	SaveMeta(ctx context.Context, name string, value []byte) error
}

func runMigrateCmd(ctx context.Context, f *migrateFlags, stdout, stderr io.Writer) error {
	cfg, log, err := toolSetup(&f.common)
	if err != nil {
		return err
	}
	from, err := parseStoreSpec(f.from, cfg)
	if err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	to, err := parseStoreSpec(f.to, cfg)
	if err != nil {
		return fmt.Errorf("--to: %w", err)
	}
	if from == to || samePebbleDir(from, to) {
		return fmt.Errorf("--from and --to name the same store (%s)", from)
	}
	src, err := openToolStore(from.config(cfg), log, toolStoreOptions{})
	if err != nil {
		if heldByServe(err, from.config(cfg)) {
			return fmt.Errorf("--from: %s: the data directory is held by a running petrel serve, and the source must not change during a migrate: stop it first, or migrate a copy (petrel backup DIR, then --from pebble:DIR)", from.config(cfg).Store.Path)
		}
		return fmt.Errorf("--from: %w", err)
	}
	defer src.Close()
	dst, err := openToolStore(to.config(cfg), log, toolStoreOptions{create: true, noSync: true})
	if err != nil {
		return fmt.Errorf("--to: %w", err)
	}
	ctx, stop := cli.Interruptible(ctx)
	defer stop()
	o := migrateOptions{Batch: f.batch, Force: f.force}
	var bar progressBar
	o.Start = func(total int64) { bar.b = newBar(stderr, f.quiet, "migrating", total, false) }
	o.Progress = bar.add
	res, err := migrateStores(ctx, src, dst, o)
	finishBar(bar.b)
	if cerr := dst.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close the destination: %w", cerr)
	}
	if err == nil {
		err = dropRecycledLogs(dst, to.config(cfg), log)
	}
	res.From, res.To = from.String(), to.String()
	res.Interrupted = errors.Is(err, context.Canceled)
	if res.Events > 0 || res.Verified || errors.Is(err, errVerify) {
		if f.jsonOut {
			if jerr := printJSON(stdout, res); jerr != nil {
				return jerr
			}
		} else {
			fmt.Fprintln(stdout, res.String())
		}
	}
	if res.Interrupted {
		return errors.New("interrupted: what was copied is kept; run the same command with --force to carry on (copied events are skipped as duplicates)")
	}
	return err
}

// String is the human summary.
func (r *migrateResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "copied %d events from %s to %s in %.1fs (%.0f events/s): stored %d, already there %d, refused %d\n",
		r.Events, r.From, r.To, r.Seconds, r.EventsPerSec, r.Stored, r.Duplicate, r.Refused)
	for _, id := range r.RefusedIDs {
		fmt.Fprintf(&b, "  refused %s\n", id)
	}
	fmt.Fprintf(&b, "tombstones: %d deleted ids, %d deleted addresses, %d vanished authors; policy state: %d entries\n",
		r.DeletedIDs, r.DeletedAddrs, r.Vanished, r.Meta)
	if r.Held > 0 {
		fmt.Fprintf(&b, "held unverified (verify_mode optimistic): %d events, copied as held: a relay started on the destination checks them\n", r.Held)
	}
	switch {
	case r.Interrupted:
		fmt.Fprintf(&b, "NOT verified: interrupted; the destination held %d events before, the source %d", r.DestBefore, r.SourceBefore)
	case r.Verified:
		fmt.Fprintf(&b, "verified: the destination holds %d events (the source %d), the same tombstones and the same policy state", r.DestAfter, r.SourceAfter)
	default:
		fmt.Fprintf(&b, "NOT verified: the destination holds %d events (%d before), the source %d (%d before)", r.DestAfter, r.DestBefore, r.SourceAfter, r.SourceBefore)
	}
	return b.String()
}

// migrateStores copies src into dst: every event, then every tombstone,
// then every named blob; then it checks the counts (errVerify).
//
// Why this is exact. The events are saved through dst's own rules, in
// src's order (newest first). The events of a store never conflict with
// each other under the storage rules (a store holds one version per
// address, no event its stored deletions or requests to vanish cover,
// none that refuses another), so each is stored whatever the order, and
// the deletion and vanish requests among them record their tombstones
// again in dst. A store also keeps tombstones whose request is gone (an
// operator's Delete, or a purged expiration), so the tombstones are then
// copied as such (store.Tombstoner). They go after the events because a
// request to vanish is itself covered by its own horizon: recorded
// first, the horizon would refuse the request.
func migrateStores(ctx context.Context, src, dst store.Store, o migrateOptions) (*migrateResult, error) {
	start := time.Now()
	res := &migrateResult{}
	if o.Batch <= 0 {
		o.Batch = 1000
	}
	all := []nostr.Filter{{}}
	var err error
	if res.SourceBefore, err = src.Count(ctx, all); err != nil {
		return res, fmt.Errorf("count the source: %w", err)
	}
	if res.DestBefore, err = dst.Count(ctx, all); err != nil {
		return res, fmt.Errorf("count the destination: %w", err)
	}
	srcT, ok1 := src.(store.Tombstoner)
	dstT, ok2 := dst.(store.Tombstoner)
	srcM, ok3 := src.(migrateMeta)
	dstM, ok4 := dst.(migrateMeta)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return res, errors.New("a store here cannot list or restore its tombstones and policy state")
	}
	destTombs, err := countTombstones(ctx, dstT)
	if err != nil {
		return res, err
	}
	destMeta, err := dstM.MetaNames(ctx)
	if err != nil {
		return res, err
	}
	empty := res.DestBefore == 0 && destTombs.total() == 0 && len(destMeta) == 0
	if !o.Force && !empty {
		return res, fmt.Errorf("%w: it holds %d events, %d tombstones and %d policy entries (--force copies into it anyway; what it holds is kept)",
			errDestNotEmpty, res.DestBefore, destTombs.total(), len(destMeta))
	}
	if o.Start != nil {
		o.Start(res.SourceBefore)
	}
	if err := copyEvents(ctx, src, dst, o, res); err != nil {
		res.Seconds = time.Since(start).Seconds()
		res.EventsPerSec = rate(res.Events, time.Since(start))
		return res, err
	}
	copied := &tombCounts{}
	batch := make([]store.Tombstone, 0, 4096)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := dstT.RestoreTombstones(ctx, batch)
		batch = batch[:0]
		return err
	}
	err = srcT.Tombstones(ctx, func(t *store.Tombstone) error {
		copied.add(t)
		batch = append(batch, *t)
		if len(batch) == cap(batch) {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return res, fmt.Errorf("copy tombstones: %w", err)
	}
	res.DeletedIDs, res.DeletedAddrs, res.Vanished = copied.ids, copied.addrs, copied.vanished
	names, err := srcM.MetaNames(ctx)
	if err != nil {
		return res, fmt.Errorf("copy policy state: %w", err)
	}
	for _, name := range names {
		v, err := srcM.LoadMeta(ctx, name)
		if err == nil {
			err = dstM.SaveMeta(ctx, name, v)
		}
		if err != nil {
			return res, fmt.Errorf("copy policy state %q: %w", name, err)
		}
		res.Meta++
	}
	if err := copyHeld(ctx, src, dst, res); err != nil {
		return res, err
	}
	if err := syncToolStore(dst); err != nil {
		return res, err
	}
	res.Seconds = time.Since(start).Seconds()
	res.EventsPerSec = rate(res.Events, time.Since(start))
	return res, verifyMigration(ctx, src, dst, srcM, dstM, names, copied, empty, res)
}

// copyHeld copies the events src holds unverified (answered OK:true by
// a relay in optimistic mode, their signatures not checked yet) into dst,
// still held: whoever starts a relay on dst checks them, as one started
// on src would have. Without it they would be lost with the source.
func copyHeld(ctx context.Context, src, dst store.Store, res *migrateResult) error {
	su, ok1 := src.(store.Unverified)
	du, ok2 := dst.(store.Unverified)
	if !ok1 {
		return nil
	}
	var evs []*nostr.Event
	if err := su.Unverified(ctx, func(ev *nostr.Event) error { evs = append(evs, ev); return nil }); err != nil {
		return fmt.Errorf("list held events: %w", err)
	}
	if len(evs) == 0 {
		return nil
	}
	if !ok2 {
		return fmt.Errorf("the source holds %d unverified events and the destination cannot hold them: start a relay on the source first, which checks them", len(evs))
	}
	results := make(chan store.SaveResult, len(evs))
	for _, ev := range evs {
		if err := du.SubmitUnverified(ctx, ev, func(r store.SaveResult) { results <- r }); err != nil {
			return fmt.Errorf("copy held events: %w", err)
		}
	}
	for range evs {
		r := <-results
		switch r.Outcome {
		case store.Held:
			res.Held++
		case store.Duplicate: // stored in the destination already
		default:
			return fmt.Errorf("copy held events: %v (%v)", r.Outcome, r.Err)
		}
	}
	return nil
}

// copyEvents saves every event of src into dst, o.Batch at a time; one
// goroutine reads the source while another saves the previous batch.
func copyEvents(ctx context.Context, src, dst store.Store, o migrateOptions, res *migrateResult) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan []*nostr.Event, 1)
	var saveErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for b := range batches {
			if saveErr != nil || ctx.Err() != nil {
				continue // drain
			}
			// An interrupt lands between batches: a batch the store took
			// is answered whatever ctx does (store.Store).
			rs, err := dst.Save(ctx, b)
			if err != nil {
				saveErr = fmt.Errorf("save into the destination: %w", err)
				cancel()
				continue
			}
			res.Events += int64(len(b))
			for i, r := range rs {
				switch r.Outcome {
				case store.Stored:
					res.Stored++
				case store.Duplicate:
					res.Duplicate++
				default:
					res.Refused++
					if len(res.RefusedIDs) < 10 {
						why := r.Outcome.String()
						if r.Err != nil {
							why += ": " + r.Err.Error()
						}
						res.RefusedIDs = append(res.RefusedIDs, b[i].ID.Hex()+" ("+why+")")
					}
				}
			}
			if o.Progress != nil {
				o.Progress(int64(len(b)))
			}
		}
	}()
	cur := make([]*nostr.Event, 0, o.Batch)
	err := queryEach(ctx, src, []nostr.Filter{{}}, func(r *store.Record) error {
		ev, err := nostr.ParseEvent(r.Raw, nil)
		if err != nil {
			return fmt.Errorf("the source holds an event that does not parse (id %s): %w", r.ID.Hex(), err)
		}
		if cur = append(cur, ev); len(cur) == o.Batch {
			select {
			case batches <- cur:
			case <-ctx.Done():
				return ctx.Err()
			}
			cur = make([]*nostr.Event, 0, o.Batch)
		}
		return nil
	})
	if err == nil && len(cur) > 0 {
		batches <- cur
	}
	close(batches)
	wg.Wait()
	if saveErr != nil {
		return saveErr
	}
	if err != nil {
		return fmt.Errorf("read the source: %w", err)
	}
	return nil
}

// tombCounts counts tombstones by type, the addresses by their Key: the
// postgres store keeps a d of 201-256 bytes in full, and a restored
// tombstone of one (from pebble, which keeps its hash) beside it as a
// hash, two rows listed alike (store.Tombstoner).
type tombCounts struct {
	ids, addrs, vanished int64
	addrKeys             map[string]bool
}

func (c *tombCounts) add(t *store.Tombstone) {
	switch t.Type {
	case store.TombstoneID:
		c.ids++
	case store.TombstoneAddr:
		if c.addrKeys == nil {
			c.addrKeys = map[string]bool{}
		}
		if k := t.Key(); !c.addrKeys[k] {
			c.addrKeys[k] = true
			c.addrs++
		}
	case store.TombstoneVanish:
		c.vanished++
	}
}

func (c *tombCounts) total() int64 { return c.ids + c.addrs + c.vanished }

// covers reports whether c has at least o's count of each type, or with
// exact, exactly o's.
func (c *tombCounts) covers(o *tombCounts, exact bool) bool {
	if exact {
		return c.ids == o.ids && c.addrs == o.addrs && c.vanished == o.vanished
	}
	return c.ids >= o.ids && c.addrs >= o.addrs && c.vanished >= o.vanished
}

func countTombstones(ctx context.Context, t store.Tombstoner) (*tombCounts, error) {
	c := &tombCounts{}
	err := t.Tombstones(ctx, func(tb *store.Tombstone) error {
		c.add(tb)
		return nil
	})
	if err != nil {
		return c, fmt.Errorf("list tombstones: %w", err)
	}
	return c, nil
}

// verifyMigration counts both stores after the copy: the source must not
// have changed, the destination must hold every event read (as many as
// the source, when it started empty; at least as many otherwise), as
// many tombstones of each type as the source (at least as many, when it
// did not start empty) and the source's named blobs.
func verifyMigration(ctx context.Context, src, dst store.Store, srcM, dstM migrateMeta, names []string, copied *tombCounts, empty bool, res *migrateResult) error {
	all := []nostr.Filter{{}}
	var err error
	if res.SourceAfter, err = src.Count(ctx, all); err != nil {
		return fmt.Errorf("%w: count the source: %w", errVerify, err)
	}
	if res.DestAfter, err = dst.Count(ctx, all); err != nil {
		return fmt.Errorf("%w: count the destination: %w", errVerify, err)
	}
	var bad []string
	if res.SourceAfter != res.SourceBefore || res.Events != res.SourceBefore {
		bad = append(bad, fmt.Sprintf("the source changed during the copy (%d events before, %d read, %d after): stop every writer to it and run migrate again with --force",
			res.SourceBefore, res.Events, res.SourceAfter))
	}
	if res.Refused > 0 {
		bad = append(bad, fmt.Sprintf("the destination refused %d events", res.Refused))
	}
	if (empty && res.DestAfter != res.Events) || res.DestAfter < res.Events {
		bad = append(bad, fmt.Sprintf("the destination holds %d events after the copy, for %d copied", res.DestAfter, res.Events))
	}
	dstT := dst.(store.Tombstoner)
	got, err := countTombstones(ctx, dstT)
	if err != nil {
		return fmt.Errorf("%w: %w", errVerify, err)
	}
	if !got.covers(copied, empty) {
		bad = append(bad, fmt.Sprintf("the destination holds %d/%d/%d deleted ids/addresses/vanished authors, the source %d/%d/%d",
			got.ids, got.addrs, got.vanished, copied.ids, copied.addrs, copied.vanished))
	}
	for _, name := range names {
		a, err1 := srcM.LoadMeta(ctx, name)
		b, err2 := dstM.LoadMeta(ctx, name)
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			bad = append(bad, fmt.Sprintf("policy state %q differs", name))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", errVerify, strings.Join(bad, "; "))
	}
	res.Verified = true
	return nil
}
