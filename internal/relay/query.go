package relay

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// queryJob is one stored query (REQ) or count (COUNT) in the scheduler. A
// REQ job runs in time slices: it is requeued when its slice ends and
// parked when its connection's (or the relay's) stored-query budget is
// full, and resumed when the client has read enough.
type queryJob struct {
	s       *Session
	sb      *sub // nil for COUNT
	subID   string
	filters []nostr.Filter
	count   bool
	cnt     *countJob      // COUNT state between slices (count.go)
	it      store.Iterator // owned by whoever runs or releases the job
	// held are the live events matched while the query runs, sent after
	// EOSE unless the query's snapshot includes them; guarded by
	// s.out.mu (REQ only).
	held      []held
	zbuf      []byte // the record being sent, compressed (compress.go)
	t0        time.Time
	sent      int
	cancelled atomic.Bool
	finished  atomic.Bool
}

func (j *queryJob) cancel() { j.cancelled.Store(true) }

// hold keeps a live event for after EOSE and counts it against the live
// out-queue caps. s.out.mu must be held.
func (j *queryJob) hold(o *outbox, raw []byte, seq uint64) {
	j.held = append(j.held, held{raw: raw, seq: seq})
	o.hold(len(raw), 1)
}

// unhold takes the held events out of the job and the live count, and
// returns them. s.out.mu must be held.
func (j *queryJob) unhold(o *outbox) []held {
	n := 0
	for i := range j.held {
		n += len(j.held[i].raw)
	}
	o.hold(-n, -len(j.held))
	h := j.held
	j.held = nil
	return h
}

// release closes the job's iterator. It is called by whoever holds the job
// when it will never run again.
func (j *queryJob) release() {
	if j.finished.CompareAndSwap(false, true) && j.it != nil {
		j.it.Close()
		j.it = nil
	}
}

// queryScheduler runs query jobs on a fixed pool of workers, FIFO, in
// slices of Config.QuerySlice.
type queryScheduler struct {
	r       *Relay
	mu      sync.Mutex
	cond    *sync.Cond
	queue   fifo[*queryJob]
	parked  []*queryJob // waiting for the relay-wide budget
	nparked atomic.Int32
	closed  bool
	wg      sync.WaitGroup
}

func newQueryScheduler(r *Relay) *queryScheduler {
	q := &queryScheduler{r: r}
	q.cond = sync.NewCond(&q.mu)
	for i := 0; i < r.cfg.QueryWorkers; i++ {
		q.wg.Add(1)
		go q.worker()
	}
	return q
}

func (q *queryScheduler) enqueue(j *queryJob) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		j.release()
		return
	}
	q.queue.push(j)
	q.mu.Unlock()
	q.cond.Signal()
}

// parkGlobal parks j until the relay-wide budget frees, unless it already
// has. It reports whether j was parked.
func (q *queryScheduler) parkGlobal(j *queryJob) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.r.stats.QueryBytesQueued.Load() < q.r.cfg.QueryBytesTotal {
		return false
	}
	q.parked = append(q.parked, j)
	q.nparked.Add(1)
	return true
}

// resumeGlobal requeues every job parked on the relay-wide budget.
func (q *queryScheduler) resumeGlobal() {
	if q.nparked.Load() == 0 {
		return
	}
	q.mu.Lock()
	q.queue.push(q.parked...)
	q.nparked.Add(-int32(len(q.parked)))
	clear(q.parked)
	q.parked = q.parked[:0]
	q.mu.Unlock()
	q.cond.Broadcast()
}

func (q *queryScheduler) worker() {
	defer q.wg.Done()
	for {
		q.mu.Lock()
		for q.queue.len() == 0 && !q.closed {
			q.cond.Wait()
		}
		if q.closed {
			q.mu.Unlock()
			return
		}
		j := q.queue.pop()
		q.mu.Unlock()
		q.run(j)
	}
}

// close stops the workers and releases every queued or parked job.
func (q *queryScheduler) close() {
	q.mu.Lock()
	q.closed = true
	rest := append(q.queue.take(), q.parked...)
	q.parked = nil
	q.mu.Unlock()
	q.cond.Broadcast()
	q.wg.Wait()
	for _, j := range rest {
		j.release()
	}
}

