package importer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// chunk is a run of input lines and, once a worker has been through it
// (done is closed), the events and counts they gave.
type chunk struct {
	first int64 // line number of lines[0]
	buf   []byte
	lines []lineSpan

	events  []*nostr.Event
	evLines []int64
	n       Counts
	errs    []LineError
	done    chan struct{}
}

// lineSpan is one line in chunk.buf; tooLong marks a line that was
// dropped for exceeding MaxLine.
type lineSpan struct {
	start, end int
	tooLong    bool
}

// batch is a batch of checked events on its way to the store.
type batch struct {
	events []*nostr.Event
	lines  []int64
}

// pipeline runs one import.
type pipeline struct {
	st        store.Store
	o         Options
	verifier  nostr.Verifier // nil: no signature check
	chunkPool sync.Pool
}

// errStopped ends the reader when the saver failed.
var errStopped = errors.New("importer: stopped")

// Run reads JSONL from r and saves the events into st, as the package
// documentation describes. Lines are parsed and checked by o.Workers
// goroutines, in chunks; the chunks are put back in input order and saved
// in batches of o.Batch events by one goroutine.
//
// The result is returned also with an error (what was done until then).
// When ctx ends, Run stops reading, checks and saves the lines already
// read (saves are not cancelled), and returns with Interrupted set and a
// nil error. Run does not sync or close st.
func Run(ctx context.Context, st store.Store, r io.Reader, o Options) (*Result, error) {
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.Batch <= 0 {
		o.Batch = DefaultBatch
	}
	if o.MaxLine <= 0 {
		o.MaxLine = DefaultMaxLine
	}
	if o.Now == 0 {
		o.Now = time.Now().Unix()
	}
	p := &pipeline{st: st, o: o}
	res := &Result{Verifier: "none"}
	if !o.NoVerify {
		p.verifier = o.Verifier
		if p.verifier == nil {
			p.verifier = nostr.DefaultVerifier()
		}
		res.Verifier = p.verifier.Name()
	}
	start := time.Now()

	// Stages: reader -> (ordered, jobs) -> workers -> consumer (in order)
	// -> batches -> saver. stopRead ends the reader early.
	inflight := 4 * o.Workers
	ordered := make(chan *chunk, inflight)
	jobs := make(chan *chunk, inflight)
	batches := make(chan batch, 1)
	stopRead := make(chan struct{})
	var stopOnce sync.Once
	stop := func() { stopOnce.Do(func() { close(stopRead) }) }

	var readErr error
	var bytesRead int64
	go func() {
		defer close(ordered)
		defer close(jobs)
		bytesRead, readErr = p.read(ctx, r, stopRead, ordered, jobs)
	}()
	var wg sync.WaitGroup
	for range o.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range jobs {
				p.check(c)
				close(c.done)
			}
		}()
	}

	// The saver owns saved counts and save errors until it ends.
	var saved Counts
	var saveErrs []LineError
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
			if err := p.save(sctx, b, &saved, &saveErrs); err != nil {
				saveErr = err
				stop()
			}
		}
	}()

	// The consumer: chunks in input order, cut into batches.
	var checked Counts
	var checkErrs []LineError
	b := batch{}
	for c := range ordered {
		<-c.done
		checked.add(&c.n)
		if room := o.MaxErrors - len(checkErrs); room > 0 {
			checkErrs = append(checkErrs, c.errs[:min(room, len(c.errs))]...)
		}
		for i, ev := range c.events {
			b.events = append(b.events, ev)
			b.lines = append(b.lines, c.evLines[i])
			if len(b.events) == o.Batch {
				batches <- b
				b = batch{}
			}
		}
		p.putChunk(c)
	}
	if len(b.events) > 0 {
		batches <- b
	}
	close(batches)
	wg.Wait()
	<-saverDone

	res.Counts = checked
	res.add(&saved)
	res.Errors = append(checkErrs, saveErrs...)
	slices.SortStableFunc(res.Errors, func(a, b LineError) int { return int(a.Line - b.Line) })
	res.Errors = res.Errors[:min(len(res.Errors), o.MaxErrors)]
	res.Bytes = bytesRead
	d := time.Since(start)
	res.Seconds = d.Seconds()
	if d > 0 {
		res.EventsPerSec = float64(res.Events) / d.Seconds()
	}
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

