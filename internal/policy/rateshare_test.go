package policy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
	"time"
)

// sharedPair is two nodes' limits over one clock, each sharing what it
// takes; pass hands one node's spending to the other.
func sharedPair(t *testing.T, cfg Config) (a, b *RateLimits, clock *fakeClock) {
	t.Helper()
	a, clock = newTestLimits(cfg)
	b = NewRateLimits(cfg)
	b.now = clock.now
	a.Share()
	b.Share()
	return a, b, clock
}

func pass(t *testing.T, from, to *RateLimits) int {
	t.Helper()
	msgs := from.Spent(1 << 16)
	for _, m := range msgs {
		if err := to.Debit(m); err != nil {
			t.Fatal(err)
		}
	}
	return len(msgs)
}

// TestRateShare: a client spread over two nodes gets one node's limit:
// at the burst through both, accepted; one more through either, refused,
// nothing else disturbed (another address, the pubkey limit).
func TestRateShare(t *testing.T) {
	a, b, clock := sharedPair(t, Config{EventRate: 1, EventBurst: 4, PubKeyEventRate: 100, PubKeyEventBurst: 100, ReqRate: 1, ReqBurst: 2})
	ip, other := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	allow := func(r *RateLimits, ip netip.Addr, want bool) {
		t.Helper()
		if got := r.AllowEvent(ip, pkN(1)) == nil; got != want {
			t.Fatalf("%v: allowed %v, want %v", ip, got, want)
		}
	}
	// Two through a, two through b: the burst of 4, taken in all.
	allow(a, ip, true)
	allow(a, ip, true)
	allow(b, ip, true)
	allow(b, ip, true)
	pass(t, a, b)
	pass(t, b, a)
	allow(a, ip, false) // one past the burst, on either node
	allow(b, ip, false)
	allow(a, other, true) // another address: its own bucket
	allow(b, other, true)
	// A second refills one token on both.
	clock.advance(time.Second)
	allow(b, ip, true)
	pass(t, b, a)
	allow(a, ip, false)
	// REQs too.
	if a.AllowReq(ip) != nil || a.AllowReq(ip) != nil {
		t.Fatal("REQ refused within the burst")
	}
	pass(t, a, b)
	if b.AllowReq(ip) == nil {
		t.Fatal("REQ past the burst allowed on the other node")
	}
	sa, sb := a.Stats(), b.Stats()
	if sa.EventIP.Limited != 2 || sb.EventIP.Limited != 1 || sb.ReqIP.Limited != 1 {
		t.Fatalf("limited: a %+v, b %+v", sa, sb)
	}
	// b took 3 of ip's tokens and 1 of other's; a took 2 of ip's, 1 of other's and 2 REQs.
	if sa.EventIP.Remote != 4 || sb.EventIP.Remote != 3 || sb.ReqIP.Remote != 2 || sb.EventPubKey.Remote != 3 {
		t.Fatalf("remote: a %+v, b %+v", sa, sb)
	}
	// Nothing taken since: nothing to send.
	if n := pass(t, a, b); n != 0 {
		t.Fatalf("%d messages with nothing taken", n)
	}
}

// TestRateShareRefund: a token given back (the pubkey's limit refused
// the event) is not charged to the other node.
func TestRateShareRefund(t *testing.T) {
	a, b, _ := sharedPair(t, Config{EventRate: 1, EventBurst: 2, PubKeyEventRate: 1, PubKeyEventBurst: 1})
	ip := netip.MustParseAddr("192.0.2.1")
	if a.AllowEvent(ip, pkN(1)) != nil || a.AllowEvent(ip, pkN(1)) == nil {
		t.Fatal("pubkey limit")
	}
	pass(t, a, b)
	if st := b.Stats().EventIP; st.Remote != 1 {
		t.Fatalf("address tokens debited on b: %d, want 1 (the refund not charged)", st.Remote)
	}
	if b.AllowEvent(ip, pkN(2)) != nil {
		t.Fatal("b refused the address's second token")
	}
}