// run executes one slice of j.
func (q *queryScheduler) run(j *queryJob) {
	r := q.r
	s := j.s
	if j.cancelled.Load() || s.closed.Load() {
		j.release()
		return
	}
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("BUG: panic in stored query", "panic", p)
			j.release()
			s.close(CloseInternalError, "internal error")
		}
	}()
	if j.count {
		q.runCount(j)
		return
	}
	o := &s.out
	sb := j.sb
	if j.it == nil {
		it, err := r.store.Query(r.ctx, j.filters)
		if err != nil {
			q.fail(j, err)
			return
		}
		j.it = it
		o.mu.Lock()
		sb.setSnapshot(it.Snapshot())
		o.mu.Unlock()
	}
	deadline := time.Now().Add(r.cfg.QuerySlice)
	sinceFlush := 0
	for n := 1; ; n++ {
		if n&15 == 0 {
			if j.cancelled.Load() {
				j.release()
				return
			}
			if time.Now().After(deadline) {
				r.flusher.schedule(s)
				q.enqueue(j)
				return
			}
		}
		// Budgets: park until the client has read enough.
		o.mu.Lock()
		if int64(o.bytes[catStored]) >= r.cfg.QueryBytesPerConn {
			r.stats.LimitTrips[limQueryBytesPerConn].Add(1)
			if sb.state == subClosed {
				o.mu.Unlock()
				j.release()
				return
			}
			s.parked = j
			o.mu.Unlock()
			r.flusher.schedule(s)
			return
		}
		o.mu.Unlock()
		if r.stats.QueryBytesQueued.Load() >= r.cfg.QueryBytesTotal {
			r.stats.LimitTrips[limQueryBytesTotal].Add(1)
			r.flusher.schedule(s)
			if q.parkGlobal(j) {
				return
			}
		}
		if !j.it.Next() {
			break
		}
		rec := j.it.Record()
		if !s.canSeeRecord(rec) {
			continue
		}
		// Compress outside the lock (the fan-out takes it too).
		var zbody []byte
		if s.wantsBody(sb.prefix, rec.Raw) {
			zbody, j.zbuf = r.body(rec.ID, rec.Raw, j.zbuf)
		}
		o.mu.Lock()
		if sb.state == subClosed {
			o.mu.Unlock()
			j.release()
			return
		}
		size := s.appendEvent(catStored, sb.prefix, rec.Raw, zbody)
		o.mu.Unlock()
		if v := r.stats.QueryBytesQueued.Add(int64(size)); v > r.queryBytesPeak.Load() {
			storeMax(&r.queryBytesPeak, v)
		}
		r.stats.StoredSent.Add(1)
		r.stats.MessagesOut.Add(1)
		j.sent++
		sinceFlush += size
		if sinceFlush >= 64<<10 {
			sinceFlush = 0
			// Write what is queued now, from this goroutine, unless a
			// flusher already is: the socket usually takes it at once,
			// so the out-queue's buffer stays small and is reused
			// instead of growing to the whole answer (measured: buffer
			// growth and its GC were a third of a 1000-event REQ's CPU).
			r.flusher.flushNow(s)
		}
	}
	if err := j.it.Err(); err != nil {
		q.fail(j, err)
		return
	}
	j.release()
	// EOSE, then the live events held during the stored phase that the
	// query's snapshot did not include (the hand-off: sub.sawCommit).
	eose := nostr.AppendEOSE(nil, sb.id)
	o.mu.Lock()
	if sb.state == subStored {
		o.appendFrame(catControl, eose)
		held := j.unhold(o) // uncounted first: they move to the queue
		for _, h := range held {
			if !sb.sawCommit(h.seq) {
				s.appendEvent(catLive, sb.prefix, h.raw, nil)
				r.stats.Deliveries.Add(1)
				r.stats.MessagesOut.Add(1)
			}
		}
		clear(held)
		sb.state = subLive
		if sb.job == j {
			sb.job = nil
		}
	}
	o.mu.Unlock()
	r.stats.MessagesOut.Add(1)
	r.QueryLatency.Observe(time.Since(j.t0).Seconds())
	r.flusher.schedule(s)
}

// fail ends a query that hit a store error: the subscription is closed
// with CLOSED "error: ...".
func (q *queryScheduler) fail(j *queryJob, err error) {
	r := q.r
	j.release()
	r.stats.DBErrors.Add(1)
	r.log.Warn("stored query failed", "err", err)
	if j.sb != nil {
		j.s.dropSub(j.sb, "error: query failed")
	} else {
		j.s.closedMsg(j.subID, "error: count failed")
	}
}

