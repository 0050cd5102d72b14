package relay

import (
	"runtime"
	"time"
)

// Config configures the protocol engine. The zero value works: every zero
// field takes the default named in its comment (Normalize fills them in).
// Where a limit can be switched off, a negative value means "no limit".
type Config struct {
	// URL is this relay's public WebSocket URL (wss://relay.example.com).
	// NIP-42 AUTH events and NIP-62 requests to vanish are checked against
	// it (scheme and host case, a default port and a trailing slash do not
	// matter); it is never taken from request headers. Default "": AUTH
	// and requests to vanish then accept only relay tags naming a
	// loopback host (localhost, 127.0.0.0/8, ::1), which suits a relay
	// reached on loopback only; a public relay must set it.
	URL string `toml:"url"`

	// AuthOnConnect sends the NIP-42 AUTH challenge as soon as a
	// connection opens. Default false: the challenge is sent the first
	// time a request needs authentication (right before the
	// "auth-required:" answer).
	AuthOnConnect bool `toml:"auth_on_connect"`
	// AuthRequired makes every EVENT, REQ, COUNT and NEG-OPEN need a
	// NIP-42 authentication first (any pubkey); NIP-11 then advertises
	// limitation.auth_required. Requests to vanish (NIP-62) are exempt.
	// Default false.
	AuthRequired bool `toml:"auth_required"`
	// AuthWindow is how far an AUTH event's created_at may be from now,
	// either way. Default 10m.
	AuthWindow time.Duration `toml:"auth_window"`
	// MaxAuthPubKeys is how many pubkeys may authenticate on one
	// connection; beyond it AUTH is answered "restricted:". Default 16.
	MaxAuthPubKeys int `toml:"max_auth_pubkeys"`
	// ProtectedKinds are served only to an authenticated author or "p"
	// tagged recipient (NIP-42 read protection for direct messages).
	// Default [4, 14, 1059]; an empty list (protected_kinds = []) protects
	// nothing.
	ProtectedKinds []int `toml:"protected_kinds"`
	// CountScanLimit is the most events one COUNT may read one by one: to
	// compute the NIP-45 "hll" field (omitted when more events match), or
	// to count exactly the protected events a client may see when an
	// index cannot (the COUNT is then refused with "restricted:").
	// Default 100000 events. Negative: never read events (no "hll").
	CountScanLimit int `toml:"count_scan_limit"`

	// MaxMessageBytes is the largest WebSocket message accepted. Larger
	// frames close the connection with 1009. Default 131072 bytes.
	MaxMessageBytes int `toml:"max_message_bytes"`
	// MaxEventBytes is the largest event JSON accepted. Default 65536 bytes.
	MaxEventBytes int `toml:"max_event_bytes"`
	// MaxSubscriptions is the number of open subscriptions per connection.
	// Default 200.
	MaxSubscriptions int `toml:"max_subscriptions"`
	// MaxSubscriptionValues is the number of filter values (ids,
	// authors, kinds and tag values, over every filter) one connection's
	// open subscriptions may hold together: each costs the subscription
	// index memory (without the cap, 200 REQs of 1,000 unknown authors
	// each, 200,000 values, took 83 MiB of the relay's memory on one
	// connection; max_subscriptions REQs of max_message_bytes hold up to
	// about 380,000). A REQ that would take the
	// connection past it is refused with CLOSED "blocked:" (those open
	// stay). Default 40000 (strfry's 20 subscriptions of its largest
	// message come to about 38,000); negative: no cap.
	MaxSubscriptionValues int `toml:"max_subscription_values"`
	// MaxFilters is the number of filters per REQ or COUNT. Default 200.
	MaxFilters int `toml:"max_filters"`
	// MaxFilterValues is the number of elements in any one filter array
	// (ids, authors, kinds, #tag). Default 1000.
	MaxFilterValues int `toml:"max_filter_values"`
	// MaxLimit caps a filter's limit; larger limits (and a missing limit)
	// are clamped to it. Default 500.
	MaxLimit int `toml:"max_limit"`
	// MaxSubIDLength is the longest subscription id in bytes. Default 64.
	MaxSubIDLength int `toml:"max_subid_length"`
	// MaxTags is the number of tags in an event. Default 2000.
	MaxTags int `toml:"max_tags"`
	// MaxContentBytes is the largest event content. Default: bounded only by
	// MaxEventBytes.
	MaxContentBytes int `toml:"max_content_bytes"`
	// CreatedAtFuture is how far in the future created_at may be.
	// Default 15m. Negative: no bound.
	CreatedAtFuture time.Duration `toml:"created_at_future"`
	// CreatedAtPast is how far in the past created_at may be. Default 0:
	// no bound.
	CreatedAtPast time.Duration `toml:"created_at_past"`

	// OutQueueFrames caps the frames waiting to be written to one
	// connection. Default 4096 frames.
	OutQueueFrames int `toml:"out_queue_frames"`
	// OutQueueBytes caps the bytes waiting to be written to one connection
	// (live events; control frames always pass). Default 1 MiB.
	OutQueueBytes int `toml:"out_queue_bytes"`
	// QueryBytesPerConn caps stored-query output waiting to be written to
	// one connection; a query producing more pauses until the client reads.
	// Default 32 MiB.
	QueryBytesPerConn int64 `toml:"query_bytes_per_conn"`
	// QueryBytesTotal is the same cap relay-wide. Default 512 MiB.
	QueryBytesTotal int64 `toml:"query_bytes_total"`
	// QuerySlice is how long one stored query runs before yielding to
	// others. Default 10ms.
	QuerySlice time.Duration `toml:"query_slice"`
	// QueryWorkers is the number of goroutines running stored queries.
	// Default: the number of CPUs.
	QueryWorkers int `toml:"query_workers"`
	// DrainTimeout closes a connection whose out-queue has made no progress
	// for this long (time its output waits for the relay's own flushers
	// does not count: only a client that stops reading). Default 30s.
	DrainTimeout time.Duration `toml:"drain_timeout"`
	// IdleTimeout closes a connection that has sent nothing (not even a
	// pong) for this long. Pings are sent after half of it. Default 300s.
	// Negative: never.
	IdleTimeout time.Duration `toml:"idle_timeout"`

	// VerifyWorkers is the number of signature-verification goroutines.
	// Default: the number of CPUs.
	VerifyWorkers int `toml:"verify_workers"`
	// VerifyQueue is the number of events waiting for verification,
	// relay-wide; beyond it EVENTs are refused with "rate-limited:". It
	// bounds the queue's memory; the overload valve is MaxEventWait, which
	// refuses by the time events wait, and this count is sized to hold
	// that wait's worth of events at the 2-core dev machine's capacity
	// (about 8,000 events/s), so that it trips only when events arrive
	// faster than that in a burst. Default 4096 (512 before MaxEventWait:
	// a count that small refused on every short stall).
	VerifyQueue int `toml:"verify_queue"`
	// VerifyMode is when an EVENT's signature is checked: "sync" checks it
	// before the event is stored and answered; "optimistic" holds the
	// event durably as unverified, answers OK:true once the hold is
	// committed, and checks the signature behind. Only verified events
	// are ever served (stored queries, live fan-out, COUNT, NEG, export,
	// sync, scan), and replacement, deletion and vanishing are applied
	// only once an event is verified; a held event that fails is removed,
	// its sender gets a NOTICE, and its pubkey's later events are
	// verified before their OK. Events held when the relay stopped are
	// checked at the next start. Optimistic mode needs a store that can
	// hold events (both backends can) and is off, with a warning, while a
	// write-policy plugin or the per-pubkey event rate limit is set (they
	// need the signature first). Every event is still verified, only
	// later, at the cost of a second pass through the store's writer: on
	// the 2-core dev machine it did not pay (docs/BENCHMARKS.md); see
	// docs/nips.md for the trade-off. Default "sync".
	VerifyMode string `toml:"verify_mode"`
	// VerifyPending is the most events held unverified at once, relay-wide,
	// in optimistic mode (answered OK:true, signature not checked yet);
	// past it events are verified before their OK, as in sync mode
	// (counted in limits_tripped.verify_pending). Default 4096.
	VerifyPending int `toml:"verify_pending"`
	// MaxPendingEvents is the number of EVENTs one connection may have
	// awaiting their OK; beyond it they are refused with "rate-limited:".
	// It is each connection's share of the relay-wide budgets (the verify
	// queue, MaxInflightEvents): kept under them, one connection cannot
	// fill them and starve the others. Default half of VerifyQueue (2048,
	// half of MaxInflightEvents).
	MaxPendingEvents int `toml:"max_pending_events"`
	// MaxBadSignatures closes a connection that sends this many events
	// with invalid signatures in a row (1008, counted in
	// limits_tripped.bad_signatures); a valid one resets the count. From a
	// tenth of it on, the connection is slowed: it may have one EVENT
	// awaiting its OK at a time, the rest are refused with
	// "rate-limited:" and count as invalid too (a client that presses on
	// while slowed is not verified, and not forgiven). Default 100.
	// Negative: no limit.
	MaxBadSignatures int `toml:"max_bad_signatures"`
	// MaxInflightEvents is the number of EVENTs the whole relay may have
	// admitted and not yet answered (waiting for verification, the
	// plugin, or the store's writer); beyond it EVENTs are refused with
	// "rate-limited:" before any work is spent on them. It bounds the
	// latency of an OK under overload to about MaxInflightEvents divided by
	// the ingest rate, and their memory to about MaxInflightEvents times
	// the event size (4 MiB of typical 1 KiB notes, 256 MiB at the
	// largest events max_event_bytes allows by default: lower it on a
	// small host that takes large events); like VerifyQueue it is sized
	// to hold MaxEventWait's worth of events at the dev machine's
	// capacity, and MaxEventWait is the valve that trips first under
	// sustained overload. Default 4096. Negative: no limit.
	MaxInflightEvents int `toml:"max_inflight_events"`
	// MaxEventWait is the relay's overload valve: while the EVENTs already
	// admitted have waited longer than this for their OK (measured: the
	// wait of the last one answered, or the time since the last answer
	// while others wait), new EVENTs are refused with "rate-limited:"
	// (counted in limits_tripped.max_event_wait). A burst or a stall
	// shorter than this (a memtable flush, a slow fsync, a collection)
	// is absorbed, however many events it queues within the count
	// bounds above; when events keep arriving faster than the relay
	// serves them the wait grows past it and the excess is refused, so
	// that the OK latency under overload stays about this long. It is
	// set above the stalls a busy shared host shows (on the dev machine
	// under other load, OK latencies of 150-450 ms at 100-500 events/s
	// while the relay was starved of CPU; 250ms refused there). A store
	// that fails is not a lack of capacity: its error answers, and the
	// waits of EVENTs admitted before them (an outage's backlog), do not
	// count, so through a database outage writes are answered "error:"
	// and ephemeral events go on. Default 500ms. Negative: off (only the
	// counts refuse).
	MaxEventWait time.Duration `toml:"max_event_wait"`
	// FanoutQueue is the number of committed events waiting to be fanned
	// out. Default 8192.
	FanoutQueue int `toml:"fanout_queue"`

	// MaxNegSessions is the number of open NIP-77 negentropy sessions per
	// connection; beyond it NEG-OPEN is refused with NEG-ERR "blocked:".
	// Default 8. Negative: no limit.
	MaxNegSessions int `toml:"max_neg_sessions"`
	// MaxNegItems is the most events one negentropy session may cover; a
	// NEG-OPEN whose filter matches more is refused with NEG-ERR
	// "blocked:". Default 1000000 items. Negative: no limit.
	MaxNegItems int `toml:"max_neg_items"`
	// NegItemsTotal caps the items held by all negentropy sessions,
	// relay-wide (about 40 bytes each); beyond it NEG-OPEN is refused with
	// NEG-ERR "blocked: relay busy". Default 10000000 items. Negative: no
	// limit.
	NegItemsTotal int64 `toml:"neg_items_total"`
	// NegFrameLimit caps the size of each negentropy reply before hex
	// encoding (the NEG-MSG frame is about twice as large). It is lowered
	// so that the frame fits MaxMessageBytes, and raised to at least 4096.
	// Default 60000 bytes. Negative: no limit.
	NegFrameLimit int `toml:"neg_frame_limit"`
	// NegIdleTimeout closes a negentropy session that has received no
	// NEG-MSG for this long, with NEG-ERR "closed:". Default 60s.
	// Negative: no timeout.
	NegIdleTimeout time.Duration `toml:"neg_idle_timeout"`
}

