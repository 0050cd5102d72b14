package interop

import (
	"fmt"
	"testing"
)

// BenchmarkSession compares whole sessions between two 100k-item sets that
// differ by 1% (500 items of each side are its own): ours against ours,
// go-nostr against go-nostr.
func BenchmarkSession(b *testing.B) {
	const n = 100_000
	sp := spec{gens: []gen{
		{"both", "bench-both", n - n/200, 1_700_000_000, 365 * 86400},
		{"client", "bench-client", n / 200, 1_700_000_000, 365 * 86400},
		{"server", "bench-server", n / 200, 1_700_000_000, 365 * 86400},
	}}
	client, server := sp.sets()
	for _, limit := range []int{0, 60000} {
		b.Run(fmt.Sprintf("impl=petrel/limit=%d", limit), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				c, s := ours(b, client, limit), ours(b, server, limit)
				b.StartTimer()
				run(b, c, s)
			}
		})
		b.Run(fmt.Sprintf("impl=go-nostr/limit=%d", limit), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				c, s := theirClient{theirs(client, limit)}, theirServer{theirs(server, limit)}
				b.StartTimer()
				run(b, c, s)
			}
		})
	}
}
