package server

import (
	"cmp"
	"math"
	"net"
	"net/netip"
	"slices"
	"sync"
)

// slots is the exact accounting of open connections, global and per client
// address. A slot is taken at accept (before any byte is read) and released
// once when the connection closes, whatever the path. A connection from a
// trusted proxy takes only the global part at accept; its per-address part
// is attached for the client the proxy forwards: when its PROXY header is
// read (headerRead), or at the WebSocket upgrade, for the address in
// real_ip_header (attach).
//
// Past max, up to reserve more connections are admitted in the HTTP
// reserve: they may make plain HTTP requests (monitoring, NIP-11) but
// become WebSockets only if a slot under max has freed by their upgrade
// (upgrade), so WebSockets never exceed max, nor connections max+reserve.
type slots struct {
	mu      sync.Mutex
	max     int // <= 0: unlimited
	maxIP   int // <= 0: unlimited
	reserve int // >= 0; connections admitted past max for plain HTTP
	total   int // every connection holding a slot, reserved ones included
	// reserved has an entry for each connection holding a slot of the
	// HTTP reserve (none while the relay is under max).
	reserved map[net.Conn]struct{}
	perIP    map[netip.Prefix]*ipSlots
	owners   map[net.Conn]*ipSlots // one entry per connection; nil: no per-address part (yet)
	// proxied has an entry for each connection from a trusted proxy
	// whose PROXY header is awaited (an invalid address) or named a
	// client (its address); none for the others, so that a connection's
	// entry costs nothing without the PROXY protocol.
	proxied map[net.Conn]netip.Addr
	// With many nodes (connshare.go): heavy holds the addresses with at
	// least heavyMin connections here (0: not kept), which this node
	// tells the others; remote the connections the other nodes hold for
	// the addresses they told of, counted against maxIP with this
	// node's own.
	heavyMin int32
	heavy    map[netip.Prefix]*ipSlots
	remote   map[netip.Prefix]int32
}

// ipSlots counts the connections of one client address.
type ipSlots struct {
	key netip.Prefix
	n   int32
}

func newSlots(maxTotal, maxIP, reserve int) *slots {
	return &slots{
		max:      maxTotal,
		maxIP:    maxIP,
		reserve:  max(reserve, 0),
		reserved: make(map[net.Conn]struct{}),
		perIP:    make(map[netip.Prefix]*ipSlots),
		owners:   make(map[net.Conn]*ipSlots),
		proxied:  make(map[net.Conn]netip.Addr),
	}
}

// connAddr returns the TCP peer address of c (invalid if unparseable).
func connAddr(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	}
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// ipKey groups IPv4 by address and IPv6 by /64 (one site's allocation).
func ipKey(a netip.Addr) netip.Prefix {
	if !a.IsValid() {
		return netip.Prefix{}
	}
	a = a.Unmap()
	if a.Is4() {
		return netip.PrefixFrom(a, 32)
	}
	p, _ := a.Prefix(64)
	return p
}

// acquire takes a slot for c, counted for client address a, or without a
// per-address part when a is invalid (a trusted proxy's connection); at
// max, a slot of the HTTP reserve. It reports false (and whether the
// per-IP cap was the reason) when c must be refused.
func (sl *slots) acquire(c net.Conn, a netip.Addr) (ok, perIP bool) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if _, dup := sl.owners[c]; dup {
		return true, false
	}
	full := sl.max > 0 && sl.total-len(sl.reserved) >= sl.max
	if full && len(sl.reserved) >= sl.reserve {
		return false, false
	}
	var ip *ipSlots
	if a.IsValid() {
		if ip, ok = sl.takeIP(ipKey(a)); !ok {
			return false, true
		}
	}
	sl.total++
	sl.owners[c] = ip
	if full {
		sl.reserved[c] = struct{}{}
	}
	return true, false
}

// upgrade reports whether c may become a WebSocket: true unless it holds
// a slot of the HTTP reserve and none under max has freed (if one has, c
// takes it and leaves the reserve).
func (sl *slots) upgrade(c net.Conn) bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if _, held := sl.reserved[c]; !held {
		return true
	}
	if sl.total-len(sl.reserved) >= sl.max {
		return false
	}
	delete(sl.reserved, c)
	return true
}

// attach counts c, which holds a slot without a per-address part, for
// client address a, replacing any per-address part it had. It reports
// false when a is at the per-IP cap (c keeps its global slot).
func (sl *slots) attach(c net.Conn, a netip.Addr) bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	old, held := sl.owners[c]
	if !held {
		return false
	}
	k := ipKey(a)
	if old != nil && old.key == k {
		return true
	}
	ip, ok := sl.takeIP(k)
	if !ok {
		return false
	}
	sl.dropIP(old)
	sl.owners[c] = ip
	return true
}

// detach removes c's per-address part, keeping its global slot.
func (sl *slots) detach(c net.Conn) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if ip, held := sl.owners[c]; held && ip != nil {
		sl.dropIP(ip)
		sl.owners[c] = nil
	}
}

// expectHeader marks c, which holds a slot, as awaiting its PROXY header.
func (sl *slots) expectHeader(c net.Conn) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if _, held := sl.owners[c]; held {
		sl.proxied[c] = netip.Addr{}
	}
}

