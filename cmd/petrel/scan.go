package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/cli"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/pebble"
	"github.com/petrel-relay/petrel/internal/store/postgres"
)

func init() { extraCommands = append(extraCommands, scanCmd) }

// scanFlags are the flags of `petrel scan`.
type scanFlags struct {
	common  commonFlags
	sel     filterFlags
	count   bool
	ids     bool
	explain bool
}

func scanCmd() *cobra.Command {
	var f scanFlags
	cmd := &cobra.Command{
		Use:   "scan [FILTER | --filter JSON] [--count | --ids] [--explain]",
		Short: "Print the stored events matching a filter (a debugging tool)",
		Long: `Scan runs a filter against the store as a REQ would and prints the
matching events (raw JSON, newest first, one per line), or with --count
only their number (as COUNT does: limits are ignored), or with --ids only
their ids.

--explain prints to stderr how the store answers: with the pebble store,
for each filter, the index the planner chose, how many streams it merges
and which conditions it checks after the index; with the postgres store,
the SQL statements scan runs and PostgreSQL's plan for each (EXPLAIN,
which does not run them); then the time the query took.

The filter may also be given as the argument, as strfry takes it:
petrel scan '{"kinds":[0]}'. An unknown filter key is an error (a typo
such as "kind" would otherwise match every event), and "since"/"until"
may be "now", RFC 3339 or an age such as "1h" ('{"since":"1h"}').

Without a filter, scan prints every event: pass a limit, for example
petrel scan '{"limit":10}'. Scan works on the configured store
(store.backend). On the pebble store of a running petrel serve, scan
asks the relay through its control socket (<store.path>/petrel.sock,
read-only); otherwise it opens the store itself. The postgres store is
shared: scan runs beside the relay's nodes.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if cmd.Flags().Changed("filter") {
					return errors.New("give the filter as the argument or with --filter, not both")
				}
				f.sel.filter = args[0]
			}
			return runScanCmd(cmd.Context(), &f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f.common.register(cmd)
	f.sel.register(cmd, "{}")
	fs := cmd.Flags()
	fs.BoolVar(&f.count, "count", false, "print only the number of matching events (limits ignored)")
	fs.BoolVar(&f.ids, "ids", false, "print only the ids of the matching events")
	fs.BoolVar(&f.explain, "explain", false, "print the query plan and the time taken to stderr")
	return cmd
}

// scanMode is what scanEvents prints.
type scanMode uint8

const (
	scanEventsMode scanMode = iota // raw JSON lines
	scanIDsMode                    // ids
	scanCountMode                  // one number
)

func runScanCmd(ctx context.Context, f *scanFlags, stdout, stderr io.Writer) error {
	if f.count && f.ids {
		return errors.New("--count and --ids exclude each other")
	}
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
	if cfg.Store.Backend == "pebble" {
		// The store of a running petrel serve: ask it (read-only, through
		// its control socket) instead of failing on its lock.
		if served, err := scanThroughServe(ctx, f, cfg.Store.Path, filters, stdout, stderr); served {
			return err
		}
	}
	st, err := openToolStore(cfg, log, toolStoreOptions{})
	if err != nil {
		return err
	}
	defer st.Close()
	if f.explain {
		if err := explainScan(ctx, st, filters, f.count, stderr); err != nil {
			return err
		}
	}
	mode := scanEventsMode
	switch {
	case f.count:
		mode = scanCountMode
	case f.ids:
		mode = scanIDsMode
	}
	start := time.Now()
	n, err := scanEvents(ctx, st, stdout, filters, mode)
	if err != nil {
		return err
	}
	if f.explain {
		fmt.Fprintf(stderr, "%d events in %v\n", n, time.Since(start).Round(time.Microsecond))
	}
	return nil
}

// explainScan prints to w how st answers what scan asks of it: the
// pebble planner's plan of each filter (limits dropped for --count, as
// COUNT ignores them), or the postgres store's statements with
// PostgreSQL's EXPLAIN of each (the statement scan runs: Count's, Scan's
// when no filter has a limit or a search, else Query's, one per filter).
func explainScan(ctx context.Context, st store.Store, filters []nostr.Filter, count bool, w io.Writer) error {
	switch s := st.(type) {
	case *pebble.Store:
		planned := filters
		if count { // COUNT ignores limits: plan what it runs
			planned = slices.Clone(filters)
			for i := range planned {
				planned[i].HasLimit, planned[i].Limit = false, 0
			}
		}
		plans, err := s.Explain(planned)
		if err != nil {
			return fmt.Errorf("explain: %w", err)
		}
		for i, p := range plans {
			fmt.Fprintf(w, "filter %d: %s\n", i, p)
		}
	case *postgres.Store:
		op := postgres.ExplainQuery
		switch {
		case count:
			op = postgres.ExplainCount
		case streamable(filters):
			op = postgres.ExplainScan
		}
		plans, err := s.Explain(ctx, filters, op)
		if err != nil {
			return fmt.Errorf("explain: %w", err)
		}
		for i, p := range plans {
			if op == postgres.ExplainQuery {
				fmt.Fprintf(w, "filter %d: %s\n", i, p)
			} else {
				fmt.Fprintf(w, "filters: %s\n", p)
			}
		}
	default:
		fmt.Fprintf(w, "explain: the %s store does not describe its plans\n", st.Stats().Backend)
	}
	return nil
}

// scanEvents prints what mode says about the events matching filters to w
// and returns how many there were.
func scanEvents(ctx context.Context, st store.Store, w io.Writer, filters []nostr.Filter, mode scanMode) (int64, error) {
	if mode == scanCountMode {
		n, err := st.Count(ctx, filters)
		if err != nil {
			return 0, fmt.Errorf("count: %w", err)
		}
		_, err = fmt.Fprintln(w, n)
		return n, err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	var n int64
	hexBuf := make([]byte, 0, 65)
	err := queryEach(ctx, st, filters, func(r *store.Record) error {
		n++
		if mode == scanIDsMode {
			hexBuf = append(append(hexBuf[:0], r.ID.Hex()...), '\n')
			_, err := bw.Write(hexBuf)
			return err
		}
		if _, err := bw.Write(r.Raw); err != nil {
			return err
		}
		return bw.WriteByte('\n')
	})
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return n, err
}

// scanThroughServe runs the scan through the control socket of the petrel
// serve holding the store in dir. served is false when no relay answers
// there.
func scanThroughServe(ctx context.Context, f *scanFlags, dir string, filters []nostr.Filter, stdout, stderr io.Writer) (served bool, err error) {
	if f.explain {
		served, err := cli.AskControlQuery(ctx, dir, filters, cli.QueryRequest{Explain: true, Count: f.count}, func(line []byte) error {
			var a cli.ExplainAnswer
			if err := json.Unmarshal(line, &a); err != nil {
				return fmt.Errorf("the running relay's answer: %w", err)
			}
			_, err := io.WriteString(stderr, a.Explain)
			return err
		})
		if !served || err != nil {
			return served, err
		}
	}
	start := time.Now()
	var n int64
	if f.count {
		n, served, err = cli.AskControlCount(ctx, dir, filters)
		if served && err == nil {
			_, err = fmt.Fprintln(stdout, n)
		}
	} else {
		bw := bufio.NewWriterSize(stdout, 64<<10)
		served, err = cli.AskControlQuery(ctx, dir, filters, cli.QueryRequest{IDs: f.ids}, func(line []byte) error {
			n++
			bw.Write(line)
			return bw.WriteByte('\n')
		})
		if ferr := bw.Flush(); err == nil {
			err = ferr
		}
	}
	if served && err == nil && f.explain {
		fmt.Fprintf(stderr, "%d events in %v (through the running relay)\n", n, time.Since(start).Round(time.Microsecond))
	}
	return served, err
}
