package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/cli"
	"github.com/petrel-relay/petrel/internal/client"
	"github.com/petrel-relay/petrel/internal/config"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
	psync "github.com/petrel-relay/petrel/internal/sync"
)

func init() { extraCommands = append(extraCommands, syncCmd) }

// syncOpenStore opens the local store for `petrel sync`; tests replace it.
var syncOpenStore = openSyncStore

// openSyncStore opens the configured store (store.backend) as the local
// side of a sync, creating it if it does not exist yet (a new mirror)
// when create is set. An upload alone does not create one: there would be
// nothing to send, and a typo in --data would pass for a sync.
func openSyncStore(cfg config.Config, log *slog.Logger, create bool) (store.Store, error) {
	return openToolStore(cfg, log, toolStoreOptions{create: create})
}

// syncFlags are the flags of `petrel sync`.
type syncFlags struct {
	common         commonFlags
	auth           cli.AuthFlags
	filter         string
	dir            string
	from           string
	batch          int
	window         int
	fallbackPaging bool
	since, until   string
	negTimeout     time.Duration
	quiet          bool
	jsonOut        bool
}

func syncCmd() *cobra.Command {
	var f syncFlags
	cmd := &cobra.Command{
		Use:   "sync <relay-url>",
		Short: "Sync the local store (or --from another relay) with a relay, using NIP-77 negentropy",
		Long: `Sync brings the events matching --filter in line between the local store
(or the relay given with --from) and the relay at <relay-url>.

With a relay that speaks NIP-77 it reconciles both sets with negentropy
(bytes proportional to the difference), then downloads what is missing
here (--dir down, the default), uploads what is missing there (--dir up),
or both (--dir both). Downloaded events are checked (id and signature)
and saved in batches, so an interrupted sync keeps its progress: run it
again to carry on.

With --from, both sides are relays: sync opens a NIP-77 session with each
and reconciles them with each other (neither relay's ids are listed; the
bytes follow the difference), then moves the difference between them:
--dir down copies what <relay-url> has to the --from relay, up the
reverse. Both relays must speak NIP-77.

--auth answers a relay's NIP-42 challenge with the --sec key (or
$NOSTR_SECRET_KEY) when it refuses the negentropy session, a request or
an uploaded event with "auth-required:", then asks again; with --from
the same key serves both relays. Without --auth, such a relay stops sync
with a message saying so.

With a relay that does not speak NIP-77, sync stops with a clear message,
or with --fallback-paging pages through the relay's events with REQ
(newest first, bounded by --since/--until) and downloads those the local
store lacks. (--fallback-scan is the deprecated old name of
--fallback-paging.)

The local store is the configured one (store.backend). The pebble store
needs its data directory to itself (a mirror, not the directory petrel
serve holds: to sync a running relay, give its URL with --from). With the postgres backend, sync reads and fills the
cluster's shared store beside its running nodes: what it saves is served
by every node's stored queries, but not pushed to live subscriptions.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("fallback-scan") {
				fmt.Fprintln(cmd.ErrOrStderr(), "petrel sync: --fallback-scan is deprecated, use --fallback-paging")
			}
			return runSync(cmd.Context(), &f, args[0], cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f.common.register(cmd)
	f.auth.Register(cmd)
	fs := cmd.Flags()
	fs.StringVar(&f.filter, "filter", "{}", "NIP-01 filter (JSON) selecting the events to sync; its limit is ignored")
	fs.StringVar(&f.dir, "dir", "down", "down (fetch what is missing here), up (send what is missing there) or both")
	fs.StringVar(&f.from, "from", "", "sync this relay instead of the local store (a relay URL, or host[:port] as for the remote)")
	fs.IntVar(&f.batch, "batch", 500, "events per local commit")
	fs.IntVar(&f.window, "window", 64, "uploaded events awaiting their OK")
	fs.BoolVar(&f.fallbackPaging, "fallback-paging", false, "when the relay lacks NIP-77, download by paging through it with REQ")
	// The old name, kept working for scripts; hidden from the help. (Not
	// MarkDeprecated: cobra would print its warning to the command's
	// output, which may be the --json stream; RunE warns on stderr.)
	fs.BoolVar(&f.fallbackPaging, "fallback-scan", false, "old name of --fallback-paging")
	_ = fs.MarkHidden("fallback-scan")
	fs.StringVar(&f.since, "since", "", "only events created at or after: unix time, now, RFC 3339, or an age like 30m, 1h, 2d, 1w")
	fs.StringVar(&f.until, "until", "", "only events created at or before (same forms as --since)")
	fs.DurationVar(&f.negTimeout, "neg-timeout", 10*time.Second, "how long to wait for the answer to NEG-OPEN before deciding the relay lacks NIP-77")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress bar")
	fs.BoolVar(&f.jsonOut, "json", false, "print the result as one JSON object instead of the summary line (\"complete\": false and \"error\" when the sync failed)")
	return cmd
}

// parseTime reads a time as the tools take it: unix seconds, now, RFC
// 3339 or an age before now (cli.ParseWhen).
func parseTime(s string) (int64, error) { return cli.ParseWhen(s, time.Now()) }

// syncOptions turns the flags into sync options (without the local side).
func (f *syncFlags) options(remote string) (psync.Options, error) {
	o := psync.Options{Batch: f.batch, Window: f.window, FallbackPaging: f.fallbackPaging, OpenTimeout: f.negTimeout}
	var err error
	if o.Remote, err = cli.ParseRelay(remote); err != nil {
		return o, err
	}
	if f.from != "" { // "": the local store
		if o.From, err = cli.ParseRelay(f.from); err != nil {
			return o, fmt.Errorf("--from: %w", err)
		}
	}
	if o.Direction, err = psync.ParseDirection(f.dir); err != nil {
		return o, err
	}
	filters, err := parseFilters(f.filter)
	if err == nil && len(filters) != 1 {
		err = errors.New("sync takes one filter, not an array")
	}
	if err != nil {
		return o, fmt.Errorf("--filter: %s", nostr.Reason(err))
	}
	o.Filter = filters[0]
	if f.since != "" {
		if o.Filter.Since, err = parseTime(f.since); err != nil {
			return o, fmt.Errorf("--since: %w", err)
		}
		o.Filter.HasSince = true
	}
	if f.until != "" {
		if o.Filter.Until, err = parseTime(f.until); err != nil {
			return o, fmt.Errorf("--until: %w", err)
		}
		o.Filter.HasUntil = true
	}
	return o, nil
}

func runSync(ctx context.Context, f *syncFlags, remote string, stdout, stderr io.Writer) error {
	o, err := f.options(remote)
	if err != nil {
		return err
	}
	if o.AuthKey, err = f.auth.AuthKey(); err != nil {
		return err
	}
	cfg, err := f.common.load()
	if err != nil {
		return err
	}
	log, err := newLogger(cfg.Log)
	if err != nil {
		return err
	}
	o.Logger = log
	if o.From == "" {
		if o.Store, err = syncOpenStore(cfg, log, o.Direction&psync.Down != 0); err != nil {
			if heldByServe(err, cfg) {
				return fmt.Errorf("%s: the data directory is held by a running petrel serve: sync the relay instead, petrel sync %s --from ws://HOST:PORT (the address it listens on)", cfg.Store.Path, remote)
			}
			return err
		}
	}
	if !f.quiet {
		if p := newBenchProgress(stderr); p != nil {
			o.Progress = &syncProgress{p: p}
		}
	}
	ctx, stop := cli.Interruptible(ctx)
	defer stop()

	res, err := psync.Run(ctx, o)
	err = cli.RelayConnectError(err, 0)
	if st := o.Store; st != nil {
		cerr := st.Close()
		if cerr != nil {
			cerr = fmt.Errorf("close store: %w", cerr)
		} else if ctx.Err() == nil {
			// Downloads are a bulk write like import's.
			cerr = dropRecycledLogs(st, cfg, log)
		}
		if err == nil {
			err = cerr
		}
	}
	// A failed sync says so before its figures: the summary line alone
	// would read as a success. The JSON result carries "complete" and
	// the error for scripts.
	if f.jsonOut {
		out := struct {
			psync.Result
			Complete bool   `json:"complete"`
			Error    string `json:"error,omitempty"`
		}{Result: res, Complete: err == nil}
		if err != nil {
			out.Error = err.Error()
		}
		if jerr := json.NewEncoder(stdout).Encode(out); jerr != nil {
			return jerr
		}
	} else if res.Mode != "" {
		if err != nil {
			fmt.Fprintln(stderr, "sync failed; done before the failure:", res.String())
		} else {
			fmt.Fprintln(stdout, res.String())
		}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled):
		return errors.New("interrupted: what was transferred is kept; run the same command again to carry on")
	case errors.Is(err, client.ErrAuthRequired):
		return cli.AuthHint(err, o.AuthKey)
	case errors.Is(err, psync.ErrUnsupported), errors.Is(err, psync.ErrRefused):
		if !o.FallbackPaging {
			return fmt.Errorf("%w\n(use --fallback-paging to download by paging through the relay with REQ instead)", err)
		}
	}
	return err
}

// syncProgress shows sync phases as progress bars.
type syncProgress struct {
	p    *benchProgress
	done int64
}

func (s *syncProgress) Phase(name string, total int64) { s.p.Phase(name, total); s.done = 0 }
func (s *syncProgress) Add(n int64)                    { s.done += n; s.p.Set(s.done) }
func (s *syncProgress) Done()                          { s.p.Done() }
