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
// Events from one connection reach the writer in the order they were
// read, so their commits and their OKs follow that order too (a client
// that pipelines an event and its replacement, or a note and its
// deletion, gets what it sent). Verification is parallel, so order is
// restored after it (turns): each verifier takes a batch from the queue together
// with a ticket (taking is one step under takeMu, so tickets follow the
// queue's order), verifies it, and hands it on only when every earlier
// ticket has been handed on (turn). The queue is filled by each
// connection's handler in the order it reads, so per-connection order
// holds from the read to the writer; across connections nothing waits
// longer than one batch's verification.
//
// With a write-policy plugin, a verified event waits for the plugin's
// decision without holding a verifier, and decisions may come back in any
// order: each event gets a place in a sequencer, in turn, and one
// dedicated goroutine (the poster) hands accepted events on in that
// order, doing what may block (the store's Submit) so that the plugin's
// callbacks never do. Refusals are answered as soon as they are decided;
// only accepted events wait for their turn. Events beyond the sequencer's
// capacity (PluginMaxInflight) are refused with "rate-limited:".
type ingest struct {
	r        *Relay
	mu       sync.RWMutex // read: enqueuers; write: close
	closed   bool
	turns    // the verify queue, handed on in order
	workers  sync.WaitGroup
	inflight sync.WaitGroup // events submitted to the store, not yet answered

	seq      *sequencer     // plugin decisions, in order; nil without plugin
	postDone chan struct{}  // closed when the poster exits
	plugged  sync.WaitGroup // events submitted to the plugin, not yet decided
}

