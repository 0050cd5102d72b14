package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/relay"
)

// Deliver hands an event from another node to this node's relay for
// fan-out, with its commit position (0: never stored): relay.Relay's
// Publish. It may block (the relay's fan-out queue applies backpressure).
type Deliver func(ev *nostr.Event, seq uint64)

// Bridge connects one node's relay to the cluster's live bus, a NATS
// subject. It is the relay's Bus: Publish sends the events this node
// accepted; events other nodes accepted are handed to the relay through
// the Deliver function given to Start. When messages may have been lost
// (this node's connection dropped, a gap in another node's sequence, a
// node gone silent) it catches up from the store of record (Options.Feed).
//
// Lifecycle: New, then relay.New with the bridge as Options.Bus, then
// Start with the relay's Publish. To stop: StopDelivery (nothing more is
// handed to the relay), then the relay's Shutdown (its last events still
// go out on the bus), then Close. All methods are safe for concurrent
// use.
type Bridge struct {
	opts   Options
	log    *slog.Logger
	origin []byte // this node's origin header
	start  time.Time

	// Publishing: pubMu orders sequence numbers with queue sends.
	pubMu   sync.Mutex
	pubq    chan pubItem
	seq     uint64        // last bus sequence assigned; guarded by pubMu
	dropSeq atomic.Uint64 // highest sequence dropped before it reached NATS
	closing atomic.Bool   // Close began: Publish drops

	// What failed attempts to reach the bus and NATS's errors logged
	// lately (onConnectFailed, onError).
	failLog, errLog logLimit
	payloadWarned   atomic.Int64 // the max_payload checkPayload last warned of

	win *window
	rm  *removals
	st  counters

	droppedSeen atomic.Int64 // sub.Dropped() as last read
	lastOwnSent atomic.Int64 // send time of the last own message heard back

	policyHint func()                               // set by OnPolicyHint before Start; nil: none
	rates      func([]byte)                         // set by OnRates before Start; nil: none
	conns      atomic.Pointer[func(string, []byte)] // set by OnConns, at any time

	mu          sync.Mutex // guards the fields below
	nc          *nats.Conn
	sub         *nats.Subscription
	started     bool
	connected   bool
	outage      bool  // this node's connection is down (or not up yet)
	outageSince int64 // where the outage's catch-up starts, unix nanos, margin included
	connectedAt int64 // last (re)connect, unix nanos
	origins     map[string]*originState
	silentNow   int // origins currently silent
	checked     chan struct{}

	// Delivery into the relay: deliverMu is held for reading around each
	// call, so that StopDelivery can wait for the last one.
	deliverMu sync.RWMutex
	deliver   Deliver
	stopped   bool

	cu catchUp

	ctx    context.Context
	cancel context.CancelFunc
	quit   chan struct{} // closed by Close: the publisher drains and exits
	wg     sync.WaitGroup
	once   sync.Once

	// Test hooks (set before Start, read-only afterwards).
	dropIn  func(e *envelope) bool // drop a received message as if NATS had lost it
	dropOut func(seq uint64) bool  // drop an outgoing event as if NATS had refused it
	// onFirstConnect runs NATS's connect callback (given as run), so a
	// test can hold it back.
	onFirstConnect func(run func())
}

var _ relay.Bus = (*Bridge)(nil)

// pubItem is an event waiting in the publish queue.
type pubItem struct {
	ev     *nostr.Event
	commit uint64
	seq    uint64
}

// New checks opts and returns a bridge that is not connected yet. Publish
// may be called at once (events are queued, up to Options.PublishQueue).
func New(opts Options) (*Bridge, error) {
	o, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	var rb [8]byte
	if _, err := rand.Read(rb[:]); err != nil {
		return nil, fmt.Errorf("cluster: boot id: %w", err)
	}
	start := time.Now()
	b := &Bridge{
		opts:    o,
		log:     o.Logger.With("node", o.Node),
		origin:  originHeader(o.Node, binary.BigEndian.Uint64(rb[:]), start.UnixNano()),
		start:   start,
		pubq:    make(chan pubItem, o.PublishQueue),
		win:     newWindow(o.DedupMax, int64(o.DedupWindow)),
		rm:      newRemovals(max(o.DedupMax/16, 1024), int64(o.DedupWindow)),
		origins: make(map[string]*originState),
		checked: make(chan struct{}),
		quit:    make(chan struct{}),
	}
	b.cu.kick = make(chan struct{}, 1)
	b.ctx, b.cancel = context.WithCancel(context.Background())
	return b, nil
}

