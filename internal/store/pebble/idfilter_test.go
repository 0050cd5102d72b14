package pebble

import (
	"math/rand/v2"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

func TestIDFilter(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	f := newIDFilter(1000)
	var in []nostr.ID
	for i := 0; i < 100_000; i++ {
		id := storetest.IDWithPrefix(rng, byte(i))
		f.add(&id)
		in = append(in, id)
	}
	for i := range in {
		if !f.mayContain(&in[i]) {
			t.Fatalf("false negative for id %d", i)
		}
	}
	fp := 0
	for i := 0; i < 100_000; i++ {
		id := storetest.IDWithPrefix(rng, byte(i))
		if f.mayContain(&id) {
			fp++
		}
	}
	// 100k ids in 8 Mi bits with 4 hashes: about 0.02% false positives.
	if fp > 1000 {
		t.Fatalf("%d false positives in 100000", fp)
	}
}
