package relay

import (
	"net/netip"
	"sync"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/policy"
	"github.com/petrel-relay/petrel/internal/store"
)

// verifyJob is one EVENT waiting for signature verification.
type verifyJob struct {
	s  *Session
	ev *nostr.Event
	t0 time.Time
	// token is the Relay.pre token from the duplicate check, when
	// checked.
	token   uint64
	checked bool
}

// ingest is the EVENT pipeline after the cheap checks: a bounded queue into
// a pool of verifiers, which hand valid events to the store's writer (or,
// for ephemeral events, straight to the dispatcher).
//
// With a write-policy plugin, a verified event waits for the plugin's
// decision without holding a verifier: the plugin calls back on its own
// goroutine, which must not block, so an accepted event is handed to one
// dedicated goroutine (the poster) through a bounded queue, and the
// poster does what may block (the store's Submit, the dispatcher's
// queue). When that queue is full the event is refused with
// "rate-limited:".
type ingest struct {
	r        *Relay
	mu       sync.RWMutex // read: enqueuers; write: close
	closed   bool
	queue    chan verifyJob
	workers  sync.WaitGroup
	inflight sync.WaitGroup // events submitted to the store, not yet answered

	post       chan verifyJob // plugin-accepted events for the poster; nil without plugin
	postClosed bool           // guarded by mu
	postDone   chan struct{}  // closed when the poster exits
	plugged    sync.WaitGroup // events submitted to the plugin, not yet decided
}

