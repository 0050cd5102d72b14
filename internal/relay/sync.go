package relay

// NIP-77 negentropy syncing on the relay side.
//
// A connection may hold up to Config.MaxNegSessions negentropy sessions,
// keyed by subscription id. NEG-OPEN checks the read rules and the
// per-connection count, then queues a load job: one of a few dedicated
// load workers (half the query workers, at least one) reads the matching
// (created_at, id) items with store.Items, less those of protected events
// the client may not see (hidden), bounded by MaxNegItems and by
// what is left of the relay-wide NegItemsTotal budget, builds the
// negentropy Vector, answers the initial message and only then marks the
// session ready. NEG-MSG is answered inline on the message handler: its
// cost is bounded by the message size (MaxMessageBytes) and the reply by
// NegFrameLimit. NEG-CLOSE drops the session without reply.
//
// Idle sessions (no NEG-MSG for NegIdleTimeout) are closed with NEG-ERR
// "closed: ..." by a janitor goroutine that runs only while some
// connection holds a negentropy session; the same janitor reclaims the
// sessions (and their budget) of connections that went away. Session.Closed
// may call closeNeg to release them at once; without it they are
// reclaimed on the janitor's next pass (every NegIdleTimeout/4, at most
// every second).
//
// The relay-wide state lives in a registry keyed by *Relay (negStates),
// created on first use and removed when the relay shuts down, because
// this file may not add fields to Relay or Session.
//
// Lock order: negRelay.mu, then nothing (sendControl is never called with
// it held); negSub.mu, then Session.out.mu (through sendControl).

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/petrel-relay/petrel/internal/negentropy"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// NegStats are the NIP-77 counters of a relay.
type NegStats struct {
	// Opened counts NEG-OPENs answered with NEG-MSG.
	Opened int64 `json:"neg_sessions_opened"`
	// Active is the number of sessions open now (loading or ready).
	Active int64 `json:"neg_sessions_active"`
	// Refused counts NEG-OPENs answered with NEG-ERR (limits, read rules,
	// malformed initial message, store errors).
	Refused int64 `json:"neg_sessions_refused"`
	// TimedOut counts sessions closed for idleness.
	TimedOut int64 `json:"neg_sessions_timed_out"`
	// Messages counts NEG-MSGs answered (initial messages included).
	Messages int64 `json:"neg_messages"`
	// ItemsLoaded counts the items loaded for sessions, in total.
	ItemsLoaded int64 `json:"neg_items_loaded"`
	// ItemsHeld is the number of items held by open sessions now,
	// counted against NegItemsTotal.
	ItemsHeld int64 `json:"neg_items_held"`
}

// NegStats returns the NIP-77 counters.
func (r *Relay) NegStats() NegStats {
	v, ok := negStates.Load(r)
	if !ok {
		return NegStats{}
	}
	nr := v.(*negRelay)
	nr.mu.Lock()
	active, held := int64(nr.active), nr.held
	nr.mu.Unlock()
	return NegStats{
		Opened:      nr.opened.Load(),
		Active:      active,
		Refused:     nr.refused.Load(),
		TimedOut:    nr.timedOut.Load(),
		Messages:    nr.messages.Load(),
		ItemsLoaded: nr.itemsLoaded.Load(),
		ItemsHeld:   held,
	}
}

// negStates maps *Relay to its *negRelay.
var negStates sync.Map

// negState returns the relay's NIP-77 state, creating it on first use.
func (r *Relay) negState() *negRelay {
	if v, ok := negStates.Load(r); ok {
		return v.(*negRelay)
	}
	nr := &negRelay{
		r:      r,
		conns:  make(map[*Session]map[string]*negSub),
		queued: make(map[*Session]int),
		jobs:   make(chan *negSub, negLoadQueue),
	}
	v, loaded := negStates.LoadOrStore(r, nr)
	if loaded {
		return v.(*negRelay)
	}
	for range max(1, r.cfg.QueryWorkers/2) {
		go nr.loadWorker()
	}
	go func() {
		<-r.ctx.Done()
		negStates.Delete(r)
	}()
	return nr
}

// negLoadQueue is how many NEG-OPENs may wait for a load worker,
// relay-wide; beyond it NEG-OPEN is refused with "blocked: relay busy".
// One connection may have at most max(MaxNegSessions, negQueuedPerConn)
// of them (replaced sessions included).
const (
	negLoadQueue     = 64
	negQueuedPerConn = 2
)

