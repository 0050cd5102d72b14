package server

import (
	"net"
	"net/netip"
	"sync"
)

// slots is the exact accounting of open connections, global and per client
// address. A slot is taken at accept (before any byte is read) and released
// once when the connection closes, whatever the path.
type slots struct {
	mu     sync.Mutex
	max    int // <= 0: unlimited
	maxIP  int // <= 0: unlimited
	total  int
	perIP  map[netip.Prefix]int32
	owners map[net.Conn]netip.Prefix
}

func newSlots(maxTotal, maxIP int) *slots {
	return &slots{
		max:    maxTotal,
		maxIP:  maxIP,
		perIP:  make(map[netip.Prefix]int32),
		owners: make(map[net.Conn]netip.Prefix),
	}
}

// ipKey groups IPv4 by address and IPv6 by /64 (one site's allocation).
func ipKey(c net.Conn) netip.Prefix {
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return netip.Prefix{}
	}
	a := ap.Addr().Unmap()
	if a.Is4() {
		return netip.PrefixFrom(a, 32)
	}
	p, _ := a.Prefix(64)
	return p
}

// acquire takes a slot for c. It reports false (and whether the per-IP cap
// was the reason) when c must be refused.
func (sl *slots) acquire(c net.Conn) (ok, perIP bool) {
	k := ipKey(c)
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.max > 0 && sl.total >= sl.max {
		return false, false
	}
	if sl.maxIP > 0 && int(sl.perIP[k]) >= sl.maxIP {
		return false, true
	}
	if _, dup := sl.owners[c]; dup {
		return true, false
	}
	sl.total++
	sl.perIP[k]++
	sl.owners[c] = k
	return true, false
}

// release frees c's slot if it holds one.
func (sl *slots) release(c net.Conn) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	k, ok := sl.owners[c]
	if !ok {
		return
	}
	delete(sl.owners, c)
	sl.total--
	if n := sl.perIP[k] - 1; n > 0 {
		sl.perIP[k] = n
	} else {
		delete(sl.perIP, k)
	}
}

func (sl *slots) active() int {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.total
}
