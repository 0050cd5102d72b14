package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/cli"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

func init() { extraCommands = append(extraCommands, deleteCmd) }

// deleteFlags are the flags of `petrel delete`.
type deleteFlags struct {
	common  commonFlags
	sel     filterFlags
	dryRun  bool
	yes     bool
	all     bool
	batch   int
	quiet   bool
	jsonOut bool
}

// errNotConfirmed is returned when the operator does not confirm.
var errNotConfirmed = errors.New("not confirmed: nothing deleted")

func deleteCmd() *cobra.Command {
	var f deleteFlags
	cmd := &cobra.Command{
		Use:   "delete --filter JSON [--dry-run] [--yes]",
		Short: "Delete the stored events matching a filter",
		Long: `Delete removes the stored events matching --filter. It counts them
first and asks for confirmation on the terminal, unless --yes; --dry-run
only counts. A filter's "limit" keeps its meaning: the newest matches.

This is an operator's removal, not a NIP-09 deletion: nothing is
remembered, so the same events can come back (published again, synced or
imported). To keep an author or an event out, use the relay's ban lists.
A filter that matches every event ({}) needs --all as well.

Delete works on the configured store (store.backend). While petrel
serve holds the pebble store, delete asks it through its control socket
(<store.path>/petrel.sock): the relay lists the matches and deletes them
through its own writer, between its other writes (the list confirmed is
the list deleted). The postgres store is shared: delete runs beside the
relay's nodes. Either way the relay's stored queries stop returning the
events as soon as they are deleted (live subscribers that already
received them keep them).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("filter") {
				return errors.New("--filter is required")
			}
			return runDeleteCmd(cmd.Context(), &f, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f.common.register(cmd)
	f.sel.register(cmd, "")
	fs := cmd.Flags()
	fs.BoolVar(&f.dryRun, "dry-run", false, "only count the matching events")
	fs.BoolVarP(&f.yes, "yes", "y", false, "do not ask for confirmation")
	fs.BoolVar(&f.all, "all", false, "allow a filter that matches every event")
	fs.IntVar(&f.batch, "batch", 1000, "events per store commit")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress bar")
	fs.BoolVar(&f.jsonOut, "json", false, "print the result as one JSON object instead of the summary line")
	return cmd
}

// deleteOptions configures deleteEvents.
type deleteOptions struct {
	// DryRun only counts.
	DryRun bool
	// Batch is the number of ids per store.Delete. Default 1000.
	Batch int
	// Confirm is asked, with the number of matches, before anything is
	// deleted; false cancels (errNotConfirmed). Nil confirms.
	Confirm func(matched int) (bool, error)
	// Progress, if not nil, is called after each batch with the number
	// of events deleted so far and the number matched.
	Progress func(done, total int)
}

// deleteResult is what deleteEvents did.
type deleteResult struct {
	Matched int     `json:"matched"`
	Deleted int     `json:"deleted"`
	DryRun  bool    `json:"dry_run,omitempty"`
	Seconds float64 `json:"seconds"`
}

func (r *deleteResult) String() string {
	if r.DryRun {
		return fmt.Sprintf("%d events match (dry run: nothing deleted)", r.Matched)
	}
	return fmt.Sprintf("deleted %d of %d matching events in %.1fs", r.Deleted, r.Matched, r.Seconds)
}

func runDeleteCmd(ctx context.Context, f *deleteFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	filters, err := f.sel.filters()
	if err != nil {
		return err
	}
	if matchesAll(filters) && !f.all {
		return errors.New("the filter matches every event: add --all to delete everything")
	}
	cfg, log, err := toolSetup(&f.common)
	if err != nil {
		return err
	}
	ctx, stop := cli.Interruptible(ctx)
	defer stop()

	o := deleteOptions{DryRun: f.dryRun, Batch: f.batch}
	if !f.yes {
		o.Confirm = func(n int) (bool, error) {
			if !isTerminalReader(stdin) {
				return false, fmt.Errorf("%d events match; refusing to delete without confirmation: run on a terminal or pass --yes", n)
			}
			fmt.Fprintf(stderr, "delete %d events from %s? [y/N] ", n, storeLabel(cfg))
			ans, _ := bufio.NewReader(stdin).ReadString('\n')
			ans = strings.ToLower(strings.TrimSpace(ans))
			return ans == "y" || ans == "yes", nil
		}
	}
	// The bar starts after the confirmation, which it would garble.
	var bar *progressbar.ProgressBar
	o.Progress = func(done, total int) {
		if bar == nil {
			if bar = newBar(stderr, f.quiet, "deleting", int64(total), false); bar == nil {
				return
			}
		}
		bar.Set64(int64(done))
	}
	// A running petrel serve holds a pebble store: it deletes through its
	// control socket. Otherwise delete opens the store itself.
	var res deleteResult
	served := false
	if cfg.Store.Backend == "pebble" && cli.ControlServed(cfg.Store.Path) {
		res, served, err = deleteThroughServe(ctx, cfg.Store.Path, filters, o)
	}
	if !served && err == nil {
		var st store.Store
		if st, err = openToolStore(cfg, log, toolStoreOptions{}); err != nil {
			return err
		}
		defer st.Close()
		res, err = deleteEvents(ctx, st, filters, o)
	}
	finishBar(bar)
	if errors.Is(err, errNotConfirmed) {
		fmt.Fprintln(stderr, err)
		return nil
	}
	if err == nil || res.Deleted > 0 {
		if f.jsonOut {
			if jerr := printJSON(stdout, res); jerr != nil {
				return jerr
			}
		} else {
			fmt.Fprintln(stdout, res.String())
		}
	}
	return err
}

// isTerminalReader reports whether r is a terminal.
func isTerminalReader(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	return isTerminal(f)
}

// deleteEvents deletes the events of st matching filters, o.Batch ids per
// store.Delete, after o.Confirm agrees. It lists the matches first (from
// the indexes only when no filter has a limit), so the count it confirms
// is the set it deletes.
func deleteEvents(ctx context.Context, st store.Store, filters []nostr.Filter, o deleteOptions) (deleteResult, error) {
	start := time.Now()
	if o.Batch <= 0 {
		o.Batch = 1000
	}
	res := deleteResult{DryRun: o.DryRun}
	items, err := matchingItems(ctx, st, filters)
	if err != nil {
		return res, err
	}
	res.Matched = len(items)
	if o.DryRun || len(items) == 0 {
		return res, nil
	}
	if o.Confirm != nil {
		ok, err := o.Confirm(len(items))
		if err != nil {
			return res, err
		}
		if !ok {
			return res, errNotConfirmed
		}
	}
	d, err := deleteItems(ctx, st, items, o.Batch, o.Progress)
	res.Deleted = d.Deleted
	res.Seconds = time.Since(start).Seconds()
	return res, err
}

// deleteItems deletes the events of items from st, batch ids per
// store.Delete (0: 1000), calling progress (if not nil) after each.
func deleteItems(ctx context.Context, st store.Store, items []store.Item, batch int, progress func(done, total int)) (deleteResult, error) {
	start := time.Now()
	if batch <= 0 {
		batch = 1000
	}
	res := deleteResult{Matched: len(items)}
	ids := make([]nostr.ID, 0, min(batch, len(items)))
	interrupted := func(err error) (deleteResult, error) {
		res.Seconds = time.Since(start).Seconds()
		return res, fmt.Errorf("interrupted after deleting %d events: %w", res.Deleted, err)
	}
	for len(items) > 0 {
		if err := ctx.Err(); err != nil {
			return interrupted(err)
		}
		n := min(len(items), batch)
		ids = ids[:0]
		for _, it := range items[:n] {
			ids = append(ids, it.ID)
		}
		// A batch the store took is deleted whatever ctx does, and d says
		// so (store.Store); one it did not take comes back as ctx's error.
		d, err := st.Delete(ctx, ids)
		res.Deleted += d
		if err != nil && ctx.Err() != nil {
			return interrupted(err)
		}
		if err != nil {
			res.Seconds = time.Since(start).Seconds()
			return res, fmt.Errorf("delete: %w", err)
		}
		if progress != nil {
			progress(res.Deleted, res.Matched)
		}
		items = items[n:]
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}