func newIngest(r *Relay) *ingest {
	in := &ingest{r: r}
	in.turns.init(r.cfg.VerifyQueue, r.cfg.VerifyWorkers)
	if r.pol.plugin != nil {
		in.seq = newSequencer(max(r.pol.postQueue, 1))
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
	var ok, opt [verifyBatch]bool
	for {
		ticket, open := in.take(&jobs)
		if !open {
			return
		}
		evs = evs[:0]
		for i := range jobs {
			if opt[i] = in.optimistic(&jobs[i]); !opt[i] {
				evs = append(evs, jobs[i].ev)
			}
		}
		if len(evs) > 0 {
			nostr.VerifyEvents(r.verifier, evs, ok[:])
		}
		in.waitTurn(ticket)
		k := 0
		for i := range jobs {
			if opt[i] {
				in.hold(jobs[i])
				continue
			}
			in.verified(jobs[i], ok[k])
			k++
		}
		in.endTurn()
		clear(jobs)
		clear(evs)
	}
}

// optimistic reports whether j is answered before its signature check
// (optimistic.go), and if so takes its slot in the behind pool. Events
// are verified first in sync mode, when the pool is full (counted in
// limits_tripped.verify_pending), and for a quarantined pubkey; ephemeral
// events are never held.
func (in *ingest) optimistic(j *verifyJob) bool {
	r := in.r
	if !r.optimistic || j.ev.Class() == nostr.Ephemeral || r.behind.quarantined(&j.ev.PubKey) {
		return false
	}
	if !r.behind.reserve() {
		r.stats.LimitTrips[limVerifyPending].Add(1)
		return false
	}
	return true
}

// hold asks the store to hold j's event unverified; once the hold is
// committed the sender gets OK:true and the event goes to the behind
// pool. It runs in the job's turn and may block (backpressure from the
// writer). j's slot in the pool is reserved.
func (in *ingest) hold(j verifyJob) {
	r := in.r
	in.inflight.Add(1)
	err := r.behind.st.SubmitUnverified(r.ctx, j.ev, func(res store.SaveResult) {
		defer in.inflight.Done()
		if res.Outcome != store.Held {
			r.behind.free()
			r.dispatch.push(dispatchItem{ev: j.ev, okTo: j.s, t0: j.t0, res: res, stored: true})
			return
		}
		r.stats.EventsHeld.Add(1)
		// The OK first: the release, a later commit, cannot overtake it.
		r.dispatch.push(dispatchItem{ev: j.ev, okTo: j.s, t0: j.t0, held: true})
		r.behind.push(j)
	})
	if err != nil {
		in.inflight.Done()
		r.behind.free()
		r.stats.DBErrors.Add(1)
		j.s.finishEvent(j, nostr.Reject(nostr.PrefixError, "could not store event: "+err.Error()), "")
	}
}

// verified takes a job on after its signature check. It runs in the job's
// turn (see ingest).
func (in *ingest) verified(j verifyJob, valid bool) {
	r := in.r
	if !valid {
		j.s.badSignature() // counted before the answer: the client may send more on it
		j.s.finishEvent(j, nostr.Reject(nostr.PrefixInvalid, "bad signature"), "")
		return
	}
	if j.s.badSigs.Load() != 0 {
		j.s.badSigs.Store(0)
	}
	// Checks that trust the pubkey: after verification (policy.go).
	if l := r.pol.limEventPK.Load(); l != nil {
		if rej := l.AllowEvent(netip.Addr{}, j.ev.PubKey); rej != nil {
			r.stats.LimitTrips[limEventRatePubKey].Add(1)
			j.s.finishEvent(j, rej, "")
			return
		}
	}
	if in.seq == nil {
		in.accept(j)
		return
	}
	place, ok := in.seq.reserve()
	if !ok {
		j.s.finishEvent(j, r.atCapacity(limVerifyQueue, j.ev), "")
		return
	}
	if j.ev.Kind == nostr.KindRequestToVanish {
		in.seq.resolve(place, &j) // never refused by the plugin, but kept in order
		return
	}
	in.checkPlugin(j, place)
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
	tv := r.now()
	done := func(res store.SaveResult) {
		defer in.inflight.Done()
		r.dispatch.push(dispatchItem{ev: j.ev, okTo: j.s, t0: j.t0, tv: tv, tc: r.now(), res: res, stored: true})
	}
	var err error
	if j.checked {
		err = r.pre.SubmitAfter(r.ctx, j.ev, j.token, done)
	} else {
		err = r.store.Submit(r.ctx, j.ev, done)
	}
	if err != nil {
		in.inflight.Done()
		r.stats.DBErrors.Add(1)
		j.s.finishEvent(j, nostr.Reject(nostr.PrefixError, "could not store event: "+err.Error()), "")
	}
}

// checkPlugin submits a verified event to the write-policy plugin; its
// decision arrives on a plugin goroutine and resolves the event's place
// in the sequencer.
func (in *ingest) checkPlugin(j verifyJob, place uint64) {
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
	rej := r.pol.plugin.Check(j.ev, meta, func(d policy.Decision) {
		// On a plugin goroutine: must not block.
		defer in.plugged.Done()
		switch d.Action {
		case policy.Accept:
			in.seq.resolve(place, &j)
			return
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
		in.seq.resolve(place, nil)
	})
	if rej != nil {
		in.plugged.Done()
		j.s.finishEvent(j, rej, "")
		in.seq.resolve(place, nil)
	}
}

// poster hands plugin-accepted events on in their order until the
// sequencer is closed and drained.
func (in *ingest) poster() {
	defer close(in.postDone)
	for {
		j, ok := in.seq.next()
		if !ok {
			return
		}
		if j != nil {
			in.accept(*j)
		}
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
	if in.seq != nil {
		in.r.closePlugin()
		in.plugged.Wait()
		in.seq.close()
		<-in.postDone
	}
	in.inflight.Wait()
}

// sequencer hands plugin decisions to the poster in the order the events
// were verified. A verifier reserves a place in turn; the decision
// resolves it (from any goroutine, without blocking); next returns the
// places in order. At most capacity places are reserved and not yet
// taken by next.
type sequencer struct {
	mu       sync.Mutex
	cv       *sync.Cond
	capacity uint64
	tail     uint64                // the next place to reserve
	head     uint64                // the next place next returns
	done     map[uint64]*verifyJob // resolved places: the job to post, or nil
	closed   bool
}

func newSequencer(capacity int) *sequencer {
	q := &sequencer{capacity: uint64(capacity), done: make(map[uint64]*verifyJob)}
	q.cv = sync.NewCond(&q.mu)
	return q
}

// reserve takes the next place, or reports false when capacity places are
// outstanding.
func (q *sequencer) reserve() (uint64, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.tail-q.head >= q.capacity {
		return 0, false
	}
	p := q.tail
	q.tail++
	return p, true
}

// resolve records the decision for place: j to post, or nil when the
// event was answered without the store.
func (q *sequencer) resolve(place uint64, j *verifyJob) {
	q.mu.Lock()
	q.done[place] = j
	wake := place == q.head
	q.mu.Unlock()
	if wake {
		q.cv.Signal()
	}
}

// next waits for the decision at the head and returns it (nil: skip), or
// false once closed with every reserved place taken.
func (q *sequencer) next() (*verifyJob, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		if j, ok := q.done[q.head]; ok {
			delete(q.done, q.head)
			q.head++
			return j, true
		}
		if q.closed && q.head == q.tail {
			return nil, false
		}
		q.cv.Wait()
	}
}

// close lets next return false once every reserved place is taken. Every
// reserved place must be resolved by then, or be resolved later.
func (q *sequencer) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cv.Broadcast()
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
	refuse := func(rej *nostr.Rejection) { reject(rej.Prefix, rej.Text) }
	lim := r.live.Load()
	if len(ev.Raw) > lim.MaxEventBytes {
		r.stats.LimitTrips[limEventBytes].Add(1)
		reject(nostr.PrefixInvalid, "event too large")
		return
	}
	now := t0.Unix()
	if lim.CreatedAtFuture > 0 && ev.CreatedAt > now+int64(lim.CreatedAtFuture/time.Second) {
		r.stats.LimitTrips[limCreatedAtFuture].Add(1)
		reject(nostr.PrefixInvalid, "created_at too far in the future")
		return
	}
	if lim.CreatedAtPast > 0 && ev.CreatedAt < now-int64(lim.CreatedAtPast/time.Second) {
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
	if s.slowed() {
		if s.pendingEvents.Add(1) > 1 {
			s.pendingEvents.Add(-1)
			r.stats.LimitTrips[limPendingEvents].Add(1)
			reject(nostr.PrefixRateLimited, "too many invalid signatures from this connection: one event at a time")
			s.badSignature() // pressing on while slowed counts as another
			return
		}
	} else if int(s.pendingEvents.Add(1)) > r.cfg.MaxPendingEvents {
		s.pendingEvents.Add(-1)
		r.stats.LimitTrips[limPendingEvents].Add(1)
		reject(nostr.PrefixRateLimited, "too many events awaiting OK on this connection")
		return
	}
	n := r.inflight.Add(1)
	if r.cfg.MaxInflightEvents > 0 && n > int64(r.cfg.MaxInflightEvents) {
		r.inflight.Add(-1)
		s.pendingEvents.Add(-1)
		refuse(r.atCapacity(limInflightEvents, ev))
		return
	}
	if r.wait.over(t0, n-1) {
		s.eventDone()
		refuse(r.atCapacity(limEventWait, ev))
		return
	}
	if r.ingest.full() {
		s.eventDone()
		refuse(r.atCapacity(limVerifyQueue, ev))
		return
	}
	job := verifyJob{s: s, ev: ev, t0: t0}
	// The duplicate check before verification, with a store that can
	// answer it locally (store.Prechecker: the embedded store, from memory
	// for most new ids). A shared store would need a database round trip
	// on this handler goroutine for every EVENT; its writer finds
	// duplicates itself, at the cost of verifying them.
	if r.pre != nil && ev.Class() != nostr.Ephemeral {
		var has bool
		var err error
		has, job.token, err = r.pre.HasAt(r.ctx, ev.ID)
		job.checked = err == nil
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
		refuse(r.atCapacity(limVerifyQueue, ev))
	}
}

// atCapacity is the answer to ev, refused by a capacity valve (lim: the
// in-flight cap, the wait estimate or the verify queue), counted in that
// limit's trips: "rate-limited:", the relay has no room for it now.
// Unless ev is to be stored and the store reports its database
// unreachable (store.Availability): the valves then fill because the
// writer is waiting on the database, not because the relay is short of
// CPU, and the client is told so ("error:", as the writer's own failures
// are answered), counted in events_rejected{error} only, so that the
// valves' trips (and the alerts on them) do not call a database outage a
// lack of capacity. An ephemeral event needs no store: its refusal stays
// a matter of room.
func (r *Relay) atCapacity(lim int, ev *nostr.Event) *nostr.Rejection {
	if r.avail != nil && ev.Class() != nostr.Ephemeral && r.avail.Unavailable() {
		return nostr.Reject(nostr.PrefixError, "the store is unavailable, try again later")
	}
	r.stats.LimitTrips[lim].Add(1)
	return nostr.Reject(nostr.PrefixRateLimited, "relay is at capacity, slow down")
}

// badSignature counts one more invalid signature in a row and closes the
// connection at MaxBadSignatures.
func (s *Session) badSignature() {
	if n, lim := s.badSigs.Add(1), s.r.live.Load().MaxBadSignatures; lim > 0 && int(n) >= lim {
		s.closeFor(ClosePolicy, "too many invalid signatures", limBadSignatures)
	}
}

// slowed reports whether the connection sent enough invalid signatures in
// a row (a tenth of MaxBadSignatures) to be held to one EVENT at a time.
func (s *Session) slowed() bool {
	lim := s.r.live.Load().MaxBadSignatures
	return lim > 0 && int(s.badSigs.Load()) >= max(1, lim/10)
}

// finishEvent answers an EVENT that ends before the store: rejected by a
// verifier or refused at submission. msgOK is the message for accepted.
func (s *Session) finishEvent(j verifyJob, rej *nostr.Rejection, msgOK string) {
	s.eventDone()
	now := s.r.now()
	if rej != nil && rej.Prefix == nostr.PrefixError {
		s.r.wait.failed(now) // the store refused the submission (see failed)
	} else {
		s.r.wait.answered(j.t0, now, s.r.inflight.Load()) // before the client can know
	}
	if rej != nil {
		s.r.countReject(rej.Prefix)
		s.ok(j.ev.ID, false, rej.Error())
	} else {
		s.ok(j.ev.ID, true, msgOK)
	}
	s.r.OKLatency.Observe(now.Sub(j.t0).Seconds())
}

// eventDone ends an admitted EVENT (answered, one way or another): it
// leaves the connection's pending count and the relay-wide in-flight
// count.
func (s *Session) eventDone() {
	s.pendingEvents.Add(-1)
	if s.r.inflight.Add(-1) == 0 {
		s.r.wait.idle() // however it ended: nothing waits now
	}
}
