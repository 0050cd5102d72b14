package relay

import (
	"hash/maphash"
	"sync"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// bodyCache keeps the compressed bodies of recent events (compress.go),
// so that an event is compressed once, not once per REQ that returns it:
// a live event's body, made for its fan-out, is there for the REQs that
// ask for it next, and a stored event's for the next REQ after the first.
// It is bounded in bytes (Compression.CacheBytes), split in shards that
// each evict their oldest entries first. An entry is keyed by event id and
// checked against a hash of the raw JSON it was made from, so a body is
// never served for other bytes. Safe for concurrent use.
type bodyCache struct {
	seed   maphash.Seed
	shards [bodyShards]bodyShard
	budget int // bytes per shard
}

const (
	bodyShards = 16
	// bodyEntryCost is what an entry costs besides its body: the map
	// slot, the FIFO slot and the slice header.
	bodyEntryCost = 96
)

type bodyShard struct {
	mu    sync.Mutex
	m     map[nostr.ID]bodyEntry
	fifo  []nostr.ID // insertion order; fifo[head:] are live
	head  int
	bytes int
}

type bodyEntry struct {
	sum uint64 // maphash of the raw JSON the body was made from
	z   []byte // never modified once stored
}

// newBodyCache returns a cache of about maxBytes, or nil if maxBytes is
// too small to be worth one.
func newBodyCache(maxBytes int) *bodyCache {
	if maxBytes < bodyShards*4096 {
		return nil
	}
	c := &bodyCache{seed: maphash.MakeSeed(), budget: maxBytes / bodyShards}
	for i := range c.shards {
		c.shards[i].m = make(map[nostr.ID]bodyEntry)
	}
	return c
}

func (c *bodyCache) shard(id nostr.ID) *bodyShard { return &c.shards[id[0]%bodyShards] }

// get returns the compressed body of raw (event id) if it is cached. The
// returned slice is never modified; it may be kept.
func (c *bodyCache) get(id nostr.ID, raw []byte) []byte {
	sum := maphash.Bytes(c.seed, raw)
	sh := c.shard(id)
	sh.mu.Lock()
	e, ok := sh.m[id]
	sh.mu.Unlock()
	if !ok || e.sum != sum {
		return nil
	}
	return e.z
}

// put stores a copy of z, the compressed body of raw (event id), evicting
// the shard's oldest entries past its budget.
func (c *bodyCache) put(id nostr.ID, raw, z []byte) {
	cost := len(z) + bodyEntryCost
	if cost > c.budget/4 {
		return // one huge event must not flush the shard
	}
	e := bodyEntry{sum: maphash.Bytes(c.seed, raw), z: append([]byte(nil), z...)}
	sh := c.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if old, ok := sh.m[id]; ok {
		sh.bytes -= len(old.z) + bodyEntryCost
	} else {
		sh.fifo = append(sh.fifo, id)
	}
	sh.m[id] = e
	sh.bytes += cost
	for sh.bytes > c.budget && sh.head < len(sh.fifo) {
		old := sh.fifo[sh.head]
		sh.head++
		if oe, ok := sh.m[old]; ok {
			sh.bytes -= len(oe.z) + bodyEntryCost
			delete(sh.m, old)
		}
	}
	if sh.head > 1024 && sh.head > len(sh.fifo)/2 {
		n := copy(sh.fifo, sh.fifo[sh.head:])
		sh.fifo = sh.fifo[:n]
		sh.head = 0
	}
}
