package sync

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/client"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relaytest"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/pebble"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// largeSets builds two sets of n events that differ by diff (a fraction):
// n*(1-diff) common events with random ids and signatures (never
// transferred, so never verified) and n*diff/2 signed events on each side
// only.
func largeSets(n int, diff float64) (common, local, remote []*nostr.Event) {
	rng := rand.New(rand.NewPCG(100, uint64(n)))
	only := int(float64(n) * diff / 2)
	common = make([]*nostr.Event, n-2*only)
	for i := range common {
		common[i] = storetest.NewEvent(rng, storetest.Key(i%1000), 1, base+rng.Int64N(365*86400), nil, "common")
	}
	local = signed(fmt.Sprintf("large-local-%d", n), only, 1, base, 365*86400/int64(max(only, 1)))
	remote = signed(fmt.Sprintf("large-remote-%d", n), only, 1, base+17, 365*86400/int64(max(only, 1)))
	return common, local, remote
}

// openPebble opens a pebble store in a temporary directory, without
// fsync, and fills it.
func openPebble(tb testing.TB, events ...[]*nostr.Event) store.Store {
	tb.Helper()
	st, err := pebble.Open(pebble.Options{Path: tb.TempDir(), NoSync: true, CacheSize: 64 << 20})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	all := slices.Concat(events...)
	for len(all) > 0 {
		n := min(len(all), 5000)
		if _, err := st.Save(context.Background(), all[:n]); err != nil {
			tb.Fatal(err)
		}
		all = all[n:]
	}
	return st
}

// BenchmarkReconcile measures the negentropy phase of a sync between a
// local pebble store and a relay (pebble store) over loopback: two sets of
// 100k events differing by 1%. It reports the rounds and the bytes each
// way per sync. Run with -benchtime=5x: the stores are filled once.
func BenchmarkReconcile(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("events=%d/diff=1%%", n), func(b *testing.B) {
			common, local, remote := largeSets(n, 0.01)
			st := openPebble(b, common, local)
			r := relaytest.Start(b, relaytest.Options{Store: openPebble(b, common, remote)})
			b.ReportAllocs()
			b.ResetTimer()
			var res Result
			for b.Loop() {
				o := Options{Remote: r.URL, Store: st}
				if err := o.normalize(); err != nil {
					b.Fatal(err)
				}
				s := &syncer{o: o}
				c, err := client.Dial(context.Background(), r.URL, client.Options{})
				if err != nil {
					b.Fatal(err)
				}
				s.remote = c
				have, need, err := s.reconcileStore(context.Background())
				c.Close()
				if err != nil {
					b.Fatal(err)
				}
				if len(have) != len(local) || len(need) != len(remote) {
					b.Fatalf("have %d need %d", len(have), len(need))
				}
				res = s.res
			}
			b.ReportMetric(float64(res.Rounds), "rounds")
			b.ReportMetric(float64(res.ReconcileSent), "B-sent")
			b.ReportMetric(float64(res.ReconcileReceived), "B-recv")
		})
	}
}

// TestSyncLarge runs a whole sync both ways between a local pebble store
// and a relay over loopback, 100k events a side differing by 1%, and logs
// the figures. It is skipped unless PETREL_SYNC_LARGE is set (it takes a
// while to sign and fill): PETREL_SYNC_LARGE=1 go test -run TestSyncLarge -v
func TestSyncLarge(t *testing.T) {
	if os.Getenv("PETREL_SYNC_LARGE") == "" {
		t.Skip("set PETREL_SYNC_LARGE=1 to run")
	}
	const n = 100_000
	t0 := time.Now()
	common, local, remote := largeSets(n, 0.01)
	st := openPebble(t, common, local)
	r := relaytest.Start(t, relaytest.Options{Store: openPebble(t, common, remote)})
	t.Logf("setup: %v", time.Since(t0).Round(time.Millisecond))
	res, err := Run(context.Background(), Options{Remote: r.URL, Store: st, Direction: Both})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", res.String())
	t.Logf("reconcile: %v, %d rounds, sent %d B, received %d B; whole run: %v, sent %d B, received %d B",
		res.ReconcileTime.Round(time.Millisecond), res.Rounds, res.ReconcileSent, res.ReconcileReceived,
		res.Elapsed.Round(time.Millisecond), res.Sent, res.Received)
	if res.Have != len(local) || res.Need != len(remote) || res.Down.Moved != len(remote) || res.Up.Moved != len(local) {
		t.Fatal(res.String())
	}
	wantAll := want(common, local, remote)
	sameItems(t, "local", st, nostr.Filter{}, wantAll)
	sameItems(t, "remote", r.Store, nostr.Filter{}, wantAll)
}
