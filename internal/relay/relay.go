package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/policy"
	"github.com/petrel-relay/petrel/internal/store"
)

// Options are the relay's collaborators. Store is required.
type Options struct {
	Store    store.Store
	Verifier nostr.Verifier // default nostr.DefaultVerifier()
	Logger   *slog.Logger   // default slog.Default()
	Now      func() time.Time
	Info     Info // NIP-11 information

	// Policy configures the write lists, the rate limits, the plugin and
	// the NIP-13 minimum proof of work (the [policy] section). The zero
	// value switches them all off.
	Policy policy.Config
	// Persister keeps what the NIP-86 management API changes: the dynamic
	// layer of the write lists and the relay's name, description and
	// icon. Default: in memory (changes are lost at restart).
	Persister policy.Persister
	// Plugin, if set, is used instead of starting Policy.Plugin; the relay
	// does not close it.
	Plugin *policy.Plugin
	// Bus, if set, carries the events this node accepts to the other nodes
	// of a cluster (internal/cluster); events the other nodes accepted come
	// back through Relay.Publish. Nil: a single node.
	Bus Bus
	// PolicyRefresh, if positive, is how often the NIP-86 state (the
	// write lists' dynamic layer, the relay's name, description and icon)
	// is read again from Persister: with a store several nodes share, so
	// that a ban made through one node reaches the others (petrel serve
	// sets it to 2s on PostgreSQL). Zero: read at start only. A Bus that
	// is a PolicyHinter makes it at once after a change through another
	// node.
	PolicyRefresh time.Duration
}

// PolicyHinter is implemented by a Bus that carries hints that the
// NIP-86 state changed (the cluster's bridge): the node a change was
// made through says so (Relay.PolicyChanged), and the others read the
// state again at once instead of at their next PolicyRefresh. A hint may
// be lost; the periodic reading stays.
type PolicyHinter interface {
	// HintPolicy tells the other nodes that the NIP-86 state changed.
	// It must not block.
	HintPolicy()
	// OnPolicyHint sets f to be called when another node's hint
	// arrives. relay.New calls it, before the bus starts; f does not
	// block.
	OnPolicyHint(f func())
}

// RateSharer is implemented by a Bus that carries the rate limits'
// spending between nodes (the cluster's bridge), so that a client spread
// over several nodes gets one node's limits, not one per node: every
// rateShareInterval the relay hands it what its limits took
// (policy.RateLimits.Spent), and the bridge hands the relay what the
// other nodes' took (policy.RateLimits.Debit). A message may be lost: a
// client then gets that much more.
type RateSharer interface {
	// ShareRates sends msg to the other nodes. It must not block.
	ShareRates(msg []byte)
	// ShareLimit returns the largest message ShareRates can send now (the
	// NATS server's max_payload, less what the bridge adds), or 0 when
	// no limit is known; the relay cuts its messages to it.
	ShareLimit() int
	// OnRates sets f to be called with each message another node sent.
	// relay.New calls it, before the bus starts; f does not block.
	OnRates(f func(msg []byte))
}

// ConnSharer is implemented by a Bus that carries each node's
// connections per client address between nodes (the cluster's bridge),
// so that the server's max_connections_per_ip holds for the cluster, not
// once per node (internal/server's connshare.go says what a message
// holds). A message may be lost; the next one replaces it.
type ConnSharer interface {
	// ShareConns sends msg to the other nodes. It must not block.
	ShareConns(msg []byte)
	// ShareLimit is RateSharer's: the largest message ShareConns can send
	// now, or 0 when no limit is known.
	ShareLimit() int
	// OnConns sets f to be called with each message another node sent,
	// with that node's origin (the same for each message of one run of
	// it). It may be called at any time; f does not block.
	OnConns(f func(origin string, msg []byte))
}

// Bus is the relay's side of a cluster's live bus.
type Bus interface {
	// Publish sends an event this node accepted to the other nodes: a
	// stored event after its commit, with the commit position its store
	// gave it (store.SaveResult.Seq), or an ephemeral event (seq 0). It is
	// called by the dispatcher, once per event, after the event's OK and
	// local fan-out are queued, in commit order; it must not block (a bus
	// that cannot take an event now drops it, and the other nodes catch up
	// from the store). ev and ev.Raw are not modified after the call, so
	// Publish may keep them.
	Publish(ev *nostr.Event, seq uint64)
}