// Start connects to NATS, subscribes to the bus, and hands the events other
// nodes accept to deliver from then on. It does not wait for the server:
// if it cannot be reached, the bridge keeps trying in the background
// (forever), and catches up from the store once connected. It returns an
// error only for options NATS refuses, or when called twice.
func (b *Bridge) Start(deliver Deliver) error {
	b.mu.Lock()
	if b.started {
		b.mu.Unlock()
		return ErrStarted
	}
	b.started = true
	b.outage = true // until connected
	b.outageSince = b.start.UnixNano() - int64(b.opts.CatchUpMargin)
	b.mu.Unlock()
	b.deliverMu.Lock()
	b.deliver = deliver
	b.deliverMu.Unlock()

	o := b.opts
	sec, err := o.natsSecurity()
	if err != nil {
		close(b.checked)
		return err
	}
	nc, err := nats.Connect(o.URL, append(sec,
		nats.Name("petrel "+o.Node),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		// nats.go gives up after a server refuses the credentials twice;
		// a node keeps trying, so that credentials put right on the
		// server's side bring it back without a restart.
		nats.IgnoreAuthErrorAbort(),
		nats.ReconnectWait(o.ReconnectWait),
		nats.ReconnectJitter(o.ReconnectWait/10, o.ReconnectWait/10),
		nats.PingInterval(o.PingInterval),
		nats.MaxPingsOutstanding(o.MaxPingsOut),
		nats.ReconnectBufSize(o.ReconnectBuffer),
		nats.Timeout(o.ConnectTimeout),
		nats.FlusherTimeout(o.FlushTimeout),
		nats.NoCallbacksAfterClientClose(),
		nats.ConnectHandler(func(*nats.Conn) {
			// NATS runs its callbacks one at a time, in order, on one
			// goroutine, and this one is queued first whether the first
			// connect succeeds at once or after retries (nats.go
			// v1.55.0 Connect and doReconnect): waiting here holds the
			// disconnect, reconnect and error callbacks behind Start
			// as well, so none of them sees its half-set state.
			<-b.checked
			if h := b.onFirstConnect; h != nil {
				h(func() { b.onConnect(false) })
				return
			}
			b.onConnect(false)
		}),
		nats.ReconnectHandler(func(*nats.Conn) { b.onConnect(true) }),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) { b.onConnectFailed(err) }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { b.onDisconnect(err) }),
		nats.ErrorHandler(b.onError),
	)...)
	if err != nil {
		close(b.checked)
		return fmt.Errorf("cluster: connect %s: %w", RedactURL(o.URL), err)
	}
	sub, err := nc.Subscribe(o.Subject, b.onMsg)
	if err == nil {
		err = sub.SetPendingLimits(o.PendingMsgs, o.PendingBytes)
	}
	if err == nil {
		_, err = nc.Subscribe(policySubject(o.Subject), b.onPolicyMsg)
	}
	if err == nil {
		_, err = nc.Subscribe(ratesSubject(o.Subject), b.onRatesMsg)
	}
	if err == nil {
		_, err = nc.Subscribe(connsSubject(o.Subject), b.onConnsMsg)
	}
	if err != nil {
		close(b.checked)
		nc.Close()
		return fmt.Errorf("cluster: subscribe %q: %w", o.Subject, err)
	}
	// The subscription is live once the server has it, and until then
	// the server drops what other nodes publish: a round trip (the
	// flush's PING, behind the SUB) proves it, so that an event another
	// node publishes after Start returns reaches this node over the bus.
	connected := nc.IsConnected()
	var unproven error
	if connected {
		unproven = nc.FlushTimeout(o.FlushTimeout)
	}
	b.mu.Lock()
	b.nc, b.sub = nc, sub
	if connected && b.outage {
		// Connected at once: nothing was missed since New, unless the
		// round trip failed; then what may have been is caught up from
		// the store.
		b.outage, b.connected = false, true
		b.connectedAt = time.Now().UnixNano()
		if unproven != nil {
			b.addRequest(b.outageSince)
		}
	}
	b.mu.Unlock()
	close(b.checked)
	if connected {
		// Before Start returns, so that the warning comes with the
		// start-up lines; the connect callback's own check of this
		// server is then a no-op (checkPayload warns once a value).
		b.checkPayload(nc)
	}
	if unproven != nil {
		b.log.Warn("cluster: subscription not confirmed by the bus; catching up from the store", "err", unproven)
		b.kickCatchUp()
	}
	if !connected {
		b.st.lastOutageStart.Store(b.start.UnixNano())
		b.log.Warn("cluster: bus not reachable yet; retrying", "url", RedactURL(o.URL))
		b.requestCatchUp(b.outageStart()) // poll the store meanwhile
	}
	b.wg.Add(3)
	go b.publisher()
	go b.monitor()
	go b.catchUpLoop()
	return nil
}

