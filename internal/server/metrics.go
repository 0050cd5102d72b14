package server

import (
	"sync"

	"github.com/petrel-relay/petrel/internal/relay"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// initMetrics registers the relay's counters (read from its snapshot at
// scrape time, so the hot paths only touch atomics) and histograms.
func (s *Server) initMetrics() {
	makeDescs()
	if s.registry == nil {
		s.registry = prometheus.NewRegistry()
		s.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	s.registry.MustRegister(&statsCollector{s: s}, busCollector{s.relay}, s.relay.OKLatency, s.relay.QueryLatency)
	for _, h := range s.relay.OKStages {
		s.registry.MustRegister(h)
	}
	s.metrics = promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{})
}

type statsCollector struct{ s *Server }

// descs lists every descriptor desc made, for Describe.
var descs []*prometheus.Desc

func desc(name, help string, labels ...string) *prometheus.Desc {
	d := prometheus.NewDesc("petrel_"+name, help, labels, nil)
	descs = append(descs, d)
	return d
}

// The descriptors of the relay's metrics, made by makeDescs.
var (
	dConnActive   *prometheus.Desc
	dConnTotal    *prometheus.Desc
	dConnRejected *prometheus.Desc
	dSlots        *prometheus.Desc
	dSlotsReserve *prometheus.Desc
	dSlotsRemote  *prometheus.Desc
	dProxyNoAddr  *prometheus.Desc
	dReloads      *prometheus.Desc
	dReloadOK     *prometheus.Desc
	dProxyHeaders *prometheus.Desc
	dProxyRefused *prometheus.Desc
	dSubsActive   *prometheus.Desc
	dSubsTotal    *prometheus.Desc
	dEvRecv       *prometheus.Desc
	dEvAcc        *prometheus.Desc
	dEvDup        *prometheus.Desc
	dEvEph        *prometheus.Desc
	dEvRej        *prometheus.Desc
	dDropped      *prometheus.Desc
	dDBErr        *prometheus.Desc
	dMsgIn        *prometheus.Desc
	dMsgOut       *prometheus.Desc
	dBytesIn      *prometheus.Desc
	dBytesOut     *prometheus.Desc
	dDeliv        *prometheus.Desc
	dZFrames      *prometheus.Desc
	dZBytes       *prometheus.Desc
	dZSaved       *prometheus.Desc
	dZHits        *prometheus.Desc
	dStored       *prometheus.Desc
	dQueries      *prometheus.Desc
	dCounts       *prometheus.Desc
	dNotices      *prometheus.Desc
	dLimits       *prometheus.Desc
	dQBytes       *prometheus.Desc
	dOutQBytes    *prometheus.Desc
	dDBSize       *prometheus.Desc
	dStoreEvents  *prometheus.Desc
	dCommits      *prometheus.Desc
	dDiskFree     *prometheus.Desc
	dDiskSize     *prometheus.Desc
	dSpares       *prometheus.Desc
	dSparesReady  *prometheus.Desc
	dSparesUsed   *prometheus.Desc
	dUnspared     *prometheus.Desc
	dFlushes      *prometheus.Desc
	dFlushBytes   *prometheus.Desc
	dCompactions  *prometheus.Desc
	dCompactBytes *prometheus.Desc
	dCompactDebt  *prometheus.Desc
	dL0Sublevels  *prometheus.Desc
	dL0Tables     *prometheus.Desc
	dStalls       *prometheus.Desc
	dStallSecs    *prometheus.Desc
	dPGRetries    *prometheus.Desc
	dPGInDoubt    *prometheus.Desc
	dPGLate       *prometheus.Desc
	dPoolMax      *prometheus.Desc
	dPoolConns    *prometheus.Desc
	dPoolAcquired *prometheus.Desc
	dPoolIdle     *prometheus.Desc
	dPoolAcquires *prometheus.Desc
	dPoolWaits    *prometheus.Desc
	dPoolWaitSecs *prometheus.Desc
	dPoolCanceled *prometheus.Desc
	dPoolOpened   *prometheus.Desc
	dVerifyDepth  *prometheus.Desc
	dVerifyCap    *prometheus.Desc
	dDeadPost     *prometheus.Desc
	dIDFilter     *prometheus.Desc
	dStoreDown    *prometheus.Desc
	dStoreFull    *prometheus.Desc
	dStoreErrs    *prometheus.Desc
	dVerifier     *prometheus.Desc
	dNegOpened    *prometheus.Desc
	dNegActive    *prometheus.Desc
	dNegRefused   *prometheus.Desc
	dNegTimedOut  *prometheus.Desc
	dNegMessages  *prometheus.Desc
	dNegItems     *prometheus.Desc
	dInflight     *prometheus.Desc
	dAuth         *prometheus.Desc
	dConnBlocked  *prometheus.Desc
	dEvShadow     *prometheus.Desc
	dEvHeld       *prometheus.Desc
	dEvHeldBad    *prometheus.Desc
	dEvHeldRecov  *prometheus.Desc
	dHeldPending  *prometheus.Desc
	dQuarantined  *prometheus.Desc
	dReqRefused   *prometheus.Desc
	dPlugin       *prometheus.Desc
)

// makeDescs makes the descriptors, once, when a relay first sets up its
// metrics: not at package initialisation, where every petrel command (a
// client command included) would pay for them (docs/BENCHMARKS.md,
// issue 15).
var makeDescs = sync.OnceFunc(func() {
	dConnActive = desc("connections_active", "Open WebSocket sessions.")
	dConnTotal = desc("connections_total", "WebSocket sessions opened since start.")
	dConnRejected = desc("connections_rejected_total", "Connections refused by connection limits.")
	dSlots = desc("connection_slots_active", "TCP connections holding a slot (incl. not yet upgraded).")
	dSlotsReserve = desc("connection_slots_http_reserve", "Connections admitted past max_connections for plain HTTP (server.http_reserve).")
	dSlotsRemote = desc("connection_slots_remote_addresses", "Client addresses other nodes hold many connections for, counted against max_connections_per_ip here.")
	dProxyNoAddr = desc("proxy_header_missing_total", "WebSocket upgrades from a trusted proxy without a usable client address header.")
	dReloads = desc("config_reloads_total", "Configuration reloads (SIGHUP), applied or refused (nothing changed).", "result")
	dReloadOK = desc("config_last_reload_successful", "0 if the last configuration reload was refused, else 1.")
	dProxyHeaders = desc("proxy_protocol_headers_total", "PROXY protocol headers read from trusted proxies, by command: forwarded (names the client), local, unspec (no usable client address).", "command")
	dProxyRefused = desc("proxy_protocol_refused_total", "Connections closed for their PROXY protocol header, by reason: untrusted (a header from a peer not in trusted_proxies), missing, invalid, incomplete (closed before the header was complete).", "reason")
	dSubsActive = desc("subscriptions_active", "Open subscriptions.")
	dSubsTotal = desc("subscriptions_total", "Subscriptions opened since start.")
	dEvRecv = desc("events_received_total", "EVENT messages received.")
	dEvAcc = desc("events_accepted_total", "Events committed to the store.")
	dEvDup = desc("events_duplicate_total", "Events answered with the duplicate: prefix: already stored (OK true) or an older version of a stored replaceable or addressable event (OK false).")
	dEvEph = desc("events_ephemeral_total", "Ephemeral events accepted and fanned out.")
	dEvRej = desc("events_rejected_total", "Events refused, by NIP-01 reason prefix.", "reason")
	dDropped = desc("buffers_dropped_total", "Subscriptions closed because the client's out-queue overflowed.")
	dDBErr = desc("db_errors_total", "Store errors.")
	dMsgIn = desc("messages_in_total", "WebSocket messages received.")
	dMsgOut = desc("messages_out_total", "Relay messages queued to clients.")
	dBytesIn = desc("received_bytes_total", "WebSocket message bytes received.")
	dBytesOut = desc("sent_bytes_total", "Bytes written to sockets.")
	dDeliv = desc("live_deliveries_total", "Live events delivered to subscriptions.")
	dZFrames = desc("frames_compressed_total", "EVENT frames sent compressed (permessage-deflate).")
	dZBytes = desc("bytes_compressed_out_total", "Bytes of the EVENT frames sent compressed.")
	dZSaved = desc("bytes_compression_saved_total", "Bytes compression saved over sending those frames plain.")
	dZHits = desc("compression_cache_hits_total", "Event bodies taken compressed from the cache instead of compressed again.")
	dStored = desc("stored_events_sent_total", "Stored events sent in answer to REQ.")
	dQueries = desc("queries_total", "REQ subscriptions opened.")
	dCounts = desc("counts_total", "COUNT requests.")
	dNotices = desc("notices_total", "NOTICE messages sent.")
	dLimits = desc("limits_tripped_total", "Times a limit refused or clamped something, by limit.", "limit")
	dQBytes = desc("query_queued_bytes", "Stored-query bytes waiting in out-queues, relay-wide.")
	dOutQBytes = desc("out_queue_bytes", "Bytes waiting to be written to clients, relay-wide: out-queues, live events held for subscriptions in their stored phase, and bytes handed to the transport.")
	dDBSize = desc("db_size_bytes", "Bytes used by the store.")
	dStoreEvents = desc("store_events", "Events in the store (exact for pebble; PostgreSQL: the planner's estimate above 100,000).")
	dCommits = desc("store_commits_total", "Synced group commits of the store's writer, with PostgreSQL its write transactions (stored events over commits: the events sharing a commit's fsync).")
	dDiskFree = desc("store_disk_free_bytes", "Space available on the file system of the embedded store (absent for PostgreSQL).")
	dDiskSize = desc("store_disk_size_bytes", "Size of the file system of the embedded store (absent for PostgreSQL).")
	dSpares = desc("store_wal_spares", "Write-ahead log spares the embedded store keeps (store.wal_spares; absent when it keeps none).")
	dSparesReady = desc("store_wal_spares_ready", "Write-ahead log spares written and waiting for pebble's next new log.")
	dSparesUsed = desc("store_wal_spares_used_total", "New write-ahead logs that took a spare.")
	dUnspared = desc("store_wal_logs_unspared_total", "New write-ahead logs that found no spare ready and were made new files (each commit's sync into one also writes the file's inode).")
	dFlushes = desc("store_flushes_total", "Memtable flushes of the embedded store.")
	dFlushBytes = desc("store_flush_bytes_total", "Bytes the embedded store's memtable flushes wrote.")
	dCompactions = desc("store_compactions_total", "Compactions of the embedded store.")
	dCompactBytes = desc("store_compaction_bytes_total", "Bytes the embedded store's compactions wrote (over store_flush_bytes_total: how often a flushed byte is written again).")
	dCompactDebt = desc("store_compaction_debt_bytes", "Bytes the embedded store's compactions must still rewrite to bring every level within its size target (pebble's estimate).")
	dL0Sublevels = desc("store_l0_sublevels", "Depth of the embedded store's level 0 (a query may read a table of each; commits stall at 24).")
	dL0Tables = desc("store_l0_tables", "Tables in the embedded store's level 0.")
	dStalls = desc("store_write_stalls_total", "Times the embedded store stopped commits until a flush or compaction caught up.")
	dStallSecs = desc("store_write_stall_seconds_total", "Time the embedded store's commits were stopped by write stalls, the one in progress included.")
	dPGRetries = desc("store_write_retries_total", "PostgreSQL write transactions tried again (a deadlock, a serialization failure, a unique violation between nodes, a lost connection).")
	dPGInDoubt = desc("store_commits_in_doubt_committed_total", "PostgreSQL write transactions whose COMMIT reply was lost with the connection, found committed in time to answer their events stored.")
	dPGLate = desc("store_late_committed_events_total", "Events answered failed (their commit in doubt) that PostgreSQL reported committed later; they are fanned out then.")
	dPoolMax = desc("store_pool_max_conns", "Size limit of the PostgreSQL store's connection pool (store.postgres_max_conns).")
	dPoolConns = desc("store_pool_conns", "Connections the PostgreSQL store's pool holds open.")
	dPoolAcquired = desc("store_pool_acquired_conns", "Connections of the PostgreSQL store's pool in use.")
	dPoolIdle = desc("store_pool_idle_conns", "Idle connections of the PostgreSQL store's pool.")
	dPoolAcquires = desc("store_pool_acquires_total", "Connections taken from the PostgreSQL store's pool (each query, count and write transaction takes one).")
	dPoolWaits = desc("store_pool_acquire_waits_total", "Connections taken from the PostgreSQL store's pool that found none idle and waited for one to be made or given back.")
	dPoolWaitSecs = desc("store_pool_acquire_wait_seconds_total", "Time spent waiting for a connection of the PostgreSQL store's pool.")
	dPoolCanceled = desc("store_pool_acquires_canceled_total", "Waits for a connection of the PostgreSQL store's pool given up (a query's deadline passed).")
	dPoolOpened = desc("store_pool_conns_opened_total", "Connections the PostgreSQL store's pool made (beyond its size: the database or the network closed some).")
	dVerifyDepth = desc("verify_queue_depth", "EVENTs waiting for signature verification.")
	dVerifyCap = desc("verify_queue_capacity", "Size of the verify queue (relay.verify_queue); EVENTs past it are refused rate-limited.")
	dDeadPost = desc("search_dead_postings", "Search postings of removed events still in the index (petrel compact --rebuild-search clears them).")
	dIDFilter = desc("id_filter_bytes", "Memory of the store's filter of stored event ids (store.id_filter_bytes caps it).")
	dStoreDown = desc("store_unavailable", "1 while the store's database cannot be reached (its last operation failed to reach it).")
	dStoreFull = desc("store_disk_full", "1 while the store refuses writes for lack of disk space (store.min_free_bytes).")
	dStoreErrs = desc("store_errors_total", "Store operations that failed on a database error.")
	dVerifier = desc("verifier_info", "The signature verifier in use.", "verifier")
	dNegOpened = desc("neg_sessions_opened_total", "NIP-77 sessions opened.")
	dNegActive = desc("neg_sessions_active", "NIP-77 sessions open now.")
	dNegRefused = desc("neg_sessions_refused_total", "NEG-OPENs refused.")
	dNegTimedOut = desc("neg_sessions_timed_out_total", "NIP-77 sessions closed for idleness.")
	dNegMessages = desc("neg_messages_total", "NEG-MSGs answered.")
	dNegItems = desc("neg_items_held", "Items held by NIP-77 sessions, relay-wide.")
	dInflight = desc("events_inflight", "EVENTs admitted and not yet answered, relay-wide.")
	dAuth = desc("auth_total", "NIP-42 AUTH messages answered, by result.", "result")
	dConnBlocked = desc("connections_blocked_total", "Connections closed for a blocked address or a banned pubkey.")
	dEvShadow = desc("events_shadow_rejected_total", "Events answered OK but neither stored nor broadcast (plugin shadowReject).")
	dEvHeld = desc("events_held_total", "Events held unverified and answered OK before their signature check (verify_mode optimistic).")
	dEvHeldBad = desc("events_held_invalid_total", "Held events whose signature failed the check behind: removed, never served.")
	dEvHeldRecov = desc("events_held_recovered_total", "Events held by an earlier run, checked at start.")
	dHeldPending = desc("held_pending", "Held events not yet released or rejected.")
	dQuarantined = desc("quarantined_pubkeys", "Pubkeys whose events are verified before their OK after a held event of theirs failed.")
	dReqRefused = desc("requests_refused_total", "REQ, COUNT and NEG-OPEN refused by policy, by NIP-01 reason prefix.", "reason")
	dPlugin = desc("plugin_decisions_total", "Write-policy plugin outcomes, by outcome.", "outcome")
})

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	makeDescs()
	for _, d := range descs {
		ch <- d
	}
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	makeDescs()
	st := c.s.statsDoc()
	g := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	k := func(d *prometheus.Desc, v int64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	g(dConnActive, float64(st.ConnectionsActive))
	k(dConnTotal, st.ConnectionsTotal)
	k(dConnRejected, st.ConnectionsRejected)
	g(dSlots, float64(st.SlotsActive))
	g(dSlotsReserve, float64(st.SlotsReserve))
	g(dSlotsRemote, float64(st.SlotsRemoteAddresses))
	k(dProxyNoAddr, st.ProxyHeaderMissing)
	k(dReloads, st.ConfigReloads.Applied, "applied")
	k(dReloads, st.ConfigReloads.Refused, "refused")
	if st.ConfigReloads.LastRefused {
		g(dReloadOK, 0)
	} else {
		g(dReloadOK, 1)
	}
	pp := st.ProxyProtocol
	k(dProxyHeaders, pp.Forwarded, "forwarded")
	k(dProxyHeaders, pp.Local, "local")
	k(dProxyHeaders, pp.Unspec, "unspec")
	k(dProxyRefused, pp.Untrusted, "untrusted")
	k(dProxyRefused, pp.Missing, "missing")
	k(dProxyRefused, pp.Invalid, "invalid")
	k(dProxyRefused, pp.Incomplete, "incomplete")
	g(dSubsActive, float64(st.SubscriptionsActive))
	k(dSubsTotal, st.SubscriptionsTotal)
	k(dEvRecv, st.EventsReceived)
	k(dEvAcc, st.EventsAccepted)
	k(dEvDup, st.EventsDuplicate)
	k(dEvEph, st.EventsEphemeral)
	for r, v := range st.EventsRejected {
		k(dEvRej, v, r)
	}
	k(dDropped, st.BuffersDropped)
	k(dDBErr, st.DBErrors)
	k(dMsgIn, st.MessagesIn)
	k(dMsgOut, st.MessagesOut)
	k(dBytesIn, st.BytesIn)
	k(dBytesOut, st.BytesOut)
	k(dDeliv, st.Deliveries)
	k(dZFrames, st.FramesCompressed)
	k(dZBytes, st.BytesCompressed)
	k(dZSaved, st.BytesCompressionSaved)
	k(dZHits, st.BodyCacheHits)
	k(dStored, st.StoredSent)
	k(dQueries, st.Queries)
	k(dCounts, st.Counts)
	k(dNotices, st.Notices)
	for l, v := range st.LimitTrips {
		k(dLimits, v, l)
	}
	g(dQBytes, float64(st.QueryBytesQueued))
	g(dOutQBytes, float64(st.OutQueueBytes))
	g(dDBSize, float64(st.DBSizeBytes))
	g(dStoreEvents, float64(st.StoreEvents))
	k(dCommits, st.StoreCommits)
	if pg := st.StorePostgres; pg != nil {
		k(dPGRetries, pg.WriteRetries)
		k(dPGInDoubt, pg.InDoubtCommitted)
		k(dPGLate, pg.LateCommitted)
		g(dPoolMax, float64(pg.PoolMaxConns))
		g(dPoolConns, float64(pg.PoolConns))
		g(dPoolAcquired, float64(pg.PoolAcquiredConns))
		g(dPoolIdle, float64(pg.PoolIdleConns))
		k(dPoolAcquires, pg.PoolAcquires)
		k(dPoolWaits, pg.PoolAcquireWaits)
		ch <- prometheus.MustNewConstMetric(dPoolWaitSecs, prometheus.CounterValue, pg.PoolAcquireWaitSeconds)
		k(dPoolCanceled, pg.PoolAcquiresCanceled)
		k(dPoolOpened, pg.PoolConnsOpened)
	}
	if st.DiskSizeBytes > 0 {
		g(dDiskFree, float64(st.DiskFreeBytes))
		g(dDiskSize, float64(st.DiskSizeBytes))
	}
	if st.WALSpares > 0 {
		g(dSpares, float64(st.WALSpares))
		g(dSparesReady, float64(st.WALSparesReady))
		k(dSparesUsed, st.WALSparesUsed)
		k(dUnspared, st.WALLogsUnspared)
	}
	if bg := st.StoreBackground; bg != nil {
		k(dFlushes, bg.Flushes)
		k(dFlushBytes, bg.FlushBytes)
		k(dCompactions, bg.Compactions)
		k(dCompactBytes, bg.CompactionBytes)
		g(dCompactDebt, float64(bg.CompactionDebtBytes))
		g(dL0Sublevels, float64(bg.L0Sublevels))
		g(dL0Tables, float64(bg.L0Tables))
		k(dStalls, bg.WriteStalls)
		ch <- prometheus.MustNewConstMetric(dStallSecs, prometheus.CounterValue, bg.WriteStallSeconds)
	}
	g(dVerifyDepth, float64(st.VerifyQueueDepth))
	g(dVerifyCap, float64(st.VerifyQueueCapacity))
	g(dDeadPost, float64(st.SearchDeadPostings))
	g(dIDFilter, float64(st.IDFilterBytes))
	down := 0.0
	if st.StoreUnavailable {
		down = 1
	}
	g(dStoreDown, down)
	full := 0.0
	if st.StoreDiskFull {
		full = 1
	}
	g(dStoreFull, full)
	k(dStoreErrs, st.StoreErrors)
	g(dVerifier, 1, st.Verifier)
	k(dNegOpened, st.NegStats.Opened)
	g(dNegActive, float64(st.NegStats.Active))
	k(dNegRefused, st.NegStats.Refused)
	k(dNegTimedOut, st.NegStats.TimedOut)
	k(dNegMessages, st.NegStats.Messages)
	g(dNegItems, float64(st.NegStats.ItemsHeld))
	g(dInflight, float64(st.EventsInflight))
	k(dAuth, st.AuthAccepted, "accepted")
	k(dAuth, st.AuthRejected, "rejected")
	k(dConnBlocked, st.ConnectionsBlocked)
	k(dEvShadow, st.EventsShadowRejected)
	k(dEvHeld, st.EventsHeld)
	k(dEvHeldBad, st.EventsHeldInvalid)
	k(dEvHeldRecov, st.EventsHeldRecovered)
	g(dHeldPending, float64(st.HeldPending))
	g(dQuarantined, float64(st.QuarantinedPubKeys))
	for r, v := range st.RequestsRefused {
		k(dReqRefused, v, r)
	}
	if p := st.Policy.Plugin; p != nil {
		k(dPlugin, p.Accepted, "accepted")
		k(dPlugin, p.Rejected, "rejected")
		k(dPlugin, p.ShadowRejected, "shadow_rejected")
		k(dPlugin, p.Timeouts, "timeout")
		k(dPlugin, p.Failed, "failed")
		k(dPlugin, p.Refused, "refused")
	}
}

// busCollector exports the cluster bus's figures as petrel_cluster_<name>.
// Their set depends on the bus, so it is an unchecked collector (it
// describes nothing).
type busCollector struct {
	r interface{ BusGauges() []relay.BusGauge }
}

func (busCollector) Describe(chan<- *prometheus.Desc) {}

func (c busCollector) Collect(ch chan<- prometheus.Metric) {
	for _, g := range c.r.BusGauges() {
		typ := prometheus.GaugeValue
		if g.Counter {
			typ = prometheus.CounterValue
		}
		d := prometheus.NewDesc("petrel_cluster_"+g.Name, g.Help, nil, nil)
		ch <- prometheus.MustNewConstMetric(d, typ, g.Value)
	}
}