// negRelay is the relay-wide NIP-77 state.
type negRelay struct {
	r    *Relay
	jobs chan *negSub // NEG-OPENs waiting for a load worker

	mu      sync.Mutex
	conns   map[*Session]map[string]*negSub // open sessions by connection and id
	queued  map[*Session]int                // jobs in the queue, by connection
	active  int                             // sessions in conns
	held    int64                           // items held by ready sessions
	janitor bool                            // the janitor goroutine runs

	opened, refused, timedOut, messages, itemsLoaded atomic.Int64
}

// negSub states, guarded by negRelay.mu.
const (
	negLoading uint8 = iota // queued or loading: no reply sent yet
	negReady                // answered; waiting for NEG-MSG
)

// negSub is one negentropy session of one connection.
type negSub struct {
	s       *Session
	id      string
	filter  []nostr.Filter // exactly one
	initial []byte         // the NEG-OPEN message, until the load answers it
	ctx     context.Context
	cancel  context.CancelFunc // cancels the load

	// guarded by negRelay.mu
	state uint8
	n     *negentropy.Negentropy
	items int   // items counted in negRelay.held
	last  int64 // unix nanos of the last message from the client

	// mu orders replies against closing: no reply is queued for a
	// session after closed is set under mu.
	mu     sync.Mutex
	closed atomic.Bool
}

// markClosed stops any further reply for sb and cancels its load. It
// waits for a reply being queued, so nothing for sb follows what the
// caller sends next.
func (sb *negSub) markClosed() {
	sb.mu.Lock()
	sb.closed.Store(true)
	sb.mu.Unlock()
	sb.cancel()
}

// send queues a NEG-MSG or NEG-ERR for sb unless it was closed.
func (sb *negSub) send(build func([]byte) []byte) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if !sb.closed.Load() {
		sb.s.sendControl(build)
	}
}

// removeLocked drops sb from the registry and releases its items. It
// reports whether sb was registered. nr.mu must be held.
func (nr *negRelay) removeLocked(sb *negSub) bool {
	subs := nr.conns[sb.s]
	if subs[sb.id] != sb {
		return false
	}
	delete(subs, sb.id)
	if len(subs) == 0 {
		delete(nr.conns, sb.s)
	}
	nr.active--
	nr.held -= int64(sb.items)
	sb.items = 0
	return true
}

// handleNeg answers NIP-77 messages.
func (s *Session) handleNeg(msg *nostr.ClientMessage) {
	nr := s.r.negState()
	switch msg.Type {
	case nostr.MsgNegOpen:
		nr.open(s, msg.SubID, msg.Filters, msg.NegPayload)
	case nostr.MsgNegMsg:
		nr.message(s, msg.SubID, msg.NegPayload)
	case nostr.MsgNegClose:
		nr.closeSub(s, msg.SubID)
	}
}

// negErr sends NEG-ERR outside any session.
func (s *Session) negErr(subID, reason string) {
	s.sendControl(func(b []byte) []byte { return nostr.AppendNegErr(b, subID, reason) })
}

// refuse answers a NEG-OPEN with NEG-ERR.
func (nr *negRelay) refuse(s *Session, subID, reason string) {
	nr.refused.Add(1)
	s.negErr(subID, reason)
}

