package relay

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// Transport is the socket side of a session, implemented by the server.
type Transport interface {
	// Write hands complete WebSocket frames to the connection. It must not
	// block: what the socket cannot take now is buffered by the transport,
	// which reports progress through Session.Written. Write is called by
	// one goroutine at a time per session.
	Write(b []byte) error
	// Close closes the connection, sending a close frame with code and
	// reason first when it can. It may be called more than once and from
	// any goroutine; the transport then calls Session.Closed exactly once.
	Close(code int, reason string)
}

// WebSocket close codes used by the relay.
const (
	CloseNormal        = 1000
	CloseGoingAway     = 1001
	CloseProtocolError = 1002
	CloseUnsupported   = 1003
	CloseInvalidData   = 1007
	ClosePolicy        = 1008
	CloseTooBig        = 1009
	CloseInternalError = 1011
)

// subscription states, guarded by Session.out.mu.
const (
	subStored uint8 = iota // stored query running: live matches are held
	subLive                // after EOSE: live matches are queued directly
	subClosed              // closed: nothing more is delivered
)

// held is a live event matched while the subscription's stored query was
// still running, with its commit position; it is sent after EOSE unless
// the stored query's snapshot includes that position.
type held struct {
	raw []byte
	seq uint64
}

// sub is one REQ subscription. There is one per subscribed connection at
// least, so its size counts in the memory per connection: the fields are
// ordered so that it fits the 288-byte size class (see TestSizes).
type sub struct {
	s       *Session
	id      string // shares prefix's bytes when it needs no escaping
	prefix  string // `["EVENT","<id>",`, built once
	filters []nostr.Filter
	one     [1]nostr.Filter // storage for filters when there is one
	entries []*entry        // index entries; guarded by index.mu

	// guarded by s.out.mu
	job *queryJob // the stored query, until EOSE; it holds the held events
	// The stored query's snapshot (store.Snapshot), set when its iterator
	// opens: the commits its answer reflects. Live events from those
	// commits are not delivered (see sawCommit). snapOpen is nil unless
	// the snapshot lists commits in progress (a shared SQL store).
	snapLow, snapHigh uint64
	snapOpen          *[]uint64

	stamp uint64 // dispatcher-only: last event sequence that visited this sub

	listed  bool        // guarded by index.mu
	state   uint8       // guarded by s.out.mu
	counted atomic.Bool // counted in Stats.SubscriptionsActive
}

// setSnapshot records the stored query's snapshot. s.out.mu must be held.
func (sb *sub) setSnapshot(snap store.Snapshot) {
	sb.snapLow, sb.snapHigh = snap.Low, snap.High
	if len(snap.Open) > 0 {
		open := snap.Open
		sb.snapOpen = &open
	}
}

// sawCommit reports whether the subscription's stored query saw the commit
// at position seq, so that a live event from it is not delivered again:
// the one stored-to-live hand-off rule (store.Snapshot). Before the query
// has opened its iterator it reports false. s.out.mu must be held.
func (sb *sub) sawCommit(seq uint64) bool {
	snap := store.Snapshot{Low: sb.snapLow, High: sb.snapHigh}
	if sb.snapOpen != nil {
		snap.Open = *sb.snapOpen
	}
	return snap.Includes(seq)
}

// setID sets the subscription's id and builds its EVENT prefix. An id
// that needs no JSON escaping (the usual case) is kept inside the prefix,
// so the two cost one allocation.
func (sb *sub) setID(id string) {
	sb.prefix = string(append(nostr.AppendString(append(make([]byte, 0, len(id)+14), `["EVENT",`...), id), ','))
	sb.id = id
	if len(sb.prefix) == len(id)+12 { // `["EVENT","` id `",`: nothing escaped
		sb.id = sb.prefix[10 : 10+len(id)]
	}
}

// Session is one client connection's protocol state. It is created by the
// server when a WebSocket upgrade completes and lives until Closed.
// HandleMessage is called serially; everything else is safe for
// concurrent use.
type Session struct {
	r    *Relay
	t    Transport
	addr netip.Addr // IP parsed, for the write policy (zero if unparseable)

	out outbox

	mu      sync.Mutex  // guards subs
	subs    subList     // open subscriptions
	closed  atomic.Bool // the transport reported Closed
	closing atomic.Bool // close was called: the transport is closing

	pendingEvents atomic.Int32 // EVENTs awaiting their OK
	pinged        atomic.Bool  // a ping is outstanding
	lastRead      atomic.Int64 // unix nanos of the last inbound frame
	parked        *queryJob    // query paused on this session's budget; guarded by out.mu
	closeReason   atomic.Pointer[string]
	slot          int // registry position; guarded by Relay.regMu

	// NIP-42 state lives in auth.go.
	auth authState
}

