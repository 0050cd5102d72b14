package bench

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// runner is the state every scenario shares: options, the result being
// built, the deadline, the connections to close, and the counters of
// messages no scenario handler claims (CLOSED, NOTICE).
type runner struct {
	o      Options
	res    *Result
	ctx    context.Context
	cancel context.CancelFunc
	// deadline cancels ctx when Options.Timeout has run out; left is the
	// time it had left when it was last stopped, and since when it runs
	// again (sign stops it: signing is not timed).
	deadline *time.Timer
	left     time.Duration
	since    time.Time

	mu      sync.Mutex
	conns   []*Conn
	closed  map[string]int64
	notices map[string]int64

	relayS, selfS *Sampler
	t0            time.Time
	wire          atomic.Int64 // bytes read from the relay by every connection
	wire0         int64        // wire at startMeasure
	negotiated    atomic.Int64 // connections that negotiated compression
	short         atomic.Int64 // query answers with fewer events than expected
}

// newRunner checks the options and starts the scenario's clock.
func newRunner(scenario string, o Options) (*runner, error) {
	o = o.Normalize(scenario)
	if _, err := CheckTarget(o.URL, o.AllowRemote); err != nil {
		return nil, err
	}
	if o.SubURL != "" {
		if _, err := CheckTarget(o.SubURL, o.AllowRemote); err != nil {
			return nil, err
		}
	}
	if o.Rate < 0 {
		return nil, fmt.Errorf("%w: negative rate", ErrOptions)
	}
	if o.Text != TextVocabulary && o.Text != TextNatural {
		return nil, fmt.Errorf("%w: --text %q: want %s or %s", ErrOptions, o.Text, TextVocabulary, TextNatural)
	}
	if o.Events > o.MaxEvents || o.Fill > o.MaxEvents {
		return nil, fmt.Errorf("%w: %d events to sign, more than --max-events %d", ErrOptions, max(o.Events, o.Fill), o.MaxEvents)
	}
	for _, c := range []struct {
		flag string
		n    int
	}{{"--events", o.Events}, {"--conns", o.Conns}, {"--subs", o.Subs}, {"--pubs", o.Pubs}, {"--requests", o.Requests}, {"--window", o.Window}, {"--authors", o.Authors}} {
		if c.n < 0 {
			return nil, fmt.Errorf("%w: %s %d: must not be negative", ErrOptions, c.flag, c.n)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &runner{
		o: o, ctx: ctx, cancel: cancel,
		deadline: time.AfterFunc(o.Timeout, cancel), left: o.Timeout, since: time.Now(),
		closed: map[string]int64{}, notices: map[string]int64{},
		res: &Result{
			Scenario: scenario, URL: o.URL, Started: time.Now(),
			Params:   map[string]any{"seed": o.Seed, "authors": o.Authors, "text": o.Text, "timeout_s": o.Timeout.Seconds()},
			Failures: []string{},
		},
	}
	return r, nil
}

// param records a parameter in the result.
func (r *runner) param(k string, v any) { r.res.Params[k] = v }

// generator returns the scenario's event generator for stream, with n
// events ending now (or starting at Options.CreatedAt).
func (r *runner) generator(stream string, n int) *Generator {
	start := r.o.CreatedAt
	if start == 0 {
		start = StartFor(time.Now().Unix(), n, 0)
	}
	r.param("created_at_start", start)
	return NewGenerator(GenConfig{Seed: r.o.Seed, Authors: r.o.Authors, Stream: stream, Start: start, Text: r.o.Text})
}

// sign generates and signs events [first, first+n) with a progress phase.
// Signing is not bounded by Options.Timeout (untimed).
func (r *runner) sign(g *Generator, first, n int) (set *EventSet, err error) {
	r.untimed(func() { set, err = r.signUntimed(g, first, n) })
	return set, err
}

// untimed runs f with the scenario's timeout stopped: the clock stands
// still meanwhile. A ladder signs all its events first, and on a slow
// machine that (with dialling) took about 27 s of the default 120 s,
// which then cut the last step short and counted its OKs as missing.
func (r *runner) untimed(f func()) {
	if !r.deadline.Stop() {
		f() // already run out
		return
	}
	r.left -= time.Since(r.since)
	f()
	r.since = time.Now()
	r.deadline.Reset(max(r.left, 0))
}

func (r *runner) signUntimed(g *Generator, first, n int) (*EventSet, error) {
	var done atomic.Int64
	stop := r.phase("signing", int64(n), done.Load)
	set, err := g.Generate(context.Background(), first, n, 0, func(k int) { done.Add(int64(k)) })
	stop()
	return set, err
}

// signFrames is sign for scenarios that only send the frames and match
// OKs by id: it drops the parsed events and hands the memory back to the
// OS before anything is timed. A load client with a large heap measures
// its own stalls: against a relay that answers OK at once
// (scripts/trace/nullrelay), the ladder's OK p99 was 4.2-5.8 ms with the
// parsed events of 240,000 kept (760 MiB resident) and 2.2-3.4 ms with
// them dropped (310 MiB; docs/BENCHMARKS.md, issue 19).
func (r *runner) signFrames(g *Generator, first, n int) (*EventSet, error) {
	set, err := r.sign(g, first, n)
	if err != nil {
		return nil, err
	}
	set.DropParsed()
	debug.FreeOSMemory() // collects first
	return set, nil
}

// phase shows a progress phase fed by count until the returned function
// is called.
func (r *runner) phase(name string, total int64, count func() int64) (stop func()) {
	p := r.o.Progress
	if p == nil {
		return func() {}
	}
	p.Phase(name, total)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				p.Set(count())
				return
			case <-t.C:
				p.Set(count())
			}
		}
	}()
	return func() { close(quit); wg.Wait() }
}

