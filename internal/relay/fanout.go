package relay

import (
	"errors"
	"sync"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// dispatchItem is one event leaving the ingest path: its OK goes to okTo
// (nil for events from elsewhere, e.g. another node or an import), and if
// it was accepted it is fanned out to matching subscriptions.
type dispatchItem struct {
	ev   *nostr.Event
	okTo *Session
	t0   time.Time
	// tv, tc: when a stored event was handed to the store (verified, in
	// its turn) and when its commit came back, for OKStages; zero for
	// everything else.
	tv, tc   time.Time
	res      store.SaveResult
	stored   bool // res is meaningful
	accepted bool // ephemeral: accepted without the store
	announce bool // accepted here without an OK (Announce): tell the bus
	held     bool // held unverified (optimistic.go): OK:true, no fan-out yet
	release  bool // a held event released after its check: fan out, no OK
}

// dispatcher is the single goroutine that writes OKs and fans committed
// events out. It drains its queue in batches and schedules each touched
// session for flushing once per batch, so frames coalesce into one write.
type dispatcher struct {
	r     *Relay
	queue chan dispatchItem
	done  chan struct{}
	once  sync.Once
	// mu: read by every push, written once by close, so that an event
	// pushed after the relay shut down (Publish from the bus, Announce
	// from the store) is dropped, not a send on a closed channel.
	mu      sync.RWMutex
	closed  bool
	visits  uint64     // fan-outs so far: sub.stamp marks a sub visited by one
	touched []*Session // sessions to flush after the batch (outbox.touched marks them)
	ptrs    []*sub     // subscriptions one fan-out found overflowed
	zbody   []byte     // the event being fanned out, compressed (compress.go)
	// touchedTrim gives back touched's array once batches stay small
	// (it is emptied at every batch and would keep its largest one's).
	touchedTrim capTrim
}

func newDispatcher(r *Relay) *dispatcher {
	d := &dispatcher{
		r:     r,
		queue: make(chan dispatchItem, r.cfg.FanoutQueue),
		done:  make(chan struct{}),
	}
	go d.run()
	return d
}

// push hands an item to the dispatcher. It blocks while the queue is full:
// that is backpressure on the store's writer, never a silent drop.
func (d *dispatcher) push(it dispatchItem) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return // the relay is shut down: nobody is left to tell
	}
	d.queue <- it
}

// Announce fans out an event this node's store committed without an OK
// to send (its writer learnt only later that a commit it could not
// confirm had taken effect: store.ErrInDoubt), and hands it to the bus
// like any event accepted here. seq is its commit position.
func (r *Relay) Announce(ev *nostr.Event, seq uint64) {
	r.dispatch.push(dispatchItem{ev: ev, accepted: true, announce: true, res: store.SaveResult{Seq: seq}})
}

// Publish fans out an event that was committed elsewhere (another node
// of a shared store, an import), without an OK. seq is the commit
// position the store gave it (store.SaveResult.Seq), so that a
// subscription whose stored query saw that commit does not get it twice;
// 0 for an event that was never stored (ephemeral). Events may be
// published in any order.
func (r *Relay) Publish(ev *nostr.Event, seq uint64) {
	r.dispatch.push(dispatchItem{ev: ev, accepted: true, res: store.SaveResult{Seq: seq}})
}

func (d *dispatcher) close() {
	d.once.Do(func() {
		d.mu.Lock()
		d.closed = true
		close(d.queue)
		d.mu.Unlock()
	})
	<-d.done
}

func (d *dispatcher) run() {
	defer close(d.done)
	const maxBatch = 512
	for {
		it, ok := <-d.queue
		if !ok {
			return
		}
		d.handle(it)
	batch:
		for n := 1; n < maxBatch; n++ {
			select {
			case it, ok = <-d.queue:
				if !ok {
					d.flushTouched()
					return
				}
				d.handle(it)
			default:
				break batch
			}
		}
		d.flushTouched()
	}
}

func (d *dispatcher) touch(s *Session) {
	// A flag in the session, not a set of the dispatcher's: a map kept
	// its buckets for every session a broadcast had touched (37 bytes a
	// connection after one event to all, measured).
	if s.out.touched {
		return
	}
	s.out.touched = true
	d.touched = append(d.touched, s)
}

func (d *dispatcher) flushTouched() {
	for i, s := range d.touched {
		s.out.touched = false
		d.r.flusher.schedule(s)
		d.touched[i] = nil
	}
	d.touchedTrim.used(len(d.touched))
	d.touched = d.touched[:0]
	if d.touchedTrim.emptied(cap(d.touched)) {
		d.touched = nil
	}
}

