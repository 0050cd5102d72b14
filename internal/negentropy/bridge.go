package negentropy

import (
	"errors"
	"fmt"
	"slices"
)

// ErrBridgeReply is returned by Bridge.Reply for a reply that does not
// answer the message it was sent: a range outside those asked about, or
// a reply while none is awaited.
var ErrBridgeReply = errors.New("negentropy: reply does not answer the bridge's message")

// Side names one of the two servers a Bridge reconciles.
type Side int

// The two sides of a Bridge.
const (
	SideA Side = 0
	SideB Side = 1
)

func (s Side) other() Side { return 1 - s }

// String returns "A" or "B".
func (s Side) String() string {
	if s == SideA {
		return "A"
	}
	return "B"
}

// maxRangeReply is the most bytes a server's answer to one Fingerprint
// range can take: 16 fingerprinted buckets, or an id list of at most 31
// ids (a split never cuts an id list).
const maxRangeReply = 2*buckets*IDSize + 2*maxVarintLen + IDSize + 1

// maxRangeMsg is the most bytes one range takes in a Bridge's message: a
// lower bound (when it is not the previous range's upper one) and an
// upper bound, each a timestamp and an id prefix, their modes and a
// fingerprint.
const maxRangeMsg = 2*(maxVarintLen+1+IDSize) + 2 + FingerprintSize

// maxGrowth bounds how much a side's message grows from one message to
// the next, so one answer's estimate cannot overshoot far.
const maxGrowth = 4

// Bridge reconciles the sets of two servers, A and B, when neither set is
// at hand: both are behind NIP-77 relays, and the Bridge is the client
// (initiator) of one session with each. It never sends a set of its own.
// Instead it passes each server's description of a range (a fingerprint,
// or the ids of a range holding fewer than 32 items) to the other server
// as a Fingerprint range: an equal fingerprint ends the range, a
// different one makes that server split it into finer ranges or answer
// with its ids, which go back the other way. A range is settled when both
// servers' ids for it are known, and the ids only one side holds are
// reported. The cost is that of two ordinary sessions over the
// difference: a few round trips per side and bytes proportional to the
// difference, not to the sets.
//
// Use: while !Done, for each side ask Next for a message (nil: nothing to
// send that side now); send the first one a side gets in NEG-OPEN and the
// rest in NEG-MSG; feed each side's answer to Reply, which returns the ids
// found only on A and only on B. Both sides may have a message in flight
// at once (at most one each). Each id is reported once.
//
// With a frame size limit, a message asks about as many ranges as fill
// the server's answer to the limit: the first one as many as the largest
// possible answers would, the next ones as many as the bytes an answered
// range took so far predict (ranges one side lacks come back as a few
// bytes each, so most messages hold hundreds), and never more than the
// limit in bytes. A server cuts an answer at its frame size limit (see
// the package comment): the Bridge sends the ranges left unanswered
// again, sizes that side's messages by the cut answer from then on, and
// ignores the closing fingerprint (whose coverage differs between
// implementations), so the result does not depend on how a server cuts.
// A Bridge is not safe for concurrent use.
type Bridge struct {
	// pending holds, per side, the ranges waiting to be sent to it, each
	// with the other side's description (or the probe); sent the ranges of
	// the message in flight to it.
	pending  [2][]bridgeRange
	sent     [2][]bridgeRange
	inFlight [2]bool
	// perMsg is how many ranges one message to a side holds at most.
	perMsg [2]int
	// budget is how many bytes a message to a side, and its answer, may
	// take (0: no limit): the frame size limit less the slack, lowered to
	// the size of an answer the side cut.
	budget [2]int
	// reported remembers the ids returned, so none is reported twice.
	reported map[[IDSize]byte]struct{}
	// Rounds counts the answers processed, per side.
	rounds [2]int
}

// bridgeRange is a range of the item space, [lower, upper), with one
// side's description of its items there.
type bridgeRange struct {
	lower, upper bound
	// owner is the side the description is from; -1 for the probe, the
	// fingerprint of the empty set that starts the bridge (a server that
	// skips it has no items in the range).
	owner Side
	fp    Fingerprint
	// ids are the owner's items in the range, when known (hasIDs).
	ids    [][IDSize]byte
	hasIDs bool
}

const probe Side = -1

// emptyFingerprint is the fingerprint of no items.
func emptyFingerprint() Fingerprint {
	var s sum256
	return s.fingerprint(0)
}

// idsFingerprint is the fingerprint of a list of ids.
func idsFingerprint(ids [][IDSize]byte) Fingerprint {
	var s sum256
	for i := range ids {
		s.add(&ids[i])
	}
	return s.fingerprint(uint64(len(ids)))
}

