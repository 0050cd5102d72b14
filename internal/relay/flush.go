package relay

import (
	"sync"
)

// flusher is the pool of goroutines that hand out-queues to their
// transports. A session is queued at most once at a time (outbox.scheduled),
// so the queue is bounded by the number of sessions. Producers (fan-out,
// stored queries, message handlers) append frames and schedule the session
// once per batch, so one write carries many frames.
type flusher struct {
	mu     sync.Mutex
	cond   *sync.Cond
	queue  fifo[*Session]
	closed bool
	wg     sync.WaitGroup
}

func newFlusher(workers int) *flusher {
	f := &flusher{}
	f.cond = sync.NewCond(&f.mu)
	for i := 0; i < workers; i++ {
		f.wg.Add(1)
		go f.run()
	}
	return f
}

// schedule queues s for a flush unless it is already queued.
func (f *flusher) schedule(s *Session) {
	if !s.out.scheduled.CompareAndSwap(false, true) {
		return
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		s.out.scheduled.Store(false)
		return
	}
	f.queue.push(s)
	f.mu.Unlock()
	f.cond.Signal()
}

// flushNow flushes s on the calling goroutine unless it is already queued
// or being flushed (in which case that flush will take what is queued).
func (f *flusher) flushNow(s *Session) {
	if s.out.scheduled.CompareAndSwap(false, true) {
		s.flush()
	}
}

func (f *flusher) run() {
	defer f.wg.Done()
	for {
		f.mu.Lock()
		for f.queue.len() == 0 && !f.closed {
			f.cond.Wait()
		}
		if f.queue.len() == 0 && f.closed {
			f.mu.Unlock()
			return
		}
		s := f.queue.pop()
		f.mu.Unlock()
		s.flush()
	}
}

// close stops the workers after the queue is drained.
func (f *flusher) close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.cond.Broadcast()
	f.wg.Wait()
}

// flush hands queued frames to the transport until the queue is empty or
// the transport holds transportLowWater bytes. It runs on a flusher
// goroutine (or inline), one at a time per session (out.scheduled).
func (s *Session) flush() {
	o := &s.out
	for {
		if s.closed.Load() {
			o.scheduled.Store(false)
			return
		}
		if o.inTransp.Load() >= transportLowWater {
			o.scheduled.Store(false)
			// Written may have crossed the watermark between the load and
			// the store; if so it could not schedule us: check again.
			if o.inTransp.Load() < transportLowWater {
				s.r.flusher.schedule(s)
			}
			return
		}
		var rel [numCats]int
		o.mu.Lock()
		chunk := o.takeChunk(&rel)
		if chunk == nil {
			o.scheduled.Store(false)
			o.mu.Unlock()
			return
		}
		o.mu.Unlock()
		if rel[catStored] > 0 {
			s.r.releaseQueryBytes(int64(rel[catStored]))
		}
		inTransp := o.inTransp.Add(int64(len(chunk)))
		err := s.t.Write(chunk)
		o.mu.Lock()
		o.peak.transport = max(o.peak.transport, inTransp)
		o.doneChunk()
		resume := s.resumableLocked()
		o.mu.Unlock()
		if resume != nil {
			s.r.queries.enqueue(resume)
		}
		if err != nil {
			o.scheduled.Store(false)
			s.close(CloseInternalError, "write failed")
			return
		}
	}
}

// resumableLocked returns the parked query if the session's stored-query
// backlog fell under half its budget. s.out.mu must be held.
func (s *Session) resumableLocked() *queryJob {
	j := s.parked
	if j == nil || int64(s.out.bytes[catStored]) > s.r.cfg.QueryBytesPerConn/2 {
		return nil
	}
	if s.r.stats.QueryBytesQueued.Load() > s.r.cfg.QueryBytesTotal {
		return nil
	}
	s.parked = nil
	return j
}
