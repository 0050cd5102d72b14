package nostr

import (
	"strconv"
	"unsafe"
)

// This file is the event half of the codec: ParseEvent, which reads an event
// object in one pass, and Serialize/AppendEvent, which write one.

// Bits of eventState.seen, one per NIP-01 field.
const (
	seenID = 1 << iota
	seenPubKey
	seenCreatedAt
	seenKind
	seenTags
	seenContent
	seenSig
	seenAll = 1<<iota - 1
)

var eventFieldNames = [...]string{"id", "pubkey", "created_at", "kind", "tags", "content", "sig"}

// eventState is the part of parser holding one event being read.
type eventState struct {
	start, end  int // bounds of the object in p.d
	decStart    int // p.dec length when the object started
	seen        uint8
	unknown     bool
	pubkey      PubKey
	sig         Sig
	createdAt   int64
	kind        int
	content     span
	elems       []span   // all tag elements, in order
	tagEnds     []uint32 // len(elems) at the end of each tag
	unknownKeys []string // unknown keys seen, for duplicate detection
}

// ParseEvent parses one NIP-01 event object. lim may be nil (no limits).
//
// It refuses, with a *ParseError:
//   - anything but one JSON object, optionally surrounded by whitespace;
//   - a missing field, or a field (known or unknown) given twice, also when
//     a key is spelled with \u escapes;
//   - id, pubkey or sig that is not a string of exactly 64, 64 or 128
//     lowercase hex characters;
//   - created_at not an integer in [0, MaxTimestamp], or kind not one in
//     [0, MaxKind] (no sign, fraction, exponent or leading zero);
//   - tags not an array of arrays of strings (an empty tag [] is allowed);
//     content not a string;
//   - a string with invalid UTF-8, a raw control character (below 0x20),
//     an unknown escape, or a \u escape of a lone UTF-16 surrogate (a high
//     surrogate must be followed by a \u low surrogate; the pair is one code
//     point). \u0000 is accepted. Lone surrogates are refused because they
//     have no UTF-8 form, so the canonical serialization, and the id, would
//     depend on the implementation;
//   - more than lim.MaxTags tags, more than lim.MaxTagElems elements in a
//     tag, or content longer than lim.MaxContentBytes after unescaping
//     (ParseError.Bound names which; the count is checked while reading,
//     so a giant array is refused at the limit).
//
// ParseError.HasEventID and EventID are set when the id had been read when
// the error was found. Unknown keys are skipped (their values must be valid
// JSON, nested at most 64 deep; at most 64 unknown keys per object).
//
// The returned event owns a private copy of the object's bytes in Raw
// (surrounding whitespace trimmed), so data may be reused by the caller as
// soon as ParseEvent returns. Strings that had no escapes point into that
// copy; escaped strings are decoded into the same allocation, just past
// Raw's capacity. If the object had unknown keys, Raw is instead the compact
// re-serialization (Serialize), so junk fields are never stored or
// forwarded. The event is not verified: use CheckID and the signature
// check.
func ParseEvent(data []byte, lim *Limits) (*Event, error) {
	if len(data) > maxInput {
		return nil, &ParseError{Msg: "event too large", Bound: BoundEventBytes}
	}
	p := getParser(data, lim)
	defer putParser(p)
	p.ws()
	if err := p.eventObject(); err != nil {
		return nil, err
	}
	if err := p.end(); err != nil {
		return nil, err
	}
	ev, _ := p.finishEvent(new(Event), nil)
	return ev, nil
}

// eventObject reads an event object starting at p.i.
func (p *parser) eventObject() *ParseError {
	e := &p.ev
	if p.peek() != '{' {
		return p.fail("event must be a JSON object")
	}
	e.start = p.i
	e.decStart = len(p.dec)
	e.seen = 0
	e.unknown = false
	e.elems = e.elems[:0]
	e.tagEnds = e.tagEnds[:0]
	e.unknownKeys = e.unknownKeys[:0]
	p.i++
	p.ws()
	if p.peek() == '}' {
		p.i++
	} else {
		for {
			if err := p.eventMember(); err != nil {
				return err
			}
			more, err := p.next('}')
			if err != nil {
				return err
			}
			if !more {
				break
			}
		}
	}
	e.end = p.i
	if e.seen != seenAll {
		for i, name := range eventFieldNames {
			if e.seen&(1<<i) == 0 {
				return p.failf("missing field %q", name)
			}
		}
	}
	return nil
}

// eventMember reads one "key": value pair of an event object.
func (p *parser) eventMember() *ParseError {
	e := &p.ev
	k, err := p.key()
	if err != nil {
		return err
	}
	var bit uint8
	switch string(k) {
	case "id":
		bit = seenID
	case "pubkey":
		bit = seenPubKey
	case "created_at":
		bit = seenCreatedAt
	case "kind":
		bit = seenKind
	case "tags":
		bit = seenTags
	case "content":
		bit = seenContent
	case "sig":
		bit = seenSig
	default:
		for _, u := range e.unknownKeys {
			if u == string(k) {
				return p.failf("duplicate key %s", quoteShort(k))
			}
		}
		if len(e.unknownKeys) >= maxUnknownKeys {
			return p.failf("too many unknown keys (max %d)", maxUnknownKeys)
		}
		e.unknownKeys = append(e.unknownKeys, string(k))
		e.unknown = true
		return p.skipValue(0)
	}
	if e.seen&bit != 0 {
		return p.failf("duplicate key %q", k)
	}
	e.seen |= bit
	switch bit {
	case seenID:
		if err := p.hexField(p.eventID[:], "id"); err != nil {
			return err
		}
		p.hasEventID = true
	case seenPubKey:
		return p.hexField(e.pubkey[:], "pubkey")
	case seenSig:
		return p.hexField(e.sig[:], "sig")
	case seenCreatedAt:
		v, err := p.uintVal(MaxTimestamp, "created_at")
		if err != nil {
			return err
		}
		e.createdAt = int64(v)
	case seenKind:
		v, err := p.uintVal(MaxKind, "kind")
		if err != nil {
			return err
		}
		e.kind = int(v)
	case seenContent:
		if p.peek() != '"' {
			return p.fail("content must be a string")
		}
		s, err := p.str()
		if err != nil {
			return err
		}
		if int(s.n) > p.lim.content {
			return p.limitf(BoundContentBytes, "content too long: %d bytes (max %d)", s.n, p.lim.content)
		}
		e.content = s
	case seenTags:
		return p.tags()
	}
	return nil
}