// Normalize returns c with defaults filled in for zero fields.
func (c Config) Normalize() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.MaxMessageBytes, 131072)
	def(&c.MaxEventBytes, 65536)
	def(&c.MaxSubscriptions, 200)
	def(&c.MaxSubscriptionValues, 40000)
	def(&c.MaxFilters, 200)
	def(&c.MaxFilterValues, 1000)
	def(&c.MaxLimit, 500)
	def(&c.MaxSubIDLength, 64)
	def(&c.MaxTags, 2000)
	def(&c.OutQueueFrames, 4096)
	def(&c.OutQueueBytes, 1<<20)
	def(&c.QueryWorkers, runtime.NumCPU())
	def(&c.VerifyWorkers, runtime.NumCPU())
	def(&c.VerifyQueue, 4096)
	if c.VerifyMode == "" {
		c.VerifyMode = VerifySync
	}
	def(&c.VerifyPending, 4096)
	def(&c.MaxPendingEvents, max(1, c.VerifyQueue/2))
	def(&c.MaxBadSignatures, 100)
	def(&c.MaxInflightEvents, 4096)
	if c.MaxEventWait == 0 {
		c.MaxEventWait = 500 * time.Millisecond
	}
	def(&c.FanoutQueue, 8192)
	if c.AuthWindow <= 0 {
		c.AuthWindow = 10 * time.Minute
	}
	def(&c.MaxAuthPubKeys, 16)
	if c.ProtectedKinds == nil {
		c.ProtectedKinds = []int{4, 14, 1059}
	}
	def(&c.CountScanLimit, 100000)
	if c.QueryBytesPerConn == 0 {
		c.QueryBytesPerConn = 32 << 20
	}
	if c.QueryBytesTotal == 0 {
		c.QueryBytesTotal = 512 << 20
	}
	if c.CreatedAtFuture == 0 {
		c.CreatedAtFuture = 15 * time.Minute
	}
	if c.QuerySlice <= 0 {
		c.QuerySlice = 10 * time.Millisecond
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 30 * time.Second
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 300 * time.Second
	}
	def(&c.MaxNegSessions, 8)
	def(&c.MaxNegItems, 1_000_000)
	if c.NegItemsTotal == 0 {
		c.NegItemsTotal = 10_000_000
	}
	def(&c.NegFrameLimit, 60000)
	if c.NegFrameLimit > 0 {
		// A reply, hex-encoded, should fit what the relay itself accepts.
		c.NegFrameLimit = max(min(c.NegFrameLimit, (c.MaxMessageBytes-256)/2), 4096)
	}
	if c.NegIdleTimeout == 0 {
		c.NegIdleTimeout = 60 * time.Second
	}
	return c
}

// Values of Config.VerifyMode.
const (
	VerifySync       = "sync"
	VerifyOptimistic = "optimistic"
)
