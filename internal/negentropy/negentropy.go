package negentropy

import (
	"fmt"
	"slices"
)

// ProtocolVersion is the version byte of Negentropy protocol version 1,
// the first byte of every message.
const ProtocolVersion = 0x61

// MinFrameSizeLimit is the smallest non-zero frame size limit New accepts.
const MinFrameSizeLimit = 4096

// Range modes.
const (
	modeSkip        = 0
	modeFingerprint = 1
	modeIDList      = 2
)

const (
	// buckets is how many fingerprinted ranges a range is split into.
	buckets = 16
	// frameSlack is how far below the frame size limit a message stops
	// taking ranges, leaving room for the closing fingerprint range.
	frameSlack = 200
)

// Negentropy is one side of one reconciliation session over a Vector. The
// client side calls Initiate once and then ReconcileClient with each reply;
// the server side calls Reconcile with each message. A Negentropy is not
// safe for concurrent use; it holds no resources beyond its memory.
type Negentropy struct {
	v              *Vector
	frameSizeLimit int
	initiator      bool
	started        bool
	// referenceTail makes the closing fingerprint of a message cut at the
	// frame size limit cover what the reference implementations cover
	// (from the upper bound of the range being processed), instead of
	// exactly the range it is sent for. Tests only.
	referenceTail bool

	out    []byte                    // scratch for one range's output
	theirs map[[IDSize]byte]struct{} // client scratch for id lists
}

// New starts a session over v. frameSizeLimit caps the size in bytes of
// every message the session produces after the first (the binary message;
// hex doubles it): 0 means no limit, otherwise it must be at least
// MinFrameSizeLimit (ErrFrameSizeLimit). A session keeps v and reads it on
// every call; v may be shared with other sessions.
func New(v *Vector, frameSizeLimit int) (*Negentropy, error) {
	if frameSizeLimit < 0 || (frameSizeLimit != 0 && frameSizeLimit < MinFrameSizeLimit) {
		return nil, fmt.Errorf("%w: %d", ErrFrameSizeLimit, frameSizeLimit)
	}
	return &Negentropy{v: v, frameSizeLimit: frameSizeLimit}, nil
}

// Initiate makes this session the client and returns the first message,
// which NIP-77 sends in NEG-OPEN. It fails with ErrRole if called twice or
// after Reconcile. The first message is never cut at the frame size limit:
// it holds at most 16 fingerprints or 31 ids. The returned slice belongs to
// the caller.
func (n *Negentropy) Initiate() ([]byte, error) {
	if n.started {
		return nil, ErrRole
	}
	n.started, n.initiator = true, true
	var e encoder
	out := make([]byte, 1, 1+buckets*(2*maxVarintLen+IDSize+1+FingerprintSize))
	out[0] = ProtocolVersion
	return n.splitRange(out, &e, 0, n.v.Len(), &infinity), nil
}

// Reconcile answers one client message on the server side and returns the
// reply, which NIP-77 sends in NEG-MSG. The server keeps no state between
// messages. A malformed message yields one of the message errors
// (ErrTruncated, ErrVarint, ErrInvalidVersion, ErrBoundLength,
// ErrBoundOrder, ErrMode), for which the relay sends NEG-ERR. A message of
// another protocol version (0x60 or 0x62 to 0x6f) yields
// ErrUnsupportedVersion together with a one-byte reply naming version 1,
// which the server must send to the client as NEG-MSG. Reconcile on a
// client session fails with ErrRole. The returned slice belongs to the
// caller; msg is not retained.
func (n *Negentropy) Reconcile(msg []byte) ([]byte, error) {
	if n.initiator {
		return nil, ErrRole
	}
	n.started = true
	return n.reconcile(msg, nil)
}