// open starts a session (NEG-OPEN), replacing one with the same id.
func (nr *negRelay) open(s *Session, subID string, filters []nostr.Filter, payload []byte) {
	r := nr.r
	// A replaced session ends first, whatever happens to the new one.
	nr.closeSub(s, subID)

	if rej := s.checkRead(filters); rej != nil {
		nr.refuse(s, subID, rej.Error())
		return
	}
	if len(filters) != 1 {
		nr.refuse(s, subID, "invalid: NEG-OPEN takes exactly one filter")
		return
	}
	if filters[0].Search != "" {
		nr.refuse(s, subID, "invalid: search filters cannot be synced")
		return
	}
	// The version byte is checked before loading anything: an unknown
	// version is answered at once with the one we speak (NIP-77: the
	// client may then retry with it).
	if len(payload) == 0 || payload[0] < 0x60 || payload[0] > 0x6f {
		nr.refuse(s, subID, "invalid: not a negentropy message")
		return
	}
	if payload[0] != negentropy.ProtocolVersion {
		nr.refused.Add(1)
		s.sendControl(func(b []byte) []byte {
			return nostr.AppendNegMsg(b, subID, []byte{negentropy.ProtocolVersion})
		})
		return
	}

	ctx, cancel := context.WithCancel(r.ctx)
	sb := &negSub{
		s: s, id: subID, filter: filters, initial: payload,
		ctx: ctx, cancel: cancel,
		state: negLoading, last: r.now().UnixNano(),
	}
	nr.mu.Lock()
	if s.closed.Load() || s.closing.Load() {
		nr.mu.Unlock()
		cancel()
		return
	}
	subs := nr.conns[s]
	if limit := r.cfg.MaxNegSessions; limit >= 0 && len(subs) >= limit {
		nr.mu.Unlock()
		cancel()
		nr.refuse(s, subID, "blocked: too many negentropy sessions on this connection (max "+itoa(r.cfg.MaxNegSessions)+")")
		return
	}
	// Replaced sessions stay in the queue until a worker drops them: a
	// connection may not fill the queue with them.
	if nr.queued[s] >= max(r.cfg.MaxNegSessions, negQueuedPerConn) {
		nr.mu.Unlock()
		cancel()
		nr.refuse(s, subID, "rate-limited: too many NEG-OPENs waiting on this connection")
		return
	}
	select {
	case nr.jobs <- sb:
	default:
		nr.mu.Unlock()
		cancel()
		nr.refuse(s, subID, "blocked: relay busy, try again later")
		return
	}
	nr.queued[s]++
	if subs == nil {
		subs = make(map[string]*negSub, 1)
		nr.conns[s] = subs
	}
	subs[subID] = sb
	nr.active++
	startJanitor := !nr.janitor
	nr.janitor = true
	nr.mu.Unlock()
	if startJanitor {
		go nr.sweep()
	}
}

// loadWorker runs load jobs until the relay shuts down.
func (nr *negRelay) loadWorker() {
	for {
		select {
		case <-nr.r.ctx.Done():
			return
		case sb := <-nr.jobs:
			nr.mu.Lock()
			if nr.queued[sb.s]--; nr.queued[sb.s] <= 0 {
				delete(nr.queued, sb.s)
			}
			nr.mu.Unlock()
			nr.load(sb)
		}
	}
}

// load reads a session's items, answers its initial message and marks it
// ready, or refuses it.
func (nr *negRelay) load(sb *negSub) {
	r := nr.r
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("BUG: panic in negentropy load", "panic", p)
			nr.fail(sb, "error: internal error")
		}
	}()
	if sb.closed.Load() {
		return
	}
	// Load at most what the session and the relay-wide budget allow.
	limit, busy := int64(r.cfg.MaxNegItems), false
	if limit < 0 {
		limit = math.MaxInt
	}
	if total := r.cfg.NegItemsTotal; total >= 0 {
		nr.mu.Lock()
		room := total - nr.held
		nr.mu.Unlock()
		if room < limit {
			limit, busy = room, true
		}
	}
	if limit <= 0 {
		nr.fail(sb, "blocked: relay busy: too many items held by negentropy sessions, try again later")
		return
	}
	if limit == math.MaxInt {
		limit = 0 // no limit
	}
	items, err := r.store.Items(sb.ctx, sb.filter, int(limit))
	if err == nil {
		var hidden []store.Item
		if hidden, err = nr.hidden(sb, int(limit)); err == nil {
			items = subtractItems(items, hidden)
		}
	}
	switch {
	case sb.closed.Load():
		return
	case errors.Is(err, store.ErrTooMany) && busy:
		nr.fail(sb, "blocked: relay busy: too many items held by negentropy sessions, try again later")
		return
	case errors.Is(err, store.ErrTooMany):
		nr.fail(sb, "blocked: this query is too big: more than "+itoa(r.cfg.MaxNegItems)+" events match, narrow the filter")
		return
	case err != nil:
		r.stats.DBErrors.Add(1)
		r.log.Warn("negentropy load failed", "err", err)
		nr.fail(sb, "error: could not read the store")
		return
	}

	// Count the items before building anything from them.
	nr.mu.Lock()
	if nr.conns[sb.s][sb.id] != sb {
		nr.mu.Unlock()
		return // replaced or closed meanwhile
	}
	if total := r.cfg.NegItemsTotal; total >= 0 && nr.held+int64(len(items)) > total {
		nr.mu.Unlock()
		nr.fail(sb, "blocked: relay busy: too many items held by negentropy sessions, try again later")
		return
	}
	nr.held += int64(len(items))
	sb.items = len(items)
	nr.mu.Unlock()
	nr.itemsLoaded.Add(int64(len(items)))

	vitems := make([]negentropy.Item, len(items))
	for i := range items {
		vitems[i] = negentropy.Item{Timestamp: uint64(items[i].CreatedAt), ID: items[i].ID}
	}
	items = nil
	v, err := negentropy.NewVector(vitems)
	if err != nil {
		nr.fail(sb, "error: "+strings.TrimPrefix(err.Error(), "negentropy: "))
		return
	}
	n, err := negentropy.New(v, max(r.cfg.NegFrameLimit, 0))
	if err != nil {
		panic("BUG: negentropy frame limit: " + err.Error())
	}
	reply, err := n.Reconcile(sb.initial)
	if err != nil && !errors.Is(err, negentropy.ErrUnsupportedVersion) {
		nr.fail(sb, negReason(err))
		return
	}

	nr.mu.Lock()
	if nr.conns[sb.s][sb.id] != sb {
		nr.mu.Unlock()
		return
	}
	sb.state, sb.n, sb.initial = negReady, n, nil
	sb.last = r.now().UnixNano()
	nr.mu.Unlock()
	nr.opened.Add(1)
	nr.messages.Add(1)
	sb.send(func(b []byte) []byte { return nostr.AppendNegMsg(b, sb.id, reply) })
}

