package relay

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// Optimistic verification (relay.verify_mode = "optimistic").
//
// A verifier that takes an event which may be answered optimistically
// (see ingest.optimistic) does not check its signature: in the event's
// turn it asks the store to hold it unverified (store.Unverified), and the
// dispatcher sends OK:true once the hold is committed. The event is then
// checked behind, by the behind pool, and released into the store (stored
// by every rule, with a commit position, and fanned out as any stored
// event is) or rejected (its held copy removed, the sender told by a
// NOTICE, the pubkey quarantined). Until it is released it is in no
// index, so no REQ, COUNT, NEG, export, sync or scan sees it, and no live
// subscription receives it: the fan-out of an event happens only at its
// release. The store decides replacement, deletion and vanishing only at
// the release, against the store as it is then (store.Unverified), so an
// unverified event never displaces or deletes a verified one.
//
// The behind pool holds at most Config.VerifyPending events (slots).
// When it is full, and for a quarantined pubkey, the event is verified
// before its OK, as in sync mode. A pubkey is quarantined when one of its
// held events fails: its later events are verified before their OK. Its
// other held events are not dropped: each is checked and released if
// valid (dropping them would let anyone who forges one event in a
// pubkey's name take down that pubkey's genuine events, already answered
// OK:true).
//
// Held events the store still has at start (the relay stopped, or was
// killed, with events in the pool) are listed by listHeld before the
// relay takes any event, and fed to the pool by recover: they are
// checked and released or rejected like the others (and were never
// served meanwhile).

// maxQuarantined bounds the quarantine list; past it the list forgets an
// arbitrary entry for each new one.
const maxQuarantined = 1 << 16

// behind is the pool that checks held events.
type behind struct {
	r     *Relay
	st    store.Unverified
	slots chan struct{} // one token per held event not yet released or rejected
	turns               // the queue of held events, handed on in order
	stop  chan struct{} // closed by close: recover stops feeding

	workers  sync.WaitGroup
	inflight sync.WaitGroup // releases and rejections submitted, not yet done
	recovery sync.WaitGroup

	qmu        sync.Mutex
	quarantine map[nostr.PubKey]struct{}
	nQuar      atomic.Int64
}

func newBehind(r *Relay, st store.Unverified) *behind {
	b := &behind{
		r:          r,
		st:         st,
		slots:      make(chan struct{}, r.cfg.VerifyPending),
		stop:       make(chan struct{}),
		quarantine: make(map[nostr.PubKey]struct{}),
	}
	b.turns.init(r.cfg.VerifyPending, r.cfg.VerifyWorkers)
	for i := 0; i < r.cfg.VerifyWorkers; i++ {
		b.workers.Add(1)
		go b.run()
	}
	// The held events are listed here, before the relay takes any event:
	// listed later, the list could include events held by this run,
	// which would then be checked twice (harmless, but counted as
	// recovered and holding two slots).
	held := b.listHeld()
	b.recovery.Add(1)
	go b.recover(held)
	return b
}

// reserve takes a slot without blocking and reports whether there was one.
func (b *behind) reserve() bool {
	select {
	case b.slots <- struct{}{}:
		b.r.stats.HeldPending.Add(1)
		return true
	default:
		return false
	}
}

// free gives a slot back.
func (b *behind) free() {
	<-b.slots
	b.r.stats.HeldPending.Add(-1)
}

// push queues a held event whose slot is reserved: it never blocks.
func (b *behind) push(j verifyJob) {
	select {
	case b.queue <- j:
	default:
		panic("BUG: behind queue full with a reserved slot")
	}
}

// quarantined reports whether pk's events are verified before their OK.
func (b *behind) quarantined(pk *nostr.PubKey) bool {
	if b.nQuar.Load() == 0 {
		return false
	}
	b.qmu.Lock()
	_, ok := b.quarantine[*pk]
	b.qmu.Unlock()
	return ok
}

func (b *behind) addQuarantine(pk *nostr.PubKey) {
	b.qmu.Lock()
	if _, ok := b.quarantine[*pk]; !ok {
		if len(b.quarantine) >= maxQuarantined {
			for k := range b.quarantine {
				delete(b.quarantine, k)
				break
			}
		}
		b.quarantine[*pk] = struct{}{}
	}
	b.nQuar.Store(int64(len(b.quarantine)))
	b.qmu.Unlock()
}