// ReconcileClient processes one server reply on the client side. It
// returns the ids this side has and the server lacks (have) and the ids the
// server has and this side lacks (need), learnt from this reply. next is
// the message to send back (NEG-MSG), or nil when reconciliation is
// complete (the client then sends NEG-CLOSE). Over a whole session have and
// need cover the symmetric difference exactly; without a frame size limit
// on either side each id is reported once, but after a message cut at the
// limit the protocol goes over later ranges again, so an id can be
// reported in more than one round and the caller should deduplicate.
// Errors are as for Reconcile, except that a reply of another protocol
// version is only an error (ErrUnsupportedVersion). ReconcileClient before
// Initiate fails with ErrRole. The returned slices belong to the caller;
// msg is not retained.
func (n *Negentropy) ReconcileClient(msg []byte) (next []byte, have, need [][IDSize]byte, err error) {
	if !n.initiator {
		return nil, nil, nil, ErrRole
	}
	var d diff
	out, err := n.reconcile(msg, &d)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(out) == 1 {
		out = nil
	}
	return out, d.have, d.need, nil
}

// diff collects the client's findings from one message.
type diff struct {
	have, need [][IDSize]byte
}

// exceeded reports whether a message of size bytes is past the point
// where it must be cut.
func (n *Negentropy) exceeded(size int) bool {
	return n.frameSizeLimit != 0 && size > n.frameSizeLimit-frameSlack
}

// reconcile processes one message; d is nil on the server.
func (n *Negentropy) reconcile(msg []byte, d *diff) ([]byte, error) {
	dec := decoder{reader: reader{buf: msg}}
	var enc encoder
	// The answer is usually about as long as the message, or longer.
	size := max(256, len(msg))
	if n.frameSizeLimit != 0 {
		size = min(size, n.frameSizeLimit)
	}
	full := make([]byte, 1, size)
	full[0] = ProtocolVersion

	v, err := dec.byte()
	if err != nil {
		return nil, err
	}
	if v < 0x60 || v > 0x6f {
		return nil, fmt.Errorf("%w: 0x%02x", ErrInvalidVersion, v)
	}
	if v != ProtocolVersion {
		err := fmt.Errorf("%w: 0x%02x", ErrUnsupportedVersion, v)
		if d != nil {
			return nil, err
		}
		return full, err
	}

	items := n.v.items
	size = len(items)
	var prevBound bound // the lower bound of the next range
	prevIndex := 0      // the index of the first item at or above prevBound
	written := 0        // the index of the first item at or above the last bound written
	skipping := false   // a run of ranges not answered, not yet written as one Skip
	o := n.out[:0]

	for dec.len() > 0 {
		o = o[:0]
		curr, err := dec.bound()
		if err != nil {
			return nil, err
		}
		if compareBounds(&curr, &prevBound) < 0 {
			return nil, ErrBoundOrder
		}
		mode, err := dec.varint()
		if err != nil {
			return nil, err
		}
		lower := prevIndex
		upper := n.v.lowerBound(prevIndex, size, &curr)

		// endSkip writes the pending run of unanswered ranges as one Skip
		// range ending where this range starts.
		endSkip := func() {
			if skipping {
				skipping = false
				o = enc.appendBound(o, &prevBound)
				o = append(o, modeSkip)
			}
		}

		switch mode {
		case modeSkip:
			skipping = true

		case modeFingerprint:
			theirs, err := dec.bytes(FingerprintSize)
			if err != nil {
				return nil, err
			}
			if ours := n.v.Fingerprint(lower, upper); string(ours[:]) == string(theirs) {
				skipping = true
			} else {
				endSkip()
				o = n.splitRange(o, &enc, lower, upper, &curr)
			}

		case modeIDList:
			count, err := dec.varint()
			if err != nil {
				return nil, err
			}
			if count > uint64(dec.len()/IDSize) {
				return nil, fmt.Errorf("%w: id list of %d ids", ErrTruncated, count)
			}
			ids, _ := dec.bytes(count * IDSize)
			if d != nil {
				n.diffIDs(d, ids, items[lower:upper])
				skipping = true
				break
			}
			// The server answers with its own ids for the range, as many as
			// fit; if they do not all fit, the range it answers ends at the
			// first id left out, and the closing fingerprint covers the rest.
			// The answer goes straight into the message: it is never
			// dropped, and may be long.
			endSkip()
			full = append(full, o...)
			used := len(full) - len(o)
			o = o[:0]
			end := curr
			if k := n.idsThatFit(used, upper-lower); k < upper-lower {
				upper = lower + k
				end = itemBound(&items[upper])
			}
			full = enc.appendBound(full, &end)
			full = append(full, modeIDList)
			full = appendVarint(full, uint64(upper-lower))
			full = slices.Grow(full, (upper-lower)*IDSize)
			for i := lower; i < upper; i++ {
				full = append(full, items[i].ID[:]...)
			}
			written = upper

		default:
			return nil, fmt.Errorf("%w: %d", ErrMode, mode)
		}

		if n.exceeded(len(full) + len(o)) {
			// Drop this range's answer and close the message with one
			// fingerprint from the last bound written to infinity.
			from := written
			if n.referenceTail {
				from = upper
			}
			fp := n.v.Fingerprint(from, size)
			full = enc.appendBound(full, &infinity)
			full = append(full, modeFingerprint)
			full = append(full, fp[:]...)
			break
		}
		if len(o) > 0 {
			full = append(full, o...)
			written = upper
		}
		prevIndex = upper
		prevBound = curr
	}
	n.out = o[:0]
	return full, nil
}