// dial opens a connection whose unclaimed messages (those h returns false
// for) go to the runner's CLOSED/NOTICE counters.
func (r *runner) dial(ctx context.Context, cfg DialConfig, h func(m *nostr.RelayMessage, at time.Time) bool) (*Conn, error) {
	if cfg.URL == "" {
		cfg.URL = r.o.URL
	}
	cfg.Compress = r.o.Compress
	cfg.WireIn = &r.wire
	c, err := Dial(ctx, cfg, func(m *nostr.RelayMessage, at time.Time) {
		if h != nil && h(m, at) {
			return
		}
		r.unclaimed(m)
	})
	if err != nil {
		return nil, err
	}
	if c.Compressed() {
		r.negotiated.Add(1)
	}
	r.mu.Lock()
	r.conns = append(r.conns, c)
	r.mu.Unlock()
	return c, nil
}

// unclaimed counts a message no handler took.
func (r *runner) unclaimed(m *nostr.RelayMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch m.Type {
	case nostr.LabelClosed:
		r.closed[m.Message]++
	case nostr.LabelNotice:
		r.notices[m.Message]++
	}
}

// countClosed records a CLOSED a handler took.
func (r *runner) countClosed(msg string) {
	r.mu.Lock()
	r.closed[msg]++
	r.mu.Unlock()
}

// dialMany opens n connections, DialConcurrency at a time, and fails the
// run if any cannot be opened. cfg(i) and h(i) give connection i's dial
// configuration and handler.
func (r *runner) dialMany(n int, cfg func(i int) DialConfig, h func(i int) func(*nostr.RelayMessage, time.Time) bool) ([]*Conn, bool) {
	conns := make([]*Conn, n)
	var firstErr error
	var nerr int
	var mu sync.Mutex
	sem := make(chan struct{}, r.o.DialConcurrency)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			dc := cfg(i)
			if dc.LocalIP == nil && n > r.o.PerIP && r.o.PerIP > 0 && r.loopback() {
				// Many connections: spread them over source addresses
				// like the conns scenario, so a relay's per-IP cap does
				// not refuse them.
				dc.LocalIP = sourceIP(i, r.o.PerIP)
			}
			c, err := r.dial(r.ctx, dc, h(i))
			if err != nil {
				mu.Lock()
				nerr++
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				return
			}
			conns[i] = c
		}(i)
	}
	wg.Wait()
	if nerr > 0 {
		r.res.Fail("%d of %d connections could not be opened (first: %v)", nerr, n, firstErr)
		return conns, false
	}
	return conns, true
}

// startMeasure starts the clock of the timed part and the /proc samplers.
func (r *runner) startMeasure() {
	if r.o.PID != 0 {
		s := &Sampler{PID: r.o.PID}
		if err := s.Start(); err != nil {
			r.res.Fail("--pid %d: %v", r.o.PID, err)
		} else {
			r.relayS = s
		}
	}
	s := &Sampler{PID: os.Getpid()}
	if s.Start() == nil {
		r.selfS = s
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		var load float64
		if _, err := fmt.Sscan(string(b), &load); err == nil {
			r.param("loadavg_1m", load)
			if load > float64(runtime.NumCPU()) {
				r.res.Note("the machine was busy when timing started (1-minute load %.1f on %d CPUs): figures are noisy", load, runtime.NumCPU())
			}
		}
	}
	if r.o.Compress {
		r.param("compress", true)
	}
	r.wire0 = r.wire.Load()
	r.t0 = time.Now()
}