// hidden returns the items, among those matching sb's filter, of the
// protected events (Config.ProtectedKinds) its client may not see, sorted
// like store.Items. As for COUNT, with F the filter and P the protected
// kinds: the items of F ∩ P, minus those of the filters expressing the
// visible part (visibleFilters), or, when a "#p" condition names someone
// else, the records of F ∩ P read one by one and checked with
// canSeeRecord. limit bounds each read as it bounds F's. The reads are
// taken one after the other: an event deleted between them may be listed.
func (nr *negRelay) hidden(sb *negSub, limit int) ([]store.Item, error) {
	r := nr.r
	pf := r.protectedPart(sb.filter)
	if len(pf) == 0 {
		return nil, nil
	}
	info := sb.s.auth.load()
	if !info.authed() {
		return r.store.Items(sb.ctx, pf, limit)
	}
	if vf, ok := visibleFilters(pf, info); ok {
		prot, err := r.store.Items(sb.ctx, pf, limit)
		if err != nil || len(prot) == 0 || len(vf) == 0 {
			return prot, err
		}
		vis, err := r.store.Items(sb.ctx, vf, limit)
		if err != nil {
			return nil, err
		}
		return subtractItems(prot, vis), nil
	}
	for i := range pf {
		pf[i].HasLimit, pf[i].Limit = false, 0
	}
	it, err := r.store.Query(sb.ctx, pf)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []store.Item
	for n := 0; it.Next(); n++ {
		if limit > 0 && n == limit {
			return nil, store.ErrTooMany
		}
		if rec := it.Record(); !sb.s.canSeeRecord(rec) {
			out = append(out, store.Item{CreatedAt: rec.CreatedAt, ID: rec.ID})
		}
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, store.CompareItems)
	return out, nil
}

// subtractItems returns the items of a not in b, both sorted by
// store.CompareItems. It reuses a's array.
func subtractItems(a, b []store.Item) []store.Item {
	if len(b) == 0 {
		return a
	}
	out, j := a[:0], 0
	for _, it := range a {
		for j < len(b) && store.CompareItems(b[j], it) < 0 {
			j++
		}
		if j < len(b) && store.CompareItems(b[j], it) == 0 {
			continue
		}
		out = append(out, it)
	}
	return out
}

// fail drops a session that could not be opened and tells the client.
func (nr *negRelay) fail(sb *negSub, reason string) {
	nr.mu.Lock()
	ok := nr.removeLocked(sb)
	nr.mu.Unlock()
	if !ok {
		return
	}
	nr.refused.Add(1)
	sb.send(func(b []byte) []byte { return nostr.AppendNegErr(b, sb.id, reason) })
	sb.markClosed()
}

