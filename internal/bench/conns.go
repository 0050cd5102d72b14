package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net"
	"net/url"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lesismal/nbio"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// ConnsStats describes the conns scenario.
type ConnsStats struct {
	Target     int `json:"target"`
	Opened     int `json:"opened"`      // WebSocket upgrades that succeeded
	Subscribed int `json:"subscribed"`  // subscriptions answered with EOSE
	Held       int `json:"held"`        // subscribed connections still open at the liveness check
	DialFailed int `json:"dial_failed"` // connections that could not be opened or subscribed
	Processes  int `json:"processes"`   // client processes holding connections
	PerProcess int `json:"per_process"`
	// SourceAddrs is the number of 127.0.0.x source addresses used, PerIP
	// connections each (0: not bound).
	SourceAddrs int    `json:"source_addrs"`
	SourceRange string `json:"source_range"`
	PerIP       int    `json:"per_ip"`
	// ConnectSeconds is the wall time to open and subscribe every
	// connection; ConnectRate is Subscribed per second over it.
	ConnectSeconds float64 `json:"connect_s"`
	ConnectRate    float64 `json:"connect_per_s"`
	// Liveness: one event published after the hold; every held
	// subscription must receive it exactly once.
	LivenessExpected   int `json:"liveness_expected"`
	LivenessReceived   int `json:"liveness_received"`
	LivenessMissing    int `json:"liveness_missing"`
	LivenessDuplicated int `json:"liveness_duplicated"`
	// RelayRSSPerConn is (peak sampled RSS - RSS at start) / Held, with
	// Options.PID.
	RelayRSSPerConn float64 `json:"relay_rss_per_conn_bytes,omitempty"`
	// RelayIdleRSSPerConn is (RSS after the hold, before the liveness
	// event - RSS at start) / subscribed: the idle cost of a connection.
	RelayIdleRSSPerConn float64 `json:"relay_idle_rss_per_conn_bytes,omitempty"`
	// Nodes is the number of relay URLs the connections were spread over
	// (Options.NodeURLs; 1: Options.URL only). LiveEvents is the number
	// of liveness events published (Options.LiveEvents), so
	// LivenessExpected is LiveEvents x the subscriptions held at the
	// liveness check (Subscribed, and any whose EOSE came late): the
	// (subscription, event) pairs, each counted per subscription.
	Nodes      int `json:"nodes"`
	LiveEvents int `json:"live_events"`
	// RelaysIdleRSSPerConn is RelayIdleRSSPerConn summed over every relay
	// process (Options.PID and Options.PIDs).
	RelaysIdleRSSPerConn float64 `json:"relays_idle_rss_per_conn_bytes,omitempty"`
	// RelaysIdleAnonPerConn is the same for the relays' private memory
	// (RssAnon): VmRSS also counts the binary's pages each relay touched
	// while serving, which every process counts and the machine holds
	// once.
	RelaysIdleAnonPerConn float64 `json:"relays_idle_anon_per_conn_bytes,omitempty"`
	// KernelSockMemPerConn is the growth of the TCP buffer memory
	// /proc/net/sockstat reports (its "mem", pages) from the start to
	// after the hold, per subscribed connection (both ends on this
	// machine); KernelSlabPerConn the growth of /proc/meminfo's Slab (the
	// socket, file and epoll structures themselves) over the same span.
	// Both are machine-wide.
	KernelSockMemPerConn float64 `json:"kernel_sockstat_mem_per_conn_bytes"`
	KernelSlabPerConn    float64 `json:"kernel_slab_per_conn_bytes"`
	// ClientRSSPerConn is the client processes' resident memory after
	// the hold (workers whole, this process's growth) per subscribed
	// connection.
	ClientRSSPerConn float64 `json:"client_rss_per_conn_bytes,omitempty"`
	// ClientAnonPerConn is the same for the processes' private memory
	// (RssAnon: heap, stacks), without the pages of the binary that
	// VmRSS counts in every process but the machine holds once.
	ClientAnonPerConn float64 `json:"client_anon_per_conn_bytes,omitempty"`
	// LastDeliverySeconds is from the first liveness event's OK to the
	// last liveness delivery anywhere.
	LastDeliverySeconds float64 `json:"last_delivery_from_ok_s,omitempty"`
	// Errors lists dial and subscription errors with their counts.
	Errors []string `json:"errors,omitempty"`
}

// connsSpec is what one process opens: Conns connections numbered
// First..First+Conns-1 (the number picks the source address and the
// subscription id), each with one subscription.
type connsSpec struct {
	URL      string   `json:"url"`
	Conns    int      `json:"conns"`
	First    int      `json:"first"`
	PerIP    int      `json:"per_ip"` // <= 0: do not bind
	Filter   string   `json:"filter"`
	EventIDs []string `json:"event_ids"` // the liveness events (at most 64)
	// URLs, if set, are the nodes: connection First+i dials
	// URLs[(First+i) % len(URLs)] instead of URL.
	URLs            []string `json:"urls,omitempty"`
	DialConcurrency int      `json:"dial_concurrency"`
	Deadline        int64    `json:"deadline_unix_ns"`
	Compress        bool     `json:"compress"`
}