func newIngest(r *Relay) *ingest {
	in := &ingest{r: r, queue: make(chan verifyJob, r.cfg.VerifyQueue)}
	if r.plugin != nil {
		in.post = make(chan verifyJob, max(r.postQueue, 1))
		in.postDone = make(chan struct{})
		go in.poster()
	}
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

// verifyBatch is the most jobs a verifier takes from the queue at once:
// what nostr.VerifyEvents checks in one call.
const verifyBatch = nostr.VerifyBatchMax

func (in *ingest) run() {
	defer in.workers.Done()
	r := in.r
	jobs := make([]verifyJob, 0, verifyBatch)
	evs := make([]*nostr.Event, 0, verifyBatch)
	var ok [verifyBatch]bool
	for j := range in.queue {
		jobs = append(jobs[:0], j)
		// Take what is already queued, up to an even share per verifier
		// (so that a short queue is still verified on every core), without
		// waiting for more.
		share := min(verifyBatch, 1+len(in.queue)/r.cfg.VerifyWorkers)
	take:
		for len(jobs) < share {
			select {
			case j, open := <-in.queue:
				if !open {
					break take
				}
				jobs = append(jobs, j)
			default:
				break take
			}
		}
		evs = evs[:0]
		for i := range jobs {
			evs = append(evs, jobs[i].ev)
		}
		nostr.VerifyEvents(r.verifier, evs, ok[:])
		for i := range jobs {
			in.verified(jobs[i], ok[i])
		}
		clear(jobs)
		clear(evs)
	}
}

// verified takes a job on after its signature check.
func (in *ingest) verified(j verifyJob, valid bool) {
	r := in.r
	if !valid {
		j.s.finishEvent(j, nostr.Reject(nostr.PrefixInvalid, "bad signature"), "")
		return
	}
	// Checks that trust the pubkey: after verification (policy.go).
	if r.limEventPK != nil {
		if rej := r.limEventPK.AllowEvent(netip.Addr{}, j.ev.PubKey); rej != nil {
			r.stats.LimitTrips[limEventRatePubKey].Add(1)
			j.s.finishEvent(j, rej, "")
			return
		}
	}
	if r.plugin != nil && j.ev.Kind != nostr.KindRequestToVanish {
		in.checkPlugin(j)
		return
	}
	in.accept(j)
}

// accept hands a verified, accepted event on: ephemeral events to the
// dispatcher, others to the store's writer. It may block (backpressure
// from the writer or the dispatcher).
func (in *ingest) accept(j verifyJob) {
	r := in.r
	if j.ev.Class() == nostr.Ephemeral {
		r.stats.EventsEphemeral.Add(1)
		r.dispatch.push(dispatchItem{ev: j.ev, okTo: j.s, t0: j.t0, accepted: true})
		return
	}
	in.inflight.Add(1)
	r.pending.add(j.ev.ID) // before the commit: see pendingFanout
	done := func(res store.SaveResult) {
		defer in.inflight.Done()
		r.dispatch.push(dispatchItem{ev: j.ev, okTo: j.s, t0: j.t0, res: res, stored: true})
	}
	var err error
	if j.checked {
		err = r.pre.SubmitAfter(r.ctx, j.ev, j.token, done)
	} else {
		err = r.store.Submit(r.ctx, j.ev, done)
	}
	if err != nil {
		r.pending.done(j.ev.ID)
		in.inflight.Done()
		r.stats.DBErrors.Add(1)
		j.s.finishEvent(j, nostr.Reject(nostr.PrefixError, "could not store event: "+err.Error()), "")
	}
}

// checkPlugin submits a verified event to the write-policy plugin; its
// decision arrives on a plugin goroutine.
func (in *ingest) checkPlugin(j verifyJob) {
	r := in.r
	var authed nostr.PubKey
	if info := j.s.auth.load(); info.authed() {
		authed = info.pubkeys[0]
		if info.has(&j.ev.PubKey) {
			authed = j.ev.PubKey
		}
	}
	meta := policy.MetaFromIP(j.s.addr, authed)
	meta.ReceivedAt = j.t0
	in.plugged.Add(1)
	rej := r.plugin.Check(j.ev, meta, func(d policy.Decision) {
		// On a plugin goroutine: must not block.
		defer in.plugged.Done()
		switch d.Action {
		case policy.Accept:
			in.handOff(j)
		case policy.ShadowReject:
			r.stats.EventsShadowRejected.Add(1)
			j.s.finishEvent(j, nil, "")
		default:
			rej := d.Rejection()
			if rej == nil {
				rej = nostr.Reject(nostr.PrefixError, "write policy plugin gave no decision")
			}
			j.s.finishEvent(j, rej, "")
		}
	})
	if rej != nil {
		in.plugged.Done()
		j.s.finishEvent(j, rej, "")
	}
}

// handOff queues a plugin-accepted event for the poster without blocking.
func (in *ingest) handOff(j verifyJob) {
	in.mu.RLock()
	if in.postClosed {
		in.mu.RUnlock()
		j.s.finishEvent(j, nostr.Reject(nostr.PrefixError, "relay is shutting down"), "")
		return
	}
	select {
	case in.post <- j:
		in.mu.RUnlock()
	default:
		in.mu.RUnlock()
		in.r.stats.LimitTrips[limVerifyQueue].Add(1)
		j.s.finishEvent(j, nostr.Reject(nostr.PrefixRateLimited, "relay is at capacity, slow down"), "")
	}
}

// poster submits plugin-accepted events until the post queue is closed.
func (in *ingest) poster() {
	defer close(in.postDone)
	for j := range in.post {
		in.accept(j)
	}
}

// close stops taking events, verifies and submits what is queued (events
// waiting for the plugin get its decision; a plugin the relay started is
// closed, which rejects what it still holds), and waits until the store
// has answered every submitted event.
func (in *ingest) close() {
	in.mu.Lock()
	if !in.closed {
		in.closed = true
		close(in.queue)
	}
	in.mu.Unlock()
	in.workers.Wait()
	if in.post != nil {
		in.r.closePlugin()
		in.plugged.Wait()
		in.mu.Lock()
		if !in.postClosed {
			in.postClosed = true
			close(in.post)
		}
		in.mu.Unlock()
		<-in.postDone
	}
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
	if n := r.inflight.Add(1); r.cfg.MaxInflightEvents > 0 && n > int64(r.cfg.MaxInflightEvents) {
		r.inflight.Add(-1)
		s.pendingEvents.Add(-1)
		r.stats.LimitTrips[limInflightEvents].Add(1)
		reject(nostr.PrefixRateLimited, "relay is at capacity, slow down")
		return
	}
	if r.ingest.full() {
		s.eventDone()
		r.stats.LimitTrips[limVerifyQueue].Add(1)
		reject(nostr.PrefixRateLimited, "relay is at capacity, slow down")
		return
	}
	job := verifyJob{s: s, ev: ev, t0: t0}
	if ev.Class() != nostr.Ephemeral {
		var has bool
		var err error
		if r.pre != nil {
			has, job.token, err = r.pre.HasAt(r.ctx, ev.ID)
			job.checked = err == nil
		} else {
			has, err = r.store.Has(r.ctx, ev.ID)
		}
		if err != nil {
			s.eventDone()
			r.stats.DBErrors.Add(1)
			reject(nostr.PrefixError, "could not check for duplicates")
			return
		}
		if has {
			s.eventDone()
			r.stats.EventsDuplicate.Add(1)
			s.ok(ev.ID, true, "duplicate: already have this event")
			return
		}
	}
	ok, closed := r.ingest.offer(job)
	if !ok {
		s.eventDone()
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
	s.eventDone()
	if rej != nil {
		s.r.countReject(rej.Prefix)
		s.ok(j.ev.ID, false, rej.Error())
	} else {
		s.ok(j.ev.ID, true, msgOK)
	}
	s.r.OKLatency.Observe(s.r.now().Sub(j.t0).Seconds())
}

// eventDone ends an admitted EVENT (answered, one way or another): it
// leaves the connection's pending count and the relay-wide in-flight
// count.
func (s *Session) eventDone() {
	s.pendingEvents.Add(-1)
	s.r.inflight.Add(-1)
}