// headerRead ends c's wait for its PROXY header. A valid src is the
// client the header named: it becomes c's source, and if perAddr is set c
// takes its per-address slot for src. It reports false when c holds no
// slot (it was closed meanwhile) or, with atCap, when src is at the
// per-IP cap (c keeps its global slot until it is closed).
func (sl *slots) headerRead(c net.Conn, src netip.Addr, perAddr bool) (ok, atCap bool) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	old, held := sl.owners[c]
	if !held {
		return false, false
	}
	delete(sl.proxied, c)
	if !src.IsValid() {
		return true, false
	}
	if perAddr {
		ip, ok := sl.takeIP(ipKey(src))
		if !ok {
			return false, true
		}
		sl.dropIP(old)
		sl.owners[c] = ip
	}
	sl.proxied[c] = src
	return true, false
}

// source returns the client c's PROXY header named, if it named one.
func (sl *slots) source(c net.Conn) (netip.Addr, bool) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	a := sl.proxied[c]
	return a, a.IsValid()
}

// takeIP counts one more connection for k: refused at maxIP, counting
// what other nodes hold for k. sl.mu must be held.
func (sl *slots) takeIP(k netip.Prefix) (*ipSlots, bool) {
	ip := sl.perIP[k]
	if sl.maxIP > 0 {
		n := sl.remote[k]
		if ip != nil {
			n += ip.n
		}
		if int(n) >= sl.maxIP {
			return nil, false
		}
	}
	if ip == nil {
		ip = &ipSlots{key: k}
		sl.perIP[k] = ip
	}
	if ip.n++; sl.heavyMin > 0 && ip.n == sl.heavyMin {
		sl.heavy[k] = ip
	}
	return ip, true
}

// dropIP counts one connection less for ip (nil: none). sl.mu must be
// held.
func (sl *slots) dropIP(ip *ipSlots) {
	if ip == nil {
		return
	}
	if sl.heavyMin > 0 && ip.n == sl.heavyMin {
		delete(sl.heavy, ip.key)
	}
	if ip.n--; ip.n <= 0 {
		delete(sl.perIP, ip.key)
	}
}

// keepHeavy starts keeping the addresses with at least min connections
// here (heavyConns lists them). Call it before any connection.
func (sl *slots) keepHeavy(min int32) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	sl.heavyMin, sl.heavy = min, make(map[netip.Prefix]*ipSlots)
}

// heavyConns appends to dst the addresses with at least heavyMin
// connections here and their counts, at most limit of them: when there
// are more, the ones with the most connections (and, between equal
// counts, the lowest addresses, so that the same ones are listed from
// one interval to the next while the counts stay).
func (sl *slots) heavyConns(dst []addrConns, limit int) []addrConns {
	start := len(dst)
	sl.mu.Lock()
	for k, ip := range sl.heavy {
		dst = append(dst, addrConns{k, ip.n})
	}
	sl.mu.Unlock()
	if len(dst)-start > limit {
		// Not netip.Prefix.Compare (the same order for these masked
		// keys): it masks both prefixes at every call, 52% slower for
		// 10,000 addresses (BenchmarkHeavyConns/cut).
		slices.SortFunc(dst[start:], func(a, b addrConns) int {
			if c := cmp.Compare(b.n, a.n); c != 0 {
				return c
			}
			if c := a.key.Addr().Compare(b.key.Addr()); c != 0 {
				return c
			}
			return cmp.Compare(a.key.Bits(), b.key.Bits())
		})
		dst = dst[:start+max(limit, 0)]
	}
	return dst
}

// addRemote changes what other nodes hold, address by address, by the
// counts in d (negative: fewer).
func (sl *slots) addRemote(d []addrConns) {
	if len(d) == 0 {
		return
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.remote == nil {
		sl.remote = make(map[netip.Prefix]int32)
	}
	for _, c := range d {
		if n := int32(min(int64(sl.remote[c.key])+int64(c.n), math.MaxInt32)); n > 0 {
			sl.remote[c.key] = n
		} else {
			delete(sl.remote, c.key)
		}
	}
}

// remoteAddresses returns how many addresses other nodes told of.
func (sl *slots) remoteAddresses() int {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return len(sl.remote)
}

// addrConns is one address's connections.
type addrConns struct {
	key netip.Prefix
	n   int32
}

// release frees c's slot if it holds one. It returns the client c's
// PROXY header named (if any), and whether c was still awaiting its
// header.
func (sl *slots) release(c net.Conn) (src netip.Addr, awaiting bool) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	ip, ok := sl.owners[c]
	if !ok {
		return netip.Addr{}, false
	}
	delete(sl.owners, c)
	sl.total--
	sl.dropIP(ip)
	if len(sl.reserved) > 0 {
		delete(sl.reserved, c)
	}
	if len(sl.proxied) > 0 {
		if src, ok = sl.proxied[c]; ok {
			delete(sl.proxied, c)
			awaiting = !src.IsValid()
		}
	}
	return src, awaiting
}

// active returns the number of connections holding a slot.
func (sl *slots) active() int {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.total
}

// inReserve returns the number of connections holding a slot of the HTTP
// reserve.
func (sl *slots) inReserve() int {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return len(sl.reserved)
}