func (b *Bridge) outageStart() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.outageSince
}

// Publish queues an event this node accepted for the bus (relay.Bus). It
// never blocks: when the queue is full the event is dropped and counted,
// and the other nodes see the gap in this node's sequence and catch up
// from the store.
func (b *Bridge) Publish(ev *nostr.Event, commit uint64) {
	if ev.Class() == nostr.Ephemeral {
		commit = 0
	}
	b.pubMu.Lock()
	defer b.pubMu.Unlock()
	if b.closing.Load() {
		b.st.publishDrops.Add(1)
		return
	}
	b.seq++
	select {
	case b.pubq <- pubItem{ev: ev, commit: commit, seq: b.seq}:
	default:
		b.dropSeq.Store(b.seq)
		b.st.publishDrops.Add(1)
	}
}

// publisher hands queued events to NATS, in sequence order, and sends a
// heartbeat every HeartbeatInterval. At Close it sends what is queued and
// a goodbye.
func (b *Bridge) publisher() {
	defer b.wg.Done()
	buf := make([]byte, 0, 4096)
	var last uint64 // sequence of the last event taken from the queue
	send := func(it pubItem) {
		last = it.seq
		if b.dropOut != nil && b.dropOut(it.seq) {
			b.st.publishDrops.Add(1)
			return
		}
		raw := it.ev.Raw
		if len(raw) == 0 {
			raw = nostr.Serialize(it.ev)
		}
		buf = appendEnvelope(buf[:0], envEvent, b.origin, it.seq, time.Now().UnixNano(), it.commit, raw)
		if err := b.nc.Publish(b.opts.Subject, buf); err != nil {
			b.st.publishDrops.Add(1)
			b.log.Debug("cluster: publish failed", "err", err)
			return
		}
		b.st.published.Add(1)
	}
	// beat sends a heartbeat (or goodbye) with the last sequence sent.
	// Drops past the last one taken count when the queue is empty: every
	// event sequenced before them has been taken by then.
	beat := func(typ byte) {
		d := b.dropSeq.Load()
		seq := last
		if len(b.pubq) == 0 && d > seq {
			seq = d
		}
		buf = appendEnvelope(buf[:0], typ, b.origin, seq, time.Now().UnixNano(), 0, nil)
		if err := b.nc.Publish(b.opts.Subject, buf); err != nil {
			b.log.Debug("cluster: heartbeat failed", "err", err)
		}
	}
	tick := time.NewTicker(b.opts.HeartbeatInterval)
	defer tick.Stop()
	for {
		select {
		case it := <-b.pubq:
			send(it)
		case <-tick.C:
			beat(envHeartbeat)
		case <-b.quit:
			for len(b.pubq) > 0 { // Publish refuses new items by now
				send(<-b.pubq)
			}
			beat(envBye)
			return
		}
	}
}