// NewSession registers a new connection with the relay. It queues nothing:
// call Start once the transport is wired to the session.
func (r *Relay) NewSession(t Transport, ip string) *Session {
	s := &Session{r: r, t: t, addr: parseAddr(ip)}
	now := r.now().UnixNano()
	s.lastRead.Store(now)
	s.out.progress.Store(now)
	r.register(s)
	r.stats.ConnectionsActive.Add(1)
	r.stats.ConnectionsTotal.Add(1)
	return s
}

// Start runs the session's opening actions (the blocked-IP check, an AUTH
// challenge on connect). The transport must be able to route Written for
// this session before Start is called: anything Start queues may be
// written, and reported, at once.
func (s *Session) Start() { s.r.onOpen(s) }

// Touch records inbound activity (a pong, any frame) for the idle timeout.
func (s *Session) Touch() {
	s.lastRead.Store(s.r.now().UnixNano())
	s.pinged.Store(false)
}

// SendPong answers a client's ping through the out-queue, so that the
// out-queue's count of bytes held by the transport stays exact.
func (s *Session) SendPong(data []byte) {
	if s.closed.Load() || len(data) > 125 {
		return
	}
	o := &s.out
	o.mu.Lock()
	o.appendControlFrame(opPong, data)
	o.mu.Unlock()
	s.r.flusher.schedule(s)
}

// Written is called by the transport when n bytes handed to Write have
// reached the socket.
func (s *Session) Written(n int) {
	if n <= 0 {
		return
	}
	s.r.stats.BytesOut.Add(int64(n))
	s.out.touch(s.r.now())
	v := s.out.inTransp.Add(-int64(n))
	if v < transportLowWater && v+int64(n) >= transportLowWater {
		s.r.flusher.schedule(s)
	}
}

// Closed is called by the transport exactly once when the connection is
// gone. It closes every subscription and releases what the session held.
func (s *Session) Closed() {
	if !s.closed.CompareAndSwap(false, true) {
		return
	}
	s.mu.Lock()
	subs := s.subs
	s.subs = nil
	s.mu.Unlock()
	s.closeNeg()
	for _, sb := range subs {
		s.r.closeSub(sb)
	}
	s.out.mu.Lock()
	if j := s.parked; j != nil {
		s.parked = nil
		j.release()
	}
	stored := s.out.bytes[catStored]
	peak := s.out.peak
	s.out.reset()
	s.out.mu.Unlock()
	s.r.releaseQueryBytes(int64(stored))
	s.r.unregister(s, peak)
	s.r.stats.ConnectionsActive.Add(-1)
}

// close asks the transport to close the connection. Only the first call
// does anything; it reports whether this call was it, so that a limit
// that closes the connection is counted once however many messages keep
// arriving until the transport reports Closed.
func (s *Session) close(code int, reason string) bool {
	return s.closeFor(code, reason, -1)
}

// closeFor is close for a tripped limit (an index into
// Stats.LimitTrips; -1 for none): the trip is counted before the
// transport is asked to close, so a reader who sees the connection gone
// (connections_active) also sees the trip.
func (s *Session) closeFor(code int, reason string, lim int) bool {
	if s.closed.Load() || !s.closing.CompareAndSwap(false, true) {
		return false
	}
	if lim >= 0 {
		s.r.stats.LimitTrips[lim].Add(1)
	}
	s.closeReason.Store(&reason)
	s.t.Close(code, reason)
	return true
}

// flush hands queued frames to the transport until the queue is empty or
// the transport holds transportLowWater bytes. It runs on a flusher
// goroutine (or inline), one at a time per session (out.scheduled).
func (s *Session) flush() {
	o := &s.out
	for {
		if s.closed.Load() {
			o.scheduled.Store(false)
			return
		}
		if o.inTransp.Load() >= transportLowWater {
			o.scheduled.Store(false)
			// Written may have crossed the watermark between the load and
			// the store; if so it could not schedule us: check again.
			if o.inTransp.Load() < transportLowWater {
				s.r.flusher.schedule(s)
			}
			return
		}
		var rel [numCats]int
		o.mu.Lock()
		chunk := o.takeChunk(&rel)
		if chunk == nil {
			o.scheduled.Store(false)
			o.mu.Unlock()
			return
		}
		o.mu.Unlock()
		if rel[catStored] > 0 {
			s.r.releaseQueryBytes(int64(rel[catStored]))
		}
		inTransp := o.inTransp.Add(int64(len(chunk)))
		err := s.t.Write(chunk)
		o.mu.Lock()
		o.peak.transport = max(o.peak.transport, inTransp)
		o.doneChunk()
		resume := s.resumableLocked()
		o.mu.Unlock()
		if resume != nil {
			s.r.queries.enqueue(resume)
		}
		if err != nil {
			o.scheduled.Store(false)
			s.close(CloseInternalError, "write failed")
			return
		}
	}
}

