package relay

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
)

func TestBodyCache(t *testing.T) {
	if newBodyCache(-1) != nil || newBodyCache(0) != nil || newBodyCache(1000) != nil {
		t.Fatal("a cache too small to be worth one was made")
	}
	const budget = 1 << 20
	c := newBodyCache(budget)
	id := func(i int) nostr.ID {
		var x nostr.ID
		copy(x[:], fmt.Sprintf("%08d", i))
		x[0] = byte(i) // spread over the shards
		return x
	}
	raw := []byte(`{"content":"one"}`)
	z := []byte("compressed one")
	c.put(id(1), raw, z)
	z[0] = 'X' // the cache keeps a copy
	if got := c.get(id(1), raw); string(got) != "compressed one" {
		t.Fatalf("get: %q", got)
	}
	// The same id with other bytes (another serialization) is a miss.
	if got := c.get(id(1), []byte(`{"content": "one"}`)); got != nil {
		t.Fatalf("body served for other raw bytes: %q", got)
	}
	if got := c.get(id(2), raw); got != nil {
		t.Fatalf("unknown id: %q", got)
	}
	// A body over a quarter of a shard is not kept.
	big := bytes.Repeat([]byte("b"), budget/bodyShards/4)
	c.put(id(3), raw, big)
	if c.get(id(3), raw) != nil {
		t.Fatal("a huge body was cached")
	}
	// Filling well past the budget keeps every shard within it, the
	// newest entries present and the oldest gone.
	body := bytes.Repeat([]byte("z"), 400)
	const n = 20000
	for i := 10; i < n; i++ {
		c.put(id(i), raw, body)
	}
	total := 0
	for i := range c.shards {
		sh := &c.shards[i]
		if sh.bytes > c.budget {
			t.Fatalf("shard %d holds %d bytes; budget %d", i, sh.bytes, c.budget)
		}
		total += sh.bytes
	}
	if total < budget*3/4 {
		t.Fatalf("the cache holds %d bytes of a %d budget", total, budget)
	}
	if c.get(id(n-1), raw) == nil || c.get(id(n-2), raw) == nil {
		t.Fatal("the newest entries are gone")
	}
	if c.get(id(10), raw) != nil {
		t.Fatal("the oldest entry survived")
	}
}