// connsReady is a process's report after opening.
type connsReady struct {
	Opened     int              `json:"opened"`
	Subscribed int              `json:"subscribed"`
	Negotiated int              `json:"negotiated"` // connections with permessage-deflate
	Failed     int              `json:"failed"`
	Errors     map[string]int   `json:"errors,omitempty"`
	Connect    *Hist            `json:"connect"`
	Closed     map[string]int64 `json:"closed,omitempty"`
}

// connsReport is a process's report after the liveness events.
type connsReport struct {
	Alive int `json:"alive"` // subscribed and still open
	// Subs counts the connections subscribed when asked to collect, open
	// or lost since: the population Received is counted over. It can
	// exceed the ready report's count by connections whose EOSE came
	// after the connect deadline (counted failed then).
	Subs       int `json:"subs"`
	Received   int `json:"received"` // (subscription, event) pairs delivered at least once
	Duplicated int `json:"duplicated"`
	// LastAt is the unix nanos of the last liveness delivery; RSS the
	// worker's own resident memory when asked to collect (after the hold).
	LastAt    int64            `json:"last_unix_ns,omitempty"`
	RSS       int64            `json:"rss_bytes,omitempty"`
	Anon      int64            `json:"anon_bytes,omitempty"` // RssAnon
	Delivery  *Hist            `json:"delivery"`
	Closed    map[string]int64 `json:"closed,omitempty"`
	Notices   map[string]int64 `json:"notices,omitempty"`
	Lost      int              `json:"lost"`
	LostFirst string           `json:"lost_first,omitempty"`
	Bad       int64            `json:"bad_messages"`
	BadFirst  string           `json:"bad_first,omitempty"`
}

// workerMsg is one JSON line between the conns scenario and a worker.
type workerMsg struct {
	Op string `json:"op"` // parent: "open", "collect", "close"; worker: "progress", "ready", "report", "error"

	Spec     *connsSpec   `json:"spec,omitempty"`
	SentAt   int64        `json:"sent_unix_ns,omitempty"`
	Deadline int64        `json:"deadline_unix_ns,omitempty"`
	Opened   int64        `json:"opened,omitempty"`
	Ready    *connsReady  `json:"ready,omitempty"`
	Report   *connsReport `json:"report,omitempty"`
	Error    string       `json:"error,omitempty"`
}

// sourceIP returns the source address of connection i with perIP
// connections per address: 127.0.0.2 for the first perIP, then 127.0.0.3,
// and so on through 127.x.y.z. It returns nil when perIP <= 0.
func sourceIP(i, perIP int) net.IP {
	if perIP <= 0 {
		return nil
	}
	n := 2 + i/perIP
	return net.IPv4(127, byte(n>>16), byte(n>>8), byte(n))
}

// connsGroup holds one process's idle connections (lean.go).
type connsGroup struct {
	spec    connsSpec
	targets []nostr.ID // bit k of leanConn.seen is targets[k]
	conns   []*leanConn
	urls    []*url.URL // parsed spec.URL, or spec.URLs
	eng     *leanEngine

	slots   chan struct{} // dial slots: held from the dial to EOSE (or failure)
	mu      sync.Mutex
	closed  map[string]int64
	notices map[string]int64
	opened  atomic.Int64

	bad      atomic.Int64 // relay messages that could not be parsed
	firstBad string       // guarded by mu
}

func newConnsGroup(spec connsSpec) (*connsGroup, error) {
	if len(spec.EventIDs) == 0 || len(spec.EventIDs) > maxLiveEvents {
		return nil, fmt.Errorf("%w: %d liveness events, want 1 to %d", ErrOptions, len(spec.EventIDs), maxLiveEvents)
	}
	targets := make([]nostr.ID, len(spec.EventIDs))
	for k, h := range spec.EventIDs {
		id, err := nostr.ParseID(h)
		if err != nil {
			return nil, fmt.Errorf("%w: liveness event id: %v", ErrOptions, err)
		}
		targets[k] = id
	}
	if spec.DialConcurrency <= 0 {
		spec.DialConcurrency = 64
	}
	return &connsGroup{spec: spec, targets: targets, closed: map[string]int64{}, notices: map[string]int64{},
		conns: make([]*leanConn, spec.Conns), slots: make(chan struct{}, spec.DialConcurrency)}, nil
}

// leanURLs parses the URLs the connections dial (spec.URLs, or spec.URL):
// ws:// only.
func leanURLs(spec connsSpec) ([]*url.URL, error) {
	raw := spec.URLs
	if len(raw) == 0 {
		raw = []string{spec.URL}
	}
	var out []*url.URL
	for _, s := range raw {
		u, err := url.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("%w: url %q: %v", ErrOptions, s, err)
		}
		if u.Scheme != "ws" {
			return nil, fmt.Errorf("%w: url %q: the conns client speaks ws:// only", ErrOptions, s)
		}
		out = append(out, u)
	}
	return out, nil
}

// message handles one relay message of c.
func (g *connsGroup) message(c *leanConn, data []byte) {
	at := time.Now()
	if m, ok := fastEvent(data); ok {
		g.handle(c, m, at)
		return
	}
	m, err := nostr.ParseRelayMessage(data)
	if err != nil {
		if g.bad.Add(1) == 1 {
			g.mu.Lock()
			g.firstBad = fmt.Sprintf("%v: %.200q", err, data)
			g.mu.Unlock()
		}
		return
	}
	g.handle(c, m, at)
}