// BusReporter is implemented by a Bus with figures of its own: /stats
// shows Report under "cluster", /metrics each of Gauges.
type BusReporter interface {
	// Report returns a JSON-encodable snapshot of the bus's figures.
	Report() any
	// Gauges returns the numeric figures, each named in snake_case
	// (exported as petrel_cluster_<name>) with a one-line help.
	Gauges() []BusGauge
}

// BusGauge is one numeric figure of a BusReporter. Counter marks a value
// that only grows (exported as a Prometheus counter).
type BusGauge struct {
	Name, Help string
	Value      float64
	Counter    bool
}

// FanoutGate is implemented by a Bus that de-duplicates what a node fans
// out across the paths an event can reach it by (accepted here, heard on
// the bus, replayed from the store by a catch-up). The dispatcher asks it
// before fanning out each stored event, so the decision is made in the
// one place where every path meets, in fan-out order.
type FanoutGate interface {
	// FirstFanout reports whether ev is to be fanned out here: false if
	// this node fanned it out already. local reports that this node
	// accepted it (its OK and Bus.Publish happen either way). Called on
	// the dispatcher goroutine; it must not block.
	FirstFanout(ev *nostr.Event, local bool) bool
}

// Relay is the protocol engine shared by all sessions.
type Relay struct {
	// cfg has the LiveKeys settings zeroed, so that a read of them
	// there, not in live, fails every test of the limit.
	cfg        Config
	live       atomic.Pointer[liveConfig]
	liveChange sync.Mutex // ReloadLimits
	store      store.Store
	pre        store.Prechecker   // store, if it implements it; else nil
	avail      store.Availability // likewise
	verifier   nostr.Verifier
	log        *slog.Logger
	now        func() time.Time

	idx      *index
	flusher  *flusher
	queries  *queryScheduler
	ingest   *ingest
	dispatch *dispatcher
	// behind checks held events (optimistic.go): nil unless the store
	// implements store.Unverified. optimistic: events are held before
	// their check (Config.VerifyMode, and nothing that needs the
	// signature first: a write-policy plugin, the per-pubkey rate limit).
	behind     *behind
	optimistic bool

	stats        Stats
	OKLatency    prometheus.Histogram // EVENT received -> OK queued
	QueryLatency prometheus.Histogram // REQ received -> EOSE queued
	// OKStages splits OKLatency for events that went to the store (see
	// OKStageNames): the same buckets, one histogram a stage.
	OKStages [len(OKStageNames)]prometheus.Histogram
	okTrace  okTrace // StartOKTrace (oktrace.go)

	searchOK bool // the store answers NIP-50 search filters

	zc     Compression // compressed EVENT frames (compress.go); set before sessions start
	zcache *bodyCache  // recent compressed bodies; nil: none

	inflight atomic.Int64 // EVENTs admitted and not yet answered, relay-wide
	wait     waitValve    // Config.MaxEventWait

	infoMu sync.RWMutex
	info   Info
	// infoChange serializes the changes of info that read it first
	// (ChangeInfo, ReloadInfo), so that none is lost to another.
	infoChange sync.Mutex
	policyKick chan struct{} // another node's NIP-86 change: refresh now; nil without PolicyRefresh
	rateShare  RateSharer    // the bus, when it shares the rate limits' spending; nil: not

	regMu       sync.Mutex
	sessions    []*Session
	closedPeaks queuePeaks // high-water marks of closed sessions; guarded by regMu

	queryBytesPeak atomic.Int64 // high-water mark of stats.QueryBytesQueued

	pol  policySet    // write policy and read protection (policy.go, auth.go)
	bus  Bus          // nil: a single node
	gate FanoutGate   // bus, if it implements it; else nil
	own  nostr.OwnURL // Config.URL normalized; zero: loopback hosts only

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed sync.Once
}

// Check reports what New would refuse in c whatever the store, all of
// it, without starting anything (petrel serve --check): an unknown
// verify_mode, a url that is not a relay's own ws:// or wss:// URL.
func (c Config) Check() error {
	c = c.Normalize()
	var errs []error
	switch c.VerifyMode {
	case VerifySync, VerifyOptimistic:
	default:
		errs = append(errs, fmt.Errorf("relay: verify_mode %q: want %q or %q", c.VerifyMode, VerifySync, VerifyOptimistic))
	}
	if _, err := nostr.ParseOwnURL(c.URL); err != nil {
		errs = append(errs, fmt.Errorf("relay: url: %w", err))
	}
	return errors.Join(errs...)
}

