package policy

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// fakeClock is a settable clock for the limiters.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestLimits(cfg Config) (*RateLimits, *fakeClock) {
	c := &fakeClock{t: time.Unix(1700000000, 0)}
	r := NewRateLimits(cfg)
	r.now = c.now
	return r, c
}

func TestRateLimitsOff(t *testing.T) {
	r, _ := newTestLimits(Config{EventRate: -1})
	ip := netip.MustParseAddr("192.0.2.1")
	for i := 0; i < 1000; i++ {
		if r.AllowEvent(ip, pkN(1)) != nil || r.AllowReq(ip) != nil {
			t.Fatal("limited with every limit off")
		}
	}
	if st := r.Stats(); st != (RateStats{}) {
		t.Fatalf("stats %+v", st)
	}
}

func TestEventRateLimit(t *testing.T) {
	r, clock := newTestLimits(Config{EventRate: 2, EventBurst: 3})
	ip := netip.MustParseAddr("192.0.2.1")
	f := func(ip netip.Addr, want bool) {
		t.Helper()
		rej := r.AllowEvent(ip, pkN(1))
		if (rej == nil) != want {
			t.Fatalf("%v: allowed %v, want %v (%v)", ip, rej == nil, want, rej)
		}
		if rej != nil && rej.Error() != "rate-limited: slow down: this address may send at most 2 events per second (bursts of 3)" {
			t.Fatalf("message %q", rej.Error())
		}
	}
	f(ip, true)
	f(ip, true)
	f(ip, true)
	f(ip, false) // burst used up
	f(ip, false)
	f(netip.MustParseAddr("192.0.2.2"), true) // other address, own bucket
	f(netip.MustParseAddr("::ffff:192.0.2.1"), false)
	clock.advance(500 * time.Millisecond) // one token back
	f(ip, true)
	f(ip, false)
	clock.advance(time.Hour) // refilled to the burst, not beyond
	f(ip, true)
	f(ip, true)
	f(ip, true)
	f(ip, false)
	f(netip.Addr{}, true) // no address: not limited by address
	if st := r.Stats().EventIP; st.Limited != 5 || st.Keys != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestRateLimitIPv6Slash64(t *testing.T) {
	r, _ := newTestLimits(Config{ReqRate: 1, ReqBurst: 1})
	f := func(ip string, want bool) {
		t.Helper()
		if got := r.AllowReq(netip.MustParseAddr(ip)) == nil; got != want {
			t.Fatalf("%s: allowed %v, want %v", ip, got, want)
		}
	}
	f("2001:db8:0:1::1", true)
	f("2001:db8:0:1:ffff::2", false) // same /64
	f("2001:db8:0:2::1", true)       // another /64
	f("192.0.2.1", true)
	f("192.0.2.1", false)
	if st := r.Stats().ReqIP; st.Limited != 2 || !strings.Contains(r.reqIP.rej.Text, "1 subscription requests per second") {
		t.Fatalf("stats %+v, message %q", st, r.reqIP.rej.Text)
	}
}

func TestPubKeyRateLimitRefundsAddress(t *testing.T) {
	r, _ := newTestLimits(Config{EventRate: 1, EventBurst: 2, PubKeyEventRate: 1, PubKeyEventBurst: 1})
	ip := netip.MustParseAddr("192.0.2.1")
	f := func(pk nostr.PubKey, want string) {
		t.Helper()
		if got := rejText(r.AllowEvent(ip, pk)); !strings.Contains(got, want) || (want == "") != (got == "") {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	f(pkN(1), "")
	f(pkN(1), "this pubkey may publish at most 1 events per second")
	// The address's token was given back: one more event fits its burst.
	f(pkN(2), "")
	f(pkN(3), "this address may send at most")
	st := r.Stats()
	if st.EventPubKey.Limited != 1 || st.EventIP.Limited != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestRateLimitMemoryBound(t *testing.T) {
	const maxKeys = 320
	r, clock := newTestLimits(Config{EventRate: 1, EventBurst: 5, PubKeyEventRate: 1, RateMaxKeys: maxKeys})
	// A flood of distinct addresses and pubkeys, all within one instant:
	// no bucket refills, so only eviction bounds the table.
	var pk nostr.PubKey
	for i := 0; i < 100000; i++ {
		ip := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		pk[0], pk[1], pk[2] = byte(i), byte(i>>8), byte(i>>16)
		if rej := r.AllowEvent(ip, pk); rej != nil {
			t.Fatalf("new key limited: %v", rej)
		}
		if i%1000 == 999 {
			clock.advance(time.Millisecond)
		}
	}
	st := r.Stats()
	for _, ls := range []LimitStats{st.EventIP, st.EventPubKey} {
		if ls.Keys > maxKeys || ls.Keys < maxKeys/2 || ls.Evicted < 100000-maxKeys {
			t.Fatalf("stats %+v: keys must stay within %d", ls, maxKeys)
		}
	}
	// Once buckets have refilled they are worth nothing: new keys find
	// room by sweeping them, not by evicting.
	clock.advance(time.Hour)
	before := r.Stats().EventIP
	for i := 0; i < 50; i++ {
		r.AllowEvent(netip.AddrFrom4([4]byte{172, 16, 0, byte(i)}), pk)
	}
	if st := r.Stats().EventIP; st.Evicted != before.Evicted || st.Keys >= before.Keys {
		t.Fatalf("before %+v, after %+v: refilled buckets not swept", before, st)
	}
	lim := r.eventIP
	now := clock.now().Add(time.Hour).UnixNano()
	for i := range lim.shards {
		sh := &lim.shards[i]
		sh.mu.Lock()
		lim.makeRoom(sh, now)
		sh.mu.Unlock()
	}
	if st := r.Stats().EventIP; st.Keys != 0 {
		t.Fatalf("refilled buckets not swept: %+v", st)
	}
}

func TestRateLimitsConcurrent(t *testing.T) {
	r := NewRateLimits(Config{EventRate: 100, PubKeyEventRate: 100, ReqRate: 100, RateMaxKeys: 64})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				ip := netip.AddrFrom4([4]byte{10, 0, byte(g), byte(i)})
				r.AllowEvent(ip, pkN(i%4))
				r.AllowReq(ip)
			}
		}(g)
	}
	wg.Wait()
	if st := r.Stats(); st.EventIP.Keys > 64 || st.ReqIP.Keys > 64 {
		t.Fatalf("stats %+v", st)
	}
}

func TestConfigNormalize(t *testing.T) {
	c := Config{EventRate: 2.5, PubKeyEventRate: 0.2, ReqRate: -3}.Normalize()
	if c.EventBurst != 3 || c.PubKeyEventBurst != 1 || c.ReqRate != 0 || c.ReqBurst != 0 ||
		c.RateMaxKeys != DefaultRateMaxKeys || c.PluginTimeout != DefaultPluginTimeout || c.PluginMaxInflight != DefaultPluginMaxInflight {
		t.Fatalf("normalized %+v", c)
	}
	if c := (Config{EventRate: 5, EventBurst: 50}).Normalize(); c.EventBurst != 50 {
		t.Fatalf("explicit burst changed: %+v", c)
	}
}

// BenchmarkAllowEvent: both event limits on, over one key or 100k;
// shared, each limit also notes what it takes for the other nodes of a
// cluster, harvested and encoded (Spent) every 400,000 events: 100 ms at
// 4M events a second, the harvest's cost spread over them.
func BenchmarkAllowEvent(b *testing.B) {
	for _, shared := range []bool{false, true} {
		for _, keys := range []int{1, 100000} {
			b.Run(fmt.Sprintf("shared=%v/keys=%d", shared, keys), func(b *testing.B) {
				r := NewRateLimits(Config{EventRate: 1e9, EventBurst: 1e9, PubKeyEventRate: 1e9, PubKeyEventBurst: 1e9, RateMaxKeys: 2 * keys})
				if shared {
					r.Share()
				}
				ips := make([]netip.Addr, keys)
				pks := make([]nostr.PubKey, keys)
				for i := range ips {
					ips[i] = netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
					pks[i][0], pks[i][1], pks[i][2] = byte(i), byte(i>>8), byte(i>>16)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					j := i % keys
					if r.AllowEvent(ips[j], pks[j]) != nil {
						b.Fatal("limited")
					}
					if shared && i%400_000 == 399_999 {
						r.Spent(64 << 10)
					}
				}
			})
		}
	}
}

// TestConnectRateLimit: connections per address, at the burst allowed
// and past it refused with the limit's message; another address, and the
// other limits, untouched; with sharing, another node's connections
// count.
func TestConnectRateLimit(t *testing.T) {
	r, clock := newTestLimits(Config{ConnectRate: 1, ConnectBurst: 2})
	ip := netip.MustParseAddr("192.0.2.1")
	if r.AllowConnect(ip) != nil || r.AllowConnect(ip) != nil {
		t.Fatal("refused within the burst")
	}
	if got := rejText(r.AllowConnect(ip)); got != "rate-limited: slow down: this address may open at most 1 connections per second (bursts of 2)" {
		t.Fatalf("past the burst: %q", got)
	}
	if r.AllowConnect(netip.MustParseAddr("192.0.2.2")) != nil || r.AllowEvent(ip, pkN(1)) != nil || r.AllowReq(ip) != nil {
		t.Fatal("another address or another limit refused")
	}
	if r.AllowConnect(netip.Addr{}) != nil {
		t.Fatal("no address limited")
	}
	clock.advance(time.Second)
	if r.AllowConnect(ip) != nil {
		t.Fatal("refused after a token refilled")
	}
	if st := r.Stats().ConnectIP; st.Limited != 1 || st.Keys != 2 {
		t.Fatalf("stats %+v", st)
	}

	a, b, _ := sharedPair(t, Config{ConnectRate: 1, ConnectBurst: 2})
	a.AllowConnect(ip)
	a.AllowConnect(ip)
	pass(t, a, b)
	if b.AllowConnect(ip) == nil {
		t.Fatal("b allowed a connection past the burst taken through a")
	}
	if st := b.Stats().ConnectIP; st.Remote != 2 {
		t.Fatalf("b's remote tokens %d, want 2", st.Remote)
	}
}
