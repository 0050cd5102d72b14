package negentropy

import (
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestNew(t *testing.T) {
	v := mustVector(t, nil)
	f := func(limit int, want error) {
		t.Helper()
		_, err := New(v, limit)
		if !errors.Is(err, want) {
			t.Errorf("New(limit=%d): err %v, want %v", limit, err, want)
		}
	}
	f(0, nil)
	f(4096, nil)
	f(60000, nil)
	f(4095, ErrFrameSizeLimit)
	f(1, ErrFrameSizeLimit)
	f(-1, ErrFrameSizeLimit)
}

func TestRoles(t *testing.T) {
	v := mustVector(t, nil)
	c, _ := New(v, 0)
	if _, _, _, err := c.ReconcileClient([]byte{ProtocolVersion}); !errors.Is(err, ErrRole) {
		t.Errorf("ReconcileClient before Initiate: %v", err)
	}
	if _, err := c.Initiate(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initiate(); !errors.Is(err, ErrRole) {
		t.Errorf("second Initiate: %v", err)
	}
	if _, err := c.Reconcile([]byte{ProtocolVersion}); !errors.Is(err, ErrRole) {
		t.Errorf("Reconcile on client: %v", err)
	}
	s, _ := New(v, 0)
	if _, err := s.Reconcile([]byte{ProtocolVersion}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Initiate(); !errors.Is(err, ErrRole) {
		t.Errorf("Initiate after Reconcile: %v", err)
	}
}

// TestExactMessages pins small sessions to the bytes the protocol defines.
func TestExactMessages(t *testing.T) {
	id := func(b byte) [IDSize]byte {
		var id [IDSize]byte
		for i := range id {
			id[i] = b
		}
		return id
	}
	f := func(items []Item, server bool, in, want string) {
		t.Helper()
		n, _ := New(mustVector(t, items), 0)
		var got []byte
		var err error
		if server {
			var msg []byte
			msg, err = hex.DecodeString(in)
			if err != nil {
				t.Fatal(err)
			}
			got, err = n.Reconcile(msg)
		} else {
			got, err = n.Initiate()
		}
		if err != nil {
			t.Fatalf("err %v", err)
		}
		if hex.EncodeToString(got) != want {
			t.Errorf("got  %x\nwant %s", got, want)
		}
	}
	// Empty set: one IdList range to infinity (bound 00 00: timestamp
	// infinity, no prefix) with no ids.
	f(nil, false, "", "6100000200")
	f(nil, true, "6100000200", "6100000200")
	// An empty message asks nothing; the answer is the bare version.
	f(nil, true, "61", "61")
	// One item: its id in the list.
	one := []Item{{Timestamp: 5, ID: id(0x11)}}
	ids11 := hex.EncodeToString(func() []byte { b := id(0x11); return b[:] }())
	f(one, false, "", "6100000201"+ids11)
	// A server with that item answering an empty id list sends its id.
	f(one, true, "6100000200", "6100000201"+ids11)
	// Skip everything: no answer at all.
	f(one, true, "61000000", "61")
	// Id lists for [0, ts 5) (encoded 1+5 = 06, no prefix; empty) and
	// [ts 5, infinity) (holding the item): the server answers each with
	// its own ids, the same here.
	f(one, true, "6106000200000002"+"01"+ids11, "6106000200000002"+"01"+ids11)
	// Unsupported version: the server names version 1.
	n, _ := New(mustVector(t, one), 0)
	got, err := n.Reconcile([]byte{0x62, 0, 0})
	if !errors.Is(err, ErrUnsupportedVersion) || string(got) != "\x61" {
		t.Errorf("version 0x62: reply %x err %v", got, err)
	}
}

func TestNewVector(t *testing.T) {
	a := Item{Timestamp: 1, ID: [IDSize]byte{1}}
	b := Item{Timestamp: 1, ID: [IDSize]byte{2}}
	c := Item{Timestamp: 0, ID: [IDSize]byte{9}}
	v, err := NewVector([]Item{b, a, b, c, a})
	if err != nil {
		t.Fatal(err)
	}
	if v.Len() != 3 || v.items[0] != c || v.items[1] != a || v.items[2] != b {
		t.Errorf("got %v", v.items)
	}
	// Already ascending, with duplicates.
	v, err = NewVector([]Item{c, a, a, b, b})
	if err != nil || v.Len() != 3 || v.items[0] != c || v.items[1] != a || v.items[2] != b {
		t.Errorf("sorted with duplicates: got %v, %v", v.items, err)
	}
	if _, err := NewVector([]Item{a, {Timestamp: math.MaxUint64}}); !errors.Is(err, ErrReservedTimestamp) {
		t.Errorf("max timestamp: %v", err)
	}
	if _, err := NewVector([]Item{{Timestamp: math.MaxUint64 - 1}}); err != nil {
		t.Errorf("max-1 timestamp: %v", err)
	}
}

func TestFingerprint(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 63, 64, 65, 200, 1000} {
		items := make([]Item, n)
		for i := range items {
			items[i] = Item{Timestamp: uint64(i), ID: randID(r)}
		}
		// Carry across every limb: ids of all 0xff bytes.
		if n > 3 {
			for i := range 3 {
				for j := range items[i].ID {
					items[i].ID[j] = 0xff
				}
			}
		}
		v := mustVector(t, items)
		for range 50 {
			lo := r.IntN(n + 1)
			hi := lo + r.IntN(n-lo+1)
			if got, want := v.Fingerprint(lo, hi), naiveFingerprint(v.items[lo:hi]); got != want {
				t.Fatalf("n=%d [%d,%d): got %x want %x", n, lo, hi, got, want)
			}
		}
	}
	// A known value: the empty set is sha256(32 zero bytes || 0x00)[:16].
	v := mustVector(t, nil)
	if got := hex.EncodeToString(func() []byte { f := v.Fingerprint(0, 0); return f[:] }()); got != "7f9c9e31ac8256ca2f258583df262dbc" {
		t.Errorf("empty fingerprint %s", got)
	}
}

// naiveFingerprint computes a fingerprint byte by byte.
func naiveFingerprint(items []Item) Fingerprint {
	var sum [IDSize]byte
	for _, it := range items {
		carry := 0
		for i := range IDSize {
			s := int(sum[i]) + int(it.ID[i]) + carry
			sum[i] = byte(s)
			carry = s >> 8
		}
	}
	var s sum256
	for i := range 4 {
		for j := range 8 {
			s[i] |= uint64(sum[8*i+j]) << (8 * j)
		}
	}
	return s.fingerprint(uint64(len(items)))
}

func TestVarint(t *testing.T) {
	f := func(n uint64, want string) {
		t.Helper()
		got := appendVarint(nil, n)
		if hex.EncodeToString(got) != want {
			t.Errorf("appendVarint(%d) = %x, want %s", n, got, want)
		}
		r := reader{buf: got}
		back, err := r.varint()
		if err != nil || back != n || r.len() != 0 {
			t.Errorf("varint(%x) = %d, %v", got, back, err)
		}
	}
	f(0, "00")
	f(1, "01")
	f(127, "7f")
	f(128, "8100")
	f(255, "817f")
	f(16383, "ff7f")
	f(16384, "818000")
	f(math.MaxUint64, "81ffffffffffffffff7f")

	bad := func(in string, want error) {
		t.Helper()
		b, _ := hex.DecodeString(in)
		r := reader{buf: b}
		if _, err := r.varint(); !errors.Is(err, want) {
			t.Errorf("varint(%s): err %v, want %v", in, err, want)
		}
	}
	bad("", ErrTruncated)
	bad("80", ErrTruncated)
	bad("ffff", ErrTruncated)
	bad("82ffffffffffffffff7f", ErrVarint)
	bad("8080808080808080808080808001", nil) // leading zero digits are accepted
}

// TestEdgeCases runs whole sessions over the spec's corner cases.
func TestEdgeCases(t *testing.T) {
	f := func(name string, s sets, climit, slimit int, check func(t *testing.T, out session)) {
		t.Helper()
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(len(name)), 7))
			client, server := s.gen(r)
			c, sv := ours(t, client, server, climit, slimit)
			out := run(t, c, sv, climit, slimit)
			checkDiff(t, client, server, out.have, out.need, climit != 0 || slimit != 0)
			if check != nil {
				check(t, out)
			}
		})
	}
	rounds := func(want int) func(*testing.T, session) {
		return func(t *testing.T, out session) {
			t.Helper()
			if out.rounds != want {
				t.Errorf("rounds %d, want %d", out.rounds, want)
			}
		}
	}
	day := uint64(86400)
	f("both empty", sets{}, 0, 0, rounds(1))
	f("client empty", sets{onlyServer: 1000, tsRange: day, base: 1e9}, 0, 0, nil)
	f("server empty", sets{onlyClient: 1000, tsRange: day, base: 1e9}, 0, 0, nil)
	f("client empty small", sets{onlyServer: 31, tsRange: day}, 0, 0, rounds(1))
	f("identical 1", sets{common: 1, tsRange: day}, 0, 0, rounds(1))
	f("identical 31", sets{common: 31, tsRange: day}, 0, 0, rounds(1))
	f("identical 32", sets{common: 32, tsRange: day}, 0, 0, rounds(1))
	f("identical 5000", sets{common: 5000, tsRange: day}, 0, 0, rounds(1))
	f("one extra each", sets{common: 5000, onlyClient: 1, onlyServer: 1, tsRange: day}, 0, 0, nil)
	f("equal timestamps", sets{common: 3000, onlyClient: 40, onlyServer: 70, tsRange: 1, base: 1_700_000_000}, 0, 0, nil)
	f("equal timestamps shared prefix", sets{common: 3000, onlyClient: 40, onlyServer: 70, tsRange: 1, sharedPrefix: 31}, 0, 0, nil)
	f("timestamp 0", sets{common: 500, onlyClient: 50, onlyServer: 50, tsRange: 1, base: 0}, 0, 0, nil)
	f("timestamp max", sets{common: 500, onlyClient: 50, onlyServer: 50, tsRange: 1, base: math.MaxUint64 - 1}, 0, 0, nil)
	f("timestamps 0 and max", sets{common: 500, onlyClient: 50, onlyServer: 50, tsRange: math.MaxUint64, base: 0}, 0, 0, nil)
	f("frame limit 4096 both", sets{common: 20000, onlyClient: 800, onlyServer: 800, tsRange: 30 * day}, 4096, 4096,
		func(t *testing.T, out session) {
			if out.rounds < 5 {
				t.Errorf("only %d rounds under a 4096-byte limit", out.rounds)
			}
		})
	f("frame limit 4096 server", sets{onlyServer: 3000, tsRange: day}, 0, 4096,
		func(t *testing.T, out session) {
			// 3000 ids are ~96 KB: at most ~3.9 KB per reply.
			if out.rounds < 20 {
				t.Errorf("only %d rounds for 3000 ids under a 4096-byte limit", out.rounds)
			}
		})
	f("frame limit 4096 client", sets{common: 5000, onlyClient: 3000, tsRange: day}, 4096, 0, nil)
	f("frame limit ties", sets{common: 10000, onlyClient: 500, onlyServer: 500, tsRange: 1}, 4096, 4096, nil)

	// Modes switch within sessions: fingerprints for large ranges, id
	// lists once a range holds fewer than 32 items, skips for the rest.
	f("mode switching", sets{common: 20000, onlyClient: 30, onlyServer: 30, tsRange: day}, 0, 0,
		func(t *testing.T, out session) {
			seen := map[uint64]int{}
			mixed := 0
			for _, m := range out.msgs {
				ranges, err := parseMessage(m, true)
				if err != nil {
					t.Fatal(err)
				}
				modes := map[uint64]bool{}
				for _, r := range ranges {
					seen[r.mode]++
					modes[r.mode] = true
				}
				if len(modes) >= 2 {
					mixed++
				}
			}
			if seen[modeSkip] == 0 || seen[modeFingerprint] == 0 || seen[modeIDList] == 0 {
				t.Errorf("modes seen %v, want all three", seen)
			}
			if mixed == 0 {
				t.Error("no message mixes modes")
			}
		})
}