// New starts a relay engine over opts.Store with cfg (normalized).
func New(cfg Config, opts Options) (*Relay, error) {
	if opts.Store == nil {
		return nil, errors.New("relay: a store is required")
	}
	cfg = cfg.Normalize()
	if err := errors.Join(cfg.Check(), opts.Info.Check()); err != nil {
		return nil, err
	}
	if cfg.VerifyMode == VerifyOptimistic {
		if _, ok := opts.Store.(store.Unverified); !ok {
			return nil, errors.New("relay: verify_mode optimistic needs a store that can hold unverified events")
		}
	}
	r := &Relay{
		cfg:      cfg,
		store:    opts.Store,
		verifier: opts.Verifier,
		log:      opts.Logger,
		now:      opts.Now,
		idx:      newIndex(),
		info:     opts.Info.normalize(),
		bus:      opts.Bus,
	}
	r.gate, _ = opts.Bus.(FanoutGate)
	r.rateShare, _ = opts.Bus.(RateSharer)
	r.live.Store(newLive(cfg))
	r.cfg = withLive(cfg, Config{})
	r.pre, _ = opts.Store.(store.Prechecker)
	r.avail, _ = opts.Store.(store.Availability)
	if r.verifier == nil {
		r.verifier = nostr.DefaultVerifier()
	}
	if sr, ok := r.store.(store.Searcher); ok {
		r.searchOK = sr.SupportsSearch()
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	if r.now == nil {
		r.now = time.Now
	}
	r.own, _ = nostr.ParseOwnURL(cfg.URL) // checked
	r.initProtected()
	if err := r.initPolicy(opts); err != nil {
		return nil, err
	}
	r.stats.start = time.Now()
	r.OKLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "petrel", Name: "ok_latency_seconds",
		Help:    "Time from an EVENT's arrival to its OK being queued.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	})
	r.QueryLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "petrel", Name: "query_latency_seconds",
		Help:    "Time from a REQ's arrival to its EOSE being queued.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	})
	for i, name := range OKStageNames {
		r.OKStages[i] = prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "petrel", Name: "ok_stage_seconds",
			Help:        "Where the OK latency of an EVENT that went to the store goes, by stage: verify (arrival to handed to the store, in its turn), store (handed over to the store's reply: committed, duplicate or failed), dispatch (the reply to OK queued).",
			Buckets:     prometheus.ExponentialBuckets(0.0001, 2, 16),
			ConstLabels: prometheus.Labels{"stage": name},
		})
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.flusher = newFlusher(max(2, cfg.QueryWorkers))
	r.dispatch = newDispatcher(r)
	r.queries = newQueryScheduler(r)
	if u, ok := r.store.(store.Unverified); ok {
		r.behind = newBehind(r, u)
		r.optimistic = cfg.VerifyMode == VerifyOptimistic
		if r.optimistic && (r.pol.plugin != nil || r.pol.limEventPK.Load() != nil) {
			r.optimistic = false
			r.log.Warn("relay: verify_mode optimistic is off: a write-policy plugin and the per-pubkey event rate limit need the signature checked first")
		}
	}
	r.wait.max = r.cfg.MaxEventWait
	r.ingest = newIngest(r)
	r.wg.Add(1)
	go r.sweep()
	if r.rateShare != nil {
		r.rateShare.OnRates(r.debitRates)
		r.wg.Add(1)
		go r.shareRates()
	}
	if opts.PolicyRefresh > 0 {
		r.policyKick = make(chan struct{}, 1)
		if h, ok := opts.Bus.(PolicyHinter); ok {
			h.OnPolicyHint(r.kickPolicy)
		}
		r.wg.Add(1)
		go r.refreshPolicy(opts.PolicyRefresh)
	}
	return r, nil
}

// Bus returns the bus the relay was given (nil: a single node).
func (r *Relay) Bus() Bus { return r.bus }

// Config returns the normalized configuration, with the live limits as
// they are now (ReloadLimits).
func (r *Relay) Config() Config { return r.live.Load().Config }

// Store returns the relay's store.
func (r *Relay) Store() store.Store { return r.store }

// VerifierName names the signature verifier in use.
func (r *Relay) VerifierName() string { return r.verifier.Name() }

