package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/petrel-relay/petrel/internal/cli"
	"github.com/petrel-relay/petrel/internal/importer"
	"github.com/petrel-relay/petrel/internal/nostr"
)

func init() { extraCommands = append(extraCommands, importCmd) }

// importFlags are the flags of `petrel import`.
type importFlags struct {
	common    commonFlags
	noVerify  bool
	gzip      bool
	batch     int
	workers   int
	maxLine   int
	maxErrors int
	quiet     bool
	jsonOut   bool
	strict    bool
}

func importCmd() *cobra.Command {
	var f importFlags
	cmd := &cobra.Command{
		Use:   "import [file|-]",
		Short: "Load events from a JSONL file (or stdin) into the store",
		Long: `Import reads events, one per line, from a file or from stdin ("-" or no
argument), checks them, and saves them in large batches.

A line is an event object, or a relay or client envelope holding one:
["EVENT",{...}] or ["EVENT","<subid>",{...}], so dumps made by other
relays' tools and by WebSocket clients load as they are. Other messages
(EOSE, NOTICE, OK, REQ...) and blank lines are skipped. Input is
decompressed when the name ends in .gz, when it starts with the gzip
magic bytes, or with --gzip.

Every event's id is recomputed and its signature verified on all cores;
--no-verify skips the signature check (not the id check) for dumps you
trust. The store's rules apply as for events published to the relay:
duplicates are skipped, an older replaceable or addressable version is
superseded, deletions (kind 5) delete and are remembered, requests to
vanish (kind 62) apply when addressed to this relay, as the relay decides
it (a "relay" tag naming relay.url, or any loopback URL when relay.url
is not set, or ALL_RELAYS). Ephemeral events and events whose NIP-40
expiration has passed are skipped and counted. The relay's write policy
(allow lists, rate limits, created_at window, PoW) does not apply:
import is an operator's tool.

Import writes into the configured store (store.backend). Into a pebble
store that no relay holds, import writes without fsync and syncs once at
the end. Beside a running petrel serve, import sends its input through
the relay's control socket and the relay saves it (each batch committed
durably, beside its own writes; the relay's verification uses its
cores, --workers 1 leaves it the most). The postgres store commits each
batch durably, beside the relay's running nodes. Either way, what import
saves beside a relay is served by stored queries, not pushed to live
subscriptions. An interrupted import keeps what it had
saved, and running it again skips what is already there.

With no file and a terminal for stdin, import refuses to start (it would
wait for events typed by hand); give "-" to type them, ending with Ctrl-D.
--strict makes import exit with status 1 when any line was refused
(invalid, bad id, bad signature, store error), after saving the others.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "-"
			if len(args) == 1 {
				if path = args[0]; path == "" {
					// "$FILE" with FILE unset: stdin (a script's, empty)
					// would import nothing and succeed.
					return errors.New(`no file given (""): give a JSONL file, or "-" for stdin`)
				}
			}
			if stdinIsTerminal(cmd.InOrStdin()) {
				if len(args) == 0 {
					return errors.New("no input: give a JSONL file (petrel import events.jsonl), or pipe events in (strfry export | petrel import); \"-\" reads events typed here")
				}
				if path == "-" {
					fmt.Fprintln(cmd.ErrOrStderr(), "petrel import: reading events from the terminal, one JSON event per line; end with Ctrl-D")
				}
			}
			return runImportCmd(cmd.Context(), &f, path, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f.common.register(cmd)
	fs := cmd.Flags()
	fs.BoolVar(&f.noVerify, "no-verify", false, "skip signature verification (ids are still checked)")
	fs.BoolVar(&f.gzip, "gzip", false, "the input is gzip-compressed (automatic for .gz names and gzip data)")
	fs.IntVar(&f.batch, "batch", importer.DefaultBatch, "events per store commit")
	fs.IntVar(&f.workers, "workers", 0, "parsing and verifying goroutines (0: one per CPU)")
	fs.IntVar(&f.maxLine, "max-line-bytes", importer.DefaultMaxLine, "longest line accepted; longer lines are counted invalid and skipped")
	fs.IntVar(&f.maxErrors, "show-errors", 10, "how many refused lines to list with their line numbers")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress bar")
	fs.BoolVar(&f.jsonOut, "json", false, "print the result as one JSON object instead of the summary")
	fs.BoolVar(&f.strict, "strict", false, "exit with status 1 when any line was refused (the others are still saved)")
	return cmd
}

func runImportCmd(ctx context.Context, f *importFlags, path string, stdin io.Reader, stdout, stderr io.Writer) error {
	cfg, log, err := toolSetup(&f.common)
	if err != nil {
		return err
	}
	// As the relay, refuse a relay.url it would refuse, before any store
	// is made.
	own, err := nostr.ParseOwnURL(cfg.Relay.URL)
	if err != nil {
		return fmt.Errorf("relay.url: %w", err)
	}
	// Open the input first: a wrong path must not create a store.
	var bar progressBar
	in, size, closeIn, err := openInput(path, stdin, f.gzip, func(n int64) { bar.add(n) })
	if err != nil {
		return err
	}
	defer closeIn()
	ctx, stop := cli.Interruptible(ctx)
	defer stop()
	bar.b = newBar(stderr, f.quiet, "importing", size, true) // drawn at the first input read
	// A running petrel serve holds a pebble store: the input goes to it
	// through its control socket. Otherwise import opens the store.
	if cfg.Store.Backend == "pebble" && cli.ControlServed(cfg.Store.Path) {
		res, served, err := importThroughServe(ctx, cfg.Store.Path, f, in)
		if served {
			finishBar(bar.b)
			return reportImport(f, res, err, stdout)
		}
	}
	st, err := openToolStore(cfg, log, toolStoreOptions{create: true, noSync: true})
	if err != nil {
		return err
	}
	res, err := importer.Run(ctx, st, in, importer.Options{
		NoVerify:  f.noVerify,
		Workers:   f.workers,
		Batch:     f.batch,
		MaxLine:   f.maxLine,
		MaxErrors: f.maxErrors,
		OwnURL:    own,
	})
	if serr := syncToolStore(st); err == nil {
		err = serr
	}
	if cerr := st.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close store: %w", cerr)
	}
	if err == nil && (res == nil || !res.Interrupted) {
		err = dropRecycledLogs(st, cfg, log)
	}
	finishBar(bar.b)
	return reportImport(f, res, err, stdout)
}

// reportImport prints what an import did and returns the command's error:
// err, or the interruption, or with --strict the refused lines.
func reportImport(f *importFlags, res *importer.Result, err error, stdout io.Writer) error {
	if res != nil {
		if f.jsonOut {
			if jerr := printJSON(stdout, res); jerr != nil {
				return jerr
			}
		} else {
			fmt.Fprintln(stdout, importSummary(res))
		}
	}
	if res != nil && res.Interrupted && err == nil {
		return fmt.Errorf("interrupted after line %d: what was saved is kept; run the same import again to carry on (stored events are skipped as duplicates)", res.Lines)
	}
	if err == nil && f.strict && res != nil {
		if n := res.Invalid + res.BadID + res.BadSig + res.Failed; n > 0 {
			return fmt.Errorf("--strict: %d of %d lines refused (the others were saved)", n, res.Lines)
		}
	}
	return err
}

// stdinIsTerminal reports whether r is a terminal (a person at a shell,
// not a pipe or a file); tests replace it.
var stdinIsTerminal = defaultStdinIsTerminal

func defaultStdinIsTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progressBar is a nil-safe holder for a bar made after its feeder.
type progressBar struct{ b *progressbar.ProgressBar }

func (p *progressBar) add(n int64) {
	if p.b != nil {
		p.b.Add64(n)
	}
}

// importSummary is the human summary of an import.
func importSummary(r *importer.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "read %d lines (%s) in %.1fs: %d events, %.0f events/s (verifier %s)\n",
		r.Lines, humanBytes(r.Bytes), r.Seconds, r.Events, r.EventsPerSec, r.Verifier)
	fmt.Fprintf(&b, "stored %d, duplicate %d, superseded %d, deleted %d (and %d removed by deletions or newer versions)\n",
		r.Stored, r.Duplicate, r.Superseded, r.Deleted, r.Removed)
	fmt.Fprintf(&b, "skipped: ephemeral %d, expired %d, vanish for another relay %d, other messages %d, blank %d\n",
		r.Ephemeral, r.Expired, r.VanishElsewhere, r.Messages, r.Blank)
	fmt.Fprintf(&b, "refused: invalid %d, bad id %d, bad signature %d, store errors %d\n",
		r.Invalid, r.BadID, r.BadSig, r.Failed)
	for _, e := range r.Errors {
		if e.ID != "" {
			fmt.Fprintf(&b, "  line %d: %s (id %s)\n", e.Line, e.Err, e.ID)
		} else {
			fmt.Fprintf(&b, "  line %d: %s\n", e.Line, e.Err)
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}