func (d *dispatcher) handle(it dispatchItem) {
	r := d.r
	fanout := it.accepted
	if it.okTo != nil {
		s := it.okTo
		var okv, storeFailed bool
		var msg string
		switch {
		case it.accepted, it.held:
			okv = true
		case it.stored:
			switch it.res.Outcome {
			case store.Stored:
				okv, fanout = true, true
				r.stats.EventsAccepted.Add(1)
			case store.Duplicate:
				okv, msg = true, "duplicate: already have this event"
				r.stats.EventsDuplicate.Add(1)
			case store.Superseded:
				msg = "duplicate: a newer version of this event is already stored"
				r.stats.EventsDuplicate.Add(1) // every "duplicate:" answer
				r.countReject(nostr.PrefixDuplicate)
			case store.Deleted:
				msg = "blocked: this event has been deleted"
				r.countReject(nostr.PrefixBlocked)
			default:
				storeFailed = true
				r.stats.DBErrors.Add(1)
				r.countReject(nostr.PrefixError)
				msg = "error: could not store event"
				full := errors.Is(it.res.Err, store.ErrDiskFull)
				switch {
				case errors.Is(it.res.Err, store.ErrInDoubt):
					msg = "error: the database did not confirm the commit; the event may be stored: send it again"
				case full:
					msg = "error: the relay's storage is full; try again later"
				}
				if it.res.Err != nil && !full { // the store logs a full disk once
					r.log.Warn("store failed", "id", it.ev.ID.Hex(), "err", it.res.Err)
				}
			}
		}
		s.eventDone()
		// The valve learns of the answer before the client can.
		now := r.now()
		if storeFailed {
			r.wait.failed(now)
		} else {
			r.wait.answered(it.t0, now, r.inflight.Load())
		}
		if !s.closed.Load() {
			o := &s.out
			bp := scratchPool.Get().(*[]byte)
			b := nostr.AppendOK((*bp)[:0], it.ev.ID, okv, msg)
			o.mu.Lock()
			o.appendFrame(catControl, b)
			o.mu.Unlock()
			*bp = b
			scratchPool.Put(bp)
			r.stats.MessagesOut.Add(1)
			d.touch(s)
		}
		r.OKLatency.Observe(now.Sub(it.t0).Seconds())
		if r.okTrace.on.Load() {
			r.okTrace.record(it.ev.ID, it.t0, it.tv, it.tc, now)
		}
		if !it.tv.IsZero() {
			r.OKStages[okStageVerify].Observe(it.tv.Sub(it.t0).Seconds())
			r.OKStages[okStageStore].Observe(it.tc.Sub(it.tv).Seconds())
			r.OKStages[okStageDispatch].Observe(now.Sub(it.tc).Seconds())
		}
	} else if it.stored && it.res.Outcome == store.Stored {
		fanout = true
		r.stats.EventsAccepted.Add(1)
	}
	if it.announce {
		r.stats.EventsAccepted.Add(1) // its OK was lost with the commit's reply
	}
	if fanout {
		local := it.okTo != nil || it.announce || it.release
		if r.gate == nil || r.gate.FirstFanout(it.ev, local) {
			d.fanout(it.ev, it.res.Seq)
		}
		if local && r.bus != nil {
			r.bus.Publish(it.ev, it.res.Seq) // accepted here: tell the other nodes
		}
	}
}

// fanout delivers ev, committed at position seq (0: never stored), to
// every live subscription that matches it, except those whose stored
// query saw that commit (sub.sawCommit); a subscription whose stored
// query still runs holds it until EOSE, when the same rule decides.
func (d *dispatcher) fanout(ev *nostr.Event, seq uint64) {
	r := d.r
	d.visits++
	visit := d.visits
	d.ptrs = d.ptrs[:0]
	// The event's compressed body, made for the first subscriber whose
	// connection negotiated compression and shared by all.
	var zb []byte
	r.idx.candidates(ev, func(sb *sub) {
		if sb.stamp == visit {
			return
		}
		sb.stamp = visit
		if !nostr.MatchesAny(sb.filters, ev) {
			return
		}
		if !sb.s.canSee(ev) {
			return
		}
		s := sb.s
		o := &s.out
		o.mu.Lock()
		if sb.sawCommit(seq) {
			// Its stored query answered this commit already.
			o.mu.Unlock()
			return
		}
		switch sb.state {
		case subClosed:
		case subStored:
			if !s.roomForLive(len(ev.Raw) + len(sb.prefix) + 11) {
				sb.state = subClosed
				d.ptrs = append(d.ptrs, sb)
			} else {
				sb.job.hold(o, ev.Raw, seq)
			}
		case subLive:
			if !s.roomForLive(len(ev.Raw) + len(sb.prefix) + 11) {
				sb.state = subClosed
				d.ptrs = append(d.ptrs, sb)
			} else {
				var zbody []byte
				if s.wantsBody(sb.prefix, ev.Raw) {
					if zb == nil {
						zb, d.zbody = r.body(ev.ID, ev.Raw, d.zbody)
					}
					zbody = zb
				}
				s.appendEvent(catLive, sb.prefix, ev.Raw, zbody)
				r.stats.Deliveries.Add(1)
				r.stats.MessagesOut.Add(1)
				d.touch(s)
			}
		}
		o.mu.Unlock()
	})
	// Overflowed subscriptions are closed outside the index lock.
	for i, sb := range d.ptrs {
		r.stats.BuffersDropped.Add(1)
		r.stats.LimitTrips[limOutQueue].Add(1)
		sb.s.dropSub(sb, "error: slow consumer: out-queue full, events were dropped; re-subscribe with since")
		d.ptrs[i] = nil
	}
	// A large overflow is a one-off (the subscriptions it closed do not
	// overflow again), so its array goes at once.
	if cap(d.ptrs) > trimKeepCap {
		d.ptrs = nil
	}
}

// roomForLive reports whether one more live frame of n bytes fits in the
// session's live budget. Events held for subscriptions in their stored
// phase count too, frames and bytes: they are queued at EOSE all at once.
// s.out.mu must be held.
func (s *Session) roomForLive(n int) bool {
	o := &s.out
	liveBytes := o.bytes[catLive] + o.heldBytes
	liveFrames := o.frames[catLive] + int(o.heldFrames)
	return liveFrames < s.r.cfg.OutQueueFrames && liveBytes+n <= s.r.cfg.OutQueueBytes
}