// NewBridge returns a Bridge whose first message goes to side A.
// frameSizeLimit is the frame size limit the servers are expected to
// answer within (0: none): it sets how many ranges one message asks
// about, so that an answer to all of them fits; a server that cuts its
// answers all the same gets smaller messages from then on.
func NewBridge(frameSizeLimit int) (*Bridge, error) {
	if frameSizeLimit < 0 || (frameSizeLimit != 0 && frameSizeLimit < MinFrameSizeLimit) {
		return nil, fmt.Errorf("%w: %d", ErrFrameSizeLimit, frameSizeLimit)
	}
	per, budget := 1<<10, 0
	if frameSizeLimit != 0 {
		budget = frameSizeLimit - frameSlack
		per = max(1, budget/maxRangeReply)
	}
	b := &Bridge{perMsg: [2]int{per, per}, budget: [2]int{budget, budget}, reported: make(map[[IDSize]byte]struct{})}
	b.pending[SideA] = []bridgeRange{{upper: infinity, owner: probe, fp: emptyFingerprint()}}
	return b, nil
}

// Done reports whether the reconciliation is complete: nothing is left to
// send and no answer is awaited.
func (b *Bridge) Done() bool {
	return len(b.pending[0])+len(b.pending[1]) == 0 && !b.inFlight[0] && !b.inFlight[1]
}

// Rounds returns the number of answers processed from each side.
func (b *Bridge) Rounds() (a, bb int) { return b.rounds[SideA], b.rounds[SideB] }

// Next returns the next message for side s, or nil when there is nothing
// to send it now (its answer to the last message is awaited, or no range
// waits for it). The returned slice belongs to the caller.
func (b *Bridge) Next(s Side) []byte {
	if b.inFlight[s] || len(b.pending[s]) == 0 {
		return nil
	}
	p := b.pending[s]
	slices.SortFunc(p, func(x, y bridgeRange) int { return compareBounds(&x.lower, &y.lower) })
	var e encoder
	out := []byte{ProtocolVersion}
	var prev bound // the upper bound of the last range written
	n := 0
	for ; n < min(len(p), b.perMsg[s]); n++ {
		if n > 0 && b.budget[s] != 0 && len(out)+maxRangeMsg > b.budget[s] {
			break
		}
		r := &p[n]
		if compareBounds(&r.lower, &prev) != 0 {
			out = e.appendBound(out, &r.lower)
			out = append(out, modeSkip)
		}
		out = e.appendBound(out, &r.upper)
		out = append(out, modeFingerprint)
		out = append(out, r.fp[:]...)
		prev = r.upper
	}
	b.sent[s] = slices.Clone(p[:n])
	b.pending[s] = slices.Delete(p, 0, n)
	b.inFlight[s] = true
	return out
}

// resize sets how many ranges the next messages to side s hold, from its
// answer of size bytes to a message of sent ranges, of which the first
// answered were answered (all of them unless the server cut its answer).
// A cut answer was full: the next messages hold a quarter more ranges
// than it answered, so answers stay full (a cut costs only the few bytes
// of the ranges sent again). Otherwise, after a full message, as many
// ranges as the bytes an answered range took would fill the budget with,
// at most maxGrowth times as many as before.
func (b *Bridge) resize(s Side, sent, answered, size int, cut bool) {
	if cut {
		if b.budget[s] == 0 || size < b.budget[s] {
			// The server's own limit is below the one expected.
			b.budget[s] = max(size, MinFrameSizeLimit/2)
		}
		b.perMsg[s] = max(1, answered+answered/4)
		return
	}
	if b.budget[s] == 0 || (sent < b.perMsg[s] && size <= b.budget[s]) {
		// No limit, or not a full message and an answer that fitted.
		return
	}
	perRange := max(1, size/max(1, answered))
	b.perMsg[s] = max(1, min(b.budget[s]/perRange, maxGrowth*b.perMsg[s]))
}

