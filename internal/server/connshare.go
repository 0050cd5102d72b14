package server

import (
	"encoding/binary"
	"errors"
	"math"
	"net/netip"
	"sync"
	"time"

	"github.com/petrel-relay/petrel/internal/relay"
)

// The per-address connection cap across the nodes of a cluster. Each node
// counts its own connections per client address (slots); a client the
// load balancer spreads over N nodes (HAProxy's leastconn does) would get
// max_connections_per_ip on each. With a bus that is a
// relay.ConnSharer, every connShareInterval a node tells the others the
// addresses holding at least a sixteenth of the cap here (heavyShare; at
// least 2), with their counts, and counts what the others told it
// against the cap with its own. An address under that share on every
// node is not told of: a client spread over N nodes gets at most the
// cap plus (N-1) times one less than the share (15 each for the default
// 128), and, for the connections opened within one interval of each
// other on several nodes, what each node admitted before it heard.
// Connections already open are never closed for this.
//
// A message is a version byte, then one entry an address:
//
//	address (16 bytes) | prefix bits (1 byte) | connections (uvarint)
//
// and replaces what that node told before; a node not heard from for
// connShareExpiry is forgotten (it stopped, or left the bus).

const (
	connShareV1       = 1
	connShareInterval = 250 * time.Millisecond
	connShareExpiry   = 4 * connShareInterval
	// maxConnShare is the most addresses one message lists (about 67 KB,
	// well under NATS's default payload limit of 1 MB), fewer when the
	// bus takes smaller messages (connShareFits); past it, the heaviest
	// addresses are listed and the others left out of that interval's
	// message.
	maxConnShare = 3000
	// connShareEntry is the most bytes an address takes in a message.
	connShareEntry = 16 + 1 + binary.MaxVarintLen32
)

// connShareFits returns how many addresses a message lists on a bus that
// takes messages of up to limit bytes (0: unknown): maxConnShare, or
// fewer when the NATS server's max_payload is smaller. A limit under one
// address is not cut to: the message goes whole and fails visibly (the
// bridge counts and logs what NATS would not send).
func connShareFits(limit int) int {
	if n := (limit - 1) / connShareEntry; limit > 0 && n > 0 {
		return min(n, maxConnShare)
	}
	return maxConnShare
}

// heavyShare returns the connections from which an address is told to
// the other nodes: a sixteenth of the cap, at least 2.
func heavyShare(maxIP int) int32 {
	return int32(max(2, maxIP/16))
}

// connShare exchanges the heavy addresses' counts with the other nodes.
type connShare struct {
	bus relay.ConnSharer
	sl  *slots
	now func() time.Time

	mu     sync.Mutex
	nodes  map[string]*remoteNode // by origin
	told   bool                   // this node's last message listed an address
	buf    []addrConns            // tick's
	read   []addrConns            // heard's: the message's entries
	deltas []addrConns            // heard's: the changes to the slots' counts
}

// remoteNode is what one other node told last. Each message replaces the
// one before; heard applies only the difference to the slots, so that a
// node that tells the same thousands of addresses every interval costs
// the others a map lookup an address, not the slots' lock for a rebuild.
type remoteNode struct {
	conns map[netip.Prefix]*remoteConns
	heard time.Time
	gen   uint64 // the message being applied
}

// remoteConns is one address's count as a node told it, and the message
// (remoteNode.gen) that last listed it.
type remoteConns struct {
	n   int32
	gen uint64
}

func newConnShare(bus relay.ConnSharer, sl *slots, maxIP int) *connShare {
	cs := &connShare{bus: bus, sl: sl, now: time.Now, nodes: make(map[string]*remoteNode)}
	sl.keepHeavy(heavyShare(maxIP))
	bus.OnConns(cs.heard)
	return cs
}

// run tells the other nodes this node's heavy addresses every
// connShareInterval, and forgets the nodes gone silent, until done
// closes.
func (cs *connShare) run(done <-chan struct{}) {
	t := time.NewTicker(connShareInterval)
	defer t.Stop()
	for {
		select {
		case <-done:
			cs.goodbye()
			return
		case <-t.C:
			cs.tick()
		}
	}
}

