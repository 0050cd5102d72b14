package relay

import (
	"sync/atomic"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// Rejection reasons counted in Stats.Rejected, by NIP-01 prefix.
var reasonNames = [...]string{
	"invalid", "duplicate", "blocked", "rate-limited", "pow", "restricted",
	"auth-required", "mute", "error",
}

func reasonIndex(p nostr.Prefix) int {
	for i, n := range reasonNames {
		if string(p) == n {
			return i
		}
	}
	return len(reasonNames) - 1
}

// Limit trip counters, by limit name.
var limitNames = [...]string{
	"max_message_bytes", "max_event_bytes", "max_subscriptions",
	"max_filters", "max_filter_values", "max_subid_length", "max_tags",
	"max_content_bytes", "created_at_future", "created_at_past",
	"out_queue", "query_bytes_per_conn", "query_bytes_total",
	"max_pending_events", "verify_queue", "max_connections",
	"max_connections_per_ip", "drain_timeout", "idle_timeout",
	"control_backlog", "max_limit_clamped",
	"event_rate_ip", "event_rate_pubkey", "req_rate_ip", "max_auth_pubkeys",
	"count_scan_limit", "max_inflight_events", "bad_signatures",
	"verify_pending", "max_event_wait", "connect_rate_ip",
	"max_subscription_values",
}

const (
	limMessageBytes = iota
	limEventBytes
	limSubscriptions
	limFilters
	limFilterValues
	limSubIDLength
	limTags
	limContentBytes
	limCreatedAtFuture
	limCreatedAtPast
	limOutQueue
	limQueryBytesPerConn
	limQueryBytesTotal
	limPendingEvents
	limVerifyQueue
	limConnections
	limConnectionsPerIP
	limDrainTimeout
	limIdleTimeout
	limControlBacklog
	limLimitClamped
	limEventRateIP
	limEventRatePubKey
	limReqRateIP
	limAuthPubKeys
	limCountScan
	limInflightEvents
	limBadSignatures
	limVerifyPending
	limEventWait
	limConnectRateIP
	limSubscriptionValues
	numLimits
)

// Stats holds the relay's counters. All fields are updated atomically and
// may be read at any time; Snapshot gives a consistent-enough copy for
// /stats and /metrics.
type Stats struct {
	start time.Time

	ConnectionsActive   atomic.Int64
	ConnectionsTotal    atomic.Int64
	ConnectionsRejected atomic.Int64
	SubscriptionsActive atomic.Int64
	SubscriptionsTotal  atomic.Int64
	EventsReceived      atomic.Int64
	EventsAccepted      atomic.Int64
	EventsDuplicate     atomic.Int64
	EventsEphemeral     atomic.Int64
	Rejected            [len(reasonNames)]atomic.Int64
	BuffersDropped      atomic.Int64
	DBErrors            atomic.Int64
	MessagesIn          atomic.Int64
	MessagesOut         atomic.Int64
	BytesIn             atomic.Int64
	BytesOut            atomic.Int64
	Deliveries          atomic.Int64
	// FramesCompressed, BytesCompressed and BytesCompressionSaved count
	// the EVENT frames queued compressed (permessage-deflate), their
	// bytes, and the bytes they saved over plain frames.
	FramesCompressed      atomic.Int64
	BytesCompressed       atomic.Int64
	BytesCompressionSaved atomic.Int64
	// BodyCacheHits counts compressed bodies taken from the cache
	// instead of compressing the event again.
	BodyCacheHits    atomic.Int64
	StoredSent       atomic.Int64
	Queries          atomic.Int64
	Counts           atomic.Int64
	Notices          atomic.Int64
	LimitTrips       [numLimits]atomic.Int64
	QueryBytesQueued atomic.Int64 // stored-query bytes in out-queues, relay-wide

	AuthAccepted         atomic.Int64 // NIP-42 AUTH answered OK true
	AuthRejected         atomic.Int64 // NIP-42 AUTH answered OK false
	ConnectionsBlocked   atomic.Int64 // sessions closed for a blocked address or banned pubkey
	EventsShadowRejected atomic.Int64 // answered OK true, neither stored nor broadcast (plugin)
	// Optimistic verification (optimistic.go).
	EventsHeld          atomic.Int64 // held unverified and answered OK true
	EventsHeldInvalid   atomic.Int64 // held, then found to have a bad signature (never served)
	EventsHeldRecovered atomic.Int64 // held by an earlier run, checked at start
	HeldPending         atomic.Int64 // held events not yet released or rejected
	// ReqRefused counts REQ, COUNT and NEG-OPEN refused by policy
	// (authentication, read protection, rate limits), by prefix.
	ReqRefused [len(reasonNames)]atomic.Int64
}

// Snapshot is a point-in-time copy of the counters.
type Snapshot struct {
	UptimeSeconds float64 `json:"uptime_seconds"`
	Verifier      string  `json:"verifier"`
	StoreBackend  string  `json:"store_backend"`
	DBSizeBytes   int64   `json:"db_size_bytes"`
	// StoreEvents is the number of stored events (store.Stats.Events:
	// exact for pebble, an estimate for a large PostgreSQL table).
	StoreEvents int64 `json:"store_events"`
	// StoreCommits: the store's synced (group) commits since start
	// (store.Stats.Commits; with PostgreSQL, its write transactions).
	StoreCommits int64 `json:"store_commits"`
	// DiskFreeBytes and DiskSizeBytes: the file system holding an
	// embedded store (store.Stats). In /metrics only (a public /stats
	// has no business describing the host's disks).
	DiskFreeBytes int64 `json:"-"`
	DiskSizeBytes int64 `json:"-"`
	// WALSpares...WALLogsUnspared: the embedded store's write-ahead log
	// spares (store.Stats), in /metrics only as the disk's figures are.
	WALSpares       int64 `json:"-"`
	WALSparesReady  int64 `json:"-"`
	WALSparesUsed   int64 `json:"-"`
	WALLogsUnspared int64 `json:"-"`
	// StoreUnavailable: the store's last operation failed to reach it (a
	// shared store's database is down); StoreErrors: operations the
	// store failed on such errors since start.
	StoreUnavailable bool  `json:"store_unavailable"`
	StoreErrors      int64 `json:"store_errors"`
	// StoreDiskFull: the store refuses writes for lack of disk space
	// (store.min_free_bytes); StoreFreeBytes: space free on the store's
	// filesystem, -1 when not known.
	StoreDiskFull  bool  `json:"store_disk_full"`
	StoreFreeBytes int64 `json:"store_free_bytes"`
	// Cluster is the live bus's own report (Bus that implements
	// BusReporter), or nil for a single node.
	Cluster any `json:"cluster,omitempty"`
	// SearchDeadPostings: search postings of removed events still in the
	// index (petrel compact --rebuild-search clears them).
	SearchDeadPostings int64 `json:"search_dead_postings"`
	// StoreBackground: the embedded store's flushes, compactions and
	// write stalls (store.Stats.Background); absent for PostgreSQL.
	StoreBackground *store.Background `json:"store_background,omitempty"`
	// StorePostgres: the PostgreSQL store's write retries and connection
	// pool (store.Stats.Postgres); absent for the embedded store.
	StorePostgres *store.Postgres `json:"store_postgres,omitempty"`
	// IDFilterBytes: memory of the store's filter of stored ids.
	IDFilterBytes       int64 `json:"id_filter_bytes"`
	ConnectionsActive   int64 `json:"connections_active"`
	ConnectionsTotal    int64 `json:"connections_total"`
	ConnectionsRejected int64 `json:"connections_rejected"`
	SubscriptionsActive int64 `json:"subscriptions_active"`
	SubscriptionsTotal  int64 `json:"subscriptions_total"`
	EventsReceived      int64 `json:"events_received"`
	EventsAccepted      int64 `json:"events_accepted"`
	// EventsDuplicate counts the events answered with the "duplicate:"
	// prefix: those already stored (OK true) and older versions of a
	// stored replaceable or addressable event (OK false, also counted in
	// EventsRejected["duplicate"], which is so never larger).
	EventsDuplicate       int64            `json:"events_duplicate"`
	EventsEphemeral       int64            `json:"events_ephemeral"`
	EventsRejected        map[string]int64 `json:"events_rejected"`
	BuffersDropped        int64            `json:"buffers_dropped"`
	DBErrors              int64            `json:"db_errors"`
	MessagesIn            int64            `json:"messages_in"`
	MessagesOut           int64            `json:"messages_out"`
	BytesIn               int64            `json:"bytes_in"`
	BytesOut              int64            `json:"bytes_out"`
	Deliveries            int64            `json:"live_deliveries"`
	FramesCompressed      int64            `json:"frames_compressed"`
	BytesCompressed       int64            `json:"bytes_compressed_out"`
	BytesCompressionSaved int64            `json:"bytes_compression_saved"`
	BodyCacheHits         int64            `json:"compression_cache_hits"`
	StoredSent            int64            `json:"stored_events_sent"`
	Queries               int64            `json:"queries"`
	Counts                int64            `json:"counts"`
	Notices               int64            `json:"notices"`
	LimitTrips            map[string]int64 `json:"limits_tripped"`
	QueryBytesQueued      int64            `json:"query_bytes_queued"`
	EventsInflight        int64            `json:"events_inflight"`
	// VerifyQueueDepth: EVENTs waiting for signature verification now;
	// VerifyQueueCapacity: the queue's size (relay.verify_queue), past
	// which EVENTs are refused "rate-limited:".
	VerifyQueueDepth    int64 `json:"verify_queue_depth"`
	VerifyQueueCapacity int64 `json:"verify_queue_capacity"`
	// OKLatency: EVENT arrival to OK queued; QueryLatency: REQ arrival
	// to EOSE queued (the petrel_ok_latency_seconds and
	// petrel_query_latency_seconds histograms).
	OKLatency    LatencySummary `json:"ok_latency"`
	QueryLatency LatencySummary `json:"query_latency"`
	// OKStages splits OKLatency for the events that went to the store, by
	// stage (OKStageNames; the petrel_ok_stage_seconds histogram): what
	// an operator reads to tell a slow verifier from a slow store or a
	// busy dispatcher.
	OKStages map[string]LatencySummary `json:"ok_stages"`
	// OutQueueBytes: bytes waiting in every connection's out-queue
	// (including live events held for subscriptions in their stored
	// phase) plus bytes handed to the transport and not yet written.
	OutQueueBytes int64 `json:"out_queue_bytes"`
	NegStats

	AuthAccepted         int64            `json:"auth_accepted"`
	AuthRejected         int64            `json:"auth_rejected"`
	ConnectionsBlocked   int64            `json:"connections_blocked"`
	EventsShadowRejected int64            `json:"events_shadow_rejected"`
	EventsHeld           int64            `json:"events_held"`
	EventsHeldInvalid    int64            `json:"events_held_invalid"`
	EventsHeldRecovered  int64            `json:"events_held_recovered"`
	HeldPending          int64            `json:"held_pending"`
	QuarantinedPubKeys   int64            `json:"quarantined_pubkeys"`
	RequestsRefused      map[string]int64 `json:"requests_refused"`
	Policy               PolicyStats      `json:"policy"`
}

func (st *Stats) snapshot() Snapshot {
	s := Snapshot{
		UptimeSeconds:         time.Since(st.start).Seconds(),
		ConnectionsActive:     st.ConnectionsActive.Load(),
		ConnectionsTotal:      st.ConnectionsTotal.Load(),
		ConnectionsRejected:   st.ConnectionsRejected.Load(),
		SubscriptionsActive:   st.SubscriptionsActive.Load(),
		SubscriptionsTotal:    st.SubscriptionsTotal.Load(),
		EventsReceived:        st.EventsReceived.Load(),
		EventsAccepted:        st.EventsAccepted.Load(),
		EventsDuplicate:       st.EventsDuplicate.Load(),
		EventsEphemeral:       st.EventsEphemeral.Load(),
		EventsRejected:        make(map[string]int64, len(reasonNames)),
		BuffersDropped:        st.BuffersDropped.Load(),
		DBErrors:              st.DBErrors.Load(),
		MessagesIn:            st.MessagesIn.Load(),
		MessagesOut:           st.MessagesOut.Load(),
		BytesIn:               st.BytesIn.Load(),
		BytesOut:              st.BytesOut.Load(),
		Deliveries:            st.Deliveries.Load(),
		FramesCompressed:      st.FramesCompressed.Load(),
		BytesCompressed:       st.BytesCompressed.Load(),
		BytesCompressionSaved: st.BytesCompressionSaved.Load(),
		BodyCacheHits:         st.BodyCacheHits.Load(),
		StoredSent:            st.StoredSent.Load(),
		Queries:               st.Queries.Load(),
		Counts:                st.Counts.Load(),
		Notices:               st.Notices.Load(),
		LimitTrips:            make(map[string]int64, numLimits),
		QueryBytesQueued:      st.QueryBytesQueued.Load(),

		AuthAccepted:         st.AuthAccepted.Load(),
		AuthRejected:         st.AuthRejected.Load(),
		ConnectionsBlocked:   st.ConnectionsBlocked.Load(),
		EventsShadowRejected: st.EventsShadowRejected.Load(),
		EventsHeld:           st.EventsHeld.Load(),
		EventsHeldInvalid:    st.EventsHeldInvalid.Load(),
		EventsHeldRecovered:  st.EventsHeldRecovered.Load(),
		HeldPending:          st.HeldPending.Load(),
		RequestsRefused:      make(map[string]int64, len(reasonNames)),
	}
	for i, n := range reasonNames {
		s.EventsRejected[n] = st.Rejected[i].Load()
		s.RequestsRefused[n] = st.ReqRefused[i].Load()
	}
	for i, n := range limitNames {
		s.LimitTrips[n] = st.LimitTrips[i].Load()
	}
	return s
}

// ReasonNames lists the rejection reasons, for metric registration.
func ReasonNames() []string { return reasonNames[:] }

// QueueStats reports out-queue high-water marks. It exists for tests and
// debugging (a memory bound is asserted on these figures, not on wall
// time); it costs a lock per open connection, so do not poll it in a hot
// loop. Per-connection peaks are the largest seen on any one connection
// since the relay started, closed connections included.
type QueueStats struct {
	// PeakLiveFrames and PeakLiveBytes: live event frames queued on one
	// connection plus live events held for subscriptions still in their
	// stored phase (bounded by OutQueueFrames and OutQueueBytes).
	PeakLiveFrames int
	PeakLiveBytes  int
	// PeakStoredBytes: stored-query bytes queued on one connection
	// (bounded by QueryBytesPerConn plus one frame).
	PeakStoredBytes int
	// PeakControlBytes: OK, EOSE, CLOSED, NOTICE... bytes queued on one
	// connection (a connection passing 4*OutQueueBytes is closed).
	PeakControlBytes int
	// PeakTransportBytes: bytes handed to one connection's transport and
	// not yet reported written (the out-queue stops handing bytes over at
	// 64 KiB; one write hands at most 256 KiB).
	PeakTransportBytes int64
	// PeakQueryBytesTotal: stored-query bytes queued relay-wide (bounded
	// by QueryBytesTotal plus one frame per query worker).
	PeakQueryBytesTotal int64
}

// QueueStats returns the out-queue high-water marks.
func (r *Relay) QueueStats() QueueStats {
	r.regMu.Lock()
	p := r.closedPeaks
	list := make([]*Session, len(r.sessions))
	copy(list, r.sessions)
	r.regMu.Unlock()
	for _, s := range list {
		s.out.mu.Lock()
		p.merge(s.out.peak)
		s.out.mu.Unlock()
	}
	return QueueStats{
		PeakLiveFrames:      p.liveFrames,
		PeakLiveBytes:       p.liveBytes,
		PeakStoredBytes:     p.stored,
		PeakControlBytes:    p.control,
		PeakTransportBytes:  p.transport,
		PeakQueryBytesTotal: r.queryBytesPeak.Load(),
	}
}

// OutQueueBytes returns the bytes waiting to be written to clients,
// relay-wide: queued in out-queues, held for subscriptions in their stored
// phase, and handed to the transport but not yet written. It reads one
// atomic per open connection under the registry lock.
func (r *Relay) OutQueueBytes() int64 {
	var n int64
	r.regMu.Lock()
	for _, s := range r.sessions {
		n += s.out.queued.Load() + max(s.out.inTransp.Load(), 0)
	}
	r.regMu.Unlock()
	return n
}

// storeMax raises a to v unless it is already larger.
func storeMax(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// OutQueueBuffers returns how many connections hold out-queue buffers
// and the capacity of those buffers, relay-wide (segments in use and the
// spare). An idle connection holds none: its buffers are returned once
// its out-queue drains. It takes every session's out-queue lock in turn,
// under the registry lock: for tests and diagnostics, not a hot path.
func (r *Relay) OutQueueBuffers() (conns int, bytes int64) {
	r.regMu.Lock()
	defer r.regMu.Unlock()
	for _, s := range r.sessions {
		o := &s.out
		o.mu.Lock()
		n := o.bufferBytes()
		o.mu.Unlock()
		if n > 0 {
			conns++
			bytes += n
		}
	}
	return conns, bytes
}

// OutQueuesIdle reports whether every out-queue is drained: nothing
// queued, no flush scheduled or writing, nothing held by the transport.
// For tests and diagnostics.
func (r *Relay) OutQueuesIdle() bool {
	r.regMu.Lock()
	defer r.regMu.Unlock()
	for _, s := range r.sessions {
		o := &s.out
		o.mu.Lock()
		busy := o.writing || o.pending() || o.scheduled.Load() || o.inTransp.Load() > 0
		o.mu.Unlock()
		if busy {
			return false
		}
	}
	return true
}