// subID is connection i's subscription id.
func (g *connsGroup) subID(i int) string { return "c" + strconv.Itoa(g.spec.First+i) }

func (g *connsGroup) handle(s *leanConn, m *nostr.RelayMessage, at time.Time) {
	if m.SubID != g.subID(int(s.idx)) {
		if m.Type == nostr.LabelNotice {
			g.mu.Lock()
			g.notices[m.Message]++
			g.mu.Unlock()
		}
		return
	}
	switch m.Type {
	case nostr.LabelEvent:
		if !s.has(lsEnded) {
			return
		}
		k := g.target(eventID(m))
		if k < 0 {
			return
		}
		bit := uint64(1) << k
		old := s.seen.Or(bit)
		if old&bit != 0 {
			s.dup.Add(1)
			return
		}
		if old == 0 {
			s.recvAt.Store(at.UnixNano())
		}
		s.lastAt.Store(at.UnixNano()) // one connection's messages come in order
	case nostr.LabelEOSE:
		// A connection's messages are handled by one goroutine at a
		// time: connectD is written before lsEnded, which readers check.
		if !s.has(lsEnded) {
			s.connectD = at.UnixNano() - s.started
			s.set(lsEnded)
			g.settle(s)
		}
	case nostr.LabelClosed:
		s.state.Or(lsClosed)
		g.mu.Lock()
		g.closed[m.Message]++
		g.mu.Unlock()
		if s.set(lsEnded) {
			g.settle(s)
		}
	}
}

// settle returns c's dial slot, once: at EOSE, CLOSED, or the end of the
// connection.
func (g *connsGroup) settle(c *leanConn) {
	if c.set(lsSettled) {
		<-g.slots
	}
}

// onData is the poller's data handler.
func (g *connsGroup) onData(nc *nbio.Conn, b []byte) {
	if c, ok := nc.Session().(*leanConn); ok {
		c.onData(b, g.message)
	}
}

// onClose is nbio's close handler.
func (g *connsGroup) onClose(nc *nbio.Conn, err error) {
	if c, ok := nc.Session().(*leanConn); ok {
		c.ended(err)
		g.settle(c)
	}
}

// maxLiveEvents is the most liveness events a conns run publishes (one
// bit each in leanConn.seen).
const maxLiveEvents = 64

// target returns the index of id among the liveness events, or -1.
func (g *connsGroup) target(id nostr.ID) int {
	for k := range g.targets {
		if g.targets[k] == id {
			return k
		}
	}
	return -1
}

// all is the seen mask of a subscription that has every liveness event.
func (g *connsGroup) all() uint64 {
	if len(g.targets) == 64 {
		return ^uint64(0)
	}
	return uint64(1)<<len(g.targets) - 1
}

// url returns the URL connection First+i dials.
func (g *connsGroup) url(i int) *url.URL {
	return g.urls[(g.spec.First+i)%len(g.urls)]
}