// TestProperty runs random sessions of up to 20k items a side, with random
// overlaps, timestamp spreads (heavy ties included) and frame limits, and
// checks each finds exactly the symmetric difference in a reasonable number
// of rounds.
func TestProperty(t *testing.T) {
	cases := 120
	if testing.Short() {
		cases = 20
	}
	r := rand.New(rand.NewPCG(42, 43))
	limits := []int{0, 0, 4096, 6000, 60000}
	for i := range cases {
		size := []int{0, 1, 31, 32, 100, 1000, 5000, 20000}[r.IntN(8)]
		common := r.IntN(size + 1)
		rest := size - common
		s := sets{
			common:     common,
			onlyClient: r.IntN(rest + 1),
			tsRange:    []uint64{1, 3, 100, 86400, 1 << 40}[r.IntN(5)],
			base:       r.Uint64N(2_000_000_000),
		}
		s.onlyServer = rest - s.onlyClient
		if r.IntN(4) == 0 {
			s.sharedPrefix = r.IntN(IDSize)
		}
		climit, slimit := limits[r.IntN(len(limits))], limits[r.IntN(len(limits))]
		client, server := s.gen(r)
		c, sv := ours(t, client, server, climit, slimit)
		out := run(t, c, sv, climit, slimit)
		checkDiff(t, client, server, out.have, out.need, climit != 0 || slimit != 0)
		if t.Failed() {
			t.Fatalf("case %d: %+v limits %d/%d", i, s, climit, slimit)
		}
		// Rounds: one per level of 16-way splitting down to id lists, plus
		// the bytes that must cross a limited frame.
		n := max(len(client), len(server))
		depth := 1
		for m := 32; m < n; m *= buckets {
			depth++
		}
		budget := depth + 2
		if lim := min(nonZero(climit), nonZero(slimit)); lim != 0 {
			budget += 4 * (out.up + out.down) / (lim - frameSlack)
		}
		if out.rounds > budget {
			t.Errorf("case %d: %d rounds for %d items, limits %d/%d (budget %d, %d+%d bytes)",
				i, out.rounds, n, climit, slimit, budget, out.up, out.down)
		}
	}
}

func nonZero(l int) int {
	if l == 0 {
		return 1 << 40
	}
	return l
}