// onMsg handles one bus message (on the subscription's goroutine).
func (b *Bridge) onMsg(m *nats.Msg) {
	var e envelope
	if err := decodeEnvelope(m.Data, &e); err != nil {
		b.st.bad.Add(1)
		b.log.Debug("cluster: bad message", "err", err)
		return
	}
	if b.dropIn != nil && b.dropIn(&e) {
		return
	}
	if bytes.Equal(e.origin, b.origin) {
		b.st.echoes.Add(1)
		if e.sent > b.lastOwnSent.Load() {
			b.lastOwnSent.Store(e.sent)
		}
		return
	}
	if b.track(&e) {
		b.kickCatchUp()
	}
	if e.typ != envEvent {
		b.st.heartbeats.Add(1)
		return
	}
	b.st.received.Add(1)
	ev, err := nostr.ParseEvent(e.payload, nil)
	if err != nil {
		b.st.bad.Add(1)
		b.log.Debug("cluster: bad event", "origin", string(e.name), "err", err)
		return
	}
	commit := e.commit
	if ev.Class() == nostr.Ephemeral {
		commit = 0
	} else if !b.admit(ev) {
		return
	}
	b.handOn(ev, commit)
}

// policySubject is the subject of the NIP-86 hints of the bus subject.
func policySubject(subject string) string { return subject + ".policy" }

// HintPolicy implements relay.PolicyHinter: it tells the other nodes
// that the NIP-86 state changed, in a message of its own subject
// (<subject>.policy) holding this node's origin. Like every bus message
// it may be lost (the other nodes' periodic reading stays): before Start
// or after Close it is not sent, and while the connection is down it
// waits in NATS's reconnect buffer, if there is room.
func (b *Bridge) HintPolicy() {
	nc := b.sideConn()
	if nc == nil {
		return
	}
	if err := nc.Publish(policySubject(b.opts.Subject), b.origin); err != nil {
		b.log.Debug("cluster: NIP-86 hint not sent", "err", err)
		return
	}
	b.st.policyHintsSent.Add(1)
}

// OnPolicyHint implements relay.PolicyHinter: f is called when another
// node's hint arrives. Call it before Start.
func (b *Bridge) OnPolicyHint(f func()) { b.policyHint = f }

// onPolicyMsg handles a NIP-86 hint: another node's makes the relay read
// the state again; this node's own, heard back, is ignored.
func (b *Bridge) onPolicyMsg(m *nats.Msg) {
	if bytes.Equal(m.Data, b.origin) {
		return
	}
	b.st.policyHints.Add(1)
	if f := b.policyHint; f != nil {
		f()
	}
}

// ratesSubject is the subject of the rate limits' spending.
func ratesSubject(subject string) string { return subject + ".rates" }

// ShareRates implements relay.RateSharer: it sends what this node's rate
// limits took to the other nodes, on <subject>.rates, after this node's
// origin (publishTagged). Dropped while the connection is down.
func (b *Bridge) ShareRates(msg []byte) {
	if b.publishTagged(ratesSubject(b.opts.Subject), msg) {
		b.st.ratesSent.Add(1)
	}
}

// ShareLimit implements relay.RateSharer and relay.ConnSharer: the
// largest message ShareRates and ShareConns can send, the NATS server's
// max_payload (as it told at the last connect) less the origin tag
// publishTagged puts before it; 0 before the first connect, when it is
// not known, and after Close.
func (b *Bridge) ShareLimit() int {
	nc := b.sideConn()
	if nc == nil {
		return 0
	}
	mp := nc.MaxPayload()
	if mp <= 0 {
		return 0
	}
	return max(int(mp)-b.tagLen(), 1)
}

// tagLen is the most publishTagged puts before a message: the origin and
// its length.
func (b *Bridge) tagLen() int { return binary.MaxVarintLen32 + len(b.origin) }

// OnRates implements relay.RateSharer: f is called with each message of
// another node's rate-limit spending. Call it before Start.
func (b *Bridge) OnRates(f func([]byte)) { b.rates = f }

// onRatesMsg hands another node's rate-limit spending to the relay; this
// node's own, heard back, is ignored.
func (b *Bridge) onRatesMsg(m *nats.Msg) {
	_, msg, ok := b.untag(m.Data)
	if !ok {
		return
	}
	b.st.ratesReceived.Add(1)
	if f := b.rates; f != nil {
		f(msg)
	}
}

