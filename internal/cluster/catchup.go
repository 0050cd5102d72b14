package cluster

import (
	"errors"
	"sync"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// catchUp is the state of the one goroutine that catches up from the
// store. Requests (a point in time each) merge into one pending request,
// the earliest point asked for; runs are serialized, so two triggers never
// replay the same events at once, and the de-duplication window skips
// what an earlier run (or the bus) already fanned out.
type catchUp struct {
	mu       sync.Mutex
	pending  bool
	since    int64 // pending: the earliest point asked for (unix nanos)
	running  bool
	runSince int64
	// The last run that completed: it fanned out every event committed
	// from since up to start (less the margin), so a later request from
	// a point at or after since need only start there.
	last    struct{ since, start int64 }
	hasLast bool
	kick    chan struct{} // capacity 1: a request is waiting
}

// requestCatchUp asks for a catch-up of the events committed at or after
// since (unix nanos, margin included).
func (b *Bridge) requestCatchUp(since int64) {
	b.addRequest(since)
	b.kickCatchUp()
}

// kickCatchUp wakes the loop for the pending request.
func (b *Bridge) kickCatchUp() {
	select {
	case b.cu.kick <- struct{}{}:
	default:
	}
}

// addRequest merges a request into the pending one without waking the
// loop. It takes b.cu.mu, which may be taken while b.mu is held (never
// the other way round).
func (b *Bridge) addRequest(since int64) {
	c := &b.cu
	c.mu.Lock()
	if !c.pending || since < c.since {
		c.since = since
	}
	c.pending = true
	b.pinWindow()
	c.mu.Unlock()
}

// pinWindow keeps in the de-duplication window what the pending and
// running catch-ups may read again. b.cu.mu must be held.
func (b *Bridge) pinWindow() {
	c := &b.cu
	margin := int64(b.opts.CatchUpMargin)
	var pin int64
	if c.pending {
		pin = c.since - margin
	}
	if c.running && (pin == 0 || c.runSince-margin < pin) {
		pin = c.runSince - margin
	}
	b.win.setPin(pin)
}

// takeRequest takes the pending request for a run, starting it no earlier
// than what the last completed run covered.
func (b *Bridge) takeRequest() (int64, bool) {
	c := &b.cu
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.pending {
		return 0, false
	}
	since := c.since
	if c.hasLast && c.last.since <= since {
		since = max(since, c.last.start-int64(b.opts.CatchUpMargin))
	}
	c.pending, c.running, c.runSince = false, true, since
	return since, true
}

// endRun records the end of a run that started at start (unix nanos).
func (b *Bridge) endRun(since, start int64, ok bool) {
	c := &b.cu
	c.mu.Lock()
	c.running = false
	if ok {
		c.last.since, c.last.start, c.hasLast = since, start, true
	} else if !c.pending || since < c.since {
		c.since, c.pending = since, true // retried at the next poll
	}
	b.pinWindow()
	c.mu.Unlock()
}

// poll asks for a catch-up from where the last one ended.
func (b *Bridge) poll() {
	c := &b.cu
	c.mu.Lock()
	since, ok := c.last.start-int64(b.opts.CatchUpMargin), c.hasLast
	c.mu.Unlock()
	if !ok {
		since = time.Now().UnixNano() - int64(b.opts.PollInterval+b.opts.CatchUpMargin)
	}
	b.addRequest(since)
}

// catchUpLoop runs catch-ups as they are asked for, and every PollInterval
// while a loss goes on; a failed run is retried after PollInterval.
func (b *Bridge) catchUpLoop() {
	defer b.wg.Done()
	tick := time.NewTicker(b.opts.PollInterval)
	defer tick.Stop()
	failed := false
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-b.cu.kick:
			if failed {
				continue // the pending request waits for the retry
			}
		case <-tick.C:
			if !failed && !b.lossOngoing() {
				continue
			}
			b.poll()
		}
		since, ok := b.takeRequest()
		if !ok {
			continue
		}
		start := time.Now().UnixNano()
		n, err := b.runCatchUp(since)
		// The counts go in before the run is marked over, so whoever
		// sees no catch-up running sees its counts too.
		b.st.caughtUp.Add(n)
		switch {
		case err == nil:
			b.st.catchUps.Add(1)
		case b.ctx.Err() == nil: // a failure, unless the bridge is stopping
			b.st.catchUpErrors.Add(1)
		}
		b.endRun(since, start, err == nil)
		if err != nil {
			if b.ctx.Err() != nil {
				return
			}
			failed = true
			b.log.Warn("cluster: catch-up failed; retrying", "since", time.Unix(0, since), "err", err)
			continue
		}
		failed = false
		if n > 0 {
			b.log.Info("cluster: caught up from the store", "since", time.Unix(0, since), "events", n)
		}
	}
}

// errStopped ends a catch-up when delivery has stopped.
var errStopped = errors.New("cluster: delivery stopped")

// caught is one record a catch-up is about to hand to the relay.
type caught struct {
	ev     *nostr.Event
	commit uint64
}

// runCatchUp fans out the events committed at or after since that this
// node has not fanned out, in batches of CatchUpBatch, and returns how
// many it handed to the relay.
func (b *Bridge) runCatchUp(since int64) (int64, error) {
	if !b.win.covers(since - int64(b.opts.CatchUpMargin)) {
		b.st.dedupShort.Add(1)
	}
	it, err := b.opts.Feed.CommittedSince(b.ctx, time.Unix(0, since))
	if err != nil {
		return 0, err
	}
	defer it.Close()
	batch := make([]caught, 0, min(b.opts.CatchUpBatch, 256))
	var n int64
	for {
		batch = batch[:0]
		more := true
		for len(batch) < b.opts.CatchUpBatch {
			if !it.Next() {
				more = false
				break
			}
			rec := it.Record()
			if b.win.has(rec.ID) {
				b.st.duplicates.Add(1)
				continue
			}
			ev, err := nostr.ParseEvent(rec.Raw, nil)
			if err != nil {
				b.st.bad.Add(1)
				b.log.Warn("cluster: unreadable event in the store", "id", rec.ID.Hex(), "err", err)
				continue
			}
			batch = append(batch, caught{ev: ev, commit: rec.Seq})
		}
		if !more {
			if err := it.Err(); err != nil {
				return n, err
			}
		}
		for i := range batch {
			c := &batch[i]
			if !b.admit(c.ev) {
				continue
			}
			if !b.handOn(c.ev, c.commit) {
				return n, errStopped
			}
			n++
			batch[i] = caught{}
		}
		if !more {
			return n, nil
		}
	}
}