// dial opens connection i: TCP from its source address, the upgrade and
// the REQ in blocking mode on this goroutine (buf is its scratch), then
// hands it to the poller. It holds a dial slot, returned at EOSE (by the
// poller) or here on failure.
func (g *connsGroup) dial(ctx context.Context, i int, buf []byte) error {
	c := &leanConn{idx: int32(i), started: time.Now().UnixNano()}
	g.conns[i] = c
	u := g.url(i)
	// No TCP keepalive: at a million idle connections on loopback the
	// probes (Go's default: every 15 s, both ends) overflowed the
	// kernel's backlog under load, and 9 lost probes in a row abort a
	// connection (ETIMEDOUT). The relay's pings are what keep it alive.
	nd := &net.Dialer{Timeout: handshakeTimeout, KeepAlive: -1}
	if ip := sourceIP(g.spec.First+i, g.spec.PerIP); ip != nil {
		nd.LocalAddr = &net.TCPAddr{IP: ip}
	}
	raw, err := nd.DialContext(ctx, "tcp", hostPort(u))
	if err != nil {
		return err
	}
	c.raw = raw
	deadline := time.Now().Add(handshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	raw.SetDeadline(deadline)
	req, key := upgradeRequest(u, g.spec.Compress)
	if _, err := raw.Write(req); err != nil {
		raw.Close()
		return fmt.Errorf("dial %s: %w", u, err)
	}
	deflate, rest, err := readUpgrade(raw, buf, key)
	if err != nil {
		raw.Close()
		return fmt.Errorf("dial %s: %w", u, err)
	}
	if deflate {
		c.state.Or(lsDeflate)
	}
	g.opened.Add(1)
	if len(rest) > 0 { // the relay spoke first (an AUTH challenge)
		c.onData(append([]byte(nil), rest...), g.message)
		if c.has(lsDone) {
			return fmt.Errorf("connection lost before EOSE: %v", c.err)
		}
	}
	if err := c.send(wsText, subscribeFrame(g.subID(i), g.spec.Filter)); err != nil {
		raw.Close()
		return fmt.Errorf("send REQ: %w", err)
	}
	raw.SetDeadline(time.Time{})
	nc, err := nbio.NBConn(raw) // a copy of the descriptor; raw is closed
	if err != nil {
		raw.Close()
		return fmt.Errorf("hand the connection to the poller: %w", err)
	}
	nc.SetSession(c)
	c.nc, c.raw = nc, nil
	if _, err := g.eng.eng.AddConn(nc); err != nil {
		return fmt.Errorf("hand the connection to the poller: %w", err)
	}
	return nil
}

// open dials every connection (DialConcurrency at a time, each holding a
// slot until its EOSE), subscribes each, and waits for every EOSE or the
// spec's deadline.
func (g *connsGroup) open() *connsReady {
	ready := &connsReady{Errors: map[string]int{}}
	urls, err := leanURLs(g.spec)
	var eng *leanEngine
	if err == nil {
		eng, err = newLeanEngine(g.onData, g.onClose)
	}
	if err != nil {
		ready.Failed = g.spec.Conns
		ready.Errors[err.Error()] = g.spec.Conns
		ready.Connect = &Hist{}
		return ready
	}
	g.eng, g.urls = eng, urls
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, g.spec.Deadline))
	defer cancel()
	var mu sync.Mutex
	fail := func(err error) {
		msg := groupDialError(err.Error())
		mu.Lock()
		ready.Failed++
		ready.Errors[msg]++
		mu.Unlock()
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < g.spec.DialConcurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 4096)
			for i := range next {
				if err := g.dial(ctx, i, buf); err != nil {
					fail(err)
					if c := g.conns[i]; c != nil {
						c.ended(err)
						g.settle(c)
					}
				}
			}
		}()
	}
	attempted := g.spec.Conns
	for i := 0; i < g.spec.Conns; i++ {
		select {
		case g.slots <- struct{}{}:
			next <- i
			continue
		case <-ctx.Done():
		}
		attempted = i
		break
	}
	close(next)
	wg.Wait()
	if n := g.spec.Conns - attempted; n > 0 {
		ready.Failed += n
		ready.Errors["not attempted: deadline passed"] += n
	}
	// Wait for the slots still held (EOSE outstanding) or the deadline.
	for held := 0; held < cap(g.slots); held++ {
		select {
		case g.slots <- struct{}{}:
			continue
		case <-ctx.Done():
		}
		break
	}
	ready.Opened = int(g.opened.Load())
	ready.Connect = &Hist{}
	for _, c := range g.conns[:attempted] {
		if c == nil {
			continue
		}
		if c.has(lsDeflate) {
			ready.Negotiated++
		}
		switch st := c.state.Load(); {
		case st&lsEnded != 0 && st&lsClosed == 0:
			ready.Subscribed++
			ready.Connect.RecordDuration(time.Duration(c.connectD))
		case st&lsClosed != 0:
			fail(errors.New("subscription refused with CLOSED"))
		case st&lsSettled != 0 && st&lsDone != 0 && c.nc != nil:
			fail(fmt.Errorf("connection lost before EOSE: %v", c.Err()))
		case st&lsSettled == 0:
			fail(errors.New("no EOSE before the deadline"))
		}
	}
	g.mu.Lock()
	ready.Closed = copyCounts(g.closed)
	g.mu.Unlock()
	// The dials' garbage (handshakes, the net package's connections the
	// poller's copies replaced) is many times the idle connections'
	// memory: collect it and return the pages, so that the hold measures
	// (and a big run is sized by) what idle connections keep.
	debug.FreeOSMemory()
	return ready
}

// subscribed reports whether connection i holds a live subscription.
func (g *connsGroup) subscribed(i int) bool {
	c := g.conns[i]
	return c != nil && c.nc != nil && c.state.Load()&(lsEnded|lsClosed) == lsEnded
}

// collect waits until every held subscription has the liveness event or
// the deadline passes, and reports.
func (g *connsGroup) collect(sentAt, deadline int64) *connsReport {
	rss, anon := selfMem() // before the deliveries: the idle figures
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, deadline))
	defer cancel()
	all := g.all()
	waitUntil(ctx, func() bool {
		for i, c := range g.conns {
			if g.subscribed(i) && !c.Lost() && c.seen.Load() != all {
				return false
			}
		}
		return true
	})
	time.Sleep(100 * time.Millisecond) // catch a late duplicate
	rep := &connsReport{Delivery: &Hist{}, RSS: rss, Anon: anon}
	for i, c := range g.conns {
		if c == nil || c.nc == nil {
			continue
		}
		if c.Lost() {
			rep.Lost++
			if rep.LostFirst == "" {
				if err := c.Err(); err != nil {
					rep.LostFirst = err.Error()
				} else {
					rep.LostFirst = "connection lost"
				}
			}
		}
		if !g.subscribed(i) {
			continue
		}
		rep.Subs++
		if !c.Lost() {
			rep.Alive++
		}
		if seen := c.seen.Load(); seen != 0 {
			rep.Received += bits.OnesCount64(seen)
			rep.Delivery.Record(c.recvAt.Load() - sentAt)
			rep.LastAt = max(rep.LastAt, c.lastAt.Load())
		}
		rep.Duplicated += int(c.dup.Load())
	}
	rep.Bad = g.bad.Load()
	g.mu.Lock()
	rep.BadFirst = g.firstBad
	rep.Closed = copyCounts(g.closed)
	rep.Notices = copyCounts(g.notices)
	g.mu.Unlock()
	return rep
}