// connsSubject is the subject of the nodes' connections per address.
func connsSubject(subject string) string { return subject + ".conns" }

// ShareConns implements relay.ConnSharer: it sends this node's
// connections per address to the others, on <subject>.conns, after its
// origin, as ShareRates does.
func (b *Bridge) ShareConns(msg []byte) {
	if b.publishTagged(connsSubject(b.opts.Subject), msg) {
		b.st.connsSent.Add(1)
	}
}

// OnConns implements relay.ConnSharer: f is called with the origin and
// message of each other node's connections per address.
func (b *Bridge) OnConns(f func(origin string, msg []byte)) { b.conns.Store(&f) }

// onConnsMsg hands another node's connections per address on; this
// node's own, heard back, is ignored.
func (b *Bridge) onConnsMsg(m *nats.Msg) {
	origin, msg, ok := b.untag(m.Data)
	if !ok {
		return
	}
	b.st.connsReceived.Add(1)
	if f := b.conns.Load(); f != nil {
		(*f)(string(origin), msg)
	}
}

// sideConn returns the NATS connection for the messages beside the event
// stream (hints, shares): nil before Start and once Close began.
func (b *Bridge) sideConn() *nats.Conn {
	if b.closing.Load() {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.nc
}

// publishTagged publishes msg on subject after this node's origin
// (uvarint length, then the origin), and reports whether NATS took it:
// not before Start nor after Close, nor while the connection is down.
// What it carries is worth something only at once (the next message
// replaces it), and kept in NATS's reconnect buffer it would take the
// room of the events waiting there.
func (b *Bridge) publishTagged(subject string, msg []byte) bool {
	nc := b.sideConn()
	if nc == nil || !nc.IsConnected() {
		return false
	}
	m := make([]byte, 0, b.tagLen()+len(msg))
	m = binary.AppendUvarint(m, uint64(len(b.origin)))
	m = append(append(m, b.origin...), msg...)
	if err := nc.Publish(subject, m); err != nil {
		// Larger than the server's max_payload, most likely (the
		// connection was up a moment ago): counted and logged, as the
		// server's own errors are, or the sharing would stop unseen.
		b.st.busErrors.Add(1)
		if b.errLog.allow(subject+": "+err.Error(), time.Now()) {
			b.log.Warn("cluster: message not sent", "subject", subject, "bytes", len(m), "err", err)
		}
		return false
	}
	return true
}

// untag splits a publishTagged message into its origin and body; ok is
// false for this node's own message heard back, and for one that is not
// readable (counted as bad).
func (b *Bridge) untag(data []byte) (origin, msg []byte, ok bool) {
	n, w := binary.Uvarint(data)
	if w <= 0 || n > uint64(len(data)-w) {
		b.st.bad.Add(1)
		return nil, nil, false
	}
	origin = data[w : w+int(n)]
	if bytes.Equal(origin, b.origin) {
		return nil, nil, false
	}
	return origin, data[w+int(n):], true
}

// admit decides whether a stored event from the bus or a catch-up is
// handed to the relay: not if a deletion seen first removed it, nor if it
// expired (a catch-up may replay it late), nor if this node fanned it out
// already. For the window it only looks: FirstFanout, on the relay's
// dispatcher, makes the decision that counts, where every path an event
// takes meets. What a deletion removes is noted here, in the order the
// bus delivers (a deleted event right behind its deletion must find it
// noted, before the dispatcher has reached the deletion).
func (b *Bridge) admit(ev *nostr.Event) bool {
	now := time.Now().UnixNano()
	if b.rm.covers(ev) {
		b.st.deleted.Add(1)
		return false
	}
	if ev.IsExpired(now / int64(time.Second)) { // NIP-40: never sent once expired
		b.st.expired.Add(1)
		return false
	}
	if b.win.has(ev.ID) {
		b.st.duplicates.Add(1)
		return false
	}
	b.rm.note(ev, now)
	return true
}

// FirstFanout implements relay.FanoutGate: it records ev as fanned out by
// this node (and what it removes, for a deletion) and reports whether it
// was not already. The relay's dispatcher calls it for every stored event
// before its fan-out, local or not, so an event this node accepted and
// the same event replayed by a catch-up that read the store before the
// dispatcher reached it are fanned out once, whichever comes first.
func (b *Bridge) FirstFanout(ev *nostr.Event, local bool) bool {
	if ev.Class() == nostr.Ephemeral {
		return true // never stored, never caught up: it comes one way only
	}
	now := time.Now().UnixNano()
	src := srcRemote
	if local {
		src = srcLocal
	}
	if _, fresh := b.win.claim(ev.ID, src, now); !fresh {
		b.st.duplicates.Add(1)
		return false
	}
	if local {
		b.rm.note(ev, now) // (remote ones were noted by admit)
	}
	return true
}

// handOn gives an event to the relay, unless delivery has stopped.
func (b *Bridge) handOn(ev *nostr.Event, commit uint64) bool {
	b.deliverMu.RLock()
	defer b.deliverMu.RUnlock()
	if b.stopped || b.deliver == nil {
		return false
	}
	b.deliver(ev, commit)
	return true
}

// onConnect runs when the connection is (re)established: the outage, if
// any, ends with a catch-up from its start.
func (b *Bridge) onConnect(re bool) {
	b.failLog.reset() // a later failure is logged at once
	b.mu.Lock()
	nc, outage := b.nc, b.outage
	b.mu.Unlock()
	if nc != nil {
		b.checkPayload(nc)
	}
	if !re && !outage {
		// NATS's callback for a first connect that Start saw succeed
		// (and counted): it runs later, on NATS's goroutine, and must not
		// restart the sequences heard since, or a message lost meanwhile
		// would go unseen.
		return
	}
	// On a reconnect NATS sends the subscription again: the catch-up
	// reads the store once the server has it (a round trip), so that what
	// is committed after that read comes over the bus. A failure means
	// the connection is going again, and another outage follows.
	if nc != nil {
		_ = nc.FlushTimeout(b.opts.FlushTimeout)
	}
	now := time.Now()
	b.mu.Lock()
	was := b.outage
	since := b.outageSince
	b.outage, b.connected = false, true
	b.connectedAt = now.UnixNano()
	for _, o := range b.origins {
		o.resync = true // the catch-up covers what was missed meanwhile
		o.heard = now.UnixNano()
	}
	if was {
		// The outage ends with its catch-up owed, in one step (b.mu, then
		// b.cu.mu inside it): whoever sees no outage sees the catch-up
		// pending, running or done, never a quiet moment between.
		b.addRequest(since)
	}
	b.mu.Unlock()
	if re {
		b.st.reconnects.Add(1)
	}
	if was {
		b.st.lastOutageEnd.Store(now.UnixNano())
		b.log.Info("cluster: bus connected; catching up", "since", time.Unix(0, since))
		b.kickCatchUp()
	}
}

// checkPayload warns when the NATS server nc is connected to cannot
// carry the largest event the relay accepts in its envelope: such an
// event is not sent on the bus (publish_drops), and the other nodes get
// it from the store when the gap in this node's sequence makes them
// catch up, late. It warns at a connect whose server tells another
// max_payload than the one warned of last: once, however often the node
// reconnects to servers alike.
func (b *Bridge) checkPayload(nc *nats.Conn) {
	if b.opts.MaxEventBytes <= 0 {
		return
	}
	need := int64(envelopeHeader(b.origin) + b.opts.MaxEventBytes)
	mp := nc.MaxPayload()
	if mp <= 0 || mp >= need || b.payloadWarned.Swap(mp) == mp {
		return
	}
	b.log.Warn("cluster: the NATS server's max_payload is under the largest event this relay accepts; larger events reach the other nodes from the store, late (raise max_payload, or lower relay.max_event_bytes)",
		"max_payload", mp, "needed", need)
}

// onDisconnect runs when the connection drops: the outage starts at the
// last point this node knows it was hearing the bus (its last own message
// heard back, or its last connect), minus the margin.
func (b *Bridge) onDisconnect(err error) {
	now := time.Now().UnixNano()
	b.mu.Lock()
	if !b.connected {
		b.mu.Unlock()
		return
	}
	b.connected, b.outage = false, true
	heard := max(b.lastOwnSent.Load(), b.connectedAt)
	b.outageSince = min(heard, now) - int64(b.opts.CatchUpMargin)
	since := b.outageSince
	b.mu.Unlock()
	b.st.disconnects.Add(1)
	b.st.lastOutageStart.Store(now)
	b.log.Warn("cluster: bus connection lost; polling the store until it is back", "err", err)
	b.requestCatchUp(since)
}

// onConnectFailed logs why an attempt to reach the bus failed (the
// server refused the credentials, TLS failed, nothing listens...): each
// reason at most once a minute, though NATS tries every ReconnectWait; a
// connection made starts afresh.
func (b *Bridge) onConnectFailed(err error) {
	b.st.connectFailures.Add(1)
	if b.failLog.allow(err.Error(), time.Now()) {
		b.log.Warn("cluster: cannot reach the bus; retrying", "url", RedactURL(b.opts.URL), "err", err)
	}
}

// onError handles asynchronous NATS errors: each reason logged at most
// once a minute (a server that refuses a subject this node publishes to
// reports every message).
func (b *Bridge) onError(_ *nats.Conn, _ *nats.Subscription, err error) {
	if errors.Is(err, nats.ErrSlowConsumer) {
		if b.errLog.allow(err.Error(), time.Now()) {
			b.log.Warn("cluster: slow consumer: NATS dropped bus messages; the sequence gap will trigger a catch-up")
		}
		return
	}
	b.st.busErrors.Add(1)
	if b.errLog.allow(err.Error(), time.Now()) {
		b.log.Warn("cluster: NATS error", "err", err)
	}
}

// logLimit passes each message at most once a minute.
type logLimit struct {
	mu   sync.Mutex
	last map[string]time.Time // when each message last passed
}

// allow reports whether msg may be logged at now, and if so notes it.
func (l *logLimit) allow(msg string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if at, ok := l.last[msg]; ok && now.Sub(at) < time.Minute {
		return false
	}
	if l.last == nil || len(l.last) >= 64 { // a bound: messages may carry subjects
		l.last = make(map[string]time.Time)
	}
	l.last[msg] = now
	return true
}

// reset forgets what passed.
func (l *logLimit) reset() {
	l.mu.Lock()
	l.last = nil
	l.mu.Unlock()
}

// lossOngoing reports whether a loss is going on that the store must be
// polled for: this node's connection is down, or another node is silent.
func (b *Bridge) lossOngoing() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.outage || b.silentNow > 0
}

