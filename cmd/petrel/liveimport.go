package main

// petrel import beside a running petrel serve: the relay holds the pebble
// store, so import streams its input (decompressed) to the relay's control
// socket (POST /import), and the relay runs the same importer on its own
// store, beside its writes. Ctrl-C ends the input at the next line break,
// so the relay saves what it was sent and answers the summary.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/petrel-relay/petrel/internal/cli"
	"github.com/petrel-relay/petrel/internal/importer"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// importAnswer is the answer to POST /import: what the import did, and
// the error that stopped it, if one did. A relay that stops during the
// import first sends {"stopping": true}, at once.
type importAnswer struct {
	Stopping bool             `json:"stopping,omitempty"`
	Result   *importer.Result `json:"result,omitempty"`
	Error    string           `json:"error,omitempty"`
}

// importQuery carries import's options in POST /import's query string
// (the body is the input).
func importQuery(f *importFlags) string {
	q := url.Values{}
	if f.noVerify {
		q.Set("no_verify", "1")
	}
	for name, v := range map[string]int{"batch": f.batch, "workers": f.workers, "max_line": f.maxLine, "max_errors": f.maxErrors} {
		if v > 0 {
			q.Set(name, strconv.Itoa(v))
		}
	}
	return q.Encode()
}

// importOptions reads importQuery's options back.
func importOptions(q url.Values) (importer.Options, error) {
	var o importer.Options
	o.NoVerify = q.Get("no_verify") == "1"
	for name, p := range map[string]*int{"batch": &o.Batch, "workers": &o.Workers, "max_line": &o.MaxLine, "max_errors": &o.MaxErrors} {
		v := q.Get(name)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return o, fmt.Errorf("%s: want a whole number of at least 0, not %q", name, v)
		}
		*p = n
	}
	return o, nil
}

// serveImport answers POST /import: the body, JSONL, goes through the
// importer into the relay's store, and the answer is the result. What is
// saved is served by stored queries, not pushed to live subscriptions, as
// an import into the postgres store beside running nodes. One import runs
// at a time.
func (c *controlServer) serveImport(w http.ResponseWriter, r *http.Request, st store.Store, own nostr.OwnURL) {
	// The answer may come before the input's end (a refusal, or the
	// relay stopping): full duplex, so that it is written at once rather
	// than after the server drains the input (which may be a quiet pipe).
	rc := http.NewResponseController(w)
	_ = rc.EnableFullDuplex()
	o, err := importOptions(r.URL.Query())
	if err != nil {
		answerEarly(w, r, rc, http.StatusBadRequest, cli.ControlError{Error: err.Error()})
		return
	}
	if !c.importing.CompareAndSwap(false, true) {
		answerEarly(w, r, rc, http.StatusConflict, cli.ControlError{Error: "another petrel import is running into this relay: wait for it to finish"})
		return
	}
	defer c.importing.Store(false)
	o.OwnURL = own
	c.log.Info("import started (petrel import)", "no_verify", o.NoVerify)
	// When the relay stops, it says so at once (a first line of the
	// answer, {"stopping": true}): petrel import then ends its input at
	// the next line break, and what it sent is saved and answered. The
	// import itself is not cancelled: its input ends, or the connection
	// does (the client gone, or the relay's shutdown out of time).
	var answerMu sync.Mutex
	answered, toldStopping := false, false
	defer context.AfterFunc(c.stopping, func() {
		answerMu.Lock()
		defer answerMu.Unlock()
		if !answered {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(importAnswer{Stopping: true})
			_ = rc.Flush()
			toldStopping = true
		}
	})()
	res, err := importer.Run(context.WithoutCancel(r.Context()), st, r.Body, o)
	answerMu.Lock()
	defer answerMu.Unlock()
	answered = true
	if c.stopping.Err() != nil && res != nil {
		res.Interrupted = true
		err = fmt.Errorf(stoppingPrefix+"it stopped the import after line %d, and what it saved is kept: run the same import again once the relay is back (stored events are skipped as duplicates)", res.Lines)
	}
	ans := importAnswer{Result: res}
	if err != nil {
		ans.Error = err.Error()
	}
	switch {
	case res == nil:
		c.log.Warn("import failed (petrel import)", "err", err)
	case c.stopping.Err() != nil:
		c.log.Info("import stopped by the shutdown (petrel import): what was saved is kept", "lines", res.Lines, "stored", res.Stored)
	case err != nil:
		c.log.Warn("import stopped (petrel import): what was saved is kept", "lines", res.Lines, "stored", res.Stored, "err", err)
	default:
		c.log.Info("events imported (petrel import)", "lines", res.Lines, "stored", res.Stored, "duplicate", res.Duplicate, "superseded", res.Superseded, "refused", res.Invalid+res.BadID+res.BadSig+res.Failed, "seconds", res.Seconds)
	}
	if toldStopping { // the answer has begun
		_ = json.NewEncoder(w).Encode(ans)
		return
	}
	controlReply(w, http.StatusOK, ans)
}