// close closes every connection and stops the poller, waiting (at most
// 5s) for nbio to report every connection closed.
func (g *connsGroup) close() {
	if g.eng == nil {
		return
	}
	for _, c := range g.conns {
		if c != nil {
			c.Close()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = g.eng.eng.Shutdown(ctx)
	g.eng = nil
}

// RunConnsWorker is a conns-scenario worker process: it reads JSON-line
// commands from in ("open" with a spec, then "collect", then "close" or
// end of input) and writes progress and reports to out. It returns when
// the parent says close or in ends; the connections are closed then.
func RunConnsWorker(in io.Reader, out io.Writer) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var wmu sync.Mutex
	enc := json.NewEncoder(out)
	send := func(m workerMsg) error {
		wmu.Lock()
		defer wmu.Unlock()
		return enc.Encode(m)
	}
	var g *connsGroup
	defer func() {
		if g != nil {
			g.close()
		}
	}()
	for sc.Scan() {
		var m workerMsg
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			send(workerMsg{Op: "error", Error: "bad command: " + err.Error()})
			return fmt.Errorf("bench worker: %w", err)
		}
		switch m.Op {
		case "open":
			if g != nil || m.Spec == nil {
				return send(workerMsg{Op: "error", Error: "open: twice or without a spec"})
			}
			var err error
			if g, err = newConnsGroup(*m.Spec); err != nil {
				send(workerMsg{Op: "error", Error: err.Error()})
				return err
			}
			quit := make(chan struct{})
			go func() {
				t := time.NewTicker(250 * time.Millisecond)
				defer t.Stop()
				for {
					select {
					case <-quit:
						return
					case <-t.C:
						send(workerMsg{Op: "progress", Opened: g.opened.Load()})
					}
				}
			}()
			ready := g.open()
			close(quit)
			if err := send(workerMsg{Op: "ready", Ready: ready}); err != nil {
				return err
			}
		case "collect":
			if g == nil {
				return send(workerMsg{Op: "error", Error: "collect before open"})
			}
			if err := send(workerMsg{Op: "report", Report: g.collect(m.SentAt, m.Deadline)}); err != nil {
				return err
			}
		case "close":
			return nil
		default:
			return send(workerMsg{Op: "error", Error: "unknown op " + strconv.Quote(m.Op)})
		}
	}
	return sc.Err()
}

// connsPart is the parent's handle on one process's share: in-process
// (group set) or a worker subprocess.
type connsPart struct {
	spec  connsSpec
	group *connsGroup

	cmd    *exec.Cmd
	stdin  io.WriteCloser
	msgs   chan workerMsg
	opened atomic.Int64
}

func (p *connsPart) startWorker(argv []string) error {
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Stderr = os.Stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("start worker %q: %w", argv[0], err)
	}
	p.msgs = make(chan workerMsg, 16)
	go func() {
		defer close(p.msgs)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			var m workerMsg
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				p.msgs <- workerMsg{Op: "error", Error: fmt.Sprintf("bad worker output %.100q: %v", sc.Bytes(), err)}
				return
			}
			if m.Op == "progress" {
				p.opened.Store(m.Opened)
				continue
			}
			p.msgs <- m
		}
	}()
	return p.command(workerMsg{Op: "open", Spec: &p.spec})
}

func (p *connsPart) command(m workerMsg) error {
	b, _ := json.Marshal(m)
	_, err := p.stdin.Write(append(b, '\n'))
	return err
}

// await returns the worker's next message of type op, or an error.
func (p *connsPart) await(op string, deadline time.Time) (workerMsg, error) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case m, ok := <-p.msgs:
		if !ok {
			return m, errors.New("worker exited")
		}
		if m.Op == "error" {
			return m, errors.New("worker: " + m.Error)
		}
		if m.Op != op {
			return m, fmt.Errorf("worker sent %q, want %q", m.Op, op)
		}
		return m, nil
	case <-t.C:
		return workerMsg{}, fmt.Errorf("worker gave no %q before the deadline", op)
	}
}

