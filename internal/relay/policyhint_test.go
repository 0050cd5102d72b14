package relay_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/policy"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/server"
)

// hintBus is a Bus that only carries NIP-86 hints: sent counts
// HintPolicy calls; hint is what the relay gave OnPolicyHint.
type hintBus struct {
	sent atomic.Int64
	mu   sync.Mutex
	hint func()
}

func (*hintBus) Publish(*nostr.Event, uint64) {}
func (b *hintBus) HintPolicy()                { b.sent.Add(1) }
func (b *hintBus) OnPolicyHint(f func())      { b.mu.Lock(); b.hint = f; b.mu.Unlock() }

// countingLoads is a MemPersister that counts the loads of one key.
type countingLoads struct {
	policy.MemPersister
	key   string
	loads atomic.Int64
}

func (p *countingLoads) Load(ctx context.Context, key string) ([]byte, error) {
	if key == p.key {
		p.loads.Add(1)
	}
	return p.MemPersister.Load(ctx, key)
}

// TestPolicyHints: a change through the NIP-86 API hints the other nodes
// (the bus's HintPolicy); another node's hint makes the relay read the
// NIP-86 state at once, and a flood of hints (anyone who can publish on
// the bus can send them) makes it read the state twice, not fifty times:
// once at the first hint, once more for all those that came after that
// reading began, 100 ms later; a steady flood, at most every 100 ms.
func TestPolicyHints(t *testing.T) {
	t.Parallel()
	admin := relaytest.NewKey("admin")
	bus := &hintBus{}
	p := &countingLoads{key: "relay/info"}
	r := relaytest.Start(t, relaytest.Options{
		Bus: bus, Persister: p, PolicyRefresh: time.Hour,
		Server: server.Config{Admins: []string{admin.PK.Hex()}},
	})
	if code, out := nip86(t, r, admin, "banpubkey", relaytest.NewKey("spammer").PK.Hex(), "spam"); code != 200 || out["result"] != true {
		t.Fatalf("banpubkey: %d %v", code, out)
	}
	if n := bus.sent.Load(); n != 1 {
		t.Fatalf("%d hints sent for one change, want 1", n)
	}
	bus.mu.Lock()
	hint := bus.hint
	bus.mu.Unlock()
	if hint == nil {
		t.Fatal("the relay did not ask for the bus's hints")
	}
	start := p.loads.Load() // the reading at start
	// One hint: one reading, at once. Then 49 more while that reading is
	// done or under way: exactly one more (a hint during a reading must
	// not be lost, and must not be repeated 49 times). The 49 wait for
	// the first reading to begin: sent before the relay took the first
	// hint, all 50 would fold into that one reading, which is right but
	// is not what this checks (that race failed CI under -race).
	hint()
	waitFor(t, "the first reading", func() bool { return p.loads.Load()-start >= 1 })
	for range 49 {
		hint()
	}
	waitFor(t, "two readings", func() bool { return p.loads.Load()-start >= 2 })
	time.Sleep(300 * time.Millisecond) // room for readings that should not come
	if n := p.loads.Load() - start; n != 2 {
		t.Fatalf("50 hints: the state was read %d times, want 2", n)
	}
	// 50 hints at once: one reading or two (two when the relay took the
	// first before the rest were sent), never more.
	start = p.loads.Load()
	for range 50 {
		hint()
	}
	waitFor(t, "a reading", func() bool { return p.loads.Load()-start >= 1 })
	time.Sleep(300 * time.Millisecond)
	if n := p.loads.Load() - start; n > 2 {
		t.Fatalf("50 hints at once: the state was read %d times, want 1 or 2", n)
	}
	// A steady flood: one hint a millisecond, for half a second.
	start = p.loads.Load()
	began := time.Now()
	for time.Since(began) < 500*time.Millisecond {
		hint()
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(began)
	time.Sleep(300 * time.Millisecond)
	if n, most := p.loads.Load()-start, 2+int64(elapsed/(100*time.Millisecond)); n > most {
		t.Fatalf("hints for %v: the state was read %d times, want at most %d", elapsed.Round(time.Millisecond), n, most)
	}
}
