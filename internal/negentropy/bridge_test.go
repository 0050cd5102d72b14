package negentropy

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// bridged is the outcome of a Bridge run between two servers.
type bridged struct {
	onlyA, onlyB [][IDSize]byte
	rounds       int // messages sent, both sides
	bytes        int // bytes sent and received, both sides
}

// runBridge reconciles servers a and b through a Bridge, answering both
// sides' messages each round as a client would over two connections.
func runBridge(t testing.TB, a, b serverSide, bridgeLimit, slimit int) bridged {
	t.Helper()
	br, err := NewBridge(bridgeLimit)
	if err != nil {
		t.Fatal(err)
	}
	var out bridged
	servers := [2]serverSide{a, b}
	for !br.Done() {
		var msgs [2][]byte
		for s := range 2 {
			msgs[s] = br.Next(Side(s))
		}
		if msgs[0] == nil && msgs[1] == nil {
			t.Fatal("bridge not done but has nothing to send")
		}
		for s := range 2 {
			if msgs[s] == nil {
				continue
			}
			out.rounds++
			if out.rounds > 2000 {
				t.Fatal("no end after 2000 messages")
			}
			if _, err := parseMessage(msgs[s], true); err != nil {
				t.Fatalf("bridge message to %s: %v", Side(s), err)
			}
			reply, err := servers[s].Reconcile(msgs[s])
			if err != nil {
				t.Fatalf("server %s: %v", Side(s), err)
			}
			if slimit != 0 && len(reply) > slimit {
				t.Fatalf("server answer of %d bytes over its limit %d", len(reply), slimit)
			}
			out.bytes += len(msgs[s]) + len(reply)
			oa, ob, err := br.Reply(Side(s), reply)
			if err != nil {
				t.Fatalf("reply from %s: %v", Side(s), err)
			}
			out.onlyA = append(out.onlyA, oa...)
			out.onlyB = append(out.onlyB, ob...)
		}
	}
	return out
}

// TestBridge reconciles two servers' random sets through a Bridge and
// checks that exactly the symmetric difference is reported, each id once,
// with and without frame size limits on the servers (ours, and ones that
// close a cut message as the reference implementations do), and that the
// bytes exchanged follow the difference, not the sets.
func TestBridge(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(17, 77))
	f := func(name string, s sets, bridgeLimit, slimit int, referenceTail bool) bridged {
		t.Helper()
		ia, ib := s.gen(r)
		a, b := ours(t, ia, ib, slimit, slimit)
		a.referenceTail, b.referenceTail = referenceTail, referenceTail
		res := runBridge(t, a, b, bridgeLimit, slimit)
		checkDiff(t, ia, ib, res.onlyA, res.onlyB, false)
		if t.Failed() {
			t.Fatalf("%s: wrong difference", name)
		}
		t.Logf("%s: %d messages, %d bytes, only A %d, only B %d", name, res.rounds, res.bytes, len(res.onlyA), len(res.onlyB))
		return res
	}
	f("both empty", sets{}, 0, 0, false)
	f("A empty", sets{onlyServer: 500, tsRange: 100}, 0, 0, false)
	f("B empty", sets{onlyClient: 500, tsRange: 100}, 0, 0, false)
	f("equal", sets{common: 3000, tsRange: 1000}, 0, 0, false)
	f("few", sets{common: 5, onlyClient: 3, onlyServer: 4, tsRange: 10}, 0, 0, false)
	f("one second", sets{common: 2000, onlyClient: 40, onlyServer: 50, tsRange: 1, sharedPrefix: 2}, 0, 0, false)
	f("spread", sets{common: 5000, onlyClient: 300, onlyServer: 200, tsRange: 100000, base: 1_700_000_000}, 0, 0, false)
	f("disjoint", sets{onlyClient: 2000, onlyServer: 3000, tsRange: 50}, 0, 0, false)
	// Small frame limits make the servers cut their answers.
	f("cut", sets{common: 4000, onlyClient: 3000, onlyServer: 3000, tsRange: 500}, 60000, 4096, false)
	f("cut, reference tail", sets{common: 4000, onlyClient: 3000, onlyServer: 3000, tsRange: 500}, 60000, 4096, true)
	f("cut, one second", sets{common: 1000, onlyClient: 2000, onlyServer: 900, tsRange: 1}, 0, 4096, true)

	// Messages are sized to fill the answers: the count follows the
	// bytes (it took 5-10 times as many while each message asked about
	// a fixed number of ranges, sized for the largest answers).
	for _, c := range []struct {
		name          string
		s             sets
		bridgeLimit   int
		slimit        int
		referenceTail bool
	}{
		{"blocks apart", sets{common: 4000, onlyClient: 8000, onlyServer: 8000, tsRange: 20000, base: 1_700_000_000}, 60000, 60000, false},
		{"few apart of many", sets{common: 100000, onlyClient: 1000, onlyServer: 1000, tsRange: 2000000, base: 1_700_000_000}, 60000, 60000, false},
		{"servers' limit below the bridge's", sets{common: 4000, onlyClient: 3000, onlyServer: 3000, tsRange: 500}, 60000, 4096, true},
		{"no limit at the bridge", sets{common: 1000, onlyClient: 2000, onlyServer: 900, tsRange: 1}, 0, 4096, true},
	} {
		res := f(c.name, c.s, c.bridgeLimit, c.slimit, c.referenceTail)
		if most := 3*res.bytes/c.slimit + 10; res.rounds > most {
			t.Errorf("%s: %d messages for %d bytes in frames of %d (at most %d)", c.name, res.rounds, res.bytes, c.slimit, most)
		}
	}

	// The cost follows the difference: 20 ids apart out of 20,000 take a
	// small fraction of the bytes that listing the ids (32 bytes each)
	// would.
	small := f("small difference", sets{common: 20000, onlyClient: 10, onlyServer: 10, tsRange: 100000}, 60000, 60000, false)
	if small.bytes > 20000*32/10 {
		t.Fatalf("small difference cost %d bytes", small.bytes)
	}
}

// TestBridgeReplyErrors: answers that do not fit are errors, not guesses.
func TestBridgeReplyErrors(t *testing.T) {
	t.Parallel()
	br, err := NewBridge(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := br.Reply(SideA, []byte{ProtocolVersion}); !errors.Is(err, ErrBridgeReply) {
		t.Fatalf("reply with nothing in flight: %v", err)
	}
	if br.Next(SideB) != nil {
		t.Fatal("B has a message before A answered")
	}
	if br.Next(SideA) == nil || br.Next(SideA) != nil {
		t.Fatal("A must get one message, then nothing until it answers")
	}
	if _, _, err := br.Reply(SideA, []byte{0x62}); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("version 2: %v", err)
	}
	if _, err := NewBridge(100); !errors.Is(err, ErrFrameSizeLimit) {
		t.Fatalf("limit 100: %v", err)
	}
}