func (p *connsPart) stop() {
	if p.group != nil {
		p.group.close()
		return
	}
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	p.command(workerMsg{Op: "close"})
	p.stdin.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// Conns opens Options.Conns idle connections, each with one subscription,
// spread over source addresses 127.0.0.2, ... (Options.PerIP per address)
// and, above Options.PerProcess, over worker processes started with
// Options.WorkerCommand. It holds them for Options.Hold, then publishes one
// event that every subscription must receive exactly once.
func Conns(o Options) (*Result, error) {
	r, err := newRunner(ScenarioConns, o)
	if err != nil {
		return nil, err
	}
	o = r.o
	u, _ := url.Parse(o.URL)
	perIP := o.PerIP
	if ip := net.ParseIP(u.Hostname()); perIP > 0 && (ip == nil || ip.To4() == nil) {
		r.res.Note("target %q is not an IPv4 address: source addresses not bound", u.Hostname())
		perIP = -1
	}
	procs := (o.Conns + o.PerProcess - 1) / o.PerProcess
	if procs > 1 && len(o.WorkerCommand) == 0 {
		return nil, fmt.Errorf("%w: %d connections need %d processes of at most %d, and no worker command is set", ErrOptions, o.Conns, procs, o.PerProcess)
	}
	r.param("conns", o.Conns)
	r.param("per_ip", perIP)
	r.param("per_process", o.PerProcess)
	r.param("hold_s", o.Hold.Seconds())
	st := &ConnsStats{Target: o.Conns, Processes: procs, PerProcess: o.PerProcess, PerIP: perIP}
	r.res.Conns = st
	if perIP > 0 {
		st.SourceAddrs = (o.Conns + perIP - 1) / perIP
		st.SourceRange = sourceIP(0, perIP).String() + "-" + sourceIP(o.Conns-1, perIP).String()
	} else {
		st.SourceRange = "kernel's choice"
	}

	nev := max(o.LiveEvents, 1)
	if nev > maxLiveEvents {
		return nil, fmt.Errorf("%w: --live-events %d: at most %d", ErrOptions, nev, maxLiveEvents)
	}
	for _, n := range o.NodeURLs {
		if _, err := CheckTarget(n, o.AllowRemote); err != nil {
			return nil, err
		}
	}
	if _, err := leanURLs(connsSpec{URL: o.URL, URLs: o.NodeURLs}); err != nil {
		return nil, err
	}
	st.Nodes, st.LiveEvents = max(len(o.NodeURLs), 1), nev
	r.param("nodes", st.Nodes)
	r.param("live_events", nev)
	gen := r.generator(ScenarioConns, nev)
	set, err := r.sign(gen, 0, nev)
	if err != nil {
		return nil, err
	}
	ev := set.Events[0]
	ids := make([]string, nev)
	for k, e := range set.Events {
		ids[k] = e.ID.Hex()
	}
	filter := authorsFilter(gen.Authors()[:min(nev, len(gen.Authors()))], ev.CreatedAt, 0)
	openDeadline := time.Now().Add(o.Timeout * 2 / 3)
	parts := make([]*connsPart, procs)
	for i := range parts {
		lo := i * o.Conns / procs
		hi := (i + 1) * o.Conns / procs
		parts[i] = &connsPart{spec: connsSpec{URL: o.URL, URLs: o.NodeURLs, Conns: hi - lo, First: lo, PerIP: perIP, Filter: filter,
			EventIDs: ids, DialConcurrency: max(o.DialConcurrency/procs, 8), Deadline: openDeadline.UnixNano(),
			Compress: o.Compress}}
	}
	defer func() {
		for _, p := range parts {
			p.stop()
		}
	}()

	// Open.
	relayPIDs := append([]int(nil), o.PIDs...)
	if o.PID != 0 {
		relayPIDs = append(relayPIDs, o.PID)
	}
	relays0, relaysAnon0, _ := sumMem(relayPIDs)
	sock0, slab0 := kernelMem()
	self0, anon0 := selfMem()
	r.startMeasure()
	openedTotal := func() int64 {
		var n int64
		for _, p := range parts {
			if p.group != nil {
				n += p.group.opened.Load()
			} else {
				n += p.opened.Load()
			}
		}
		return n
	}
	stop := r.phase("connecting", int64(o.Conns), openedTotal)
	t0 := time.Now()
	readies := make([]*connsReady, procs)
	errs := make([]error, procs)
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Add(1)
		go func(i int, p *connsPart) {
			defer wg.Done()
			if procs == 1 {
				g, err := newConnsGroup(p.spec)
				if err != nil {
					errs[i] = err
					return
				}
				p.group = g
				readies[i] = g.open()
				return
			}
			if err := p.startWorker(o.WorkerCommand); err != nil {
				errs[i] = err
				return
			}
			m, err := p.await("ready", openDeadline.Add(10*time.Second))
			if err != nil {
				errs[i] = err
				return
			}
			readies[i] = m.Ready
		}(i, p)
	}
	wg.Wait()
	stop()
	connectEnd := time.Now()
	connect := &Hist{}
	errCounts := map[string]int{}
	for i, rd := range readies {
		if errs[i] != nil {
			r.res.Fail("process %d of %d (%d connections): %v", i+1, procs, parts[i].spec.Conns, errs[i])
			st.DialFailed += parts[i].spec.Conns
			continue
		}
		st.Opened += rd.Opened
		st.Subscribed += rd.Subscribed
		r.negotiated.Add(int64(rd.Negotiated))
		st.DialFailed += rd.Failed
		connect.Merge(rd.Connect)
		for k, v := range rd.Errors {
			errCounts[k] += v
		}
	}
	st.ConnectSeconds = connectEnd.Sub(t0).Seconds()
	if st.ConnectSeconds > 0 {
		st.ConnectRate = float64(st.Subscribed) / st.ConnectSeconds
	}
	for _, k := range sortedKeys(errCounts) {
		st.Errors = append(st.Errors, fmt.Sprintf("%d× %s", errCounts[k], k))
	}
	shown := firstErrorKinds(st.Errors)
	if st.DialFailed > 0 {
		r.res.Fail("%d of %d connections could not be opened and subscribed (%s)", st.DialFailed, o.Conns, strings.Join(shown, "; "))
	}

	// Hold, then check liveness.
	delivery := &Hist{}
	if st.Subscribed > 0 {
		stop = r.phase(fmt.Sprintf("holding %d connections", st.Subscribed), 0, func() int64 { return 0 })
		select {
		case <-time.After(o.Hold):
		case <-r.ctx.Done():
		}
		stop()
		// Idle memory: RSS after the hold, before the liveness event
		// wakes every connection (the peak includes that burst).
		if r.relayS != nil && st.Subscribed > 0 {
			if now, start, ok := r.relayS.Now(); ok {
				st.RelayIdleRSSPerConn = float64(now-start) / float64(st.Subscribed)
			}
		}
		if rss1, anon1, err := sumMem(relayPIDs); len(relayPIDs) > 0 && err == nil {
			st.RelaysIdleRSSPerConn = float64(rss1-relays0) / float64(st.Subscribed)
			st.RelaysIdleAnonPerConn = float64(anon1-relaysAnon0) / float64(st.Subscribed)
		}
		sock1, slab1 := kernelMem()
		st.KernelSockMemPerConn = float64(sock1-sock0) / float64(st.Subscribed)
		st.KernelSlabPerConn = float64(slab1-slab0) / float64(st.Subscribed)
		selfNow, anonNow := selfMem()
		var workers, workersAnon int64
		delivery, workers, workersAnon = r.liveness(parts, set.Events, st, procs)
		st.ClientRSSPerConn = float64(workers+selfNow-self0) / float64(st.Subscribed)
		st.ClientAnonPerConn = float64(workersAnon+anonNow-anon0) / float64(st.Subscribed)
	}
	r.stopMeasure(time.Time{}, 0, 0)
	if u := r.res.Relay; u != nil && st.Held > 0 {
		st.RelayRSSPerConn = float64(u.RSSPeakBytes-u.RSSStartBytes) / float64(st.Held)
	}
	for _, u := range []*Usage{r.res.Relay, r.res.Client} {
		if u != nil && st.Held > 0 {
			u.CPUMicrosPerConn = u.CPUSeconds * 1e6 / float64(st.Held)
		}
	}
	r.res.Latency = map[string]Summary{"connect": connect.Summary()}
	if st.LivenessReceived > 0 {
		r.res.Latency["delivery"] = delivery.Summary()
	}
	r.res.Rates = map[string]float64{"connections": st.ConnectRate}
	r.checkConns()
	return r.finish(), nil
}

