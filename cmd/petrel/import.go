package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
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
vanish (kind 62) apply when addressed to this relay (relay.url, or
ALL_RELAYS). Ephemeral events and events whose NIP-40 expiration has
passed are skipped and counted. The relay's write policy (allow lists,
rate limits, created_at window, PoW) does not apply: import is an
operator's tool.

The store is written without fsync during the import and synced once at
the end; an interrupted import keeps what it had saved, and running it
again skips what is already there. Import needs the data directory to
itself: stop petrel serve first.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "-"
			if len(args) == 1 {
				path = args[0]
			}
			return runImportCmd(cmd.Context(), &f, path, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f.common.register(cmd)
	fs := cmd.Flags()
	fs.BoolVar(&f.noVerify, "no-verify", false, "skip signature verification (ids are still checked)")
	fs.BoolVar(&f.gzip, "gzip", false, "the input is gzip-compressed (automatic for .gz names and gzip data)")
	fs.IntVar(&f.batch, "batch", defaultImportBatch, "events per store commit")
	fs.IntVar(&f.workers, "workers", 0, "parsing and verifying goroutines (0: one per CPU)")
	fs.IntVar(&f.maxLine, "max-line-bytes", defaultImportMaxLine, "longest line accepted; longer lines are counted invalid and skipped")
	fs.IntVar(&f.maxErrors, "show-errors", 10, "how many refused lines to list with their line numbers")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress bar")
	fs.BoolVar(&f.jsonOut, "json", false, "print the result as one JSON object instead of the summary")
	return cmd
}

// Defaults of importOptions.
const (
	defaultImportBatch   = 2048
	defaultImportMaxLine = 16 << 20
	importChunkLines     = 256     // lines handed to a worker at once
	importChunkBytes     = 1 << 20 // or this many bytes
)

// importOptions configures importEvents. The zero value verifies
// signatures with nostr.DefaultVerifier on one worker per CPU.
type importOptions struct {
	// NoVerify skips the signature check (ids are always checked).
	NoVerify bool
	// Verifier checks signatures. Default nostr.DefaultVerifier().
	Verifier nostr.Verifier
	// Workers parse and verify lines. Default GOMAXPROCS.
	Workers int
	// Batch is the number of events per store.Save. Default 2048.
	Batch int
	// MaxLine is the longest line in bytes. Default 16 MiB.
	MaxLine int
	// MaxErrors is how many refused lines are listed in the result.
	// Default 0 lists none.
	MaxErrors int
	// OwnURL is this relay's URL (relay.url): requests to vanish (kind 62)
	// are applied only when their "relay" tag names it or ALL_RELAYS.
	// When empty, loopback URLs count as this relay's, as in the relay.
	OwnURL string
	// Now is the time against which NIP-40 expirations are checked.
	// Default time.Now().
	Now int64
}

// importCounts are the per-outcome counts of an import.
type importCounts struct {
	Lines           int64 `json:"lines"`                  // lines read
	Blank           int64 `json:"blank"`                  // empty or whitespace-only lines
	Messages        int64 `json:"skipped_messages"`       // envelopes other than EVENT
	Events          int64 `json:"events"`                 // lines holding a well-formed event
	Stored          int64 `json:"stored"`                 // saved
	Duplicate       int64 `json:"duplicate"`              // already stored
	Superseded      int64 `json:"superseded"`             // an older replaceable/addressable version
	Deleted         int64 `json:"deleted"`                // deleted earlier (NIP-09, NIP-62): refused
	Removed         int64 `json:"removed"`                // events removed by stored ones (older versions, deletion targets)
	Ephemeral       int64 `json:"ephemeral"`              // kinds 20000-29999: skipped
	Expired         int64 `json:"expired"`                // NIP-40 expiration passed: skipped
	VanishElsewhere int64 `json:"vanish_for_other_relay"` // kind 62 not addressed to this relay: skipped
	Invalid         int64 `json:"invalid"`                // not an event, not a message, or too long
	BadID           int64 `json:"bad_id"`                 // id does not match the content
	BadSig          int64 `json:"bad_sig"`                // signature does not verify
	Failed          int64 `json:"failed"`                 // the store refused it (see errors)
}