// listHeld returns the held events the store has at start: at most
// verify_pending for each run that held them (each held event had a
// slot; on PostgreSQL, the other nodes' held events are listed too).
func (b *behind) listHeld() []*nostr.Event {
	// Bounded as initPolicy's reads are: a store that does not answer
	// must not hold the start for ever (the events stay held, and are
	// listed at the next start).
	ctx, cancel := context.WithTimeout(b.r.ctx, 30*time.Second)
	defer cancel()
	var evs []*nostr.Event
	err := b.st.Unverified(ctx, func(ev *nostr.Event) error {
		evs = append(evs, ev)
		return nil
	})
	if err != nil {
		b.r.log.Error("relay: listing held unverified events", "err", err)
	}
	if len(evs) > 0 {
		b.r.log.Info("relay: verifying events held unverified by an earlier run", "events", len(evs))
	}
	return evs
}

// recover feeds the held events listed at start to the pool, waiting for
// slots, until they are all queued or the relay stops.
func (b *behind) recover(evs []*nostr.Event) {
	defer b.recovery.Done()
	for _, ev := range evs {
		select {
		case b.slots <- struct{}{}:
			b.r.stats.HeldPending.Add(1)
			b.r.stats.EventsHeldRecovered.Add(1)
			b.push(verifyJob{ev: ev, t0: b.r.now()})
		case <-b.stop:
			return // still held: checked at the next start
		}
	}
}

func (b *behind) run() {
	defer b.workers.Done()
	r := b.r
	jobs := make([]verifyJob, 0, verifyBatch)
	evs := make([]*nostr.Event, 0, verifyBatch)
	var ok [verifyBatch]bool
	for {
		ticket, open := b.take(&jobs)
		if !open {
			return
		}
		evs = evs[:0]
		for i := range jobs {
			evs = append(evs, jobs[i].ev)
		}
		nostr.VerifyEvents(r.verifier, evs, ok[:])
		b.waitTurn(ticket)
		for i := range jobs {
			b.checked(jobs[i], ok[i])
		}
		b.endTurn()
		clear(jobs)
		clear(evs)
	}
}

// checked releases or rejects a held event after its signature check, in
// its turn (so one connection's events are released in the order they
// were held). It may block (backpressure from the writer).
func (b *behind) checked(j verifyJob, valid bool) {
	r := b.r
	b.inflight.Add(1)
	if valid {
		if s := j.s; s != nil && s.badSigs.Load() != 0 {
			s.badSigs.Store(0) // as in sync mode: a valid event ends a run of bad ones
		}
		err := b.st.SubmitVerified(r.ctx, j.ev, func(res store.SaveResult) {
			defer b.inflight.Done()
			b.free()
			r.dispatch.push(dispatchItem{ev: j.ev, res: res, stored: true, release: true})
		})
		if err != nil {
			// Still held: checked again at the next start.
			b.inflight.Done()
			b.free()
			r.stats.DBErrors.Add(1)
			r.log.Warn("relay: could not release a verified event", "id", j.ev.ID.Hex(), "err", err)
		}
		return
	}
	r.stats.EventsHeldInvalid.Add(1)
	b.addQuarantine(&j.ev.PubKey)
	err := b.st.SubmitRejected(r.ctx, j.ev, func(err error) {
		defer b.inflight.Done()
		b.free()
		if err != nil {
			r.stats.DBErrors.Add(1)
			r.log.Warn("relay: could not remove a held event with a bad signature (checked again at the next start)", "id", j.ev.ID.Hex(), "err", err)
		}
	})
	if err != nil {
		b.inflight.Done()
		b.free()
		r.stats.DBErrors.Add(1)
	}
	if s := j.s; s != nil {
		s.notice("invalid: event " + j.ev.ID.Hex() + " has a bad signature: it was not stored and will not be served; events by its pubkey are now verified before their OK")
		s.badSignature()
	}
}

// close stops recovery, checks what is queued, and waits until every
// release and rejection is committed. Nothing may push after close
// starts (ingest.close has returned).
func (b *behind) close() {
	close(b.stop)
	b.recovery.Wait()
	close(b.queue)
	b.workers.Wait()
	b.inflight.Wait()
}