// TestRateShareFloor: a bucket goes below empty by what other nodes
// took, down to minus its burst, and refills from there.
func TestRateShareFloor(t *testing.T) {
	_, b, clock := sharedPair(t, Config{EventRate: 1, EventBurst: 2})
	ip := netip.MustParseAddr("192.0.2.1")
	k := ipKey(ip)
	m := append(append([]byte{rateShareV1, tagEventIP, 17}, k[:]...), 100) // 100 tokens taken elsewhere
	if err := b.Debit(m); err != nil {
		t.Fatal(err)
	}
	// At -2 now: three seconds to one token.
	clock.advance(2900 * time.Millisecond)
	if b.AllowEvent(ip, pkN(1)) == nil {
		t.Fatal("allowed below one token")
	}
	clock.advance(200 * time.Millisecond)
	if b.AllowEvent(ip, pkN(1)) != nil {
		t.Fatal("refused after refilling from minus the burst")
	}
	if st := b.Stats().EventIP; st.Remote != 100 || st.Limited != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestRateShareMessages: Spent splits at the size asked, every entry
// whole, and a node with a limit off skips its section; Debit refuses
// what it cannot read.
func TestRateShareMessages(t *testing.T) {
	a, b, _ := sharedPair(t, Config{EventRate: 1, EventBurst: 1, ReqRate: 1, ReqBurst: 1})
	const n = 100
	for i := range n {
		ip := netip.AddrFrom4([4]byte{10, 0, byte(i / 256), byte(i)})
		a.AllowEvent(ip, pkN(1))
		a.AllowReq(ip)
	}
	msgs := a.Spent(256)
	// 256 bytes hold (256-7)/(16+5) = 11 entries of 17 bytes: 10 messages a limit at most.
	if len(msgs) < 2*n*17/256 || len(msgs) > 2*(n/11+1) {
		t.Fatalf("%d messages", len(msgs))
	}
	for _, m := range msgs {
		if len(m) > 256 {
			t.Fatalf("message of %d bytes", len(m))
		}
		if err := b.Debit(m); err != nil {
			t.Fatal(err)
		}
	}
	if st := b.Stats(); st.EventIP.Remote != n || st.ReqIP.Remote != n {
		t.Fatalf("debited %+v", st)
	}
	// A node with the REQ limit off skips its sections, applies the rest.
	c := NewRateLimits(Config{EventRate: 1, EventBurst: 1})
	for _, m := range msgs {
		if err := c.Debit(m); err != nil {
			t.Fatal(err)
		}
	}
	if st := c.Stats(); st.EventIP.Remote != n || st.ReqIP != (LimitStats{}) {
		t.Fatalf("debited with REQ limit off: %+v", st)
	}
	for _, bad := range [][]byte{nil, {}, {2}, {rateShareV1, tagEventIP}, {rateShareV1, tagEventIP, 5, 1, 2, 3, 4, 5},
		{rateShareV1, tagEventIP, 17, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 0x80},
		append([]byte{rateShareV1, tagEventIP, 3}, bytes.Repeat([]byte{1}, 3)...)} {
		if err := b.Debit(bad); !errors.Is(err, errRateShare) {
			t.Fatalf("Debit(%v): %v", bad, err)
		}
	}
	// A tag this version does not know is skipped whole.
	if err := b.Debit([]byte{rateShareV1, 99, 2, 7, 7}); err != nil {
		t.Fatal(err)
	}
}

// FuzzRateShareDebit: Debit never panics, and takes no more tokens than
// a message lists.
func FuzzRateShareDebit(f *testing.F) {
	a := NewRateLimits(Config{EventRate: 1, EventBurst: 1, PubKeyEventRate: 1, PubKeyEventBurst: 1, ReqRate: 1, ReqBurst: 1})
	a.Share()
	a.AllowEvent(netip.MustParseAddr("192.0.2.1"), pkN(1))
	a.AllowReq(netip.MustParseAddr("2001:db8::1"))
	for _, m := range a.Spent(1 << 10) {
		f.Add(m)
	}
	f.Add([]byte{rateShareV1, 99, 2, 7, 7})
	f.Fuzz(func(t *testing.T, msg []byte) {
		b := NewRateLimits(Config{EventRate: 1, EventBurst: 1, PubKeyEventRate: 1, PubKeyEventBurst: 1, ReqRate: 1, ReqBurst: 1})
		_ = b.Debit(msg)
		st := b.Stats()
		if total := st.EventIP.Remote + st.EventPubKey.Remote + st.ReqIP.Remote; total < 0 || total > int64(len(msg))*(1<<32) {
			t.Fatalf("debited %d from %d bytes", total, len(msg))
		}
	})
}

// BenchmarkRateShareDebit: what a node pays for another node's spending:
// one full message (64 KB, the relay's maxRateShare) of the event-IP or
// the pubkey limit's entries, one token a key, debited into limits that
// hold the keys already (a busy cluster's steady state). keys/msg is the
// entries a message holds; ns/key what each costs the receiving node.
func BenchmarkRateShareDebit(b *testing.B) {
	for _, limit := range []string{"ip", "pubkey"} {
		b.Run(limit, func(b *testing.B) {
			cfg := Config{EventRate: 1e9, EventBurst: 1e9, PubKeyEventRate: 1e9, PubKeyEventBurst: 1e9, RateMaxKeys: 1 << 20}
			from, to := NewRateLimits(cfg), NewRateLimits(cfg)
			from.Share()
			// Twice the keys a message holds, each allowed on both nodes.
			for i := range 2 * (64 << 10) / 17 {
				ip := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
				pk := pkN(i)
				if limit == "ip" {
					from.eventIP.take(ipKey(ip), from.now().UnixNano())
					to.eventIP.take(ipKey(ip), to.now().UnixNano())
				} else {
					from.eventPK.take(pk, from.now().UnixNano())
					to.eventPK.take(pk, to.now().UnixNano())
				}
			}
			msg := from.Spent(64 << 10)[0]
			body, w := binary.Uvarint(msg[2:]) // after the version and the tag
			size := 16 + 1                     // key and a one-byte token count
			if limit == "pubkey" {
				size = 32 + 1
			}
			if int(body)%size != 0 || 2+w+int(body) != len(msg) {
				b.Fatalf("message of %d bytes, body %d", len(msg), body)
			}
			keys := int(body) / size
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := to.Debit(msg); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(keys), "keys/msg")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(keys), "ns/key")
			b.ReportMetric(float64(len(msg)), "B/msg")
		})
	}
}
