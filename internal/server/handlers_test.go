package server

import (
	"bytes"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// waitFor polls cond until it holds, failing the test after a minute
// (a goroutine that should have parked or ended never did).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}

// TestHandlerPoolReuse: a task given while a goroutine waits runs on
// that goroutine; no new one starts.
func TestHandlerPoolReuse(t *testing.T) {
	p := newHandlerPool(8, 4, 16, slog.Default())
	defer p.Stop()
	done := make(chan struct{})
	var stacks []byte
	for i := 0; i < 100; i++ {
		p.Go(func() { done <- struct{}{} })
		<-done
		// Waiting means blocked in run's select, not only counted idle:
		// a task given between the count and the select finds no
		// goroutine at the handoff and starts a new one, as it should.
		waitFor(t, "the goroutine to wait", func() bool { return p.idle.Load() == 1 && poolSelecting(p, &stacks) == 1 })
	}
	if n := p.started.Load(); n != 1 {
		t.Fatalf("100 tasks one after another started %d goroutines, want 1", n)
	}
}

// poolSelecting counts p's goroutines blocked in run's select (their
// stacks name p as run's receiver), reading every goroutine's stack into
// *stacks, grown until they fit and kept for the next call.
func poolSelecting(p *handlerPool, stacks *[]byte) int {
	if len(*stacks) == 0 {
		*stacks = make([]byte, 1<<20)
	}
	n := runtime.Stack(*stacks, true)
	for n == len(*stacks) {
		*stacks = make([]byte, 2*len(*stacks))
		n = runtime.Stack(*stacks, true)
	}
	buf := (*stacks)[:n]
	frame := []byte(fmt.Sprintf("(*handlerPool).run(%p", p))
	count := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		header, _, _ := bytes.Cut(g, []byte("\n"))
		if bytes.Contains(header, []byte("[select")) && bytes.Contains(g, frame) {
			count++
		}
	}
	return count
}

// TestHandlerPoolLimits: max goroutines run tasks at once (at the
// limit: all start); one more task waits in the queue until a goroutine
// is free (past it: it does not run, nothing else is disturbed); after
// the burst at most maxIdle goroutines stay.
func TestHandlerPoolLimits(t *testing.T) {
	const max, maxIdle = 4, 2
	p := newHandlerPool(max, maxIdle, 16, slog.Default())
	defer p.Stop()
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(max)
	for i := 0; i < max; i++ {
		p.Go(func() { started.Done(); <-release })
	}
	started.Wait() // at the limit: every task runs at once
	if n := p.running.Load(); n != max {
		t.Fatalf("running %d, want %d", n, max)
	}
	ran := make(chan struct{})
	p.Go(func() { close(ran) }) // past the limit: queued
	select {
	case <-ran:
		t.Fatal("a task past the limit ran while every goroutine was busy")
	case <-time.After(50 * time.Millisecond):
	}
	if n := p.started.Load(); n != max {
		t.Fatalf("started %d goroutines past the limit, want %d", n, max)
	}
	release <- struct{}{} // one goroutine finishes, then takes the queued task
	<-ran
	close(release)
	waitFor(t, "the burst's goroutines to end", func() bool {
		return p.running.Load() == maxIdle && p.idle.Load() == maxIdle
	})
}

// TestHandlerPoolPanic: a task that panics is logged and the pool goes
// on running tasks.
func TestHandlerPoolPanic(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
	p := newHandlerPool(2, 2, 4, log)
	defer p.Stop()
	p.Go(func() { panic("boom") })
	done := make(chan struct{})
	p.Go(func() { close(done) })
	<-done
	waitFor(t, "the panic to be logged", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(buf.String(), "boom")
	})
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// TestHandlerPoolStop: Stop ends the waiting goroutines; a task given
// afterwards still runs.
func TestHandlerPoolStop(t *testing.T) {
	p := newHandlerPool(4, 4, 4, slog.Default())
	var wg sync.WaitGroup
	wg.Add(3)
	block := make(chan struct{})
	for i := 0; i < 3; i++ {
		p.Go(func() { wg.Done(); <-block })
	}
	wg.Wait()
	close(block)
	waitFor(t, "three waiting goroutines", func() bool { return p.idle.Load() == 3 })
	p.Stop()
	waitFor(t, "the goroutines to end", func() bool { return p.running.Load() == 0 })
	done := make(chan struct{})
	p.Go(func() { close(done) })
	<-done
}
