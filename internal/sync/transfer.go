package sync

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	gosync "sync"
	"time"

	"github.com/petrel-relay/petrel/internal/client"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// source reads events by id.
type source interface {
	// chunk is the most ids one fetch should ask for.
	chunk() int
	// fetch returns the events with these ids that the source has and
	// that pass its checks; t counts what it drops.
	fetch(ctx context.Context, ids []nostr.ID, t *Transfer) ([]*nostr.Event, error)
}

// sink takes events.
type sink interface {
	// put hands events to the target and counts the outcomes in t.
	put(ctx context.Context, events []*nostr.Event, t *Transfer) error
}

// transfer moves the events with ids from src to dst: one goroutine
// fetches chunks (at most two ahead) while this one puts them.
func (s *syncer) transfer(ctx context.Context, phase string, ids []nostr.ID, src source, dst sink, t *Transfer) error {
	if claim := s.o.Claim; claim != nil {
		dir := Down // the transfers are s.res.Down and s.res.Up
		if t == &s.res.Up {
			dir = Up
		}
		kept := ids[:0:0]
		for _, id := range ids {
			if claim(dir, id) {
				kept = append(kept, id)
			} else {
				t.Skipped++
			}
		}
		ids = kept
		t.Wanted = len(ids)
	}
	if len(ids) == 0 {
		return nil
	}
	s.phase(phase, int64(len(ids)))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type batch struct {
		n      int
		events []*nostr.Event
	}
	ch := make(chan batch, 2)
	var ferr error
	var ft Transfer // fetch-side counts, merged at the end
	go func() {
		defer close(ch)
		step := src.chunk()
		for i := 0; i < len(ids); i += step {
			part := ids[i:min(i+step, len(ids))]
			evs, err := src.fetch(ctx, part, &ft)
			if err != nil {
				ferr = err
				return
			}
			select {
			case ch <- batch{len(part), evs}:
			case <-ctx.Done():
				// Stopped before the last chunk: the transfer is not
				// complete, and must not be reported as if it were.
				ferr = ctx.Err()
				return
			}
		}
	}()
	var perr error
	for b := range ch {
		if perr == nil {
			perr = dst.put(ctx, b.events, t)
			if perr != nil {
				cancel()
			}
		}
		if s.o.Progress != nil {
			s.o.Progress.Add(int64(b.n))
		}
	}
	t.Missing += ft.Missing
	t.Invalid += ft.Invalid
	if perr != nil {
		return perr
	}
	return ferr
}

// relaySource fetches events from a relay with REQ by ids, and checks
// each one's id and signature.
type relaySource struct {
	s   *syncer
	c   *client.Conn
	inf *client.Info
}

func (r *relaySource) chunk() int {
	n := r.s.o.IDsPerReq
	if l := r.inf.Limitation.MaxLimit; l > 0 {
		n = min(n, l)
	}
	if m := r.inf.Limitation.MaxMessageLength; m > 0 {
		n = min(n, (m-200)/67) // `"<64 hex>",` per id
	}
	return max(n, 1)
}