func (c *importCounts) add(o *importCounts) {
	c.Lines += o.Lines
	c.Blank += o.Blank
	c.Messages += o.Messages
	c.Events += o.Events
	c.Stored += o.Stored
	c.Duplicate += o.Duplicate
	c.Superseded += o.Superseded
	c.Deleted += o.Deleted
	c.Removed += o.Removed
	c.Ephemeral += o.Ephemeral
	c.Expired += o.Expired
	c.VanishElsewhere += o.VanishElsewhere
	c.Invalid += o.Invalid
	c.BadID += o.BadID
	c.BadSig += o.BadSig
	c.Failed += o.Failed
}

// lineError is one refused line.
type lineError struct {
	Line int64  `json:"line"`
	ID   string `json:"id,omitempty"`
	Err  string `json:"error"`
}

// importResult is what importEvents did.
type importResult struct {
	importCounts
	Errors       []lineError `json:"errors,omitempty"` // the first MaxErrors refused lines, by line number
	Bytes        int64       `json:"bytes"`            // input bytes (uncompressed)
	Seconds      float64     `json:"seconds"`
	EventsPerSec float64     `json:"events_per_sec"` // Events / Seconds
	Verifier     string      `json:"verifier"`       // "none" with NoVerify
	Interrupted  bool        `json:"interrupted,omitempty"`
}

// String is the human summary.
func (r *importResult) String() string {
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

func runImportCmd(ctx context.Context, f *importFlags, path string, stdin io.Reader, stdout, stderr io.Writer) error {
	cfg, log, err := toolSetup(&f.common)
	if err != nil {
		return err
	}
	// Open the input first: a wrong path must not create a store.
	var bar progressBar
	in, size, closeIn, err := openInput(path, stdin, f.gzip, func(n int64) { bar.add(n) })
	if err != nil {
		return err
	}
	defer closeIn()
	st, err := openToolStore(cfg, log, toolStoreOptions{create: true, noSync: true})
	if err != nil {
		return err
	}
	bar.b = newBar(stderr, f.quiet, "importing", size, true)

	ctx, stop := interruptible(ctx)
	defer stop()
	res, err := importEvents(ctx, st, in, importOptions{
		NoVerify:  f.noVerify,
		Workers:   f.workers,
		Batch:     f.batch,
		MaxLine:   f.maxLine,
		MaxErrors: f.maxErrors,
		OwnURL:    cfg.Relay.URL,
	})
	if serr := syncToolStore(st); err == nil {
		err = serr
	}
	if cerr := st.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close store: %w", cerr)
	}
	finishBar(bar.b)
	if res != nil {
		if f.jsonOut {
			if jerr := printJSON(stdout, res); jerr != nil {
				return jerr
			}
		} else {
			fmt.Fprintln(stdout, res.String())
		}
	}
	if res != nil && res.Interrupted && err == nil {
		return fmt.Errorf("interrupted after line %d: what was saved is kept; run the same import again to carry on (stored events are skipped as duplicates)", res.Lines)
	}
	return err
}

// progressBar is a nil-safe holder for a bar made after its feeder.
type progressBar struct{ b *progressbar.ProgressBar }

func (p *progressBar) add(n int64) {
	if p.b != nil {
		p.b.Add64(n)
	}
}

// importChunk is a run of input lines and, once a worker has been through
// it (done is closed), the events and counts they gave.
type importChunk struct {
	first int64 // line number of lines[0]
	buf   []byte
	lines []lineSpan

	events  []*nostr.Event
	evLines []int64
	n       importCounts
	errs    []lineError
	done    chan struct{}
}

// lineSpan is one line in importChunk.buf; tooLong marks a line that was
// dropped for exceeding MaxLine.
type lineSpan struct {
	start, end int
	tooLong    bool
}

// importBatch is a batch of checked events on its way to the store.
type importBatch struct {
	events []*nostr.Event
	lines  []int64
}

// importer runs one import.
type importer struct {
	st        store.Store
	o         importOptions
	verifier  nostr.Verifier // nil: no signature check
	ownURL    string         // normalized
	chunkPool sync.Pool
}

