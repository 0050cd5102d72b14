package negentropy

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// benchSets makes two sets of n items differing by 1%: 0.5% of each side
// is its own, timestamps spread over a year.
func benchSets(n int) (client, server []Item) {
	r := rand.New(rand.NewPCG(100, uint64(n)))
	own := n / 200
	s := sets{common: n - own, onlyClient: own, onlyServer: own, tsRange: 365 * 86400, base: 1_700_000_000}
	return s.gen(r)
}

// BenchmarkReconcile runs whole sessions between two 100k-item sets that
// differ by 1%, with and without a frame size limit. Besides time per
// session it reports rounds, bytes each way (binary; NIP-77 hex doubles
// them) and the server's share of the time.
func BenchmarkReconcile(b *testing.B) {
	for _, n := range []int{100_000} {
		client, server := benchSets(n)
		cv, sv := mustVector(b, client), mustVector(b, server)
		for _, limit := range []int{0, 60000} {
			b.Run(fmt.Sprintf("items=%d/limit=%d", n, limit), func(b *testing.B) {
				b.ReportAllocs()
				var rounds, up, down, ids int
				var serverTime time.Duration
				for b.Loop() {
					c, _ := New(cv, limit)
					s, _ := New(sv, limit)
					msg, err := c.Initiate()
					if err != nil {
						b.Fatal(err)
					}
					for msg != nil {
						rounds++
						up += len(msg)
						t0 := time.Now()
						reply, err := s.Reconcile(msg)
						serverTime += time.Since(t0)
						if err != nil {
							b.Fatal(err)
						}
						down += len(reply)
						var have, need [][IDSize]byte
						msg, have, need, err = c.ReconcileClient(reply)
						if err != nil {
							b.Fatal(err)
						}
						ids += len(have) + len(need)
					}
				}
				runs := float64(b.N)
				b.ReportMetric(float64(rounds)/runs, "rounds/op")
				b.ReportMetric(float64(up)/runs, "up-B/op")
				b.ReportMetric(float64(down)/runs, "down-B/op")
				b.ReportMetric(float64(ids)/runs, "ids/op")
				b.ReportMetric(float64(serverTime.Nanoseconds())/runs, "server-ns/op")
			})
		}
	}
}

// BenchmarkFingerprint measures one fingerprint over ranges of several
// lengths in a 100k-item vector.
func BenchmarkFingerprint(b *testing.B) {
	client, _ := benchSets(100_000)
	v := mustVector(b, client)
	for _, n := range []int{16, 1000, 100_000} {
		b.Run(fmt.Sprintf("range=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			lo := (v.Len() - n) / 3
			var sink Fingerprint
			for b.Loop() {
				sink = v.Fingerprint(lo, lo+n)
			}
			_ = sink
		})
	}
}

// BenchmarkNewVector measures building a 100k-item vector from items
// already ascending (as the store returns them) and shuffled.
func BenchmarkNewVector(b *testing.B) {
	items, _ := benchSets(100_000)
	sortItems(items)
	r := rand.New(rand.NewPCG(1, 1))
	shuffled := append([]Item(nil), items...)
	r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for _, c := range []struct {
		name  string
		items []Item
	}{{"sorted", items}, {"shuffled", shuffled}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]Item, len(c.items))
			for b.Loop() {
				copy(buf, c.items)
				if _, err := NewVector(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
