package stream

import (
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// TestRecent: an id is claimed once; the set holds at most max ids and
// forgets the oldest first.
func TestRecent(t *testing.T) {
	t.Parallel()
	id := func(i int) nostr.ID { return nostr.ID{byte(i), byte(i >> 8)} }
	r := newRecent(3)
	for i := range 3 {
		if !r.claim(id(i)) {
			t.Fatalf("first claim of %d refused", i)
		}
	}
	if r.claim(id(1)) || r.len() != 3 {
		t.Fatal("second claim of 1 granted")
	}
	if !r.claim(id(3)) || r.len() != 3 { // forgets 0, the oldest
		t.Fatalf("claim past the limit: len %d", r.len())
	}
	if r.claim(id(1)) || r.claim(id(2)) || r.claim(id(3)) {
		t.Fatal("a kept id was claimed again")
	}
	if !r.claim(id(0)) { // forgotten, so new again; forgets 1
		t.Fatal("forgotten id not claimable")
	}
	if !r.claim(id(1)) {
		t.Fatal("1 should have been forgotten")
	}
}