// goodbye tells the others, when this node stops (the server's shutdown
// begins), to count none of its connections from now, rather than at
// expiry: its clients reconnect through the other nodes meanwhile. The
// connections still draining are left out early, on the side of the
// one-sided error (a client may get more than the cap, never less).
func (cs *connShare) goodbye() {
	if cs.told {
		cs.bus.ShareConns(encodeConns(nil))
		cs.told = false
	}
}

// tick sends this node's heavy addresses: while it has any, and once
// more when it has none left (so the others drop them at once, not at
// expiry); then forgets the silent nodes.
func (cs *connShare) tick() {
	cs.buf = cs.sl.heavyConns(cs.buf[:0], connShareFits(cs.bus.ShareLimit()))
	if len(cs.buf) > 0 || cs.told {
		cs.bus.ShareConns(encodeConns(cs.buf))
		cs.told = len(cs.buf) > 0
	}
	now := cs.now()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for o, n := range cs.nodes {
		if now.Sub(n.heard) > connShareExpiry {
			delete(cs.nodes, o)
			d := cs.deltas[:0]
			for k, c := range n.conns {
				d = append(d, addrConns{k, -c.n})
			}
			cs.sl.addRemote(d)
			cs.deltas = d
		}
	}
}

// heard takes another node's message (relay.ConnSharer's callback): it
// replaces what that node told before. A message that cannot be read
// changes nothing.
func (cs *connShare) heard(origin string, msg []byte) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	read, err := readConns(cs.read[:0], msg)
	cs.read = read[:0]
	if err != nil {
		return
	}
	n := cs.nodes[origin]
	if n == nil {
		if len(read) == 0 {
			return
		}
		n = &remoteNode{conns: make(map[netip.Prefix]*remoteConns, len(read))}
		cs.nodes[origin] = n
	}
	n.gen++
	d := cs.deltas[:0]
	for _, e := range read {
		switch c := n.conns[e.key]; {
		case c == nil:
			n.conns[e.key] = &remoteConns{e.n, n.gen}
			d = append(d, e)
		case c.gen == n.gen: // listed twice in this message: summed
			sum := int32(min(int64(c.n)+int64(e.n), math.MaxInt32))
			d = append(d, addrConns{e.key, sum - c.n})
			c.n = sum
		default:
			if e.n != c.n {
				d = append(d, addrConns{e.key, e.n - c.n})
			}
			c.n, c.gen = e.n, n.gen
		}
	}
	for k, c := range n.conns {
		if c.gen != n.gen { // not listed this time
			d = append(d, addrConns{k, -c.n})
			delete(n.conns, k)
		}
	}
	if len(n.conns) == 0 {
		delete(cs.nodes, origin)
	} else {
		n.heard = cs.now()
	}
	cs.sl.addRemote(d)
	cs.deltas = d[:0]
}

func encodeConns(conns []addrConns) []byte {
	m := make([]byte, 0, 1+len(conns)*(17+binary.MaxVarintLen32))
	m = append(m, connShareV1)
	for _, c := range conns {
		a := c.key.Addr().As16()
		m = append(m, a[:]...)
		m = append(m, byte(c.key.Bits()))
		m = binary.AppendUvarint(m, uint64(c.n))
	}
	return m
}

var errConnShare = errors.New("server: bad connection-share message")

// readConns appends a message's entries to dst, in its order (an address
// listed twice is there twice); it fails, having checked every entry, on
// a message it cannot read.
func readConns(dst []addrConns, msg []byte) ([]addrConns, error) {
	if len(msg) == 0 || msg[0] != connShareV1 {
		return dst, errConnShare
	}
	for p := msg[1:]; len(p) > 0; {
		if len(p) < 17 {
			return dst, errConnShare
		}
		a := netip.AddrFrom16([16]byte(p[:16])).Unmap()
		bits := int(p[16])
		n, w := binary.Uvarint(p[17:])
		if w <= 0 || n == 0 || n > math.MaxInt32 {
			return dst, errConnShare
		}
		k, err := a.Prefix(bits)
		if err != nil || k.Bits() != bits || k != ipKey(a) {
			return dst, errConnShare
		}
		dst = append(dst, addrConns{k, int32(n)})
		p = p[17+w:]
	}
	return dst, nil
}
