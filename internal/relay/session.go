package relay

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/petrel-relay/petrel/internal/nostr"
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

	subValues     int32                  // filter values of subs (filterValues); guarded by mu
	pendingEvents atomic.Int32           // EVENTs awaiting their OK
	pinged        atomic.Bool            // a ping is outstanding
	lastRead      atomic.Int64           // unix nanos of the last inbound frame
	parked        *queryJob              // query paused on this session's budget; guarded by out.mu
	closeReason   atomic.Pointer[string] // a limit's close (LimitClosed)
	slot          int32                  // registry position; guarded by Relay.regMu
	badSigs       atomic.Int32           // invalid signatures in a row (MaxBadSignatures)

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
	if s.closed.Load() || s.closing.Load() || len(data) > 125 {
		return
	}
	o := &s.out
	o.mu.Lock()
	o.appendControlFrame(opPong, data)
	backlog := o.bytes[catControl]
	o.mu.Unlock()
	// A client that pings and does not read its pongs is bounded as one
	// that does not read its answers (sendControl).
	if backlog > controlBacklogFactor*s.r.cfg.OutQueueBytes {
		s.closeFor(ClosePolicy, "not reading responses", limControlBacklog)
		return
	}
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
		if lim != limIdleTimeout {
			s.closeReason.Store(&reason)
		}
	}
	s.t.Close(code, reason)
	return true
}

// LimitClosed returns why the relay closed the connection for a limit the
// client went past (not reading, invalid signatures, a message too big),
// or "" when it did not (the client left, an idle timeout, a shutdown):
// what the transport logs when the connection is gone.
func (s *Session) LimitClosed() string {
	if p := s.closeReason.Load(); p != nil {
		return *p
	}
	return ""
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
	msg, err := nostr.ParseClientMessage(data, &r.live.Load().parse)
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