// stopMeasure ends the timed part at end (zero: now) and records usage
// per accepted event and per delivery.
func (r *runner) stopMeasure(end time.Time, accepted, deliveries int64) {
	if end.IsZero() {
		end = time.Now()
	}
	r.res.Seconds = end.Sub(r.t0).Seconds()
	w := &WireStats{Compress: r.o.Compress, Negotiated: r.negotiated.Load(), BytesIn: r.wire.Load() - r.wire0}
	if deliveries > 0 {
		w.PerDelivery = float64(w.BytesIn) / float64(deliveries)
	}
	r.res.Wire = w
	per := func(u *Usage) {
		if accepted > 0 {
			u.CPUMicrosPerEvent = u.CPUSeconds * 1e6 / float64(accepted)
		}
		if deliveries > 0 {
			u.CPUMicrosPerDelivery = u.CPUSeconds * 1e6 / float64(deliveries)
		}
	}
	if r.relayS != nil {
		u := r.relayS.Stop()
		per(&u)
		r.res.Relay = &u
		r.relayS = nil
	}
	if r.selfS != nil {
		u := r.selfS.Stop()
		per(&u)
		r.res.Client = &u
		r.selfS = nil
	}
}

// rate returns n per second over the timed part ending at end.
func (r *runner) rate(n int64, end time.Time) float64 {
	d := end.Sub(r.t0).Seconds()
	if d <= 0 {
		return 0
	}
	return float64(n) / d
}

// checkConns records connections the relay dropped and unparseable
// messages; it must run before closeAll.
func (r *runner) checkConns() {
	r.mu.Lock()
	conns := append([]*Conn(nil), r.conns...)
	r.mu.Unlock()
	var lost int64
	var first string
	for _, c := range conns {
		if c.Lost() {
			lost++
			if first == "" {
				first = c.Err().Error()
			}
		}
		if n := c.BadMessages.Load(); n > 0 {
			if r.res.BadMessages == 0 {
				r.res.Fail("unparseable relay message: %s", c.FirstBad())
			}
			r.res.BadMessages += n
		}
	}
	if lost > 0 {
		r.res.Disconnects += lost
		r.res.Fail("%d connections were closed by the relay or the network (first: %s)", lost, first)
	}
}

// finish closes every connection, copies the message counters into the
// result and releases the runner.
func (r *runner) finish() *Result {
	if r.relayS != nil || r.selfS != nil {
		r.stopMeasure(time.Time{}, 0, 0)
	}
	r.mu.Lock()
	conns := r.conns
	r.conns = nil
	r.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	limit := time.After(3 * time.Second)
wait:
	for _, c := range conns {
		select {
		case <-c.Done():
		case <-limit:
			break wait
		}
	}
	r.mu.Lock()
	if len(r.closed) > 0 {
		r.res.Closed = r.closed
	}
	if len(r.notices) > 0 {
		r.res.Notices = r.notices
	}
	r.mu.Unlock()
	if w, q := r.res.Wire, r.res.Queries; w != nil && q != nil && q.Completed > 0 {
		w.PerRequest = float64(w.BytesIn) / float64(q.Completed)
	}
	r.deadline.Stop()
	r.cancel()
	if p := r.o.Progress; p != nil {
		p.Done()
	}
	return r.res
}

// timedOut records a timeout failure if the deadline passed, naming what
// was being waited for.
func (r *runner) timedOut(what string) bool {
	if r.ctx.Err() == nil {
		return false
	}
	r.res.Fail("timeout after %v while %s", r.o.Timeout, what)
	return true
}

// prefixOf returns a relay message's machine-readable prefix (the text
// before the first ':'), or the whole message when it has none, cut to 40
// bytes.
func prefixOf(msg string) string {
	if i := strings.IndexByte(msg, ':'); i >= 0 {
		return msg[:i]
	}
	if len(msg) > 40 {
		return msg[:40]
	}
	return msg
}

// waitUntil polls cond every 2ms until it holds or ctx ends; it reports
// whether cond held.
func waitUntil(ctx context.Context, cond func() bool) bool {
	if cond() {
		return true
	}
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return cond()
		case <-t.C:
			if cond() {
				return true
			}
		}
	}
}

// loopback reports whether the target is a loopback address (source
// addresses in 127.0.0.0/8 can only reach those).
func (r *runner) loopback() bool {
	u, err := url.Parse(r.o.URL)
	if err != nil {
		return false
	}
	ip := net.ParseIP(u.Hostname())
	return (ip != nil && ip.IsLoopback()) || u.Hostname() == "localhost"
}
