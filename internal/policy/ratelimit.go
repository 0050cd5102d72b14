package policy

import (
	"hash/maphash"
	"math"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// RateLimits applies the token-bucket limits of a Config: EVENTs per client
// address, events per pubkey, REQs per client address, connections per
// client address. A client address is
// an IPv4 address or an IPv6 /64 (one site's allocation; an IPv4-mapped
// IPv6 address counts as IPv4). Safe for concurrent use.
//
// Memory is bounded: each limit tracks at most Config.RateMaxKeys keys (in
// 32 shards, each with its own lock). A bucket that has refilled to its
// burst is the same as no bucket, so a shard forgets such buckets whenever
// it is swept: lazily, when a new key arrives and the last sweep is older
// than the time a bucket takes to refill (clamped to between a second and
// a minute), or older than a second if the shard is full. When a shard is
// still full after that, it evicts the least recently used of a small
// random sample; an evicted key starts again with a full bucket. A flood of distinct addresses therefore costs at most the
// cap, never more.
type RateLimits struct {
	eventIP *limiter[[16]byte]
	eventPK *limiter[nostr.PubKey]
	reqIP   *limiter[[16]byte]
	connIP  *limiter[[16]byte]
	now     func() time.Time
}

// LimitStats are the counters of one rate limit.
type LimitStats struct {
	Limited int64 // requests refused ("rate-limited:")
	Evicted int64 // buckets forgotten because the table was full
	Keys    int   // keys tracked now
	Remote  int64 // tokens other nodes of a cluster took from these buckets (Debit)
}

// RateStats are the counters of every rate limit; a limit that is off has
// zero counters.
type RateStats struct {
	EventIP     LimitStats // EVENT per client address
	EventPubKey LimitStats // EVENT per pubkey
	ReqIP       LimitStats // REQ per client address
	ConnectIP   LimitStats // connections per client address
}

// NewRateLimits builds the limits of cfg (normalized here). A limit whose
// rate is 0 is off; when all are, every call allows.
func NewRateLimits(cfg Config) *RateLimits {
	cfg = cfg.Normalize()
	r := &RateLimits{now: time.Now}
	r.eventIP = newLimiter[[16]byte](cfg.EventRate, cfg.EventBurst, cfg.RateMaxKeys,
		"this address may send at most "+rateText(cfg.EventRate, cfg.EventBurst, "events"))
	r.eventPK = newLimiter[nostr.PubKey](cfg.PubKeyEventRate, cfg.PubKeyEventBurst, cfg.RateMaxKeys,
		"this pubkey may publish at most "+rateText(cfg.PubKeyEventRate, cfg.PubKeyEventBurst, "events"))
	r.reqIP = newLimiter[[16]byte](cfg.ReqRate, cfg.ReqBurst, cfg.RateMaxKeys,
		"this address may send at most "+rateText(cfg.ReqRate, cfg.ReqBurst, "subscription requests"))
	r.connIP = newLimiter[[16]byte](cfg.ConnectRate, cfg.ConnectBurst, cfg.RateMaxKeys,
		"this address may open at most "+rateText(cfg.ConnectRate, cfg.ConnectBurst, "connections"))
	return r
}

func rateText(rate float64, burst int, what string) string {
	return strconv.FormatFloat(rate, 'g', 4, 64) + " " + what + " per second (bursts of " + strconv.Itoa(burst) + ")"
}

// ipKey maps an address to its rate-limit key: the IPv4 address, or the
// IPv6 /64 (the rest zeroed).
func ipKey(ip netip.Addr) [16]byte {
	ip = ip.Unmap()
	k := ip.As16()
	if !ip.Is4() {
		clear(k[8:])
	}
	return k
}

// AllowEvent takes one token from ip's EVENT bucket and one from pk's, and
// returns nil, or a "rate-limited:" rejection saying which limit and what
// it is. If the pubkey's bucket refuses, the address's token is given back.
// An invalid (zero) ip skips the address limit (imports, internal sources).
func (r *RateLimits) AllowEvent(ip netip.Addr, pk nostr.PubKey) *nostr.Rejection {
	now := r.now().UnixNano()
	var k [16]byte
	useIP := r.eventIP != nil && ip.IsValid()
	if useIP {
		k = ipKey(ip)
		if !r.eventIP.take(k, now) {
			return r.eventIP.rej
		}
	}
	if r.eventPK != nil && !r.eventPK.take(pk, now) {
		if useIP {
			r.eventIP.refund(k, now)
		}
		return r.eventPK.rej
	}
	return nil
}

// AllowReq takes one token from ip's REQ bucket and returns nil, or a
// "rate-limited:" rejection. An invalid (zero) ip is not limited.
func (r *RateLimits) AllowReq(ip netip.Addr) *nostr.Rejection { return r.allowAddr(r.reqIP, ip) }

// AllowConnect takes one token from ip's connection bucket and returns
// nil, or a "rate-limited:" rejection. An invalid (zero) ip is not
// limited.
func (r *RateLimits) AllowConnect(ip netip.Addr) *nostr.Rejection {
	return r.allowAddr(r.connIP, ip)
}

// allowAddr takes one token from ip's bucket of l (nil: off).
func (r *RateLimits) allowAddr(l *limiter[[16]byte], ip netip.Addr) *nostr.Rejection {
	if l == nil || !ip.IsValid() {
		return nil
	}
	if !l.take(ipKey(ip), r.now().UnixNano()) {
		return l.rej
	}
	return nil
}

// CarryStats adds old's counters of refused requests and forgotten
// buckets to r's, limit by limit (where both have it on), so that
// replacing the limits (a reload that changes a rate) does not reset
// them. A nil old adds nothing. Call it before r is in use.
func (r *RateLimits) CarryStats(old *RateLimits) {
	if old == nil {
		return
	}
	carryStats(r.eventIP, old.eventIP)
	carryStats(r.eventPK, old.eventPK)
	carryStats(r.reqIP, old.reqIP)
	carryStats(r.connIP, old.connIP)
}

func carryStats[K comparable](to, from *limiter[K]) {
	if to != nil && from != nil {
		to.limited.Add(from.limited.Load())
		to.evicted.Add(from.evicted.Load())
		to.remote.Add(from.remote.Load())
	}
}

// Stats returns the counters of each limit.
func (r *RateLimits) Stats() RateStats {
	return RateStats{EventIP: r.eventIP.stats(), EventPubKey: r.eventPK.stats(), ReqIP: r.reqIP.stats(), ConnectIP: r.connIP.stats()}
}

const (
	limiterShards = 32
	evictSample   = 8
	minSweepGap   = time.Second
)

// bucket is one key's token bucket.
type bucket struct {
	tokens float64 // at last
	last   int64   // unix nanos of the last update
}

// limiter is one rate limit: a sharded table of buckets.
type limiter[K comparable] struct {
	rate     float64 // tokens per nanosecond
	burst    float64
	perShard int
	sweepGap int64 // nanos between lazy sweeps: the time to refill a bucket, within [1s, 1min]
	seed     maphash.Seed
	rej      *nostr.Rejection
	limited  atomic.Int64
	evicted  atomic.Int64
	remote   atomic.Int64 // tokens other nodes took (Debit)
	shared   bool         // spending is recorded for other nodes (Share)
	shards   [limiterShards]shard[K]
}

type shard[K comparable] struct {
	mu        sync.Mutex
	m         map[K]bucket
	spent     map[K]uint32 // tokens taken since the last harvest, when shared
	lastSweep int64
	_         [32]byte // keep shards on separate cache lines
}

// newLimiter returns nil when rate is not positive (the limit is off).
func newLimiter[K comparable](ratePerSec float64, burst, maxKeys int, text string) *limiter[K] {
	if !(ratePerSec > 0) {
		return nil
	}
	l := &limiter[K]{
		rate:     ratePerSec / 1e9,
		burst:    float64(max(burst, 1)),
		perShard: max(1, (maxKeys+limiterShards-1)/limiterShards),
		seed:     maphash.MakeSeed(),
		rej:      nostr.Reject(nostr.PrefixRateLimited, "slow down: "+text),
	}
	refill := l.burst / l.rate
	l.sweepGap = int64(max(float64(minSweepGap), min(refill, float64(time.Minute))))
	for i := range l.shards {
		l.shards[i].m = make(map[K]bucket)
	}
	return l
}

func (l *limiter[K]) shardOf(k K) *shard[K] {
	return &l.shards[maphash.Comparable(l.seed, k)%limiterShards]
}

// level returns b's tokens at now.
func (l *limiter[K]) level(b bucket, now int64) float64 {
	t := b.tokens
	if dt := now - b.last; dt > 0 {
		t += float64(dt) * l.rate
	}
	return min(t, l.burst)
}

// take takes one token from k's bucket and reports whether there was one.
func (l *limiter[K]) take(k K, now int64) bool {
	sh := l.shardOf(k)
	sh.mu.Lock()
	b, ok := sh.m[k]
	if !ok {
		l.makeRoom(sh, now)
		sh.m[k] = bucket{tokens: l.burst - 1, last: now}
		if l.shared {
			l.spend(sh, k, 1)
		}
		sh.mu.Unlock()
		return true
	}
	t := l.level(b, now)
	b.last = max(b.last, now)
	ok = t >= 1
	if ok {
		t--
	}
	b.tokens = t
	sh.m[k] = b
	if ok && l.shared {
		l.spend(sh, k, 1)
	}
	sh.mu.Unlock()
	if !ok {
		l.limited.Add(1)
	}
	return ok
}

// spend notes n tokens taken from k's bucket for the next harvest (n
// may be -1: a refund). sh.mu must be held.
func (l *limiter[K]) spend(sh *shard[K], k K, n int) {
	if sh.spent == nil {
		sh.spent = make(map[K]uint32)
	}
	switch v := int(sh.spent[k]) + n; {
	case v <= 0:
		delete(sh.spent, k)
	default:
		sh.spent[k] = uint32(min(v, math.MaxUint32))
	}
}

// refund gives back a token taken at now.
func (l *limiter[K]) refund(k K, now int64) {
	sh := l.shardOf(k)
	sh.mu.Lock()
	if b, ok := sh.m[k]; ok {
		b.tokens = min(l.level(b, now)+1, l.burst)
		b.last = max(b.last, now)
		sh.m[k] = b
	}
	if l.shared {
		l.spend(sh, k, -1)
	}
	sh.mu.Unlock()
}

// debit takes n tokens another node took from k's bucket, down to minus
// the burst (never noted as spent here: that node shares them).
func (l *limiter[K]) debit(k K, n float64, now int64) {
	sh := l.shardOf(k)
	sh.mu.Lock()
	b, ok := sh.m[k]
	if !ok {
		l.makeRoom(sh, now)
		b = bucket{tokens: l.burst, last: now}
	} else {
		b.tokens = l.level(b, now)
		b.last = max(b.last, now)
	}
	b.tokens = max(b.tokens-n, -l.burst)
	sh.m[k] = b
	sh.mu.Unlock()
	l.remote.Add(int64(n))
}

// makeRoom sweeps the shard when due, and evicts one bucket if the shard
// is still full. sh.mu must be held.
func (l *limiter[K]) makeRoom(sh *shard[K], now int64) {
	full := len(sh.m) >= l.perShard
	gap := now - sh.lastSweep
	if gap >= l.sweepGap || (full && gap >= int64(minSweepGap)) {
		sh.lastSweep = now
		for k, b := range sh.m {
			if l.level(b, now) >= l.burst {
				delete(sh.m, k)
			}
		}
	}
	if len(sh.m) < l.perShard {
		return
	}
	// Evict the least recently used of a sample (map iteration order is
	// randomized).
	var victim K
	oldest, n := int64(0), 0
	for k, b := range sh.m {
		if n == 0 || b.last < oldest {
			victim, oldest = k, b.last
		}
		if n++; n == evictSample {
			break
		}
	}
	delete(sh.m, victim)
	l.evicted.Add(1)
}

func (l *limiter[K]) stats() LimitStats {
	if l == nil {
		return LimitStats{}
	}
	st := LimitStats{Limited: l.limited.Load(), Evicted: l.evicted.Load(), Remote: l.remote.Load()}
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		st.Keys += len(sh.m)
		sh.mu.Unlock()
	}
	return st
}