// answerEarly answers an import before its input has ended, then reads
// the rest of the input, for at most answerDrain, until the client ends
// it (petrel import does when the answer begins): a client still sending
// when the connection closed would fail its write and lose the answer.
func answerEarly(w http.ResponseWriter, r *http.Request, rc *http.ResponseController, code int, v any) {
	controlReply(w, code, v)
	_ = rc.Flush()
	_ = rc.SetReadDeadline(time.Now().Add(answerDrain))
	_, _ = io.Copy(io.Discard, r.Body)
}

// answerDrain bounds answerEarly's wait for the end of the input (a
// variable for TestImportAnswerDrainBound).
var answerDrain = 5 * time.Second

// errImportStopped is the answer of a relay that stopped (or closed the
// connection) before it answered the import's result.
var errImportStopped = errors.New("the running relay stopped answering before the import was done: what it saved is kept; run the same import again to carry on (stored events are skipped as duplicates)")

// importThroughServe is petrel import's run when a relay holds the store
// in dir: in is sent to it, and when ctx ends the input stops at the next
// line break (the result then says Interrupted). served is false when no
// relay answers; nothing was read from in then.
func importThroughServe(ctx context.Context, dir string, f *importFlags, in io.Reader) (res *importer.Result, served bool, err error) {
	body := newImportBody(ctx, in, f.maxLine)
	defer close(body.quit)
	// The request outlives ctx: the input ends at a line break and the
	// relay answers what it saved. A second Ctrl-C ends the process.
	resp, served, err := cli.PostControlStream(context.WithoutCancel(ctx), dir, "import?"+importQuery(f), "application/x-ndjson", body, body.sig)
	switch {
	case errors.Is(err, cli.ErrOlderServe):
		err = fmt.Errorf("%w (it cannot import beside itself)", err)
	case served && err != nil && (body.wasLost() || connectionLost(err)):
		err = errImportStopped
	}
	if !served || err != nil {
		return nil, served, err
	}
	defer resp.Body.Close()
	var ans importAnswer
	for dec := json.NewDecoder(resp.Body); ans.Result == nil; {
		ans = importAnswer{}
		if dec.Decode(&ans) != nil || (!ans.Stopping && ans.Result == nil) {
			return nil, true, errImportStopped
		}
	}
	res = ans.Result
	if body.cut.Load() {
		res.Interrupted = true
	}
	switch ierr := body.inputError(); {
	case ans.Error != "":
		err = errors.New(ans.Error)
	case ierr != nil:
		// As an import into a store it opened says it.
		err = fmt.Errorf("read line %d: %w", res.Lines+1, ierr)
	}
	return res, true, err
}