// importEvents reads JSONL from r and saves the events into st, as
// described in `petrel import --help`. Lines are parsed and checked by
// o.Workers goroutines, in chunks; the chunks are put back in input order
// and saved in batches of o.Batch events by one goroutine, so the store
// sees the events in file order while the next batch is being checked.
// Memory stays bounded whatever the input's size: a few chunks per worker
// and two batches are in flight.
//
// The result is returned also with an error (what was done until then).
// When ctx ends, importEvents stops reading, checks and saves the lines
// already read (saves are not cancelled), and returns with Interrupted set
// and a nil error.
func importEvents(ctx context.Context, st store.Store, r io.Reader, o importOptions) (*importResult, error) {
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.Batch <= 0 {
		o.Batch = defaultImportBatch
	}
	if o.MaxLine <= 0 {
		o.MaxLine = defaultImportMaxLine
	}
	if o.Now == 0 {
		o.Now = time.Now().Unix()
	}
	im := &importer{st: st, o: o}
	res := &importResult{Verifier: "none"}
	if !o.NoVerify {
		im.verifier = o.Verifier
		if im.verifier == nil {
			im.verifier = nostr.DefaultVerifier()
		}
		res.Verifier = im.verifier.Name()
	}
	if o.OwnURL != "" {
		im.ownURL, _ = normalizeRelayURL(o.OwnURL)
	}
	start := time.Now()

	// Stages: reader -> (ordered, jobs) -> workers -> consumer (in order)
	// -> batches -> saver. stopRead ends the reader early.
	inflight := 4 * o.Workers
	ordered := make(chan *importChunk, inflight)
	jobs := make(chan *importChunk, inflight)
	batches := make(chan importBatch, 1)
	stopRead := make(chan struct{})
	var stopOnce sync.Once
	stop := func() { stopOnce.Do(func() { close(stopRead) }) }

	var readErr error
	var bytesRead int64
	go func() {
		defer close(ordered)
		defer close(jobs)
		bytesRead, readErr = im.read(ctx, r, stopRead, ordered, jobs)
	}()
	var wg sync.WaitGroup
	for range o.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range jobs {
				im.check(c)
				close(c.done)
			}
		}()
	}

	// The saver owns saved counts and save errors until it ends.
	var saved importCounts
	var saveErrs []lineError
	var saveErr error
	saverDone := make(chan struct{})
	go func() {
		defer close(saverDone)
		// Saves run to completion even when ctx ends: an interrupted
		// import keeps what it had checked and handed over.
		sctx := context.WithoutCancel(ctx)
		for b := range batches {
			if saveErr != nil {
				continue // drain
			}
			if err := im.save(sctx, b, &saved, &saveErrs); err != nil {
				saveErr = err
				stop()
			}
		}
	}()

	// The consumer: chunks in input order, cut into batches.
	var checked importCounts
	var checkErrs []lineError
	batch := importBatch{}
	for c := range ordered {
		<-c.done
		checked.add(&c.n)
		if room := o.MaxErrors - len(checkErrs); room > 0 {
			checkErrs = append(checkErrs, c.errs[:min(room, len(c.errs))]...)
		}
		for i, ev := range c.events {
			batch.events = append(batch.events, ev)
			batch.lines = append(batch.lines, c.evLines[i])
			if len(batch.events) == o.Batch {
				batches <- batch
				batch = importBatch{}
			}
		}
		im.putChunk(c)
	}
	if len(batch.events) > 0 {
		batches <- batch
	}
	close(batches)
	wg.Wait()
	<-saverDone

	res.importCounts = checked
	res.add(&saved)
	res.Errors = append(checkErrs, saveErrs...)
	slices.SortStableFunc(res.Errors, func(a, b lineError) int { return int(a.Line - b.Line) })
	res.Errors = res.Errors[:min(len(res.Errors), o.MaxErrors)]
	res.Bytes = bytesRead
	d := time.Since(start)
	res.Seconds = d.Seconds()
	res.EventsPerSec = rate(res.Events, d)
	if saveErr != nil {
		return res, fmt.Errorf("save: %w", saveErr)
	}
	if readErr != nil {
		if errors.Is(readErr, context.Canceled) || errors.Is(readErr, context.DeadlineExceeded) {
			res.Interrupted = true
			return res, nil
		}
		return res, fmt.Errorf("read line %d: %w", res.Lines+1, readErr)
	}
	return res, nil
}

func (im *importer) getChunk(first int64) *importChunk {
	c, _ := im.chunkPool.Get().(*importChunk)
	if c == nil {
		c = &importChunk{buf: make([]byte, 0, importChunkBytes+4096)}
	}
	c.first = first
	c.done = make(chan struct{})
	return c
}

