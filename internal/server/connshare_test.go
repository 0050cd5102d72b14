package server

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"
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
	limit  int // ShareLimit's
	last   []byte
}

func (e *busEnd) ShareConns(msg []byte) {
	e.sent++
	e.last = msg
	e.bus.mu.Lock()
	defer e.bus.mu.Unlock()
	for o, f := range e.bus.nodes {
		if o != e.origin {
			f(e.origin, msg)
		}
	}
}

func (e *busEnd) ShareLimit() int { return e.limit }

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

// TestConnShareGoodbye: a node whose server stops tells the others to
// count none of its connections at once; one that told nothing sends
// nothing.
func TestConnShareGoodbye(t *testing.T) {
	const maxIP = 32 // told from 2 connections
	bus := &sharedBus{nodes: map[string]func(string, []byte){}}
	slA, slB, slC := newSlots(0, maxIP, 0), newSlots(0, maxIP, 0), newSlots(0, maxIP, 0)
	a, c := newConnShare(&busEnd{bus: bus, origin: "a"}, slA, maxIP), newConnShare(&busEnd{bus: bus, origin: "c"}, slC, maxIP)
	newConnShare(&busEnd{bus: bus, origin: "b"}, slB, maxIP) // b hears
	var conns [2]fakeConn
	for i := range conns {
		slA.acquire(&conns[i], netip.MustParseAddr("192.0.2.1"))
	}
	a.tick()
	if slB.remoteAddresses() != 1 {
		t.Fatal("b did not hear a's address")
	}
	stop := func(cs *connShare) {
		done := make(chan struct{})
		ended := make(chan struct{})
		go func() { cs.run(done); close(ended) }()
		close(done)
		<-ended
	}
	stop(a)
	if n := slB.remoteAddresses(); n != 0 {
		t.Fatalf("b still counts %d of a's addresses after a stopped", n)
	}
	sent := c.bus.(*busEnd).sent
	stop(c)
	if c.bus.(*busEnd).sent != sent {
		t.Fatal("c, which told nothing, sent a goodbye")
	}
}

// TestConnShareMessages: encodeConns and readConns round-trip; a message
// that lists nothing reads as nothing; malformed ones fail.
func TestConnShareMessages(t *testing.T) {
	in := []addrConns{{ipKey(netip.MustParseAddr("192.0.2.7")), 3}, {ipKey(netip.MustParseAddr("2001:db8:1:2::9")), 1 << 20}}
	got, err := readConns(nil, encodeConns(in))
	if err != nil || !slices.Equal(got, in) {
		t.Fatalf("round trip: %v %v", got, err)
	}
	if got, err := readConns(nil, encodeConns(nil)); err != nil || len(got) != 0 {
		t.Fatalf("empty: %v %v", got, err)
	}
	good := encodeConns(in[:1])
	v6 := netip.MustParseAddr("2001:db8::1").As16()
	for _, bad := range [][]byte{nil, {}, {2}, good[:10], good[:17], append(good[:17:17], 0),
		append(append([]byte{connShareV1}, v6[:]...), 128, 1), // an IPv6 address is keyed by its /64
		append(good[:18:18], 0x80, 0x80, 0x80, 0x80, 0x08),    // 2^31 connections
	} {
		if _, err := readConns(nil, bad); !errors.Is(err, errConnShare) {
			t.Fatalf("read %v: %v", bad, err)
		}
	}
}

// TestConnShareHeard: each message replaces what its node told before,
// whatever changed (a count up or down, an address added or left out);
// an address listed twice counts twice; a message that cannot be read
// changes nothing; and what two nodes tell of one address adds up.
func TestConnShareHeard(t *testing.T) {
	sl := newSlots(0, 128, 0)
	cs := newConnShare(&busEnd{bus: &sharedBus{nodes: map[string]func(string, []byte){}}, origin: "me"}, sl, 128)
	x, y, z := ipKey(netip.MustParseAddr("192.0.2.1")), ipKey(netip.MustParseAddr("192.0.2.2")), ipKey(netip.MustParseAddr("2001:db8::1"))
	check := func(step string, want map[netip.Prefix]int32) {
		t.Helper()
		sl.mu.Lock()
		defer sl.mu.Unlock()
		if !maps.Equal(sl.remote, want) {
			t.Fatalf("%s: remote %v, want %v", step, sl.remote, want)
		}
	}
	cs.heard("a", encodeConns([]addrConns{{x, 10}, {y, 20}}))
	check("first", map[netip.Prefix]int32{x: 10, y: 20})
	cs.heard("a", encodeConns([]addrConns{{x, 12}, {z, 9}, {z, 1}}))
	check("x up, y gone, z listed twice", map[netip.Prefix]int32{x: 12, z: 10})
	cs.heard("b", encodeConns([]addrConns{{x, 5}}))
	check("b too", map[netip.Prefix]int32{x: 17, z: 10})
	bad := encodeConns([]addrConns{{y, 1}})
	cs.heard("a", append(bad, 0xff))
	check("unreadable", map[netip.Prefix]int32{x: 17, z: 10})
	cs.heard("a", encodeConns([]addrConns{{x, 2}, {z, 10}}))
	check("x down, z the same", map[netip.Prefix]int32{x: 7, z: 10})
	cs.heard("a", encodeConns(nil))
	check("a lists nothing", map[netip.Prefix]int32{x: 5})
	if _, ok := cs.nodes["a"]; ok || len(cs.nodes) != 1 {
		t.Fatalf("nodes %v, want b's only", cs.nodes)
	}
	cs.heard("b", encodeConns(nil))
	check("b lists nothing", map[netip.Prefix]int32{})
}

