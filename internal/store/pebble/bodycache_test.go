package pebble

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

func body(n int, serial uint64) []byte {
	return bytes.Repeat([]byte{byte(serial)}, n)
}

// TestBodyCacheBudget: the cache keeps the newest bodies within its byte
// budget, evicting from the oldest; a serial never added is never found.
func TestBodyCacheBudget(t *testing.T) {
	const size = 100
	per := int64(size + cachedBodyOverhead)
	c := newBodyCache(10 * per)
	pk := nostr.PubKey{1}
	for s := uint64(1); s <= 50; s++ {
		if s == 20 {
			continue // a gap: a serial not stored
		}
		c.add(s, &pk, body(size, s))
		if c.bytes > c.budget {
			t.Fatalf("after serial %d: %d bytes cached, budget %d", s, c.bytes, c.budget)
		}
	}
	for s := uint64(1); s <= 50; s++ {
		e := c.get(s)
		switch {
		case s > 40 && (e == nil || !bytes.Equal(e.raw, body(size, s)) || e.pk != pk):
			t.Errorf("serial %d: not cached or wrong: %+v", s, e)
		case s <= 40 && e != nil:
			t.Errorf("serial %d is cached, want it evicted (budget: 10 bodies)", s)
		}
	}
	if c.get(20) != nil || c.get(51) != nil {
		t.Fatal("a serial never added is found")
	}
	off := newBodyCache(-1)
	off.add(1, &pk, body(size, 1))
	if off.get(1) != nil {
		t.Fatal("a disabled cache returned a body")
	}
}

// TestBodyCacheWrap: past bodyCacheSlots serials, a slot's older body
// gives way to the newer one, and the older serial is not found.
func TestBodyCacheWrap(t *testing.T) {
	c := newBodyCache(1 << 40)
	pk := nostr.PubKey{2}
	n := uint64(bodyCacheSlots + 10)
	for s := uint64(1); s <= n; s++ {
		c.add(s, &pk, body(8, s))
	}
	for _, s := range []uint64{1, 10} {
		if c.get(s) != nil {
			t.Errorf("serial %d found after its slot was reused", s)
		}
	}
	for _, s := range []uint64{11, n / 2, n} {
		if e := c.get(s); e == nil || !bytes.Equal(e.raw, body(8, s)) {
			t.Errorf("serial %d: %+v", s, e)
		}
	}
	if want := int64(bodyCacheSlots) * (8 + cachedBodyOverhead); c.bytes != want {
		t.Fatalf("%d bytes counted, want %d", c.bytes, want)
	}
}

// TestBodyCacheQueries: with and without the cache, queries return the
// same events, including after replacements and deletions (whose bodies
// stay cached but must not be returned).
func TestBodyCacheQueries(t *testing.T) {
	ctx := context.Background()
	results := map[int64]string{}
	for _, budget := range []int64{-1, 0, 4096} { // off, default, tiny
		s := openTest(t, Options{NoSync: true, BodyCacheBytes: budget})
		rng := rand.New(rand.NewPCG(11, 12))
		var evs []*nostr.Event
		for i := range 300 {
			kind := 1
			if i%10 == 0 {
				kind = 0 // replaceable: later ones replace earlier ones of the author
			}
			evs = append(evs, storetest.NewEvent(rng, storetest.Key(i%4), kind, storetest.BaseTime+int64(i), nil, fmt.Sprintf("note %d", i)))
		}
		if _, err := s.Save(ctx, evs); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Delete(ctx, []nostr.ID{evs[5].ID, evs[299].ID}); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		for _, f := range []nostr.Filter{{}, {Authors: []nostr.PubKey{storetest.Key(1)}}, {Kinds: []int{0}}} {
			it, err := s.Query(ctx, []nostr.Filter{f})
			if err != nil {
				t.Fatal(err)
			}
			for it.Next() {
				out.Write(it.Record().Raw)
				out.WriteByte('\n')
			}
			if err := it.Close(); err != nil {
				t.Fatal(err)
			}
		}
		results[budget] = out.String()
		s.Close()
	}
	if results[-1] == "" || results[0] != results[-1] || results[4096] != results[-1] {
		t.Fatalf("query results differ with the body cache:\noff %d bytes, default %d, tiny %d", len(results[-1]), len(results[0]), len(results[4096]))
	}
	if bytes.Contains([]byte(results[-1]), []byte(`"note 5"`)) || bytes.Contains([]byte(results[-1]), []byte(`"note 299"`)) {
		t.Fatal("a deleted event was returned")
	}
}

// TestBodyCacheLargeBody: a body taking a quarter of the budget is cached,
// one byte more is not (one large event must not evict the rest).
func TestBodyCacheLargeBody(t *testing.T) {
	const size = 100
	c := newBodyCache(4 * (size + cachedBodyOverhead))
	pk := nostr.PubKey{3}
	c.add(1, &pk, body(size, 1))
	c.add(2, &pk, body(size+1, 2))
	if c.get(1) == nil {
		t.Fatal("a body of a quarter of the budget was not cached")
	}
	if c.get(2) != nil {
		t.Fatal("a body of more than a quarter of the budget was cached")
	}
}