// tags reads the tags array.
func (p *parser) tags() *ParseError {
	e := &p.ev
	if p.peek() != '[' {
		return p.fail("tags must be an array of arrays of strings")
	}
	p.i++
	p.ws()
	if p.peek() == ']' {
		p.i++
		return nil
	}
	for {
		if len(e.tagEnds) >= p.lim.tags {
			return p.limitf(BoundTags, "too many tags (max %d)", p.lim.tags)
		}
		if p.peek() != '[' {
			return p.fail("tags must be an array of arrays of strings")
		}
		p.i++
		p.ws()
		if p.peek() == ']' {
			p.i++
		} else {
			n := 0
			for {
				if n >= p.lim.tagElems {
					return p.limitf(BoundTagElems, "too many elements in tag %d (max %d)", len(e.tagEnds), p.lim.tagElems)
				}
				if p.peek() != '"' {
					return p.fail("tags must be an array of arrays of strings")
				}
				s, err := p.str()
				if err != nil {
					return err
				}
				e.elems = append(e.elems, s)
				n++
				more, err := p.next(']')
				if err != nil {
					return err
				}
				if !more {
					break
				}
			}
		}
		e.tagEnds = append(e.tagEnds, uint32(len(e.elems)))
		more, err := p.next(']')
		if err != nil {
			return err
		}
		if !more {
			return nil
		}
	}
}

// finishEvent builds the Event read by eventObject into ev. It makes one
// allocation for the bytes (the object's raw JSON, then its decoded strings,
// then extra) and one each for the tag slices. extra is copied after the
// event's own bytes and returned as a string; it lets a message parser keep
// a subscription id in the same allocation.
func (p *parser) finishEvent(ev *Event, extra []byte) (*Event, string) {
	e := &p.ev
	raw := p.d[e.start:e.end]
	dec := p.dec[e.decStart:]
	buf := make([]byte, len(raw)+len(dec)+len(extra))
	copy(buf, raw)
	copy(buf[len(raw):], dec)
	copy(buf[len(raw)+len(dec):], extra)

	str := func(s span) string {
		if s.n == 0 {
			return ""
		}
		off := int(s.off) - e.start
		if s.dec {
			off = len(raw) + int(s.off) - e.decStart
		}
		return unsafe.String(&buf[off], int(s.n))
	}

	ev.ID = p.eventID
	ev.PubKey = e.pubkey
	ev.Sig = e.sig
	ev.CreatedAt = e.createdAt
	ev.Kind = e.kind
	ev.Content = str(e.content)
	ev.Tags = nil
	if len(e.tagEnds) > 0 {
		var strs []string
		if len(e.elems) > 0 {
			strs = make([]string, len(e.elems))
			for i, s := range e.elems {
				strs[i] = str(s)
			}
		}
		tags := make(Tags, len(e.tagEnds))
		lo := uint32(0)
		for i, hi := range e.tagEnds {
			tags[i] = Tag(strs[lo:hi:hi])
			lo = hi
		}
		ev.Tags = tags
	}
	ev.Raw = buf[:len(raw):len(raw)]
	if e.unknown {
		ev.Raw = AppendEvent(make([]byte, 0, len(raw)), ev)
	}
	var x string
	if len(extra) > 0 {
		x = unsafe.String(&buf[len(raw)+len(dec)], len(extra))
	}
	return ev, x
}

// Serialize returns the event as a compact JSON object in the conventional
// key order (id, pubkey, created_at, kind, tags, content, sig), with strings
// escaped as in the canonical form. The result is a new slice owned by the
// caller; it is what Raw should hold for an event built in code.
func Serialize(ev *Event) []byte {
	return AppendEvent(make([]byte, 0, serializedSizeHint(ev)), ev)
}

// AppendEvent appends the event as a compact JSON object (see Serialize) to
// dst and returns the extended slice. It ignores ev.Raw.
func AppendEvent(dst []byte, ev *Event) []byte {
	dst = append(dst, `{"id":"`...)
	dst = appendHex(dst, ev.ID[:])
	dst = append(dst, `","pubkey":"`...)
	dst = appendHex(dst, ev.PubKey[:])
	dst = append(dst, `","created_at":`...)
	dst = strconv.AppendInt(dst, ev.CreatedAt, 10)
	dst = append(dst, `,"kind":`...)
	dst = strconv.AppendInt(dst, int64(ev.Kind), 10)
	dst = append(dst, `,"tags":`...)
	dst = appendTags(dst, ev.Tags)
	dst = append(dst, `,"content":`...)
	dst = AppendString(dst, ev.Content)
	dst = append(dst, `,"sig":"`...)
	dst = appendHex(dst, ev.Sig[:])
	return append(dst, `"}`...)
}

// serializedSizeHint estimates Serialize's output length (exact when no
// string needs escaping).
func serializedSizeHint(ev *Event) int {
	n := 300 + len(ev.Content)
	for _, t := range ev.Tags {
		n += 3
		for _, s := range t {
			n += len(s) + 3
		}
	}
	return n
}