// idsThatFit returns how many of avail ids a server's id list answer may
// hold when the message so far is used bytes long. Like the reference, it
// counts the ids alone, not the range's bound and header.
func (n *Negentropy) idsThatFit(used, avail int) int {
	if n.frameSizeLimit == 0 {
		return avail
	}
	room := n.frameSizeLimit - frameSlack - used
	if room < 0 {
		return 0
	}
	return min(avail, room/IDSize+1)
}

// diffIDs compares the ids of an id list from the server with ours in the
// same range and records the differences in d.
func (n *Negentropy) diffIDs(d *diff, ids []byte, ours []Item) {
	if n.theirs == nil {
		n.theirs = make(map[[IDSize]byte]struct{}, len(ids)/IDSize)
	}
	theirs := n.theirs
	clear(theirs)
	for i := 0; i < len(ids); i += IDSize {
		theirs[[IDSize]byte(ids[i:i+IDSize])] = struct{}{}
	}
	for i := range ours {
		if _, ok := theirs[ours[i].ID]; ok {
			delete(theirs, ours[i].ID)
		} else {
			d.have = append(d.have, ours[i].ID)
		}
	}
	for i := 0; i < len(ids) && len(theirs) > 0; i += IDSize {
		id := [IDSize]byte(ids[i : i+IDSize])
		if _, ok := theirs[id]; ok {
			delete(theirs, id)
			d.need = append(d.need, id)
		}
	}
}

// splitRange appends the answer for items [lower, upper) whose range ends
// at ub: the ids themselves when there are fewer than 2*buckets, otherwise
// buckets fingerprints of near-equal parts, the larger parts first.
func (n *Negentropy) splitRange(dst []byte, e *encoder, lower, upper int, ub *bound) []byte {
	items := n.v.items
	num := upper - lower
	if num < 2*buckets {
		dst = e.appendBound(dst, ub)
		dst = append(dst, modeIDList)
		dst = appendVarint(dst, uint64(num))
		for i := lower; i < upper; i++ {
			dst = append(dst, items[i].ID[:]...)
		}
		return dst
	}
	per, extra := num/buckets, num%buckets
	curr := lower
	for i := range buckets {
		next := curr + per
		if i < extra {
			next++
		}
		fp := n.v.Fingerprint(curr, next)
		curr = next
		b := *ub
		if curr != upper {
			b = minimalBound(&items[curr-1], &items[curr])
		}
		dst = e.appendBound(dst, &b)
		dst = append(dst, modeFingerprint)
		dst = append(dst, fp[:]...)
	}
	return dst
}