// putChunk recycles c; its events now belong to a batch.
func (im *importer) putChunk(c *importChunk) {
	if cap(c.buf) > 4*importChunkBytes {
		return // a very long line grew it: let it go
	}
	c.buf = c.buf[:0]
	c.lines = c.lines[:0]
	c.events = nil
	c.evLines = nil
	c.errs = c.errs[:0]
	c.n = importCounts{}
	im.chunkPool.Put(c)
}

// read cuts r into chunks of lines and hands each to the workers (jobs)
// and, in order, to the consumer (ordered). It returns the bytes read.
func (im *importer) read(ctx context.Context, r io.Reader, stop <-chan struct{}, ordered, jobs chan<- *importChunk) (int64, error) {
	br, ok := r.(*bufio.Reader)
	if !ok || br.Size() < 64<<10 {
		br = bufio.NewReaderSize(r, 1<<20)
	}
	var total int64
	line := int64(0)
	c := im.getChunk(1)
	send := func() error {
		if len(c.lines) == 0 {
			return nil
		}
		select {
		case ordered <- c:
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return errStopped
		}
		jobs <- c // never blocks for long: workers drain jobs
		c = im.getChunk(line + 1)
		return nil
	}
	start := -1 // start in c.buf of a line read in several pieces
	tooLong := false
	var rerr error
	for rerr == nil {
		var frag []byte
		frag, rerr = br.ReadSlice('\n')
		total += int64(len(frag))
		if rerr == bufio.ErrBufferFull {
			rerr = nil
			if !tooLong {
				if start < 0 {
					start = len(c.buf)
				}
				c.buf = append(c.buf, frag...)
				if len(c.buf)-start > im.o.MaxLine {
					c.buf = c.buf[:start]
					tooLong = true
				}
			}
			continue
		}
		if len(frag) == 0 {
			break
		}
		line++
		switch {
		case tooLong:
			c.lines = append(c.lines, lineSpan{tooLong: true})
		default:
			if start < 0 {
				start = len(c.buf)
			}
			c.buf = append(c.buf, frag...)
			n := len(c.buf) - start
			if c.buf[len(c.buf)-1] == '\n' {
				n--
			}
			if n > im.o.MaxLine {
				c.buf = c.buf[:start]
				c.lines = append(c.lines, lineSpan{tooLong: true})
			} else {
				c.lines = append(c.lines, lineSpan{start: start, end: len(c.buf)})
			}
		}
		start, tooLong = -1, false
		if len(c.lines) >= importChunkLines || len(c.buf) >= importChunkBytes {
			if serr := send(); serr != nil {
				return total, serr
			}
		}
		if line&1023 == 0 && ctx.Err() != nil {
			return total, ctx.Err()
		}
	}
	if rerr != io.EOF {
		return total, rerr
	}
	if err := send(); err != nil {
		return total, err
	}
	return total, nil
}

// errStopped ends the reader when the saver failed.
var errStopped = errors.New("import stopped")

// check parses and verifies the lines of c.
func (im *importer) check(c *importChunk) {
	for i, ls := range c.lines {
		no := c.first + int64(i)
		c.n.Lines++
		if ls.tooLong {
			c.n.Invalid++
			im.lineErr(c, no, "", fmt.Sprintf("line longer than %d bytes", im.o.MaxLine))
			continue
		}
		im.checkLine(c, no, c.buf[ls.start:ls.end])
	}
}

func (im *importer) lineErr(c *importChunk, no int64, id string, msg string) {
	if len(c.errs) < im.o.MaxErrors {
		c.errs = append(c.errs, lineError{Line: no, ID: id, Err: msg})
	}
}

func (im *importer) checkLine(c *importChunk, no int64, line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		c.n.Blank++
		return
	}
	ev, isEvent, err := parseImportLine(line)
	switch {
	case err != nil:
		c.n.Invalid++
		im.lineErr(c, no, "", err.Error())
		return
	case !isEvent:
		c.n.Messages++
		return
	}
	c.n.Events++
	switch {
	case ev.Class() == nostr.Ephemeral:
		c.n.Ephemeral++
		return
	case ev.IsExpired(im.o.Now):
		c.n.Expired++
		return
	case ev.Kind == nostr.KindRequestToVanish && !im.vanishForUs(ev):
		c.n.VanishElsewhere++
		return
	}
	if !nostr.CheckID(ev) {
		c.n.BadID++
		im.lineErr(c, no, ev.ID.Hex(), "id does not match the event")
		return
	}
	if im.verifier != nil && !nostr.VerifyEvent(im.verifier, ev) {
		c.n.BadSig++
		im.lineErr(c, no, ev.ID.Hex(), "bad signature")
		return
	}
	c.events = append(c.events, ev)
	c.evLines = append(c.evLines, no)
}