// StopDelivery stops handing events to the relay: it waits for a delivery
// in progress, ends catch-ups and unsubscribes. Publish keeps working.
// Call it before the relay shuts down; it is safe to call more than once.
func (b *Bridge) StopDelivery() {
	b.deliverMu.Lock()
	b.stopped = true
	b.deliverMu.Unlock()
	b.cancel()
	b.mu.Lock()
	sub := b.sub
	b.mu.Unlock()
	if sub != nil {
		sub.Unsubscribe()
	}
}

// Close stops delivery, sends what Publish queued (and a goodbye, so that
// the other nodes need not wait for this node to go silent), flushes it
// within ctx (FlushTimeout if ctx has no deadline) and closes the
// connection. Publish calls after Close are
// dropped and counted. Calling it again does nothing.
func (b *Bridge) Close(ctx context.Context) error {
	var err error
	b.once.Do(func() {
		b.StopDelivery()
		b.pubMu.Lock()
		b.closing.Store(true)
		b.pubMu.Unlock()
		close(b.quit)
		b.mu.Lock()
		nc := b.nc
		b.mu.Unlock()
		b.wg.Wait()
		if nc != nil {
			if nc.IsConnected() {
				if _, ok := ctx.Deadline(); !ok {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, b.opts.FlushTimeout)
					defer cancel()
				}
				err = nc.FlushWithContext(ctx)
			}
			nc.Close()
		}
	})
	return err
}
