package bench

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// stallTimeout ends a wait for OKs (or deliveries) when nothing has
// arrived for this long: what is still outstanding is then reported
// missing rather than waited for until Options.Timeout.
const stallTimeout = 15 * time.Second

// OK states of an event in an okTracker.
const (
	okNone     uint32 = iota
	okNew             // OK true without a prefix: a new event
	okPrefixed        // OK true with a prefix such as "duplicate:"
	okRefused         // OK false
)

// okTracker matches OKs to the events of one EventSet: send times, the
// first answer per event, latency, and counts. Its methods are safe for
// concurrent use.
type okTracker struct {
	set    *EventSet
	base   time.Time      // time origin, fixed before any connection exists
	sentAt []atomic.Int64 // nanoseconds since base plus 1; 0: not sent
	okAt   []atomic.Int64 // when the first answer arrived, nanoseconds since base plus 1; 0: not yet
	state  []atomic.Uint32

	nSent, nAnswered atomic.Int64
	lastAnswer       atomic.Int64 // nanoseconds since base
	lastProgress     atomic.Int64 // unix nanos of the last first answer
	hist             LockedHist

	mu     sync.Mutex
	counts OKCounts
}

func newOKTracker(set *EventSet) *okTracker {
	return &okTracker{
		set:    set,
		base:   time.Now(),
		sentAt: make([]atomic.Int64, set.Len()),
		okAt:   make([]atomic.Int64, set.Len()),
		state:  make([]atomic.Uint32, set.Len()),
		counts: OKCounts{AcceptedWithPrefix: map[string]int64{}, Refused: map[string]int64{}},
	}
}

// start marks the start of publishing for stall detection; call it before
// the first markSent.
func (t *okTracker) start() {
	t.lastAnswer.Store(int64(time.Since(t.base)))
	t.lastProgress.Store(time.Now().UnixNano())
}

// markSent records that event i is about to be sent at origin (the
// scheduled time for open-loop senders, now otherwise).
func (t *okTracker) markSent(i int, at time.Time) {
	t.sentAt[i].Store(int64(at.Sub(t.base)) + 1)
	t.nSent.Add(1)
}

// unsend undoes markSent after a failed send.
func (t *okTracker) unsend(i int) {
	t.sentAt[i].Store(0)
	t.nSent.Add(-1)
}

// sentOffset returns when event i was sent, relative to base, and whether
// it was.
func (t *okTracker) sentOffset(i int) (time.Duration, bool) {
	v := t.sentAt[i].Load()
	return time.Duration(v - 1), v != 0
}

// okOffset returns when event i's first answer arrived, relative to base,
// and whether it has.
func (t *okTracker) okOffset(i int) (time.Duration, bool) {
	v := t.okAt[i].Load()
	return time.Duration(v - 1), v != 0
}

// handleOK records an OK. It returns the event's index and whether this
// was the event's first answer.
func (t *okTracker) handleOK(m *nostr.RelayMessage, at time.Time) (int, bool) {
	i, ok := t.set.Index(m.EventID)
	if !ok || t.sentAt[i].Load() == 0 {
		t.mu.Lock()
		t.counts.Unexpected++
		t.mu.Unlock()
		return -1, false
	}
	st := okNew
	switch {
	case !m.OK:
		st = okRefused
	case m.Message != "" && prefixOf(m.Message) != m.Message:
		st = okPrefixed
	}
	if !t.state[i].CompareAndSwap(okNone, st) {
		t.mu.Lock()
		t.counts.Unexpected++
		t.mu.Unlock()
		return i, false
	}
	off := at.Sub(t.base)
	t.okAt[i].Store(int64(off) + 1)
	sent, _ := t.sentOffset(i)
	t.hist.Record(int64(off - sent))
	t.mu.Lock()
	switch st {
	case okNew:
		t.counts.Accepted++
	case okPrefixed:
		t.counts.Accepted++
		t.counts.AcceptedWithPrefix[prefixOf(m.Message)]++
	case okRefused:
		t.counts.Refused[prefixOf(m.Message)]++
	}
	t.mu.Unlock()
	for {
		last := t.lastAnswer.Load()
		if int64(off) <= last || t.lastAnswer.CompareAndSwap(last, int64(off)) {
			break
		}
	}
	t.lastProgress.Store(time.Now().UnixNano())
	t.nAnswered.Add(1)
	return i, true
}