// Reply processes side s's answer to the last message Next returned for
// it. It returns the ids found only on A and only on B; each id is
// reported once over the Bridge's life. A malformed answer yields one of
// the message errors of Reconcile, an answer that does not fit the
// message ErrBridgeReply; the Bridge cannot go on after either.
func (b *Bridge) Reply(s Side, msg []byte) (onlyA, onlyB [][IDSize]byte, err error) {
	if !b.inFlight[s] {
		return nil, nil, fmt.Errorf("%w: no message in flight to side %s", ErrBridgeReply, s)
	}
	sent := b.sent[s]
	b.sent[s], b.inFlight[s] = nil, false
	b.rounds[s]++
	other := s.other()

	dec := decoder{reader: reader{buf: msg}}
	v, err := dec.byte()
	if err != nil {
		return nil, nil, err
	}
	if v < 0x60 || v > 0x6f {
		return nil, nil, fmt.Errorf("%w: 0x%02x", ErrInvalidVersion, v)
	}
	if v != ProtocolVersion {
		return nil, nil, fmt.Errorf("%w: 0x%02x", ErrUnsupportedVersion, v)
	}

	only := [2][][IDSize]byte{}
	report := func(side Side, ids [][IDSize]byte) {
		for _, id := range ids {
			if _, dup := b.reported[id]; !dup {
				b.reported[id] = struct{}{}
				only[side] = append(only[side], id)
			}
		}
	}
	answered := make([]bool, len(sent))
	cut := -1 // index of the first sent range left unanswered by a cut
	var prev bound
	k := 0 // the sent range being answered
	for dec.len() > 0 {
		curr, err := dec.bound()
		if err != nil {
			return nil, nil, err
		}
		if compareBounds(&curr, &prev) < 0 {
			return nil, nil, ErrBoundOrder
		}
		mode, err := dec.varint()
		if err != nil {
			return nil, nil, err
		}
		lower := prev
		prev = curr
		var fp []byte
		var ids [][IDSize]byte
		switch mode {
		case modeSkip:
			continue
		case modeFingerprint:
			if fp, err = dec.bytes(FingerprintSize); err != nil {
				return nil, nil, err
			}
		case modeIDList:
			count, err := dec.varint()
			if err != nil {
				return nil, nil, err
			}
			if count > uint64(dec.len()/IDSize) {
				return nil, nil, fmt.Errorf("%w: id list of %d ids", ErrTruncated, count)
			}
			raw, _ := dec.bytes(count * IDSize)
			ids = make([][IDSize]byte, count)
			for i := range ids {
				ids[i] = [IDSize]byte(raw[i*IDSize:])
			}
		default:
			return nil, nil, fmt.Errorf("%w: %d", ErrMode, mode)
		}
		// Find the sent range holding [lower, curr).
		for k < len(sent) && compareBounds(&sent[k].upper, &lower) <= 0 {
			k++
		}
		inside := k < len(sent) && compareBounds(&sent[k].lower, &lower) <= 0 &&
			compareBounds(&curr, &sent[k].upper) <= 0
		if mode == modeFingerprint && dec.len() == 0 && curr.ts == infinity.ts &&
			(!inside || compareBounds(&lower, &sent[k].lower) == 0) {
			// The closing fingerprint of a cut answer: a split never
			// answers a whole range with one fingerprint. Everything from
			// its lower bound on is unanswered.
			for cut = 0; cut < len(sent) && compareBounds(&sent[cut].upper, &lower) <= 0; cut++ {
			}
			break
		}
		if !inside {
			return nil, nil, fmt.Errorf("%w: range ending at timestamp %d", ErrBridgeReply, curr.ts)
		}
		sr := &sent[k]
		answered[k] = true
		r := bridgeRange{lower: lower, upper: curr, owner: s}
		if mode == modeFingerprint {
			r.fp = Fingerprint(fp)
		} else {
			r.ids, r.hasIDs, r.fp = ids, true, idsFingerprint(ids)
			if sr.owner == other && sr.hasIDs && compareBounds(&lower, &sr.lower) == 0 &&
				compareBounds(&curr, &sr.upper) == 0 {
				// Both sides' ids for the same range: settled.
				a, bb := ids, sr.ids
				if s == SideB {
					a, bb = bb, a
				}
				report(SideA, minus(a, bb))
				report(SideB, minus(bb, a))
				continue
			}
		}
		b.pending[other] = append(b.pending[other], r)
	}
	if cut >= 0 {
		// Ask again about what the cut left out, in messages the size of
		// what was answered.
		b.pending[s] = append(b.pending[s], sent[cut:]...)
		b.resize(s, len(sent), cut, len(msg), true)
		sent = sent[:cut]
	} else {
		b.resize(s, len(sent), len(sent), len(msg), false)
	}
	for i := range sent {
		if answered[i] {
			continue
		}
		// Skipped: the fingerprint matched side s's items.
		if sent[i].owner == probe {
			// s has no items here; the other side's may still differ.
			b.pending[other] = append(b.pending[other], bridgeRange{lower: sent[i].lower, upper: sent[i].upper,
				owner: s, fp: sent[i].fp, ids: [][IDSize]byte{}, hasIDs: true})
		}
	}
	return only[SideA], only[SideB], nil
}

// minus returns the ids of a that are not in b.
func minus(a, b [][IDSize]byte) [][IDSize]byte {
	in := make(map[[IDSize]byte]struct{}, len(b))
	for _, id := range b {
		in[id] = struct{}{}
	}
	var out [][IDSize]byte
	for _, id := range a {
		if _, ok := in[id]; !ok {
			out = append(out, id)
		}
	}
	return out
}