// liveness publishes evs, one after the other, from a fresh connection,
// and collects every part's report. It returns the first-delivery
// histogram and the worker processes' summed RSS and RssAnon.
func (r *runner) liveness(parts []*connsPart, evs []*nostr.Event, st *ConnsStats, procs int) (*Hist, int64, int64) {
	delivery := &Hist{}
	type ok struct {
		m  *nostr.RelayMessage
		at time.Time
	}
	okc := make(chan ok, len(evs))
	pub, err := r.dial(r.ctx, DialConfig{}, func(m *nostr.RelayMessage, at time.Time) bool {
		if m.Type == nostr.LabelOK {
			select {
			case okc <- ok{m, at}:
			default:
			}
			return true
		}
		return false
	})
	if err != nil {
		r.res.Fail("liveness publisher: %v", err)
		return delivery, 0, 0
	}
	// An event's OK can wait behind the previous event's fan-out, which
	// on two cores takes tens of seconds at a million subscriptions: the
	// waits grow with the count (100 s at a million; 15 s and 30 s up to
	// 150,000), bounded by the run's timeout.
	okWait := max(stallTimeout, time.Duration(st.Subscribed/10000)*time.Second)
	sentAt := time.Now()
	var firstOK time.Time
	for _, ev := range evs {
		frame := append(append([]byte(`["EVENT",`), ev.Raw...), ']')
		if err := pub.Send(frame); err != nil {
			r.res.Fail("liveness publish: %v", err)
			return delivery, 0, 0
		}
		select {
		case m := <-okc:
			if m.m.EventID != ev.ID || !m.m.OK {
				r.res.Fail("liveness event refused: %q", m.m.Message)
				return delivery, 0, 0
			}
			if firstOK.IsZero() {
				firstOK = m.at
			}
		case <-r.ctx.Done():
			r.timedOut("waiting for the liveness event's OK")
			return delivery, 0, 0
		case <-time.After(okWait):
			r.res.Fail("liveness event got no OK within %v", okWait)
			return delivery, 0, 0
		}
	}
	deadline := time.Now().Add(max(30*time.Second, 2*okWait))
	if d, ok := r.ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	var wg sync.WaitGroup
	reports := make([]*connsReport, len(parts))
	errs := make([]error, len(parts))
	stop := r.phase("liveness", 0, func() int64 { return 0 })
	for i, p := range parts {
		wg.Add(1)
		go func(i int, p *connsPart) {
			defer wg.Done()
			if p.group != nil {
				reports[i] = p.group.collect(sentAt.UnixNano(), deadline.UnixNano())
				return
			}
			if p.cmd == nil {
				return
			}
			if err := p.command(workerMsg{Op: "collect", SentAt: sentAt.UnixNano(), Deadline: deadline.UnixNano()}); err != nil {
				errs[i] = err
				return
			}
			m, err := p.await("report", deadline.Add(10*time.Second))
			if err != nil {
				errs[i] = err
				return
			}
			reports[i] = m.Report
		}(i, p)
	}
	wg.Wait()
	stop()
	var lost, subs int
	var lostFirst string
	var lastAt, workers, workersAnon int64
	for i, rep := range reports {
		if errs[i] != nil {
			r.res.Fail("process %d of %d: %v", i+1, procs, errs[i])
			continue
		}
		if rep == nil {
			continue
		}
		st.Held += rep.Alive
		subs += rep.Subs
		lastAt = max(lastAt, rep.LastAt)
		if parts[i].group == nil {
			workers += rep.RSS
			workersAnon += rep.Anon
		}
		st.LivenessReceived += rep.Received
		st.LivenessDuplicated += rep.Duplicated
		delivery.Merge(rep.Delivery)
		r.mu.Lock()
		for k, v := range rep.Closed {
			r.closed[k] += v
		}
		for k, v := range rep.Notices {
			r.notices[k] += v
		}
		r.mu.Unlock()
		lost += rep.Lost
		if lostFirst == "" {
			lostFirst = rep.LostFirst
		}
		if rep.Bad > 0 {
			if r.res.BadMessages == 0 {
				r.res.Fail("unparseable relay message: %s", rep.BadFirst)
			}
			r.res.BadMessages += rep.Bad
		}
	}
	// Expected over the subscriptions the deliveries were counted over:
	// those subscribed at the liveness check, which include any whose
	// EOSE came after the connect deadline (already failed as not
	// subscribed in time); otherwise their deliveries made "missing"
	// negative (-70 in a million run where 35 were late).
	st.LivenessExpected = subs * len(evs)
	if lastAt > 0 {
		st.LastDeliverySeconds = time.Unix(0, lastAt).Sub(firstOK).Seconds()
	}
	st.LivenessMissing = st.LivenessExpected - st.LivenessReceived
	if lost > 0 {
		r.res.Disconnects += int64(lost)
		r.res.Fail("%d connections were closed by the relay or the network during the hold (first: %s)", lost, lostFirst)
	}
	if st.LivenessMissing > 0 {
		r.res.Failures = append([]string{fmt.Sprintf("%d of %d (subscription, liveness event) deliveries are missing", st.LivenessMissing, st.LivenessExpected)}, r.res.Failures...)
	}
	if st.LivenessDuplicated > 0 {
		r.res.Fail("%d duplicate liveness deliveries", st.LivenessDuplicated)
	}
	if n := len(r.closedSnapshot()); n > 0 {
		r.res.Fail("subscriptions were CLOSED by the relay (%s)", formatCounts(r.closedSnapshot()))
	}
	return delivery, workers, workersAnon
}