// FuzzConnShareDecode: readConns never panics, and what it accepts is
// keyed as the slots key addresses; a connShare hearing it keeps counts
// that add up to it.
func FuzzConnShareDecode(f *testing.F) {
	f.Add(encodeConns([]addrConns{{ipKey(netip.MustParseAddr("192.0.2.7")), 3}}))
	f.Add([]byte{connShareV1})
	f.Fuzz(func(t *testing.T, msg []byte) {
		got, err := readConns(nil, msg)
		if err != nil {
			return
		}
		want := map[netip.Prefix]int32{}
		for _, c := range got {
			if c.key != ipKey(c.key.Addr()) || c.n <= 0 {
				t.Fatalf("accepted %v = %d", c.key, c.n)
			}
			want[c.key] = int32(min(int64(want[c.key])+int64(c.n), math.MaxInt32))
		}
		sl := newSlots(0, 128, 0)
		cs := newConnShare(&busEnd{bus: &sharedBus{nodes: map[string]func(string, []byte){}}, origin: "me"}, sl, 128)
		cs.heard("a", msg)
		if !maps.Equal(sl.remote, want) && (len(want) > 0 || len(sl.remote) > 0) {
			t.Fatalf("heard %v, want %v", sl.remote, want)
		}
		cs.heard("a", encodeConns(nil))
		if len(sl.remote) != 0 {
			t.Fatalf("after an empty message: %v", sl.remote)
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

// TestConnShareFits: on a bus that takes smaller messages than a full
// one (a NATS server's max_payload under 67 KB), a message lists as many
// addresses as fit, the ones with the most connections (between equal
// counts, the lowest addresses, the same from one interval to the next),
// and fits; at the size of five entries, five listed, one byte under,
// four; a limit under one entry or unknown (0) leaves maxConnShare.
func TestConnShareFits(t *testing.T) {
	for _, c := range []struct{ limit, want int }{
		{0, maxConnShare}, {-1, maxConnShare}, {1, maxConnShare}, {connShareEntry, maxConnShare},
		{1 + connShareEntry, 1}, {1 + 5*connShareEntry, 5}, {5 * connShareEntry, 4},
		{1 + maxConnShare*connShareEntry, maxConnShare}, {1 << 30, maxConnShare},
	} {
		if got := connShareFits(c.limit); got != c.want {
			t.Errorf("connShareFits(%d) = %d, want %d", c.limit, got, c.want)
		}
	}

	const maxIP = 64 // told from 4 connections
	sl := newSlots(0, maxIP, 0)
	bus := &sharedBus{nodes: map[string]func(string, []byte){}}
	end := &busEnd{bus: bus, origin: "a", limit: 1 + 5*connShareEntry}
	cs := newConnShare(end, sl, maxIP)
	var conns [200]fakeConn
	next := 0
	open := func(a netip.Addr, n int) {
		for range n {
			if ok, _ := sl.acquire(&conns[next], a); !ok {
				t.Fatalf("acquire from %s refused", a)
			}
			next++
		}
	}
	// Twelve heavy addresses: 192.0.2.1-10 with 4 + i connections (the
	// heaviest .10, .9, .8, .7, .6), and two IPv6 /64s with 6 each, tied
	// with .2 and after it in order: with room for ten, .10 to .2 and
	// the first /64.
	for i := 1; i <= 10; i++ {
		open(netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}), 4+i)
	}
	open(netip.MustParseAddr("2001:db8:2::1"), 6)
	open(netip.MustParseAddr("2001:db8:1::1"), 6)
	want := func(limit int, listed ...string) {
		t.Helper()
		end.limit = limit
		for range 3 { // the same each interval
			cs.tick()
			if len(end.last) > limit && limit > connShareEntry {
				t.Fatalf("limit %d: a message of %d bytes", limit, len(end.last))
			}
			got, err := readConns(nil, end.last)
			if err != nil {
				t.Fatal(err)
			}
			var addrs []string
			for _, e := range got {
				addrs = append(addrs, e.key.String())
			}
			if !slices.Equal(addrs, listed) {
				t.Fatalf("limit %d: listed %v, want %v", limit, addrs, listed)
			}
		}
	}
	want(1+5*connShareEntry, "192.0.2.10/32", "192.0.2.9/32", "192.0.2.8/32", "192.0.2.7/32", "192.0.2.6/32")
	want(5*connShareEntry, "192.0.2.10/32", "192.0.2.9/32", "192.0.2.8/32", "192.0.2.7/32")
	want(1+10*connShareEntry, "192.0.2.10/32", "192.0.2.9/32", "192.0.2.8/32", "192.0.2.7/32",
		"192.0.2.6/32", "192.0.2.5/32", "192.0.2.4/32", "192.0.2.3/32", "192.0.2.2/32", "2001:db8:1::/64")
	end.limit = 0 // unknown: all twelve, in any order
	cs.tick()
	if got, err := readConns(nil, end.last); err != nil || len(got) != 12 {
		t.Fatalf("no limit: %d listed (%v)", len(got), err)
	}
}

// BenchmarkConnShareHeard: what a node pays for another node's message at
// its largest (maxConnShare addresses, IPv4 and IPv6 half each): read,
// and what that node told before replaced in the slots' counts (under
// the lock every accept and close takes). "same": the message repeats,
// as an idle node's does; "changed": two messages of the same addresses
// with every count different alternate, the worst case. addrs/msg is the
// addresses a message lists; ns/addr what each costs.
func BenchmarkConnShareHeard(b *testing.B) {
	const maxIP = 128
	for _, variant := range []string{"same", "changed"} {
		b.Run(variant, func(b *testing.B) {
			sl := newSlots(0, maxIP, 0)
			cs := newConnShare(&busEnd{bus: &sharedBus{nodes: map[string]func(string, []byte){}}, origin: "b"}, sl, maxIP)
			var msgs [2][]byte
			for m := range msgs {
				conns := make([]addrConns, maxConnShare)
				for i := range conns {
					a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
					if i%2 == 1 {
						a = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 7: byte(i), 6: byte(i >> 8)})
					}
					n := heavyShare(maxIP)
					if variant == "changed" {
						n += int32(m)
					}
					conns[i] = addrConns{ipKey(a), n}
				}
				msgs[m] = encodeConns(conns)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cs.heard("a", msgs[i%2])
			}
			b.ReportMetric(maxConnShare, "addrs/msg")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/maxConnShare, "ns/addr")
			b.ReportMetric(float64(len(msgs[0])), "B/msg")
			if got := sl.remoteAddresses(); got != maxConnShare {
				b.Fatalf("%d addresses told of, want %d", got, maxConnShare)
			}
		})
	}
}

