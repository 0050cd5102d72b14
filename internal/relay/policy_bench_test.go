package relay

import (
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/policy"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// nopTransport is a Transport that drops everything.
type nopTransport struct{}

func (nopTransport) Write([]byte) error { return nil }
func (nopTransport) Close(int, string)  {}

// newBenchSession starts a relay over the model store with cfg and pc and
// returns a session on it.
func newBenchSession(tb testing.TB, cfg Config, pc policy.Config) *Session {
	tb.Helper()
	r, err := New(cfg, Options{Store: storetest.NewModel(), Policy: pc})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Shutdown(tb.Context()) })
	return r.NewSession(nopTransport{}, "192.0.2.1")
}

func benchEvent() *nostr.Event {
	ev := &nostr.Event{Kind: 1, Content: "hello", CreatedAt: 1700000000,
		Tags: nostr.Tags{{"e", "5c83da77af1dec6d7289834998ad7aafbd9e2191396d75ec3cc27f5a77226f36"}, {"p", "3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d"}}}
	nostr.SignEvent(ev, nostr.SecretKeyFromSeed([]byte("bench")))
	return ev
}

// TestPolicyHotPathNoAllocs: the write checks and the fan-out visibility
// check allocate nothing for an ordinary event, with the default
// configuration (read protection on, no policy) and with lists and PoW on.
func TestPolicyHotPathNoAllocs(t *testing.T) {
	ev := benchEvent()
	f := func(name string, cfg Config, pc policy.Config) {
		t.Helper()
		s := newBenchSession(t, cfg, pc)
		if rej := s.policy(ev); rej != nil {
			t.Fatalf("%s: refused: %v", name, rej)
		}
		if n := testing.AllocsPerRun(200, func() {
			_ = s.policy(ev)
			_ = s.canSee(ev)
		}); n != 0 {
			t.Fatalf("%s: %.1f allocations per event", name, n)
		}
	}
	f("defaults", Config{}, policy.Config{})
	f("lists", Config{}, policy.Config{BannedPubKeys: []string{"3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d"}, DisallowedKinds: []int{7}})
}

func BenchmarkPolicyCheck(b *testing.B) {
	ev := benchEvent()
	run := func(name string, cfg Config, pc policy.Config) {
		b.Run(name, func(b *testing.B) {
			s := newBenchSession(b, cfg, pc)
			b.ReportAllocs()
			for b.Loop() {
				_ = s.policy(ev)
				_ = s.canSee(ev)
			}
		})
	}
	run("features=off", Config{ProtectedKinds: []int{}}, policy.Config{})
	run("features=default", Config{}, policy.Config{})
	run("features=lists", Config{}, policy.Config{BannedPubKeys: []string{"3bf0c63fcb93463407af97a5e5ee64fa883d107ef9e558472c4eb9aaaefa459d"}})
	run("features=lists+ratelimit", Config{}, policy.Config{EventRate: 1e9, EventBurst: 1 << 30})
}