func (p *pipeline) getChunk(first int64) *chunk {
	c, _ := p.chunkPool.Get().(*chunk)
	if c == nil {
		c = &chunk{buf: make([]byte, 0, chunkBytes+4096)}
	}
	c.first = first
	c.done = make(chan struct{})
	return c
}

// putChunk recycles c; its events now belong to a batch.
func (p *pipeline) putChunk(c *chunk) {
	if cap(c.buf) > 4*chunkBytes {
		return // a very long line grew it: let it go
	}
	c.buf = c.buf[:0]
	c.lines = c.lines[:0]
	c.events = nil
	c.evLines = nil
	c.errs = c.errs[:0]
	c.n = Counts{}
	p.chunkPool.Put(c)
}

// read cuts r into chunks of lines and hands each to the workers (jobs)
// and, in order, to the consumer (ordered). It returns the bytes read.
func (p *pipeline) read(ctx context.Context, r io.Reader, stop <-chan struct{}, ordered, jobs chan<- *chunk) (int64, error) {
	br, ok := r.(*bufio.Reader)
	if !ok || br.Size() < 64<<10 {
		br = bufio.NewReaderSize(r, 1<<20)
	}
	var total int64
	line := int64(0)
	c := p.getChunk(1)
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
		c = p.getChunk(line + 1)
		return nil
	}
	// flush hands over the chunk being filled when reading stops early
	// (ctx ended, or the input failed): its lines, read whole, are
	// checked and saved as at the end of the input. Not after a save
	// failed (stop): nothing more is saved then. The consumer drains
	// ordered until it is closed, so the sends do not block for long.
	flush := func() {
		select {
		case <-stop:
			return
		default:
		}
		if len(c.lines) > 0 {
			ordered <- c
			jobs <- c
		}
	}
	start := -1 // start in c.buf of a line read in several pieces
	tooLong := false
	var rerr error
	for rerr == nil {
		var frag []byte
		frag, rerr = br.ReadSlice('\n')
		total += int64(len(frag))
		if rerr != nil && rerr != io.EOF && rerr != bufio.ErrBufferFull {
			break // the input failed: a line it cut is not a line
		}
		if rerr == bufio.ErrBufferFull {
			rerr = nil
			if !tooLong {
				if start < 0 {
					start = len(c.buf)
				}
				c.buf = append(c.buf, frag...)
				if len(c.buf)-start > p.o.MaxLine {
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
			if n > p.o.MaxLine {
				c.buf = c.buf[:start]
				c.lines = append(c.lines, lineSpan{tooLong: true})
			} else {
				c.lines = append(c.lines, lineSpan{start: start, end: len(c.buf)})
			}
		}
		start, tooLong = -1, false
		if len(c.lines) >= chunkLines || len(c.buf) >= chunkBytes {
			if serr := send(); serr != nil {
				flush()
				return total, serr
			}
		}
		if line&1023 == 0 && ctx.Err() != nil {
			flush()
			return total, ctx.Err()
		}
	}
	if rerr != io.EOF {
		flush()
		return total, rerr
	}
	if err := send(); err != nil {
		return total, err
	}
	return total, nil
}

// save stores one batch and counts the outcomes.
func (p *pipeline) save(ctx context.Context, b batch, n *Counts, errs *[]LineError) error {
	res, err := p.st.Save(ctx, b.events)
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
			if len(*errs) < p.o.MaxErrors {
				msg := "store failed"
				if r.Err != nil {
					msg = r.Err.Error()
				}
				*errs = append(*errs, LineError{Line: b.lines[i], ID: b.events[i].ID.Hex(), Err: msg})
			}
		}
	}
	return nil
}