// Stats returns a snapshot of the counters.
func (r *Relay) Stats() Snapshot {
	s := r.stats.snapshot()
	if r.behind != nil {
		s.QuarantinedPubKeys = r.behind.nQuar.Load()
	}
	s.Verifier = r.verifier.Name()
	st := r.store.Stats()
	s.DBSizeBytes = st.SizeBytes
	s.SearchDeadPostings = st.SearchDeadPostings
	s.IDFilterBytes = st.IDFilterBytes
	s.StoreBackground, s.StorePostgres = st.Background, st.Postgres
	s.StoreBackend = st.Backend
	s.StoreUnavailable, s.StoreErrors = st.Unavailable, st.Errors
	s.StoreDiskFull, s.StoreFreeBytes = st.DiskFull, -1
	if st.DiskSizeBytes > 0 {
		s.StoreFreeBytes = st.DiskFreeBytes
	}
	if br, ok := r.bus.(BusReporter); ok {
		s.Cluster = br.Report()
	}
	s.SubscriptionsActive = int64(r.idx.count())
	s.NegStats = r.NegStats()
	s.EventsInflight = r.inflight.Load()
	s.StoreEvents = st.Events
	s.StoreCommits = st.Commits
	s.DiskFreeBytes, s.DiskSizeBytes = st.DiskFreeBytes, st.DiskSizeBytes
	s.WALSpares, s.WALSparesReady = st.WALSpares, st.WALSparesReady
	s.WALSparesUsed, s.WALLogsUnspared = st.WALSparesUsed, st.WALLogsUnspared
	s.VerifyQueueDepth = int64(len(r.ingest.queue))
	s.VerifyQueueCapacity = int64(cap(r.ingest.queue))
	s.OKLatency = summarize(r.OKLatency)
	s.QueryLatency = summarize(r.QueryLatency)
	s.OKStages = make(map[string]LatencySummary, len(OKStageNames))
	for i, name := range OKStageNames {
		s.OKStages[name] = summarize(r.OKStages[i])
	}
	s.OutQueueBytes = r.OutQueueBytes()
	s.Policy = r.PolicyStats()
	return s
}

// BusGauges returns the live bus's numeric figures, or nil for a single
// node (or a bus without figures).
func (r *Relay) BusGauges() []BusGauge {
	if br, ok := r.bus.(BusReporter); ok {
		return br.Gauges()
	}
	return nil
}

// InflightEvents returns the number of EVENTs admitted and not yet
// answered, relay-wide.
func (r *Relay) InflightEvents() int64 { return r.inflight.Load() }

// CountRejectedConnection records a connection refused before a session
// existed (connection limits).
func (r *Relay) CountRejectedConnection(perIP bool) {
	r.stats.ConnectionsRejected.Add(1)
	if perIP {
		r.stats.LimitTrips[limConnectionsPerIP].Add(1)
	} else {
		r.stats.LimitTrips[limConnections].Add(1)
	}
}

// CountOversizedMessage records a frame refused by the transport for
// exceeding MaxMessageBytes.
func (r *Relay) CountOversizedMessage() { r.stats.LimitTrips[limMessageBytes].Add(1) }

func (r *Relay) countReject(p nostr.Prefix) { r.stats.Rejected[reasonIndex(p)].Add(1) }

func (r *Relay) register(s *Session) {
	r.regMu.Lock()
	s.slot = int32(len(r.sessions))
	r.sessions = append(r.sessions, s)
	r.regMu.Unlock()
}

func (r *Relay) unregister(s *Session, peak queuePeaks) {
	r.regMu.Lock()
	defer r.regMu.Unlock()
	r.closedPeaks.merge(peak)
	i := int(s.slot)
	if i < 0 || i >= len(r.sessions) || r.sessions[i] != s {
		return
	}
	last := len(r.sessions) - 1
	r.sessions[i] = r.sessions[last]
	r.sessions[i].slot = int32(i)
	r.sessions[last] = nil
	r.sessions = shrinkRegistry(r.sessions[:last])
	s.slot = -1
}

// registryShrinkMin is the capacity below which the session registry is
// never reallocated smaller.
const registryShrinkMin = 1024

// shrinkRegistry returns list in a smaller array once it uses less than
// a quarter of its capacity (half of the new capacity stays free, so a
// shrink is not undone by the next few registrations): after a peak of a
// million connections the registry would otherwise keep 8 MB of pointer
// slots for good. Amortised O(1) per removal, like append's growth.
func shrinkRegistry(list []*Session) []*Session {
	if cap(list) <= registryShrinkMin || len(list) >= cap(list)/4 {
		return list
	}
	return append(make([]*Session, 0, max(2*len(list), registryShrinkMin)), list...)
}

// forEachSession calls fn for a snapshot of the registered sessions.
func (r *Relay) forEachSession(fn func(*Session)) {
	r.regMu.Lock()
	list := make([]*Session, len(r.sessions))
	copy(list, r.sessions)
	r.regMu.Unlock()
	for _, s := range list {
		fn(s)
	}
}