// parseImportLine reads one non-blank line: an event object, or an
// envelope. isEvent is false (with a nil error) for an envelope that is
// not an EVENT.
func parseImportLine(line []byte) (ev *nostr.Event, isEvent bool, err error) {
	if line[0] != '[' {
		ev, err := nostr.ParseEvent(line, nil)
		if err != nil {
			return nil, false, err
		}
		return ev, true, nil
	}
	// ["EVENT",{...}] is a client message, ["EVENT","sub",{...}] a relay
	// message: the second element tells which parser to try first.
	relayFirst := secondElemIsString(line)
	for try := range 2 {
		if (try == 0) == relayFirst {
			m, rerr := nostr.ParseRelayMessage(line)
			if rerr == nil {
				return m.Event, m.Type == nostr.LabelEvent, nil
			}
			if try == 0 {
				err = rerr
			}
		} else {
			m, cerr := nostr.ParseClientMessage(line, nil)
			if cerr == nil {
				return m.Event, m.Type == nostr.MsgEvent, nil
			}
			if try == 0 {
				err = cerr
			}
		}
	}
	return nil, false, err
}

// secondElemIsString reports whether the JSON array in b has a string as
// its second element (after a string label). It only looks, never fails.
func secondElemIsString(b []byte) bool {
	i := 1
	ws := func() {
		for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
			i++
		}
	}
	ws()
	if i >= len(b) || b[i] != '"' {
		return false
	}
	for i++; i < len(b) && b[i] != '"'; i++ {
		if b[i] == '\\' {
			i++
		}
	}
	i++
	ws()
	if i >= len(b) || b[i] != ',' {
		return false
	}
	i++
	ws()
	return i < len(b) && b[i] == '"'
}

// vanishForUs reports whether a request to vanish is addressed to this
// relay: a "relay" tag with ALL_RELAYS or this relay's URL (any loopback
// URL when the relay's URL is not configured), as the relay decides.
func (im *importer) vanishForUs(ev *nostr.Event) bool {
	for _, t := range ev.Tags {
		if len(t) < 2 || t[0] != "relay" {
			continue
		}
		if t[1] == "ALL_RELAYS" {
			return true
		}
		n, ok := normalizeRelayURL(t[1])
		if !ok {
			continue
		}
		if im.ownURL != "" && n == im.ownURL {
			return true
		}
		if im.ownURL == "" {
			u, _ := url.Parse(n)
			if ip := net.ParseIP(u.Hostname()); (ip != nil && ip.IsLoopback()) || u.Hostname() == "localhost" {
				return true
			}
		}
	}
	return false
}

// normalizeRelayURL returns the form in which relay URLs are compared:
// scheme ws or wss (http and https map to them), lowercase host, default
// port dropped, no trailing slash.
func normalizeRelayURL(s string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.Host == "" || u.User != nil {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	switch scheme {
	case "http":
		scheme = "ws"
	case "https":
		scheme = "wss"
	case "ws", "wss":
	default:
		return "", false
	}
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if (scheme == "ws" && port == "80") || (scheme == "wss" && port == "443") {
		port = ""
	}
	if port != "" {
		host = net.JoinHostPort(host, port)
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return scheme + "://" + host + strings.TrimRight(u.EscapedPath(), "/"), true
}

// save stores one batch and counts the outcomes.
func (im *importer) save(ctx context.Context, b importBatch, n *importCounts, errs *[]lineError) error {
	res, err := im.st.Save(ctx, b.events)
	if err != nil {
		return err
	}
	for i, r := range res {
		switch r.Outcome {
		case store.Stored:
			n.Stored++
			n.Removed += int64(len(r.Removed))
		case store.Duplicate:
			n.Duplicate++
		case store.Superseded:
			n.Superseded++
		case store.Deleted:
			n.Deleted++
		default:
			if errors.Is(r.Err, store.ErrEphemeral) {
				n.Ephemeral++
				continue
			}
			n.Failed++
			if len(*errs) < im.o.MaxErrors {
				msg := "store failed"
				if r.Err != nil {
					msg = r.Err.Error()
				}
				*errs = append(*errs, lineError{Line: b.lines[i], ID: b.events[i].ID.Hex(), Err: msg})
			}
		}
	}
	return nil
}
