package negentropy

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// randID returns a random id.
func randID(r *rand.Rand) [IDSize]byte {
	var id [IDSize]byte
	for i := 0; i < IDSize; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			id[i+j] = byte(v >> (8 * j))
		}
	}
	return id
}

// sets describes a random pair of sets.
type sets struct {
	common, onlyClient, onlyServer int
	// tsRange is the number of distinct timestamps items draw from (1
	// means every item has the same timestamp); base is the smallest.
	tsRange, base uint64
	// sharedPrefix makes ids share their first bytes, to exercise long
	// bound prefixes.
	sharedPrefix int
}

// gen makes the client's and server's items for s.
func (s sets) gen(r *rand.Rand) (client, server []Item) {
	item := func() Item {
		it := Item{Timestamp: s.base + r.Uint64N(max(s.tsRange, 1)), ID: randID(r)}
		for i := range s.sharedPrefix {
			it.ID[i] = 0xab
		}
		return it
	}
	for range s.common {
		it := item()
		client = append(client, it)
		server = append(server, it)
	}
	for range s.onlyClient {
		client = append(client, item())
	}
	for range s.onlyServer {
		server = append(server, item())
	}
	r.Shuffle(len(client), func(i, j int) { client[i], client[j] = client[j], client[i] })
	r.Shuffle(len(server), func(i, j int) { server[i], server[j] = server[j], server[i] })
	return client, server
}

func mustVector(t testing.TB, items []Item) *Vector {
	t.Helper()
	v, err := NewVector(slices.Clone(items))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// session is the outcome of running a client against a server.
type session struct {
	have, need []([IDSize]byte)
	rounds     int      // client messages sent, the first included
	up, down   int      // bytes sent by the client and by the server
	msgs       [][]byte // every message, alternating client, server, ...
}

// serverSide is anything that can answer a client message as a server.
type serverSide interface {
	Reconcile([]byte) ([]byte, error)
}

// clientSide is anything that can drive the client side.
type clientSide interface {
	Initiate() ([]byte, error)
	ReconcileClient([]byte) ([]byte, [][IDSize]byte, [][IDSize]byte, error)
}

// run drives c against s to completion, checking frame sizes against the
// limits (0 = none) and failing after maxRounds.
func run(t testing.TB, c clientSide, s serverSide, climit, slimit int) session {
	t.Helper()
	var out session
	msg, err := c.Initiate()
	if err != nil {
		t.Fatal(err)
	}
	const maxRounds = 1000
	for msg != nil {
		out.rounds++
		if out.rounds > maxRounds {
			t.Fatalf("no end after %d rounds", maxRounds)
		}
		if climit != 0 && out.rounds > 1 && len(msg) > climit {
			t.Fatalf("client message of %d bytes over limit %d", len(msg), climit)
		}
		if _, err := parseMessage(msg, true); err != nil {
			t.Fatalf("round %d: client message: %v", out.rounds, err)
		}
		out.up += len(msg)
		out.msgs = append(out.msgs, msg)
		reply, err := s.Reconcile(msg)
		if err != nil {
			t.Fatalf("round %d: server: %v", out.rounds, err)
		}
		if slimit != 0 && len(reply) > slimit {
			t.Fatalf("server message of %d bytes over limit %d", len(reply), slimit)
		}
		if _, err := parseMessage(reply, true); err != nil {
			t.Fatalf("round %d: server message: %v", out.rounds, err)
		}
		out.down += len(reply)
		out.msgs = append(out.msgs, reply)
		var have, need [][IDSize]byte
		msg, have, need, err = c.ReconcileClient(reply)
		if err != nil {
			t.Fatalf("round %d: client: %v", out.rounds, err)
		}
		out.have = append(out.have, have...)
		out.need = append(out.need, need...)
	}
	return out
}

// ours makes a client and a server of this package.
func ours(t testing.TB, client, server []Item, climit, slimit int) (*Negentropy, *Negentropy) {
	t.Helper()
	c, err := New(mustVector(t, client), climit)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(mustVector(t, server), slimit)
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}

// checkDiff checks that have and need hold exactly the ids only the client
// has and only the server has; with dups false, each once.
func checkDiff(t testing.TB, client, server []Item, have, need [][IDSize]byte, dups bool) {
	t.Helper()
	inServer := map[[IDSize]byte]bool{}
	for _, it := range server {
		inServer[it.ID] = true
	}
	inClient := map[[IDSize]byte]bool{}
	for _, it := range client {
		inClient[it.ID] = true
	}
	var wantHave, wantNeed [][IDSize]byte
	for id := range inClient {
		if !inServer[id] {
			wantHave = append(wantHave, id)
		}
	}
	for id := range inServer {
		if !inClient[id] {
			wantNeed = append(wantNeed, id)
		}
	}
	cmpIDs := func(a, b [IDSize]byte) int { return bytes.Compare(a[:], b[:]) }
	for _, l := range [][][IDSize]byte{wantHave, wantNeed} {
		slices.SortFunc(l, cmpIDs)
	}
	gotHave := slices.Compact(slices.SortedFunc(slices.Values(have), cmpIDs))
	gotNeed := slices.Compact(slices.SortedFunc(slices.Values(need), cmpIDs))
	if !dups && (len(gotHave) != len(have) || len(gotNeed) != len(need)) {
		t.Errorf("ids reported more than once: have %d (%d distinct), need %d (%d distinct)",
			len(have), len(gotHave), len(need), len(gotNeed))
	}
	if !slices.Equal(gotHave, wantHave) {
		t.Errorf("have: got %d ids, want %d", len(gotHave), len(wantHave))
	}
	if !slices.Equal(gotNeed, wantNeed) {
		t.Errorf("need: got %d ids, want %d", len(gotNeed), len(wantNeed))
	}
}

// rangeInfo is one decoded range of a message, for tests.
type rangeInfo struct {
	b     bound
	mode  uint64
	count int // ids in an IdList
}

// parseMessage decodes a well-formed message's ranges, checking that the
// bounds ascend (strictly, or with equal neighbours allowed: an empty range
// in a message yields one in the answer).
func parseMessage(msg []byte, strict bool) ([]rangeInfo, error) {
	d := decoder{reader: reader{buf: msg}}
	v, err := d.byte()
	if err != nil {
		return nil, err
	}
	if v != ProtocolVersion {
		return nil, fmt.Errorf("version 0x%02x", v)
	}
	var out []rangeInfo
	var prev bound
	for d.len() > 0 {
		b, err := d.bound()
		if err != nil {
			return nil, err
		}
		// A server's id list up to infinity that fills the frame is
		// followed by an empty closing range at infinity.
		if c := compareBounds(&b, &prev); c < 0 || (strict && c == 0 && b.ts != infinity.ts) {
			return nil, fmt.Errorf("bound %d not above previous", len(out))
		}
		prev = b
		m, err := d.varint()
		if err != nil {
			return nil, err
		}
		ri := rangeInfo{b: b, mode: m}
		switch m {
		case modeSkip:
		case modeFingerprint:
			if _, err := d.bytes(FingerprintSize); err != nil {
				return nil, err
			}
		case modeIDList:
			c, err := d.varint()
			if err != nil {
				return nil, err
			}
			if _, err := d.bytes(c * IDSize); err != nil {
				return nil, err
			}
			ri.count = int(c)
		default:
			return nil, fmt.Errorf("mode %d", m)
		}
		out = append(out, ri)
	}
	return out, nil
}

// sortItems sorts items as a Vector does.
func sortItems(items []Item) {
	slices.SortFunc(items, func(a, b Item) int { return a.Compare(b) })
}