// resumableLocked returns the parked query if the session's stored-query
// backlog fell under half its budget. s.out.mu must be held.
func (s *Session) resumableLocked() *queryJob {
	j := s.parked
	if j == nil || int64(s.out.bytes[catStored]) > s.r.cfg.QueryBytesPerConn/2 {
		return nil
	}
	if s.r.stats.QueryBytesQueued.Load() > s.r.cfg.QueryBytesTotal {
		return nil
	}
	s.parked = nil
	return j
}

// sendControl queues a control message (OK, EOSE, CLOSED, NOTICE, ...)
// built by build and schedules a flush. Control frames are never dropped
// while the connection is open; a client that lets them pile up past
// controlBacklogFactor*OutQueueBytes is disconnected (and nothing more is
// queued for a connection being closed).
func (s *Session) sendControl(build func([]byte) []byte) {
	if s.closed.Load() || s.closing.Load() {
		return // nobody will read it
	}
	bp := scratchPool.Get().(*[]byte)
	msg := build((*bp)[:0])
	o := &s.out
	o.mu.Lock()
	o.appendFrame(catControl, msg)
	backlog := o.bytes[catControl]
	o.mu.Unlock()
	*bp = msg
	scratchPool.Put(bp)
	s.r.stats.MessagesOut.Add(1)
	if backlog > controlBacklogFactor*s.r.cfg.OutQueueBytes {
		s.closeFor(ClosePolicy, "not reading responses", limControlBacklog)
		return
	}
	s.r.flusher.schedule(s)
}

var scratchPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func (s *Session) notice(msg string) {
	s.r.stats.Notices.Add(1)
	s.sendControl(func(b []byte) []byte { return nostr.AppendNotice(b, msg) })
}

func (s *Session) closedMsg(subID, msg string) {
	s.sendControl(func(b []byte) []byte { return nostr.AppendClosed(b, subID, msg) })
}

func (s *Session) ok(id nostr.ID, accepted bool, msg string) {
	s.sendControl(func(b []byte) []byte { return nostr.AppendOK(b, id, accepted, msg) })
}

// HandleMessage processes one inbound WebSocket message. binary reports a
// binary frame. data is only read during the call.
func (s *Session) HandleMessage(data []byte, binary bool) {
	r := s.r
	s.Touch()
	r.stats.MessagesIn.Add(1)
	r.stats.BytesIn.Add(int64(len(data)))
	if s.closed.Load() || s.closing.Load() {
		return // e.g. the rest of a batch read after a protocol error
	}
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("BUG: panic handling message", "ip", s.IP(), "panic", p)
			s.close(CloseInternalError, "internal error")
		}
	}()
	if binary {
		s.notice("invalid: binary messages are not supported; send JSON text frames")
		return
	}
	if !utf8.Valid(data) {
		s.close(CloseInvalidData, "invalid UTF-8 in text frame")
		return
	}
	if len(data) > r.cfg.MaxMessageBytes {
		// The transport enforces this with 1009 before we see the data;
		// this is the backstop for transports that do not.
		s.closeFor(CloseTooBig, "message too big", limMessageBytes)
		return
	}
	msg, err := nostr.ParseClientMessage(data, &r.limits)
	if err != nil {
		s.rejectParse(err)
		return
	}
	switch msg.Type {
	case nostr.MsgEvent:
		s.handleEvent(msg.Event)
	case nostr.MsgReq:
		s.handleReq(msg.SubID, msg.Filters)
	case nostr.MsgClose:
		s.handleClose(msg.SubID)
	case nostr.MsgCount:
		s.handleCount(msg.SubID, msg.Filters)
	case nostr.MsgAuth:
		s.handleAuth(msg.Event)
	case nostr.MsgNegOpen, nostr.MsgNegMsg, nostr.MsgNegClose:
		s.handleNeg(msg)
	default:
		s.notice("invalid: unknown message type")
	}
}

