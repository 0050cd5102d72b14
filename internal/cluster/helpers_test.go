package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/store"
)

// The tests need NATS: the machine's server at 127.0.0.1:4222 (or
// PETREL_TEST_NATS_URL), and /usr/sbin/nats-server (or PETREL_NATS_SERVER)
// to start private ones that a test may kill. They fail when these are
// missing, unless PETREL_TEST_NATS=skip.

func skipWithoutNATS(t testing.TB) {
	t.Helper()
	if os.Getenv("PETREL_TEST_NATS") == "skip" {
		t.Skip("PETREL_TEST_NATS=skip")
	}
}

// sharedNATS returns the URL of the machine's NATS server.
func sharedNATS(t testing.TB) string {
	t.Helper()
	skipWithoutNATS(t)
	url := os.Getenv("PETREL_TEST_NATS_URL")
	if url == "" {
		url = "nats://127.0.0.1:4222"
	}
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("NATS not reachable at %s (set PETREL_TEST_NATS=skip to skip these tests): %v", url, err)
	}
	nc.Close()
	return url
}

// testSubject returns a subject no other test uses.
func testSubject(t testing.TB) string {
	var b [6]byte
	rand.Read(b[:])
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, t.Name())
	return "petrel.test." + name + "." + hex.EncodeToString(b[:])
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("PETREL_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// natsProc is a private nats-server on a loopback port, which a test may
// kill and start again on the same port.
type natsProc struct {
	t    testing.TB
	bin  string
	port int
	URL  string
	mu   sync.Mutex
	cmd  *exec.Cmd
}

func startNATS(t testing.TB) *natsProc {
	t.Helper()
	skipWithoutNATS(t)
	bin := os.Getenv("PETREL_NATS_SERVER")
	if bin == "" {
		bin = "/usr/sbin/nats-server"
	}
	if _, err := os.Stat(bin); err != nil {
		if p, lerr := exec.LookPath("nats-server"); lerr == nil {
			bin = p
		} else {
			t.Fatalf("nats-server not found at %s (Debian package nats-server; PETREL_TEST_NATS=skip skips): %v", bin, err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	p := &natsProc{t: t, bin: bin, port: port, URL: "nats://127.0.0.1:" + strconv.Itoa(port)}
	p.Start()
	t.Cleanup(p.Kill)
	return p
}

// Start starts the server and waits until it accepts connections.
func (p *natsProc) Start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd := exec.Command(p.bin, "-a", "127.0.0.1", "-p", strconv.Itoa(p.port))
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("start nats-server: %v", err)
	}
	p.cmd = cmd
	deadline := time.Now().Add(15 * time.Second)
	for {
		nc, err := nats.Connect(p.URL, nats.Timeout(time.Second))
		if err == nil {
			nc.Close()
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("nats-server on port %d did not come up: %v", p.port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill stops the server at once (SIGKILL), if it runs.
func (p *natsProc) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Kill()
	p.cmd.Wait()
	p.cmd = nil
}

// proxy is a TCP proxy in front of a NATS server, so that a test can cut
// one node off the bus while the others stay on it.
type proxy struct {
	t      testing.TB
	ln     net.Listener
	target string
	URL    string
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
	stall  atomic.Bool // bytes are swallowed: a dead path, not a closed one
	// slowUp delays each read from a client by this many nanoseconds
	// before it goes on to the server: a slow path, in order.
	slowUp atomic.Int64
}

func startProxy(t testing.TB, natsURL string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, ln: ln, target: strings.TrimPrefix(natsURL, "nats://"), URL: "nats://" + ln.Addr().String()}
	go p.accept()
	t.Cleanup(func() { ln.Close(); p.Cut() })
	return p
}

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go func() { p.pipe(up, c, &p.slowUp); up.Close(); c.Close() }()
		go func() { p.pipe(c, up, nil); up.Close(); c.Close() }()
	}
}

// pipe copies src to dst, swallowing what it reads while stalled, and
// holding each read for *delay first if delay is set.
func (p *proxy) pipe(dst, src net.Conn, delay *atomic.Int64) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if delay != nil && n > 0 {
			time.Sleep(time.Duration(delay.Load()))
		}
		if n > 0 && !p.stall.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Stall swallows every byte from now on, in both directions, keeping the
// connections open: the path is dead but nothing says so.
func (p *proxy) Stall() { p.stall.Store(true) }

// Unstall forwards bytes again, and closes the connections that were
// stalled (their streams lost bytes).
func (p *proxy) Unstall() {
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.stall.Store(false)
	p.mu.Unlock()
}

// Cut closes every proxied connection and refuses new ones.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Heal accepts connections again.
func (p *proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// sharedStore opens the store the test's nodes share.
func sharedStore(t testing.TB) *feedStore {
	t.Helper()
	st, err := relaytest.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return newFeedStore(st)
}

// nodeStore is a test node's store: one the nodes share, with its feed
// of commits (a feedStore, or a PostgreSQL store on one schema).
type nodeStore interface {
	store.Store
	store.Feed
}

// node is one test node: a relay on loopback with a bridge as its bus.
type node struct {
	name string
	b    *Bridge
	r    *relaytest.Relay
}

// fastOptions are the options of test nodes: short intervals so that
// tests run quickly (none of them is a pass/fail threshold).
func fastOptions(t testing.TB, url, name, subject string, st *feedStore) Options {
	return Options{
		URL: url, Node: name, Subject: subject, Feed: st, Logger: testLogger(t).With("node", name),
		CatchUpMargin:     time.Second,
		PollInterval:      200 * time.Millisecond,
		HeartbeatInterval: 100 * time.Millisecond,
		SilenceTimeout:    time.Hour, // tests that want silence set it
		PingInterval:      500 * time.Millisecond,
		ReconnectWait:     50 * time.Millisecond,
		ConnectTimeout:    time.Second,
	}
}

// startNode starts a node over st. tweak may change its options; hooks
// are run on the bridge before it starts.
func startNode(t testing.TB, url, name, subject string, st *feedStore, tweak func(*Options), hooks ...func(*Bridge)) *node {
	t.Helper()
	return startNodeWith(t, url, name, subject, st, relaytest.Options{}, tweak, hooks...)
}

// startNodeWith is startNode with ro as the relay's options (its Store
// and Bus set here), over any store that is a feed (a feedStore, or
// PostgreSQL's).
func startNodeWith(t testing.TB, url, name, subject string, st nodeStore, ro relaytest.Options, tweak func(*Options), hooks ...func(*Bridge)) *node {
	t.Helper()
	o := fastOptions(t, url, name, subject, nil)
	o.Feed = st
	if tweak != nil {
		tweak(&o)
	}
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hooks {
		h(b)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b.Close(ctx)
	})
	ro.Store, ro.Bus = st, b
	r := relaytest.Start(t, ro)
	if err := b.Start(r.Relay.Publish); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.StopDelivery) // before the relay shuts down
	return &node{name: name, b: b, r: r}
}

// waitFor polls cond until it holds; the deadline only guards against a
// hang.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(relaytest.DefaultTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitConnected waits until every node's bridge is connected and has
// heard every other node (so that no first contact is still to come).
func waitConnected(t testing.TB, nodes ...*node) {
	t.Helper()
	for _, n := range nodes {
		waitFor(t, n.name+" connected and hearing the others", func() bool {
			s := n.b.Stats()
			return s.Connected && s.Origins == len(nodes)-1
		})
	}
}

// subscriber is a client with one live subscription to an author's
// events, counting what it receives by id.
type subscriber struct {
	t     testing.TB
	c     *relaytest.Client
	subID string
	got   map[nostr.ID]int
	order []nostr.ID
}

func subscribe(t testing.TB, n *node, author relaytest.Key) *subscriber {
	t.Helper()
	s := &subscriber{t: t, c: relaytest.Dial(t, n.r.URL), subID: "live", got: map[nostr.ID]int{}}
	for _, ev := range s.c.Req(s.subID, `{"authors":["`+author.PK.Hex()+`"]}`) {
		s.count(ev.ID)
	}
	return s
}

func (s *subscriber) count(id nostr.ID) {
	s.got[id]++
	s.order = append(s.order, id)
}

// until reads until every id in want has arrived.
func (s *subscriber) until(want ...*nostr.Event) {
	s.t.Helper()
	for {
		missing := 0
		for _, ev := range want {
			if s.got[ev.ID] == 0 {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		m := s.c.Read()
		if m.Type == "EVENT" && m.SubID == s.subID {
			s.count(m.Event.ID)
		} else {
			s.t.Fatalf("unexpected %s %s while %d events are missing", m.Type, m.Message, missing)
		}
	}
}

// fence hands a fresh event by author straight to n's relay, behind
// everything handed to it before (the relay's fan-out is first in, first
// out), and reads until it arrives: afterwards every delivery queued
// before it has been read.
func (s *subscriber) fence(n *node, author relaytest.Key) {
	s.t.Helper()
	f := author.Event(nostr.KindTextNote, "fence "+strconv.FormatInt(time.Now().UnixNano(), 10), nil, 0)
	n.r.Relay.Publish(f, 0)
	s.until(f)
	s.got[f.ID] = 0 // not an event of the test
}

// exactlyOnce fails unless each of want arrived exactly once, and nothing
// else did.
func (s *subscriber) exactlyOnce(want ...*nostr.Event) {
	s.t.Helper()
	wanted := map[nostr.ID]bool{}
	for _, ev := range want {
		wanted[ev.ID] = true
		if n := s.got[ev.ID]; n != 1 {
			s.t.Errorf("event %s (%s) delivered %d times, want once", ev.ID.Hex()[:8], ev.Content, n)
		}
	}
	for id, n := range s.got {
		if n > 0 && !wanted[id] {
			s.t.Errorf("unexpected event %s delivered %d times", id.Hex()[:8], n)
		}
	}
}

// notes makes n notes by k, numbered from prefix.
func notes(k relaytest.Key, prefix string, n int) []*nostr.Event {
	out := make([]*nostr.Event, n)
	for i := range out {
		out[i] = k.Note(prefix + " " + strconv.Itoa(i))
	}
	return out
}
