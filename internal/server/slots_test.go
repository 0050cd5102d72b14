package server

import (
	"net/netip"
	"testing"
)

// TestSlotsReserve: at max, connections go to the HTTP reserve, up to
// its size (at the reserve: admitted; past it: refused); a reserved
// connection may upgrade only once a slot under max has freed, and then
// leaves the reserve. WebSockets never exceed max.
func TestSlotsReserve(t *testing.T) {
	sl := newSlots(2, 0, 2)
	a := netip.MustParseAddr("192.0.2.1")
	var conns [7]fakeConn
	acquire := func(i int, want bool) {
		t.Helper()
		if ok, perIP := sl.acquire(&conns[i], a); ok != want || perIP {
			t.Fatalf("acquire %d: %v, perIP %v; want %v", i, ok, perIP, want)
		}
	}
	upgrade := func(i int, want bool) {
		t.Helper()
		if ok := sl.upgrade(&conns[i]); ok != want {
			t.Fatalf("upgrade %d: %v; want %v", i, ok, want)
		}
	}
	counts := func(total, reserved int) {
		t.Helper()
		if n, r := sl.active(), sl.inReserve(); n != total || r != reserved {
			t.Fatalf("active %d, in reserve %d; want %d, %d", n, r, total, reserved)
		}
	}
	acquire(0, true)
	acquire(1, true)
	upgrade(0, true)
	upgrade(1, true)
	counts(2, 0)
	acquire(2, true) // the reserve
	acquire(3, true) // the reserve's last slot
	counts(4, 2)
	acquire(4, false) // past it
	counts(4, 2)
	upgrade(2, false)
	upgrade(3, false)

	sl.release(&conns[0]) // a WebSocket leaves
	counts(3, 2)
	upgrade(2, true) // takes its slot
	counts(3, 1)
	upgrade(3, false)
	acquire(4, true) // to the reserve again
	counts(4, 2)
	acquire(5, false)

	sl.release(&conns[3]) // a reserved connection leaves
	counts(3, 1)
	acquire(5, true)
	counts(4, 2)
	acquire(6, false)
	for i := range conns {
		sl.release(&conns[i])
	}
	counts(0, 0)
}

// TestSlotsNoReserve: a negative reserve (none) refuses at max, as
// without the reserve; without max there is no reserve to take.
func TestSlotsNoReserve(t *testing.T) {
	sl := newSlots(1, 0, -1)
	var conns [3]fakeConn
	if ok, _ := sl.acquire(&conns[0], netip.Addr{}); !ok {
		t.Fatal("under max: refused")
	}
	if ok, _ := sl.acquire(&conns[1], netip.Addr{}); ok {
		t.Fatal("at max, no reserve: admitted")
	}
	sl = newSlots(0, 0, 2)
	for i := range conns {
		if ok, _ := sl.acquire(&conns[i], netip.Addr{}); !ok || sl.inReserve() != 0 {
			t.Fatalf("no max: connection %d admitted %v, %d in reserve", i, ok, sl.inReserve())
		}
	}
}