// connectionLost reports whether err is the control connection breaking
// (the relay stopped, or closed it), not an answer.
func connectionLost(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// importBody is the request body of an import through the relay. It
// reads the input in a goroutine, so that it stops waiting for input (a
// pipe may be idle) when ctx ends, when the relay answers (it has stopped
// reading: a refusal, or its shutdown), or when the connection to the
// relay breaks. It sends whole lines only: a line is held until its line
// break comes (or the input's end; a line longer than the import takes is
// sent as it comes, to be refused whole), so an input that fails (a
// truncated gzip file) or is interrupted ends the body cleanly at a line
// break, and the relay answers what it saved of the lines before.
type importBody struct {
	ctx     context.Context
	in      io.Reader
	maxLine int
	started sync.Once // the pump starts at the first Read: a request never sent reads nothing
	chunks  chan inputChunk
	sig     *cli.StreamSignals // told by the connection (cli.PostControlStream)
	quit    chan struct{}      // closed when the request is over
	ready   []byte             // whole lines to send (at the input's end, its last bytes)
	held    []byte             // the line begun, held until whole
	err     error              // the input's error or io.EOF, once ready is sent
	midLine bool               // the last Read stopped inside a line of ready
	cut     atomic.Bool        // the input was stopped by ctx
	inErr   atomic.Pointer[error]
}

type inputChunk struct {
	b   []byte
	err error
}

// errRelayLost ends the body when the connection to the relay breaks.
var errRelayLost = errors.New("the connection to the running relay broke")

func newImportBody(ctx context.Context, in io.Reader, maxLine int) *importBody {
	if maxLine <= 0 {
		maxLine = importer.DefaultMaxLine
	}
	return &importBody{ctx: ctx, in: in, maxLine: maxLine, chunks: make(chan inputChunk), sig: cli.NewStreamSignals(), quit: make(chan struct{})}
}

// inputError returns the error the input failed with, if it did: the
// body ended at the line break before it.
func (b *importBody) inputError() error {
	if p := b.inErr.Load(); p != nil {
		return *p
	}
	return nil
}

// take adds a chunk of the input to what is held: its whole lines become
// ready to send, the line it leaves begun is held (dropped when the
// input fails there), and at the input's end everything is ready.
func (b *importBody) take(c inputChunk) {
	b.err = c.err
	data := c.b
	if len(b.held) > 0 {
		data = append(b.held, c.b...)
		b.held = nil
	}
	if c.err == io.EOF {
		b.ready = data // the last line needs no line break
		return
	}
	// The held part has no line break: look in the new bytes only (a long
	// line comes in many chunks).
	i := bytes.LastIndexByte(c.b, '\n')
	if i >= 0 {
		i += len(data) - len(c.b)
	}
	switch {
	case c.err != nil:
		b.ready = data[:i+1] // the line begun is dropped
	case len(data)-(i+1) > b.maxLine:
		b.ready = data // too long to be taken: sent as it comes
	case i < 0:
		b.held = data // no line break yet: held whole (data is ours), grown by append
	default:
		b.ready = data[:i+1]
		b.held = append([]byte(nil), data[i+1:]...) // the short tail after the last break
	}
}

// pump reads the input and hands it over a chunk at a time.
func (b *importBody) pump(in io.Reader) {
	for {
		buf := make([]byte, 64<<10)
		n, err := in.Read(buf)
		select {
		case b.chunks <- inputChunk{buf[:n], err}:
		case <-b.sig.Lost:
			return
		case <-b.quit:
			return
		}
		if err != nil {
			return
		}
	}
}

func (b *importBody) wasLost() bool { return closed(b.sig.Lost) }

func (b *importBody) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	b.started.Do(func() { go b.pump(b.in) })
	for {
		// Interrupted (ctx), or the relay has answered (it refused, or
		// it is stopping): the input ends at the next line break.
		canceled := b.ctx.Err() != nil
		ending := canceled || closed(b.sig.Answered)
		if ending && !b.midLine {
			if canceled {
				b.cut.Store(true)
			}
			return 0, io.EOF
		}
		if len(b.ready) > 0 {
			q := b.ready
			if ending {
				if i := bytes.IndexByte(q, '\n'); i >= 0 {
					q = q[:i+1]
				}
			}
			n := copy(p, q)
			b.ready = b.ready[n:]
			b.midLine = p[n-1] != '\n'
			return n, nil
		}
		if b.err != nil {
			if b.err != io.EOF {
				err := b.err
				b.inErr.CompareAndSwap(nil, &err)
			}
			return 0, io.EOF
		}
		var stop, answered <-chan struct{}
		if !ending {
			stop, answered = b.ctx.Done(), b.sig.Answered
		}
		select {
		case c := <-b.chunks:
			b.take(c)
		case <-stop: // cut at a line break, or finish the line begun
		case <-answered:
		case <-b.sig.Lost:
			return 0, errRelayLost
		case <-b.quit:
			return 0, io.ErrClosedPipe
		}
	}
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
