package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/cli"
	"github.com/petrel-relay/petrel/internal/store/pebble"
)

func init() { extraCommands = append(extraCommands, compactCmd) }

// compactFlags are the flags of `petrel compact`.
type compactFlags struct {
	common        commonFlags
	purgeExpired  bool
	rebuildSearch bool
	quiet         bool
	jsonOut       bool
}

func compactCmd() *cobra.Command {
	var f compactFlags
	cmd := &cobra.Command{
		Use:   "compact [--purge-expired] [--rebuild-search]",
		Short: "Compact the whole store (reclaims the space of deleted and replaced events)",
		Long: `Compact runs pebble's manual compaction over the whole keyspace: every
table is rewritten into the bottom level, dropping deleted and
overwritten entries, so the disk space of deleted, replaced and purged
events comes back and reads touch fewer files. It prints the size of the
data directory before and after.

--purge-expired first removes the events whose NIP-40 expiration has
passed (petrel serve also does this every minute), so that the
compaction reclaims their space too.

--rebuild-search first rebuilds the NIP-50 search index from the stored
events. Postings of removed events (replaced profiles and articles,
deletions, vanished authors, purged events) stay in the index, skipped by
searches but taking space and search work; the rebuild clears them. It
takes about as long as indexing every stored text once.

Pebble compacts in the background on its own; a manual compaction is
worth it after a large delete or import. It needs free disk space for
the rewritten tables (up to the size of the store at worst). While petrel
serve holds the store, compact asks it through its control socket
(<store.path>/petrel.sock) and the relay compacts beside its writes
(they compete for the disk: prefer a quiet hour); --rebuild-search
needs the relay stopped.

Compact works on the embedded pebble store only: with store.backend
"postgres" it refuses at once; PostgreSQL reclaims space itself
(autovacuum, or VACUUM FULL; docs/operations.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCompactCmd(cmd.Context(), &f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f.common.register(cmd)
	fs := cmd.Flags()
	fs.BoolVar(&f.purgeExpired, "purge-expired", false, "remove expired events (NIP-40) before compacting")
	fs.BoolVar(&f.rebuildSearch, "rebuild-search", false, "rebuild the search index (clears postings of removed events) before compacting")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress spinner")
	fs.BoolVar(&f.jsonOut, "json", false, "print the result as one JSON object instead of the summary line")
	return cmd
}

// compactResult is what a compaction did.
type compactResult struct {
	SizeBefore int64   `json:"size_before"` // bytes in the data directory before
	SizeAfter  int64   `json:"size_after"`  // and after (store closed)
	Purged     int     `json:"purged"`      // expired events removed
	Seconds    float64 `json:"seconds"`
	// Online: compacted by the running relay. The sizes are then of the
	// store's tables (.sst) alone: its write-ahead logs are in use and
	// come and go as it writes.
	Online bool `json:"online"`
}

func (r *compactResult) String() string {
	s := fmt.Sprintf("compacted in %.1fs: %s -> %s", r.Seconds, humanBytes(r.SizeBefore), humanBytes(r.SizeAfter))
	if r.Online {
		s = fmt.Sprintf("compacted by the running relay in %.1fs: tables %s -> %s", r.Seconds, humanBytes(r.SizeBefore), humanBytes(r.SizeAfter))
	}
	if r.Purged > 0 {
		s += fmt.Sprintf(" (purged %d expired events)", r.Purged)
	}
	return s
}

func runCompactCmd(ctx context.Context, f *compactFlags, stdout, stderr io.Writer) error {
	cfg, log, err := toolSetup(&f.common)
	if err != nil {
		return err
	}
	if err := backendRefusal(cfg, "compact", "PostgreSQL reclaims the space of removed rows itself (autovacuum; VACUUM FULL returns it to the OS), and the nodes purge expired events every minute"); err != nil {
		return err
	}
	if f.rebuildSearch && cfg.Store.DisableSearch {
		return errors.New("--rebuild-search: search is disabled (store.disable_search)")
	}
	ctx, stop := cli.Interruptible(ctx)
	defer stop()
	// A running petrel serve compacts its own store (the search index is
	// rebuilt only as the store opens).
	if cfg.Store.Backend == "pebble" && cli.ControlServed(cfg.Store.Path) {
		if f.rebuildSearch {
			return errors.New("--rebuild-search rebuilds the index as the store opens: stop petrel serve first (a compaction alone runs beside it)")
		}
		done := spin(stderr, f.quiet, "compacting")
		res, served, err := askCompact(ctx, cfg.Store.Path, f.purgeExpired)
		done()
		if served {
			if err != nil {
				return err
			}
			return printCompact(stdout, res, f.jsonOut)
		}
	}
	var res compactResult
	// Measured before Open (which may rebuild the search index), and again
	// once the store is closed and obsolete files are gone.
	if res.SizeBefore, err = dirSize(cfg.Store.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	start := time.Now()
	st, err := openPebbleTool(cfg, log, toolStoreOptions{rebuildSearch: f.rebuildSearch})
	if err != nil {
		return err
	}
	done := spin(stderr, f.quiet, "compacting")
	res.Purged, err = compactStore(ctx, st, f.purgeExpired, time.Now().Unix())
	done()
	res.Seconds = time.Since(start).Seconds()
	if cerr := st.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close store: %w", cerr)
	}
	if err != nil {
		return err
	}
	if res.SizeAfter, err = dirSize(cfg.Store.Path); err != nil {
		return err
	}
	return printCompact(stdout, res, f.jsonOut)
}

// printCompact prints a compaction's result: the summary line, or JSON.
func printCompact(stdout io.Writer, res compactResult, jsonOut bool) error {
	if jsonOut {
		return printJSON(stdout, res)
	}
	fmt.Fprintln(stdout, res.String())
	return nil
}

// spin shows a spinner labelled label on stderr (unless quiet, or stderr
// is not a terminal) until the returned function is called.
func spin(stderr io.Writer, quiet bool, label string) (done func()) {
	bar := newBar(stderr, quiet, label, -1, false)
	tick := make(chan struct{})
	if bar != nil {
		go func() {
			t := time.NewTicker(200 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-tick:
					return
				case <-t.C:
					bar.Add64(0)
				}
			}
		}()
	}
	return func() {
		close(tick)
		finishBar(bar)
	}
}

// compactStore purges expired events when purge is set, then compacts
// the whole keyspace of st. It returns
// how many events were purged.
func compactStore(ctx context.Context, st *pebble.Store, purge bool, now int64) (int, error) {
	purged := 0
	if purge {
		n, err := st.PurgeExpired(ctx, now)
		if err != nil {
			return n, fmt.Errorf("purge expired: %w", err)
		}
		purged = n
	}
	if err := st.Compact(ctx); err != nil {
		return purged, err
	}
	return purged, nil
}
