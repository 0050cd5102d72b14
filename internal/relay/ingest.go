package relay

import (
	"sync"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// verifyJob is one EVENT waiting for signature verification.
type verifyJob struct {
	s  *Session
	ev *nostr.Event
	t0 time.Time
}

// ingest is the EVENT pipeline after the cheap checks: a bounded queue into
// a pool of verifiers, which hand valid events to the store's writer (or,
// for ephemeral events, straight to the dispatcher).
type ingest struct {
	r        *Relay
	mu       sync.RWMutex // read: enqueuers; write: close
	closed   bool
	queue    chan verifyJob
	workers  sync.WaitGroup
	inflight sync.WaitGroup // events submitted to the store, not yet answered
}

func newIngest(r *Relay) *ingest {
	in := &ingest{r: r, queue: make(chan verifyJob, r.cfg.VerifyQueue)}
	for i := 0; i < r.cfg.VerifyWorkers; i++ {
		in.workers.Add(1)
		go in.run()
	}
	return in
}

// full reports whether the verify queue is full right now.
func (in *ingest) full() bool { return len(in.queue) >= cap(in.queue) }

// offer queues a job without blocking and reports whether it was taken.
func (in *ingest) offer(j verifyJob) (ok, closed bool) {
	in.mu.RLock()
	defer in.mu.RUnlock()
	if in.closed {
		return false, true
	}
	select {
	case in.queue <- j:
		return true, false
	default:
		return false, false
	}
}

func (in *ingest) run() {
	defer in.workers.Done()
	r := in.r
	for j := range in.queue {
		if !nostr.VerifyEvent(r.verifier, j.ev) {
			j.s.finishEvent(j, nostr.Reject(nostr.PrefixInvalid, "bad signature"), "")
			continue
		}
		if j.ev.Class() == nostr.Ephemeral {
			r.stats.EventsEphemeral.Add(1)
			r.dispatch.push(dispatchItem{ev: j.ev, okTo: j.s, t0: j.t0, accepted: true})
			continue
		}
		in.inflight.Add(1)
		j := j
		r.pending.add(j.ev.ID) // before the commit: see pendingFanout
		err := r.store.Submit(r.ctx, j.ev, func(res store.SaveResult) {
			defer in.inflight.Done()
			r.dispatch.push(dispatchItem{ev: j.ev, okTo: j.s, t0: j.t0, res: res, stored: true})
		})
		if err != nil {
			r.pending.done(j.ev.ID)
			in.inflight.Done()
			r.stats.DBErrors.Add(1)
			j.s.finishEvent(j, nostr.Reject(nostr.PrefixError, "could not store event: "+err.Error()), "")
		}
	}
}

// close stops taking events, verifies and submits what is queued, and
// waits until the store has answered every submitted event.
func (in *ingest) close() {
	in.mu.Lock()
	if !in.closed {
		in.closed = true
		close(in.queue)
	}
	in.mu.Unlock()
	in.workers.Wait()
	in.inflight.Wait()
}

// handleEvent runs the cheap checks on an EVENT, in order of cost, and
// queues it for verification.
func (s *Session) handleEvent(ev *nostr.Event) {
	r := s.r
	r.stats.EventsReceived.Add(1)
	t0 := r.now()
	reject := func(p nostr.Prefix, msg string) {
		r.countReject(p)
		s.ok(ev.ID, false, string(p)+": "+msg)
	}
	if len(ev.Raw) > r.cfg.MaxEventBytes {
		r.stats.LimitTrips[limEventBytes].Add(1)
		reject(nostr.PrefixInvalid, "event too large")
		return
	}
	now := t0.Unix()
	if r.cfg.CreatedAtFuture > 0 && ev.CreatedAt > now+int64(r.cfg.CreatedAtFuture/time.Second) {
		r.stats.LimitTrips[limCreatedAtFuture].Add(1)
		reject(nostr.PrefixInvalid, "created_at too far in the future")
		return
	}
	if r.cfg.CreatedAtPast > 0 && ev.CreatedAt < now-int64(r.cfg.CreatedAtPast/time.Second) {
		r.stats.LimitTrips[limCreatedAtPast].Add(1)
		reject(nostr.PrefixInvalid, "created_at too far in the past")
		return
	}
	if !nostr.CheckID(ev) {
		reject(nostr.PrefixInvalid, "event id does not match its content")
		return
	}
	if ev.IsExpired(now) {
		reject(nostr.PrefixInvalid, "event has expired")
		return
	}
	if rej := s.policy(ev); rej != nil {
		reject(rej.Prefix, rej.Text)
		return
	}
	// Capacity before the duplicate check: under overload the refusal must
	// stay cheap (no store lookup for an event we will not take anyway).
	if int(s.pendingEvents.Add(1)) > r.cfg.MaxPendingEvents {
		s.pendingEvents.Add(-1)
		r.stats.LimitTrips[limPendingEvents].Add(1)
		reject(nostr.PrefixRateLimited, "too many events awaiting OK on this connection")
		return
	}
	if r.ingest.full() {
		s.pendingEvents.Add(-1)
		r.stats.LimitTrips[limVerifyQueue].Add(1)
		reject(nostr.PrefixRateLimited, "relay is at capacity, slow down")
		return
	}
	if ev.Class() != nostr.Ephemeral {
		has, err := r.store.Has(r.ctx, ev.ID)
		if err != nil {
			s.pendingEvents.Add(-1)
			r.stats.DBErrors.Add(1)
			reject(nostr.PrefixError, "could not check for duplicates")
			return
		}
		if has {
			s.pendingEvents.Add(-1)
			r.stats.EventsDuplicate.Add(1)
			s.ok(ev.ID, true, "duplicate: already have this event")
			return
		}
	}
	ok, closed := r.ingest.offer(verifyJob{s: s, ev: ev, t0: t0})
	if !ok {
		s.pendingEvents.Add(-1)
		if closed {
			reject(nostr.PrefixError, "relay is shutting down")
			return
		}
		r.stats.LimitTrips[limVerifyQueue].Add(1)
		reject(nostr.PrefixRateLimited, "relay is at capacity, slow down")
	}
}

// finishEvent answers an EVENT that ends before the store: rejected by a
// verifier or refused at submission. msgOK is the message for accepted.
func (s *Session) finishEvent(j verifyJob, rej *nostr.Rejection, msgOK string) {
	s.pendingEvents.Add(-1)
	if rej != nil {
		s.r.countReject(rej.Prefix)
		s.ok(j.ev.ID, false, rej.Error())
	} else {
		s.ok(j.ev.ID, true, msgOK)
	}
	s.r.OKLatency.Observe(s.r.now().Sub(j.t0).Seconds())
}
