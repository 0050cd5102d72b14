package server

import (
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync/atomic"
)

// handlerPool runs nbio's message handlers (its ServerExecutor): every
// WebSocket message of a connection, and its upgrade request, run in a
// task given to Go.
//
// nbio's own pool starts a goroutine for a task whenever fewer than its
// maximum run and ends it as soon as no task is queued. Under a moderate
// load nearly every message then runs on a new goroutine, whose stack
// starts small and is copied, larger, as the parser and the id hash need
// more: runtime.newstack took 4-7% of the relay's CPU at 2,000 events/s
// (docs/BENCHMARKS.md, issue 19). Here a goroutine that has run its
// task waits for the next one, up to maxIdle waiting at once, so a task
// usually finds a goroutine whose stack has already grown. Beyond that
// it behaves as nbio's pool: at most max goroutines run tasks, the
// excess waits in a queue (Go blocks while the queue is full), and a
// task that panics is logged and does not take the process down.
type handlerPool struct {
	handoff chan func() // unbuffered: taken only by a waiting goroutine
	queue   chan func() // tasks waiting for a goroutine when max run
	stop    chan struct{}
	running atomic.Int64 // goroutines alive
	idle    atomic.Int64 // goroutines waiting for a task
	started atomic.Int64 // goroutines ever started (tests)
	max     int64
	maxIdle int64
	log     *slog.Logger
}

func newHandlerPool(max, maxIdle, queue int, log *slog.Logger) *handlerPool {
	return &handlerPool{
		handoff: make(chan func()),
		queue:   make(chan func(), queue),
		stop:    make(chan struct{}),
		max:     int64(max),
		maxIdle: int64(maxIdle),
		log:     log,
	}
}

// defaultHandlerPool sizes the pool as nbio sizes its own: 1,024
// goroutines a CPU and 65,536 queued tasks.
func defaultHandlerPool(log *slog.Logger) *handlerPool {
	return newHandlerPool(runtime.NumCPU()*1024, 64, 64<<10, log)
}

// Go runs f on a goroutine of the pool.
func (p *handlerPool) Go(f func()) {
	select {
	case p.handoff <- f:
		return
	default:
	}
	if p.running.Add(1) <= p.max {
		p.started.Add(1)
		go p.run(f)
		return
	}
	p.running.Add(-1)
	select {
	case p.queue <- f:
	case p.handoff <- f:
	case <-p.stop:
		go p.call(f) // after Stop: run it anyway, on its own
	}
}

// run runs f, then queued tasks, then waits for more while fewer than
// maxIdle goroutines wait.
func (p *handlerPool) run(f func()) {
	defer p.running.Add(-1)
	for {
		p.call(f)
		select {
		case f = <-p.queue:
			continue
		default:
		}
		if p.idle.Add(1) > p.maxIdle {
			p.idle.Add(-1)
			return
		}
		select {
		case f = <-p.handoff:
		case f = <-p.queue:
		case <-p.stop:
			p.idle.Add(-1)
			return
		}
		p.idle.Add(-1)
	}
}

// call runs f, logging a panic instead of crashing (nbio's pool does
// the same).
func (p *handlerPool) call(f func()) {
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("BUG: panic in a connection's handler", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		}
	}()
	f()
}

// IdleHandlers is the number of the server's handler goroutines waiting
// for a task (at most 64): goroutines that stay by design, which a
// test counting the process's goroutines for leaks leaves out.
func (s *Server) IdleHandlers() int { return int(s.handlers.idle.Load()) }

// Stop ends the waiting goroutines; tasks given later still run.
func (p *handlerPool) Stop() { close(p.stop) }