// message answers a NEG-MSG.
func (nr *negRelay) message(s *Session, subID string, payload []byte) {
	nr.mu.Lock()
	sb := nr.conns[s][subID]
	if sb == nil {
		nr.mu.Unlock()
		s.negErr(subID, "closed: no open negentropy session with this id (it may have timed out)")
		return
	}
	if sb.state != negReady {
		nr.removeLocked(sb)
		nr.mu.Unlock()
		sb.markClosed()
		s.negErr(subID, "invalid: NEG-MSG sent before the reply to NEG-OPEN")
		return
	}
	sb.last = nr.r.now().UnixNano()
	n := sb.n
	nr.mu.Unlock()

	// Only this session's message handler calls Reconcile on n: the
	// handler is serial, and the load worker no longer touches a ready
	// session.
	reply, err := n.Reconcile(payload)
	if err != nil && !errors.Is(err, negentropy.ErrUnsupportedVersion) {
		nr.mu.Lock()
		nr.removeLocked(sb)
		nr.mu.Unlock()
		sb.send(func(b []byte) []byte { return nostr.AppendNegErr(b, subID, negReason(err)) })
		sb.markClosed()
		return
	}
	nr.messages.Add(1)
	sb.send(func(b []byte) []byte { return nostr.AppendNegMsg(b, subID, reply) })
}

// closeSub drops a session without reply (NEG-CLOSE, or replacement by a
// NEG-OPEN with the same id).
func (nr *negRelay) closeSub(s *Session, subID string) {
	nr.mu.Lock()
	sb := nr.conns[s][subID]
	if sb != nil {
		nr.removeLocked(sb)
	}
	nr.mu.Unlock()
	if sb != nil {
		sb.markClosed()
	}
}

// closeNeg releases every negentropy session of s at once. Session.Closed
// may call it; otherwise the janitor reclaims them on its next pass. It
// does not wait for a reply being queued, so it may run from within
// sendControl.
func (s *Session) closeNeg() {
	v, ok := negStates.Load(s.r)
	if !ok {
		return
	}
	nr := v.(*negRelay)
	nr.mu.Lock()
	subs := nr.conns[s]
	for _, sb := range subs {
		nr.removeLocked(sb)
	}
	nr.mu.Unlock()
	for _, sb := range subs {
		sb.closed.Store(true)
		sb.cancel()
	}
}

// sweepPeriod is how often the janitor runs.
func (nr *negRelay) sweepPeriod() time.Duration {
	return min(max(nr.r.cfg.NegIdleTimeout/4, 10*time.Millisecond), time.Second)
}

// sweep is the janitor: it closes idle sessions with NEG-ERR and reclaims
// the sessions of closed connections. It exits when no session is left
// (open starts it again) or when the relay shuts down.
func (nr *negRelay) sweep() {
	r := nr.r
	t := time.NewTicker(nr.sweepPeriod())
	defer t.Stop()
	var idle []*negSub
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		now := r.now().UnixNano()
		timeout := int64(r.cfg.NegIdleTimeout)
		idle = idle[:0]
		nr.mu.Lock()
		for s, subs := range nr.conns {
			gone := s.closed.Load() || s.closing.Load()
			for _, sb := range subs {
				switch {
				case gone:
					nr.removeLocked(sb)
					sb.closed.Store(true)
					sb.cancel()
				case sb.state == negReady && timeout > 0 && now-sb.last > timeout:
					nr.removeLocked(sb)
					idle = append(idle, sb)
				}
			}
		}
		if len(nr.conns) == 0 {
			nr.janitor = false
			nr.mu.Unlock()
			nr.timeOut(idle)
			return
		}
		nr.mu.Unlock()
		nr.timeOut(idle)
	}
}

// timeOut tells the clients of idle sessions that they were closed.
func (nr *negRelay) timeOut(idle []*negSub) {
	for i, sb := range idle {
		nr.timedOut.Add(1)
		sb.send(func(b []byte) []byte {
			return nostr.AppendNegErr(b, sb.id, "closed: negentropy session idle for too long")
		})
		sb.markClosed()
		idle[i] = nil
	}
}

// negReason is the NEG-ERR reason for a malformed negentropy message.
func negReason(err error) string {
	return "invalid: malformed negentropy message: " + strings.TrimPrefix(err.Error(), "negentropy: ")
}
