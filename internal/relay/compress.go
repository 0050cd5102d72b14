package relay

import (
	"github.com/petrel-relay/petrel/internal/deflate"
	"github.com/petrel-relay/petrel/internal/nostr"
)

// Compression (permessage-deflate, RFC 7692). The server negotiates it;
// the relay builds the compressed EVENT frames itself, without context
// takeover, so that a connection holds no compressor between messages:
//
//	payload = stored block(`["EVENT","<subid>",`) + deflate(raw event + "]")
//
// The prefix is a stored (uncompressed) DEFLATE block, five bytes of
// header and no compression work per subscriber; the body is compressed
// once per event (a live event once for all its subscribers) and ends
// without its final sync flush, as RFC 7692 7.2.1 has the sender do.
// Control frames (OK, EOSE, CLOSED, NOTICE, ...) go uncompressed, and so
// does an event whose compressed frame would not be smaller.

// Compression configures the relay's compressed frames. Call
// SetCompression before the first session starts.
type Compression struct {
	// Codec compresses event bodies; nil turns compression off.
	Codec *deflate.Codec
	// MinBytes: EVENT frames shorter than this are sent uncompressed
	// without trying.
	MinBytes int
	// CacheBytes bounds the cache of recent events' compressed bodies
	// (bodycache.go); under 64 KiB: no cache.
	CacheBytes int
}

// SetCompression sets how sessions that negotiated permessage-deflate
// (Session.EnableCompression) are sent events. It must be called before
// any session starts.
func (r *Relay) SetCompression(c Compression) {
	r.zc = c
	r.zcache = nil
	if c.Codec != nil {
		r.zcache = newBodyCache(c.CacheBytes)
	}
}

// EnableCompression marks the session as having negotiated
// permessage-deflate, with a server window of windowBits (8 to 15): its
// EVENT frames are sent compressed where that is smaller. It must be
// called before Start.
func (s *Session) EnableCompression(windowBits int) {
	if s.r.zc.Codec == nil || windowBits < 8 || windowBits > 15 {
		return
	}
	s.out.zbits = uint8(windowBits)
}

// Compressed reports whether the session negotiated permessage-deflate.
func (s *Session) Compressed() bool { return s.out.zbits != 0 }

// wantsBody reports whether an EVENT frame of raw for this session should
// be offered a compressed body: the session negotiated compression, the
// frame is long enough to be worth it, and the body fits the window the
// client allows (no back-reference in it reaches further than its own
// length). Reading zbits needs no lock: it is set before Start.
func (s *Session) wantsBody(prefix string, raw []byte) bool {
	zb := s.out.zbits
	return zb != 0 && len(prefix)+len(raw)+1 >= s.r.zc.MinBytes && len(raw)+1 <= 1<<zb
}

// appendBody appends raw + "]" compressed as the last part of a message.
func (r *Relay) appendBody(dst, raw []byte) []byte {
	return r.zc.Codec.AppendLast(dst, raw, closeBracket)
}

var closeBracket = []byte("]")

// body returns the compressed body of raw (event id): from the cache, or
// compressed into buf and cached. It returns the body and buf, which the
// caller keeps for the next call; the body is valid until then.
func (r *Relay) body(id nostr.ID, raw, buf []byte) (z, newBuf []byte) {
	c := r.zcache
	if c != nil {
		if z := c.get(id, raw); z != nil {
			r.stats.BodyCacheHits.Add(1)
			return z, buf
		}
	}
	buf = r.appendBody(buf[:0], raw)
	if c != nil {
		c.put(id, raw, buf)
	}
	return buf, buf
}

// countCompressed records one EVENT frame queued compressed: wire is its
// size, saved what it saved over the uncompressed frame.
func (r *Relay) countCompressed(wire, saved int) {
	r.stats.FramesCompressed.Add(1)
	r.stats.BytesCompressed.Add(int64(wire))
	r.stats.BytesCompressionSaved.Add(int64(saved))
}

// eventFrameZ appends ["EVENT",<subid>,<raw>] compressed, from the
// subscription's prefix and the event's compressed body (appendBody), if
// that is smaller than the plain frame; it returns the frame's size and
// the bytes compression saved (0: sent plain). o.mu must be held.
func (o *outbox) appendEventFrameZ(cat uint8, prefix string, raw, zbody []byte) (int, int) {
	plain := len(prefix) + len(raw) + 1
	n := deflate.StoredLen(len(prefix)) + len(zbody)
	if zbody == nil || n >= plain || len(prefix) > deflate.MaxStored {
		return o.appendEventFrame(cat, prefix, raw), 0
	}
	total := wsHeaderLen(n) + n
	t := o.tail(total)
	t.b = appendWSHeader(t.b, opText, n)
	t.b[len(t.b)-wsHeaderLen(n)] |= rsv1
	t.b = deflate.AppendStored(t.b, []byte(prefix))
	t.b = append(t.b, zbody...)
	o.account(t, cat, total)
	return total, wsHeaderLen(plain) + plain - total
}

// appendEvent appends an EVENT frame for subscription prefix, compressed
// when the session negotiated it and that is smaller. zbody is raw's
// compressed body if the caller has it (nil: computed here when wanted).
// It returns the frame's size. o.mu must be held.
func (s *Session) appendEvent(cat uint8, prefix string, raw, zbody []byte) int {
	o := &s.out
	if zbody == nil {
		if !s.wantsBody(prefix, raw) {
			return o.appendEventFrame(cat, prefix, raw)
		}
		bp := scratchPool.Get().(*[]byte)
		zbody = s.r.appendBody((*bp)[:0], raw)
		size := s.appendEventZ(cat, prefix, raw, zbody)
		*bp = zbody
		scratchPool.Put(bp)
		return size
	}
	return s.appendEventZ(cat, prefix, raw, zbody)
}

// appendEventZ is appendEvent with the compressed body. o.mu must be held.
func (s *Session) appendEventZ(cat uint8, prefix string, raw, zbody []byte) int {
	size, saved := s.out.appendEventFrameZ(cat, prefix, raw, zbody)
	if saved > 0 {
		s.r.countCompressed(size, saved)
	}
	return size
}

// rsv1 marks a compressed message's first frame (RFC 7692 6).
const rsv1 = 0x40
