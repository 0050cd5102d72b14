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