// acceptedNew reports whether event i got OK true without a prefix.
func (t *okTracker) acceptedNew(i int) bool { return t.state[i].Load() == okNew }

// end returns the time of the last first answer (the start if none).
func (t *okTracker) end() time.Time { return t.base.Add(time.Duration(t.lastAnswer.Load())) }

// outstanding returns events sent and not answered.
func (t *okTracker) outstanding() int64 { return t.nSent.Load() - t.nAnswered.Load() }

// stalled reports whether no answer has arrived for stallTimeout.
func (t *okTracker) stalled() bool {
	return time.Since(time.Unix(0, t.lastProgress.Load())) > stallTimeout
}

// snapshot returns the counts so far, with Sent and Missing filled in.
func (t *okTracker) snapshot() *OKCounts {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.counts
	c.AcceptedWithPrefix = copyCounts(c.AcceptedWithPrefix)
	c.Refused = copyCounts(c.Refused)
	c.Sent = t.nSent.Load()
	c.Missing = c.Sent - t.nAnswered.Load()
	return &c
}

func copyCounts(m map[string]int64) map[string]int64 {
	if len(m) == 0 {
		return nil
	}
	c := make(map[string]int64, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// pubConn is a publishing connection with a window of events in flight.
type pubConn struct {
	c      *Conn
	tokens chan struct{} // one per event in flight
	idx    []int         // the events it sends, in order
	err    error         // why it stopped sending early
}

// openPublishers dials n publishing connections whose OKs go to tr.
// Event i is sent by connection i mod n. extra, if not nil, gets the
// other messages of connection k.
func (r *runner) openPublishers(n, window int, tr *okTracker, extra func(k int, m *nostr.RelayMessage, at time.Time) bool) ([]*pubConn, bool) {
	pcs := make([]*pubConn, n)
	for k := range pcs {
		pcs[k] = &pubConn{tokens: make(chan struct{}, window)}
	}
	for i := 0; i < tr.set.Len(); i++ {
		pcs[i%n].idx = append(pcs[i%n].idx, i)
	}
	conns, ok := r.dialMany(n, func(int) DialConfig { return DialConfig{} }, func(k int) func(*nostr.RelayMessage, time.Time) bool {
		pc := pcs[k]
		return func(m *nostr.RelayMessage, at time.Time) bool {
			if m.Type == nostr.LabelOK {
				if _, first := tr.handleOK(m, at); first {
					select {
					case <-pc.tokens:
					default:
					}
				}
				return true
			}
			if extra != nil {
				return extra(k, m, at)
			}
			return false
		}
	})
	for k, c := range conns {
		pcs[k].c = c
	}
	return pcs, ok
}

// publishWindowed sends every connection's events, keeping at most its
// window in flight, then waits for the outstanding OKs (until the
// deadline, or stallTimeout without progress). It reports whether every
// sent event was answered.
func (r *runner) publishWindowed(pcs []*pubConn, tr *okTracker) bool {
	return r.publishPaced(pcs, tr, 0)
}

// publishPaced is publishWindowed with, for rate above 0, event i not
// sent before start + i/rate (open loop: the schedule does not wait for
// OKs, though the window still caps what is in flight).
func (r *runner) publishPaced(pcs []*pubConn, tr *okTracker, rate float64) bool {
	var wg sync.WaitGroup
	start := time.Now().Add(5 * time.Millisecond)
	for _, pc := range pcs {
		wg.Add(1)
		go func(pc *pubConn) {
			defer wg.Done()
			timer := time.NewTimer(time.Hour)
			defer timer.Stop()
			for _, i := range pc.idx {
				if rate > 0 && !r.sleepUntil(timer, start.Add(time.Duration(float64(i)/rate*float64(time.Second)))) {
					return
				}
				select {
				case pc.tokens <- struct{}{}:
				case <-r.ctx.Done():
					return
				case <-pc.c.Done():
					pc.err = ErrClosed
					return
				}
				tr.markSent(i, time.Now())
				if err := pc.c.Send(tr.set.Frames[i]); err != nil {
					tr.unsend(i)
					pc.err = err
					return
				}
			}
		}(pc)
	}
	// Wait for the senders without blocking on a stalled window forever:
	// a stall ends the run.
	sendersDone := make(chan struct{})
	go func() { wg.Wait(); close(sendersDone) }()
	stalled := false
	waitUntil(r.ctx, func() bool {
		select {
		case <-sendersDone:
			return true
		default:
		}
		if tr.outstanding() > 0 && tr.stalled() {
			stalled = true
			return true
		}
		return false
	})
	if stalled || r.ctx.Err() != nil {
		r.cancelSenders(pcs)
		<-sendersDone
	}
	for _, pc := range pcs {
		if pc.err != nil {
			r.res.Fail("a publishing connection stopped sending: %v", pc.err)
			break
		}
	}
	return r.awaitOKs(tr)
}

// sleepUntil waits on timer until due, or returns false when the scenario
// ends first (open-loop senders: the ladder, paced fan-out).
func (r *runner) sleepUntil(timer *time.Timer, due time.Time) bool {
	d := time.Until(due)
	if d <= 0 {
		return r.ctx.Err() == nil
	}
	timer.Reset(d)
	select {
	case <-timer.C:
		return true
	case <-r.ctx.Done():
		return false
	}
}

// cancelSenders closes the publishing connections so that blocked senders
// return.
func (r *runner) cancelSenders(pcs []*pubConn) {
	for _, pc := range pcs {
		pc.c.Close()
	}
}

// awaitOKs waits until every sent event is answered, the deadline passes,
// or nothing arrives for stallTimeout.
func (r *runner) awaitOKs(tr *okTracker) bool {
	waitUntil(r.ctx, func() bool { return tr.outstanding() <= 0 || tr.stalled() })
	if n := tr.outstanding(); n > 0 {
		if !r.timedOut("waiting for OKs") && tr.stalled() {
			r.res.Note("no OK arrived for %v with %d outstanding: stopped waiting", stallTimeout, n)
		}
		return false
	}
	return true
}

// judgeOK turns OK counts into failures. Refusals fail the run unless
// allowRefused (the ladder measures them).
func (r *runner) judgeOK(c *OKCounts, allowRefused bool) {
	if c.Missing > 0 {
		r.res.Fail("%d of %d events got no OK", c.Missing, c.Sent)
	}
	if n := c.RefusedTotal(); n > 0 && !allowRefused {
		r.res.Fail("%d of %d events refused (%s)", n, c.Sent, formatCounts(c.Refused))
	}
	var pre int64
	for _, v := range c.AcceptedWithPrefix {
		pre += v
	}
	if pre > 0 {
		r.res.Fail("%d of %d events were answered OK true with a prefix (%s), so were not stored as new: "+
			"were they published before? use another --seed or --created-at", pre, c.Sent, formatCounts(c.AcceptedWithPrefix))
	}
	if c.Unexpected > 0 {
		r.res.Fail("%d unexpected OKs (an unknown event id, or a second OK for one event)", c.Unexpected)
	}
}

// Ingest publishes Options.Events events over one connection with
// Options.Window events in flight and measures accepted events per second
// and OK latency.
func Ingest(o Options) (*Result, error) {
	o.Conns = 1
	return publishScenario(ScenarioIngest, o)
}

// Parallel is Ingest over Options.Conns connections (Events in total),
// each with its own window.
func Parallel(o Options) (*Result, error) { return publishScenario(ScenarioParallel, o) }

func publishScenario(name string, o Options) (*Result, error) {
	r, err := newRunner(name, o)
	if err != nil {
		return nil, err
	}
	o = r.o
	r.param("events", o.Events)
	r.param("conns", o.Conns)
	r.param("window", o.Window)
	set, err := r.signFrames(r.generator(name, o.Events), 0, o.Events)
	if err != nil {
		return nil, err
	}
	tr := newOKTracker(set)
	pcs, ok := r.openPublishers(o.Conns, o.Window, tr, nil)
	if !ok {
		return r.finish(), nil
	}
	stop := r.phase("publishing", int64(o.Events), tr.nAnswered.Load)
	r.startMeasure()
	tr.start()
	r.publishWindowed(pcs, tr)
	end := tr.end()
	stop()
	c := tr.snapshot()
	r.stopMeasure(end, c.Accepted, 0)
	r.res.OK = c
	r.res.Rates = map[string]float64{"accepted_events": r.rate(c.Accepted, end)}
	r.res.Latency = map[string]Summary{"ok": tr.hist.Snapshot().Summary()}
	r.judgeOK(c, false)
	r.checkConns()
	return r.finish(), nil
}