func (r *relaySource) fetch(ctx context.Context, ids []nostr.ID, t *Transfer) ([]*nostr.Event, error) {
	f := nostr.Filter{IDs: ids, Present: nostr.PresentIDs, Limit: len(ids), HasLimit: true}
	got, err := r.s.req(ctx, r.c, &f)
	if err != nil {
		return nil, err
	}
	want := make(map[nostr.ID]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	ok := verifyAll(r.s.o.Verifier, got)
	out := got[:0]
	for i, ev := range got {
		switch {
		case !want[ev.ID]:
			t.Invalid++ // not asked for, or sent twice
		case !ok[i]:
			t.Invalid++
			delete(want, ev.ID)
		default:
			out = append(out, ev)
			delete(want, ev.ID)
		}
	}
	t.Missing += len(want)
	return out, nil
}

// req sends one REQ with filter f and returns its events up to EOSE. A
// refusal "auth-required:" is answered with AUTH (Options.AuthKey) and
// the REQ sent once more.
func (s *syncer) req(ctx context.Context, c *client.Conn, f *nostr.Filter) ([]*nostr.Event, error) {
	for {
		out, err := s.reqOnce(ctx, c, f)
		if !isAuthRequired(err) {
			return out, err
		}
		if err := s.authenticate(ctx, c, err); err != nil {
			return nil, err
		}
	}
}

func (s *syncer) reqOnce(ctx context.Context, c *client.Conn, f *nostr.Filter) ([]*nostr.Event, error) {
	sub, err := c.Req(s.nextSubID("req"), *f)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	var out []*nostr.Event
	timer := time.NewTimer(s.o.Timeout)
	defer timer.Stop()
	for {
		select {
		case m, ok := <-sub.Messages():
			if !ok {
				return nil, c.Err()
			}
			switch m.Type {
			case nostr.LabelEvent:
				out = append(out, m.Event)
				timer.Reset(s.o.Timeout)
			case nostr.LabelEOSE:
				_ = sub.Close()
				return out, nil
			case nostr.LabelClosed:
				if client.Prefix(m.Message) == "auth-required" {
					return nil, s.authRefusal(c, "REQ", m.Message)
				}
				return nil, fmt.Errorf("%s refused REQ: %s", c.URL(), m.Message)
			}
		case <-timer.C:
			return nil, fmt.Errorf("%s: no EOSE within %v", c.URL(), s.o.Timeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// verifyAll checks the ids and signatures of events on all CPUs and
// reports which are valid.
func verifyAll(v nostr.Verifier, events []*nostr.Event) []bool {
	ok := make([]bool, len(events))
	workers := min(runtime.GOMAXPROCS(0), (len(events)+15)/16)
	var wg gosync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(events); i += workers {
				ev := events[i]
				ok[i] = nostr.CheckID(ev) && nostr.VerifyEvent(v, ev)
			}
		}()
	}
	wg.Wait()
	return ok
}

// storeSource reads events from the local store.
type storeSource struct{ s *syncer }

func (r *storeSource) chunk() int { return r.s.o.Batch }

func (r *storeSource) fetch(ctx context.Context, ids []nostr.ID, t *Transfer) ([]*nostr.Event, error) {
	it, err := r.s.o.Store.Query(ctx, []nostr.Filter{{IDs: ids, Present: nostr.PresentIDs}})
	if err != nil {
		return nil, fmt.Errorf("read local events: %w", err)
	}
	defer it.Close()
	out := make([]*nostr.Event, 0, len(ids))
	for it.Next() {
		ev, err := nostr.ParseEvent(slices.Clone(it.Record().Raw), nil)
		if err != nil {
			return nil, fmt.Errorf("local event %s: %w", it.Record().ID.Hex(), err)
		}
		out = append(out, ev)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read local events: %w", err)
	}
	t.Missing += len(ids) - len(out)
	return out, nil
}

// storeSink saves events to the local store in batches, each one durable
// commit.
type storeSink struct{ s *syncer }

func (w *storeSink) put(ctx context.Context, events []*nostr.Event, t *Transfer) error {
	for len(events) > 0 {
		n := min(len(events), w.s.o.Batch)
		if err := w.s.save(ctx, events[:n], t); err != nil {
			return err
		}
		events = events[n:]
	}
	return nil
}

// save stores one batch and counts the outcomes.
func (s *syncer) save(ctx context.Context, events []*nostr.Event, t *Transfer) error {
	// A batch the store took is answered whatever ctx does (store.Store),
	// so the counts say what was saved.
	res, err := s.o.Store.Save(ctx, events)
	if err != nil {
		return fmt.Errorf("save: %w", err)
	}
	for i, r := range res {
		switch r.Outcome {
		case store.Stored:
			t.Moved++
		case store.Duplicate:
			t.Duplicate++
		case store.Superseded:
			t.refuse("superseded")
		case store.Deleted:
			t.refuse("deleted")
		default:
			if errors.Is(r.Err, store.ErrEphemeral) {
				t.refuse("ephemeral")
				continue
			}
			s.o.Logger.Warn("save failed", "id", events[i].ID.Hex(), "err", r.Err)
			t.refuse("error")
		}
	}
	return nil
}

// relaySink publishes events to a relay with EVENT, keeping at most
// Options.Window awaiting their OK, and retries those refused with
// "rate-limited:" after a growing pause.
type relaySink struct {
	s *syncer
	c *client.Conn
}

// Uploader publishes events to a relay over a connection its caller
// holds, as Run uploads them: at most Options.Window events awaiting
// their OK, "rate-limited:" refusals retried after a growing pause
// (Options.MaxRetries), no OK within Options.Timeout an error. It is for
// `petrel stream`, which forwards a live feed. Only Window, Timeout,
// MaxRetries, AuthKey and Logger of the Options are used. An Uploader is not safe
// for concurrent use.
type Uploader struct {
	sink relaySink
}

// NewUploader returns an Uploader publishing on c.
func NewUploader(c *client.Conn, o Options) *Uploader {
	o.defaults()
	return &Uploader{sink: relaySink{s: &syncer{o: o}, c: c}}
}

// Upload publishes events and waits for their OKs, counting the outcomes
// in t. It returns early with an error when the connection ends, an OK
// does not come within Options.Timeout, or ctx ends (after waiting a
// little for the OKs of the events in flight).
func (u *Uploader) Upload(ctx context.Context, events []*nostr.Event, t *Transfer) error {
	return u.sink.put(ctx, events, t)
}

// pendingEvent is an event being uploaded.
type pendingEvent struct {
	ev      *nostr.Event
	retries int
	// authed says it was sent after the connection answered AUTH: an
	// "auth-required:" refusal of it is final.
	authed bool
}

const (
	minBackoff = 250 * time.Millisecond
	maxBackoff = 30 * time.Second
)

// cancelGrace bounds how long an interrupted upload waits for the OKs of
// the events it already sent.
const cancelGrace = 5 * time.Second

func (w *relaySink) put(ctx context.Context, events []*nostr.Event, t *Transfer) error {
	o := &w.s.o
	c := w.c
	queue := make([]*pendingEvent, len(events))
	for i, ev := range events {
		queue[i] = &pendingEvent{ev: ev}
	}
	inflight := make(map[nostr.ID]*pendingEvent, o.Window)
	// Room for every OK awaited: the reader never waits on it, even for
	// OKs that come after put gave up on them.
	oks := make(chan *nostr.RelayMessage, o.Window)
	var pauseUntil time.Time
	lo, hi := minBackoff, maxBackoff
	if w.s.backoff > 0 {
		lo, hi = w.s.backoff, 120*w.s.backoff
	}
	backoff := lo
	lastOK := time.Now()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	// On cancellation no new event is sent, but the OKs of those in
	// flight are still awaited (for at most cancelGrace), so that an
	// interrupted run leaves nothing half-known and the next run does not
	// upload the same events again.
	done := ctx.Done()
	var cancelled error
	var graceEnd time.Time
	for len(queue) > 0 || len(inflight) > 0 {
		now := time.Now()
		if cancelled != nil && (now.After(graceEnd) || len(inflight) == 0) {
			break
		}
		for cancelled == nil && len(queue) > 0 && len(inflight) < o.Window && !now.Before(pauseUntil) {
			p := queue[0]
			queue = queue[1:]
			if _, dup := inflight[p.ev.ID]; dup {
				continue // the same id twice: one upload is enough
			}
			p.authed = w.s.authenticated(c)
			if err := c.SendEvent(p.ev, oks); err != nil {
				return err
			}
			if len(inflight) == 0 {
				lastOK = now // the wait for an OK starts now
			}
			inflight[p.ev.ID] = p
		}
		wait := o.Timeout - now.Sub(lastOK)
		if len(inflight) == 0 {
			wait = pauseUntil.Sub(now) // waiting only for the pause to end
		} else if now.Before(pauseUntil) {
			wait = min(wait, pauseUntil.Sub(now))
		}
		if cancelled != nil {
			wait = min(wait, graceEnd.Sub(now))
		}
		timer.Reset(max(wait, 0))
		select {
		case m := <-oks:
			p := inflight[m.EventID]
			if p == nil {
				break // not ours, or already counted
			}
			delete(inflight, m.EventID)
			lastOK = time.Now()
			reason := okPrefix(m.Message)
			switch {
			case m.OK && reason == "duplicate":
				t.Duplicate++
			case m.OK:
				t.Moved++
				backoff = max(lo, backoff/2)
			case reason == "rate-limited" && p.retries < o.MaxRetries:
				p.retries++
				queue = append([]*pendingEvent{p}, queue...)
				pauseUntil = lastOK.Add(backoff)
				backoff = min(2*backoff, hi)
			case reason == "auth-required" && !p.authed && cancelled == nil:
				// Sent before AUTH: authenticate (unless another
				// refusal did already) and send it again.
				if !w.s.authenticated(c) {
					if o.AuthKey == nil && p.ev.IsProtected() {
						// NIP-70: the relay wants its author, not
						// necessarily any client, to authenticate.
						t.refuse(reason)
						break
					}
					if err := w.s.authenticate(ctx, c, w.s.authRefusal(c, "EVENT", m.Message)); err != nil {
						t.refuse(reason)
						return err
					}
				}
				queue = append([]*pendingEvent{p}, queue...)
			default:
				t.refuse(reason)
			}
		case <-timer.C:
			if cancelled == nil && len(inflight) > 0 && time.Since(lastOK) >= o.Timeout {
				for range inflight {
					t.refuse("timeout")
				}
				return fmt.Errorf("%s: no OK within %v for %d events", c.URL(), o.Timeout, len(inflight))
			}
		case <-c.Done():
			return c.Err()
		case <-done:
			cancelled = ctx.Err()
			done = nil
			queue = nil
			graceEnd = time.Now().Add(min(o.Timeout, cancelGrace))
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
	return cancelled
}

// okPrefix returns the NIP-01 machine-readable prefix of an OK message,
// or "other".
func okPrefix(msg string) string {
	p, _, ok := strings.Cut(msg, ":")
	if !ok {
		return "other"
	}
	switch p {
	case "duplicate", "pow", "blocked", "rate-limited", "invalid", "restricted", "mute", "error", "auth-required":
		return p
	}
	return "other"
}