// forEachSessionBuf is forEachSession with the copy of the list in *buf,
// reused from call to call: the sweeper runs it every pass, and a fresh
// copy each time (8 bytes a connection) was garbage that an idle relay's
// heap grows with until the next collection.
func (r *Relay) forEachSessionBuf(buf *[]*Session, fn func(*Session)) {
	r.regMu.Lock()
	list := append((*buf)[:0], r.sessions...)
	r.regMu.Unlock()
	for _, s := range list {
		fn(s)
	}
	clear(list) // keep no closed session alive until the next pass
	*buf = list[:0]
}

// Sessions returns the number of live sessions.
func (r *Relay) Sessions() int {
	r.regMu.Lock()
	defer r.regMu.Unlock()
	return len(r.sessions)
}

// releaseQueryBytes returns n stored-query bytes to the relay-wide budget
// and resumes globally parked queries when it falls under half.
func (r *Relay) releaseQueryBytes(n int64) {
	if n == 0 {
		return
	}
	v := r.stats.QueryBytesQueued.Add(-n)
	if v < r.cfg.QueryBytesTotal/2 {
		r.queries.resumeGlobal()
	}
}

// sweep is the one goroutine that enforces idle and drain deadlines: it
// pings connections idle for half the idle timeout, closes those idle for
// all of it, and closes connections whose out-queue made no progress for
// DrainTimeout. It runs every few seconds with jitter, so no connection
// needs a timer of its own.
func (r *Relay) sweep() {
	defer r.wg.Done()
	base := min(r.cfg.DrainTimeout, r.cfg.IdleTimeout) / 6
	if r.cfg.IdleTimeout < 0 {
		base = r.cfg.DrainTimeout / 6
	}
	base = min(max(base, 50*time.Millisecond), 5*time.Second)
	ping := appendWSHeader(nil, opPing, 0)
	var list []*Session
	for {
		jitter := time.Duration(rand.Int64N(int64(base)/5 + 1))
		select {
		case <-r.ctx.Done():
			return
		case <-time.After(base - base/10 + jitter):
		}
		now := r.now()
		r.forEachSessionBuf(&list, func(s *Session) {
			if s.closed.Load() || s.closing.Load() {
				return
			}
			if r.cfg.IdleTimeout > 0 {
				idle := s.idleFor(now)
				if idle > r.cfg.IdleTimeout {
					s.closeFor(CloseGoingAway, "idle timeout", limIdleTimeout)
					return
				}
				if idle > r.cfg.IdleTimeout/2 && !s.pinged.Load() {
					s.pinged.Store(true)
					o := &s.out
					o.mu.Lock()
					idleQ := !o.pending() && o.inTransp.Load() <= 0
					o.appendRawFrame(ping)
					if idleQ {
						// The drain deadline counts from the ping, on
						// the relay's clock (the one it is checked on).
						o.touch(now)
					}
					o.mu.Unlock()
					r.flusher.schedule(s)
				}
			}
			o := &s.out
			o.mu.Lock()
			stuck := o.stuck(now, r.cfg.DrainTimeout)
			o.mu.Unlock()
			if stuck {
				s.closeFor(ClosePolicy, "not reading: out-queue stuck", limDrainTimeout)
			}
		})
	}
}

// Shutdown stops the engine: new messages are ignored, queued events are
// committed and answered, out-queues get up to ctx's deadline to drain, then
// every connection is closed with 1001. The store is not closed.
func (r *Relay) Shutdown(ctx context.Context) {
	r.closed.Do(func() {
		r.ingest.close() // verify queue drained, submitted events committed
		if r.behind != nil {
			r.behind.close() // held events checked, released or rejected
		}
		r.dispatch.close() // OKs and fan-out written to out-queues
		r.queries.close()  // stored queries stopped
		for {              // let out-queues drain
			busy := false
			r.forEachSession(func(s *Session) {
				s.out.mu.Lock()
				p := s.out.pending()
				// A flusher may be between takeChunk and the transport's
				// Write, and the transport may still hold bytes the
				// socket has not taken: closing now would lose them.
				inFlight := s.out.writing || s.out.inTransp.Load() > 0
				s.out.mu.Unlock()
				if p {
					r.flusher.schedule(s)
				}
				if p || inFlight {
					busy = true
				}
			})
			if !busy || ctx.Err() != nil {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
		}
		r.forEachSession(func(s *Session) { s.close(CloseGoingAway, "relay shutting down") })
		r.cancel()
		r.wg.Wait()
		r.flusher.close()
	})
}