// sumMem returns the summed VmRSS and RssAnon of pids, one read of each
// process's status file.
func sumMem(pids []int) (rss, anon int64, err error) {
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			return 0, 0, err
		}
		r, _, err := ParseStatusMem(b)
		if err != nil {
			return 0, 0, err
		}
		rss += r
		anon += parseStatusAnon(string(b))
	}
	return rss, anon, nil
}

// selfMem returns this process's VmRSS and RssAnon, zeros if they cannot
// be read.
func selfMem() (rss, anon int64) {
	rss, anon, _ = sumMem([]int{os.Getpid()})
	return rss, anon
}

// parseStatusAnon returns the RssAnon of a /proc/<pid>/status in bytes,
// 0 if there is none.
func parseStatusAnon(s string) int64 {
	for _, line := range strings.Split(s, "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "RssAnon:" && f[2] == "kB" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// kernelMem returns the TCP buffer memory of /proc/net/sockstat (its TCP
// "mem", in pages, as bytes) and /proc/meminfo's Slab, in bytes; 0 for
// what cannot be read.
func kernelMem() (sock, slab int64) {
	if b, err := os.ReadFile("/proc/net/sockstat"); err == nil {
		sock = parseSockstatMem(string(b)) * int64(os.Getpagesize())
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "Slab:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				slab = kb << 10
			}
		}
	}
	return sock, slab
}

// parseSockstatMem returns the "mem" figure of the "TCP:" line of
// /proc/net/sockstat (pages), 0 if there is none.
func parseSockstatMem(s string) int64 {
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "TCP:" {
			continue
		}
		for i := 1; i+1 < len(f); i += 2 {
			if f[i] == "mem" {
				n, _ := strconv.ParseInt(f[i+1], 10, 64)
				return n
			}
		}
	}
	return 0
}

// maxErrorKinds is how many different dial errors the failure line
// names (all of them are in the JSON result).
const maxErrorKinds = 5

// firstErrorKinds returns at most maxErrorKinds of errs, and a last entry
// that counts the rest.
func firstErrorKinds(errs []string) []string {
	if len(errs) <= maxErrorKinds {
		return errs
	}
	return append(errs[:maxErrorKinds:maxErrorKinds], fmt.Sprintf("and %d other errors", len(errs)-maxErrorKinds))
}

// groupDialError drops the source address (which varies: connections are
// spread over 127.0.0.x and ports) from a dial error, so that the same
// failure from every source counts as one: "dial tcp 127.0.0.7:40312->
// 127.0.0.1:7447: connect: connection refused" becomes "dial tcp
// 127.0.0.1:7447: connect: connection refused".
func groupDialError(msg string) string {
	i := strings.Index(msg, "->")
	if i < 0 {
		return msg
	}
	j := strings.LastIndexByte(msg[:i], ' ')
	return msg[:j+1] + msg[i+2:]
}