// rejectParse answers a message the parser refused, in context.
func (s *Session) rejectParse(err error) {
	pe, ok := err.(*nostr.ParseError)
	if !ok {
		s.notice("invalid: " + err.Error())
		return
	}
	r := s.r
	if lim := parseLimit(pe.Bound); lim >= 0 {
		r.stats.LimitTrips[lim].Add(1)
	}
	switch {
	case (pe.Type == nostr.MsgEvent || pe.Type == nostr.MsgAuth) && pe.HasEventID:
		r.stats.EventsReceived.Add(1)
		r.countReject(nostr.PrefixInvalid)
		s.ok(pe.EventID, false, "invalid: "+pe.Msg)
	case pe.Type == nostr.MsgNegOpen && pe.SubID != "":
		s.sendControl(func(b []byte) []byte { return nostr.AppendNegErr(b, pe.SubID, "invalid: "+pe.Msg) })
	case (pe.Type == nostr.MsgReq || pe.Type == nostr.MsgCount) && pe.SubID != "":
		s.closedMsg(pe.SubID, "invalid: "+pe.Msg)
	case pe.Type == nostr.MsgNegMsg && pe.SubID != "":
		s.sendControl(func(b []byte) []byte { return nostr.AppendNegErr(b, pe.SubID, "invalid: "+pe.Msg) })
	default:
		if pe.Type == nostr.MsgEvent {
			r.stats.EventsReceived.Add(1)
			r.countReject(nostr.PrefixInvalid)
		}
		label := ""
		if pe.Type != nostr.MsgUnknown {
			label = pe.Type.String() + ": "
		}
		s.notice("invalid: " + label + pe.Msg)
	}
}

// parseLimit names the limit counter of the bound a parse error reports,
// or returns -1 for nostr.BoundNone. Every other Bound has a case
// (TestParseLimitCoversBounds). Tag elements count as tags, and a filter
// over the parser's size ceiling as a message (the relay parses filters
// only inside messages).
func parseLimit(b nostr.Bound) int {
	switch b {
	case nostr.BoundSubIDLen:
		return limSubIDLength
	case nostr.BoundFilters:
		return limFilters
	case nostr.BoundFilterValues:
		return limFilterValues
	case nostr.BoundTags, nostr.BoundTagElems:
		return limTags
	case nostr.BoundContentBytes:
		return limContentBytes
	case nostr.BoundEventBytes:
		return limEventBytes
	case nostr.BoundFilterBytes, nostr.BoundMessageBytes:
		return limMessageBytes
	}
	return -1
}

// handleClose closes one subscription (NIP-01 CLOSE: no reply).
func (s *Session) handleClose(subID string) {
	s.mu.Lock()
	sb := s.subs.get(subID)
	if sb != nil {
		s.subs.remove(sb)
	}
	s.mu.Unlock()
	if sb != nil {
		s.r.closeSub(sb)
	}
}

// dropSub closes a subscription on the relay's initiative and tells the
// client with CLOSED.
func (s *Session) dropSub(sb *sub, reason string) {
	s.mu.Lock()
	s.subs.remove(sb)
	s.mu.Unlock()
	s.r.closeSub(sb)
	s.closedMsg(sb.id, reason)
}

func (s *Session) String() string { return fmt.Sprintf("session(%s)", s.IP()) }

// IP returns the client's address (no port), for limits and logs.
func (s *Session) IP() string {
	if !s.addr.IsValid() {
		return "?"
	}
	return s.addr.String()
}

// idleFor returns how long since the last inbound frame.
func (s *Session) idleFor(now time.Time) time.Duration {
	return time.Duration(now.UnixNano() - s.lastRead.Load())
}

// subList is a session's open subscriptions: a slice searched linearly.
// Most connections hold one to a few subscriptions, and MaxSubscriptions
// bounds the scan; a slice costs far less per idle connection than a map.
type subList []*sub

func (l subList) get(id string) *sub {
	for _, sb := range l {
		if sb.id == id {
			return sb
		}
	}
	return nil
}

// put adds sb, replacing the subscription with the same id; it returns
// the replaced one.
func (l *subList) put(sb *sub) (old *sub) {
	for i, x := range *l {
		if x.id == sb.id {
			(*l)[i] = sb
			return x
		}
	}
	*l = append(*l, sb)
	return nil
}

// remove deletes sb if it is listed.
func (l *subList) remove(sb *sub) {
	for i, x := range *l {
		if x == sb {
			last := len(*l) - 1
			(*l)[i] = (*l)[last]
			(*l)[last] = nil
			*l = (*l)[:last]
			if len(*l) == 0 {
				*l = nil
			}
			return
		}
	}
}