// clampFilters applies MaxLimit to every filter (a missing limit becomes
// MaxLimit) and counts each limit it lowers (limit_clamped).
func (r *Relay) clampFilters(filters []nostr.Filter) {
	maxLimit := r.live.Load().MaxLimit
	for i := range filters {
		f := &filters[i]
		if !f.HasLimit || f.Limit > maxLimit {
			if f.HasLimit {
				r.stats.LimitTrips[limLimitClamped].Add(1)
			}
			f.Limit, f.HasLimit = maxLimit, true
		}
	}
}

// handleReq opens (or replaces) a subscription: it is listed in the live
// index first, then its stored query is queued; live matches that arrive
// meanwhile are held and sent after EOSE unless the stored query sent them.
func (s *Session) handleReq(subID string, filters []nostr.Filter) {
	r := s.r
	rej := s.allowReq()
	if rej == nil {
		rej = s.checkReq(filters)
	}
	if rej == nil {
		rej = r.checkSearch(filters)
	}
	if rej != nil {
		s.handleClose(subID) // a refused REQ still replaces one with its id
		s.refuseReq(subID, rej)
		return
	}
	r.clampFilters(filters)
	for i := range filters {
		filters[i].Prepare() // sorted lists: fan-out matches long lists by binary search
	}
	r.stats.Queries.Add(1)
	sb := &sub{s: s, filters: filters, state: subStored}
	if len(filters) == 1 {
		// Keep the one filter inside the subscription, so the parsed
		// message it came in is not retained for the subscription's life.
		sb.one[0] = filters[0]
		sb.filters = sb.one[:]
	}
	sb.setID(subID)
	j := &queryJob{s: s, sb: sb, subID: subID, filters: filters, t0: r.now()}
	sb.job = j

	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return
	}
	old := s.subs.get(subID)
	live := r.live.Load()
	if maxSubs := live.MaxSubscriptions; old == nil && len(s.subs) >= maxSubs {
		s.mu.Unlock()
		r.stats.LimitTrips[limSubscriptions].Add(1)
		s.closedMsg(subID, "blocked: too many open subscriptions on this connection (max "+itoa(maxSubs)+")")
		return
	}
	values := filterValues(filters)
	held := int(s.subValues)
	if old != nil {
		held -= filterValues(old.filters) // replaced
	}
	if maxValues := live.MaxSubscriptionValues; maxValues >= 0 && held+values > maxValues {
		if old != nil {
			// The CLOSED below closes the id for the client: the
			// subscription it was to replace goes too.
			s.removeSub(old)
		}
		s.mu.Unlock()
		if old != nil {
			r.closeSub(old)
		}
		r.stats.LimitTrips[limSubscriptionValues].Add(1)
		s.closedMsg(subID, "blocked: this connection's subscriptions would hold "+itoa(held+values)+" filter values (ids, authors, kinds, tag values), over its "+itoa(maxValues)+": close some, or ask for fewer at a time")
		return
	}
	s.subValues = int32(held + values)
	s.subs.put(sb)
	if old != nil {
		r.closeSub(old) // lock order: s.mu, index.mu, out.mu
	}
	r.idx.add(sb) // under s.mu, so Closed cannot miss it
	sb.counted.Store(true)
	r.stats.SubscriptionsActive.Add(1)
	s.mu.Unlock()
	r.stats.SubscriptionsTotal.Add(1)
	r.queries.enqueue(j)
}

// handleCount answers a NIP-45 COUNT (count.go runs it).
func (s *Session) handleCount(subID string, filters []nostr.Filter) {
	r := s.r
	rej := s.allowReq()
	if rej == nil {
		rej = s.checkReq(filters)
	}
	if rej != nil {
		s.refuseReq(subID, rej)
		return
	}
	r.stats.Counts.Add(1)
	r.queries.enqueue(&queryJob{s: s, subID: subID, filters: filters, count: true, cnt: &countJob{}, t0: r.now()})
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	neg := n < 0
	if neg {
		n = -n
	}
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

// checkSearch refuses NIP-50 filters when the store has no search index,
// so that a client can tell "search unsupported" from "no match".
func (r *Relay) checkSearch(filters []nostr.Filter) *nostr.Rejection {
	if r.searchOK {
		return nil
	}
	for i := range filters {
		if filters[i].Search != "" {
			return nostr.Reject(nostr.PrefixError, "this relay does not support search (NIP-50)")
		}
	}
	return nil
}
