package server

import (
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// sharedBus is the relay.ConnSharer side of a bus between connShares in
// one process: what one sends, the others hear, under its origin.
type sharedBus struct {
	mu    sync.Mutex
	nodes map[string]func(string, []byte)
}

type busEnd struct {
	bus    *sharedBus
	origin string
	sent   int
}

func (e *busEnd) ShareConns(msg []byte) {
	e.sent++
	e.bus.mu.Lock()
	defer e.bus.mu.Unlock()
	for o, f := range e.bus.nodes {
		if o != e.origin {
			f(e.origin, msg)
		}
	}
}

func (e *busEnd) OnConns(f func(string, []byte)) {
	e.bus.mu.Lock()
	defer e.bus.mu.Unlock()
	e.bus.nodes[e.origin] = f
}

// TestConnShare: the per-address cap counts the connections other nodes
// told of: at the cap across two nodes, admitted; one past it, refused
// on either, other addresses untouched. Closing connections on one node
// frees them on the other at its next message, and a node gone silent
// is forgotten.
func TestConnShare(t *testing.T) {
	const maxIP = 32 // told from 2 connections
	bus := &sharedBus{nodes: map[string]func(string, []byte){}}
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	slA, slB := newSlots(0, maxIP, 0), newSlots(0, maxIP, 0)
	a, b := newConnShare(&busEnd{bus: bus, origin: "a"}, slA, maxIP), newConnShare(&busEnd{bus: bus, origin: "b"}, slB, maxIP)
	a.now, b.now = clock, clock
	ip, other := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")
	var ca, cb [maxIP + 1]fakeConn
	var oa, ob fakeConn // other's
	take := func(sl *slots, c *fakeConn, a netip.Addr, want bool) {
		t.Helper()
		if ok, perIP := sl.acquire(c, a); ok != want || perIP == want {
			t.Fatalf("acquire: %v (per-IP %v), want %v", ok, perIP, want)
		}
	}
	for i := range 20 {
		take(slA, &ca[i], ip, true)
	}
	take(slA, &oa, other, true) // one connection: not told of
	a.tick()
	if n := slB.remoteAddresses(); n != 1 {
		t.Fatalf("b heard of %d addresses, want 1", n)
	}
	for i := range 12 { // 20 + 12: at the cap
		take(slB, &cb[i], ip, true)
	}
	take(slB, &cb[12], ip, false) // one past it
	b.tick()
	take(slA, &ca[20], ip, false) // on a too, once b told it
	take(slB, &ob, other, true)

	// a closes ten: b admits ten more after a's next message.
	for i := range 10 {
		slA.release(&ca[i])
	}
	take(slB, &cb[12], ip, false)
	a.tick()
	for i := 12; i < 22; i++ {
		take(slB, &cb[i], ip, true)
	}
	take(slB, &cb[22], ip, false)

	// a closes the rest: its message that lists nothing clears it on b.
	for i := 10; i < 20; i++ {
		slA.release(&ca[i])
	}
	a.tick()
	if n := slB.remoteAddresses(); n != 0 {
		t.Fatalf("b still counts %d addresses of a's", n)
	}
	sent := a.bus.(*busEnd).sent
	a.tick() // nothing to tell, and told nothing last: no message
	if a.bus.(*busEnd).sent != sent {
		t.Fatal("a sent a message with nothing to tell twice")
	}
	// b goes silent: a forgets what it told after connShareExpiry.
	if n := slA.remoteAddresses(); n != 1 {
		t.Fatalf("a hears of %d of b's addresses, want 1", n)
	}
	now = now.Add(connShareExpiry + time.Millisecond)
	a.tick()
	if n := slA.remoteAddresses(); n != 0 {
		t.Fatalf("a still counts %d addresses of silent b's", n)
	}
}

// TestConnShareMessages: encodeConns and decodeConns round-trip; a
// message that lists nothing decodes to nothing; malformed ones fail.
func TestConnShareMessages(t *testing.T) {
	in := []addrConns{{ipKey(netip.MustParseAddr("192.0.2.7")), 3}, {ipKey(netip.MustParseAddr("2001:db8:1:2::9")), 1 << 20}}
	m, err := decodeConns(encodeConns(in))
	if err != nil || len(m) != 2 || m[in[0].key] != 3 || m[in[1].key] != 1<<20 {
		t.Fatalf("round trip: %v %v", m, err)
	}
	if m, err := decodeConns(encodeConns(nil)); err != nil || m != nil {
		t.Fatalf("empty: %v %v", m, err)
	}
	good := encodeConns(in[:1])
	v6 := netip.MustParseAddr("2001:db8::1").As16()
	for _, bad := range [][]byte{nil, {}, {2}, good[:10], good[:17], append(good[:17:17], 0),
		append(append([]byte{connShareV1}, v6[:]...), 128, 1), // an IPv6 address is keyed by its /64
	} {
		if _, err := decodeConns(bad); !errors.Is(err, errConnShare) {
			t.Fatalf("decode %v: %v", bad, err)
		}
	}
}

// FuzzConnShareDecode: decodeConns never panics, and what it accepts is
// keyed as the slots key addresses.
func FuzzConnShareDecode(f *testing.F) {
	f.Add(encodeConns([]addrConns{{ipKey(netip.MustParseAddr("192.0.2.7")), 3}}))
	f.Add([]byte{connShareV1})
	f.Fuzz(func(t *testing.T, msg []byte) {
		m, err := decodeConns(msg)
		if err != nil {
			return
		}
		for k, n := range m {
			if k != ipKey(k.Addr()) || n <= 0 {
				t.Fatalf("accepted %v = %d", k, n)
			}
		}
	})
}

// TestConnShareLimits: an address is told of from heavyShare
// connections (at it: told; one under: not), a message lists at most
// its limit of addresses (at it: all; one more: the limit), and a node
// is forgotten only past connShareExpiry.
func TestConnShareLimits(t *testing.T) {
	const maxIP = 64 // told from 4 connections
	if heavyShare(maxIP) != 4 || heavyShare(16) != 2 || heavyShare(-1) != 2 {
		t.Fatalf("heavyShare: %d %d %d", heavyShare(maxIP), heavyShare(16), heavyShare(-1))
	}
	sl := newSlots(0, maxIP, 0)
	sl.keepHeavy(heavyShare(maxIP))
	var conns [40]fakeConn
	next := 0
	open := func(a string, n int) {
		for range n {
			if ok, _ := sl.acquire(&conns[next], netip.MustParseAddr(a)); !ok {
				t.Fatalf("acquire from %s refused", a)
			}
			next++
		}
	}
	open("192.0.2.1", 3)
	if got := sl.heavyConns(nil, 10); len(got) != 0 {
		t.Fatalf("told of %v one under the share", got)
	}
	open("192.0.2.1", 1)
	if got := sl.heavyConns(nil, 10); len(got) != 1 || got[0].n != 4 {
		t.Fatalf("told of %v at the share, want 192.0.2.1's 4", got)
	}
	sl.release(&conns[0])
	if got := sl.heavyConns(nil, 10); len(got) != 0 {
		t.Fatalf("told of %v after one closed", got)
	}
	open("192.0.2.1", 1)
	open("192.0.2.2", 4)
	open("192.0.2.3", 4)
	if got := sl.heavyConns(nil, 3); len(got) != 3 {
		t.Fatalf("at the limit of 3: %d listed", len(got))
	}
	if got := sl.heavyConns(nil, 2); len(got) != 2 {
		t.Fatalf("past the limit of 2: %d listed", len(got))
	}

	bus := &sharedBus{nodes: map[string]func(string, []byte){}}
	now := time.Unix(1_700_000_000, 0)
	slA, slB := newSlots(0, maxIP, 0), newSlots(0, maxIP, 0)
	a, b := newConnShare(&busEnd{bus: bus, origin: "a"}, slA, maxIP), newConnShare(&busEnd{bus: bus, origin: "b"}, slB, maxIP)
	a.now = func() time.Time { return now }
	b.now = a.now
	var ca [4]fakeConn
	for i := range ca {
		slB.acquire(&ca[i], netip.MustParseAddr("192.0.2.9"))
	}
	b.tick()
	now = now.Add(connShareExpiry)
	a.tick()
	if slA.remoteAddresses() != 1 {
		t.Fatal("b forgotten at connShareExpiry, want only past it")
	}
	now = now.Add(time.Nanosecond)
	a.tick()
	if slA.remoteAddresses() != 0 {
		t.Fatal("b still counted past connShareExpiry")
	}
}
