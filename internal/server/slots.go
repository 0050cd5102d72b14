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
	perIP  map[netip.Prefix]*ipSlots
	owners map[net.Conn]*ipSlots // a small value: this map has one entry per connection
}

// ipSlots counts the connections of one client address.
type ipSlots struct {
	key netip.Prefix
	n   int32
}

func newSlots(maxTotal, maxIP int) *slots {
	return &slots{
		max:    maxTotal,
		maxIP:  maxIP,
		perIP:  make(map[netip.Prefix]*ipSlots),
		owners: make(map[net.Conn]*ipSlots),
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
	ip := sl.perIP[k]
	if sl.maxIP > 0 && ip != nil && int(ip.n) >= sl.maxIP {
		return false, true
	}
	if _, dup := sl.owners[c]; dup {
		return true, false
	}
	if ip == nil {
		ip = &ipSlots{key: k}
		sl.perIP[k] = ip
	}
	sl.total++
	ip.n++
	sl.owners[c] = ip
	return true, false
}

// release frees c's slot if it holds one.
func (sl *slots) release(c net.Conn) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	ip, ok := sl.owners[c]
	if !ok {
		return
	}
	delete(sl.owners, c)
	sl.total--
	if ip.n--; ip.n <= 0 {
		delete(sl.perIP, ip.key)
	}
}

func (sl *slots) active() int {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.total
}