// BenchmarkHeavyConns: what a tick pays to list the heavy addresses, with
// N of them at the share (2 connections each, the cap 32): "all" lists
// them all (a copy under the slots' lock, which accepts and closes
// wait for), "cut" keeps maxConnShare of them (the copy, then a sort
// outside the lock).
func BenchmarkHeavyConns(b *testing.B) {
	for _, n := range []int{maxConnShare, 10000} {
		sl := newSlots(0, 32, 0)
		sl.keepHeavy(heavyShare(32))
		conns := make([]fakeConn, 2*n)
		for i := range n {
			a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
			for j := range 2 {
				if ok, _ := sl.acquire(&conns[2*i+j], a); !ok {
					b.Fatal("acquire refused")
				}
			}
		}
		for _, v := range []struct {
			name  string
			limit int
		}{{"all", n}, {"cut", min(n, maxConnShare)}} {
			if v.name == "cut" && n <= maxConnShare {
				continue
			}
			b.Run(fmt.Sprintf("%s/%d", v.name, n), func(b *testing.B) {
				var buf []addrConns
				for b.Loop() {
					buf = sl.heavyConns(buf[:0], v.limit)
				}
				if len(buf) != v.limit {
					b.Fatalf("%d listed, want %d", len(buf), v.limit)
				}
			})
		}
	}
}
