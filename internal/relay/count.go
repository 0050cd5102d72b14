package relay

import (
	"slices"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// NIP-45 COUNT.
//
// A COUNT is exact and never counts protected events (Config.
// ProtectedKinds) the client may not see. With P the protected kinds and
// V the events the client may see, and since events of protected kinds
// and the others are disjoint:
//
//	visible(F) = Count(F) - Count(F ∩ P) + Count(F ∩ P ∩ V)
//
// where F ∩ P narrows each filter's kinds to the protected ones. F ∩ P ∩ V
// is expressed with indexable filters when it can be: a filter whose
// authors (or "#p" values) are all authenticated pubkeys is wholly
// visible, and a filter without a "#p" condition splits into one limited
// to the authenticated authors and one limited to "#p" of them. Otherwise
// (a "#p" condition naming someone else) the protected matches are read
// one by one, at most Config.CountScanLimit of them, and the COUNT is
// refused with "restricted:" beyond that. An unauthenticated client sees
// no protected event (and a filter naming a protected kind was already
// refused with "auth-required:" by checkReq). The store counts are taken
// one after the other, so the result is exact up to writes committed
// meanwhile (it is never negative).
//
// The "hll" field (hll.go) is added when the filter qualifies (hllFilter)
// and at most Config.CountScanLimit events match: the matching events are
// read (newest first) in time slices like a stored query, and their
// pubkeys fill the registers.

// countJob phases.
const (
	countStart         uint8 = iota // nothing done yet
	countScanProtected              // reading protected matches one by one
	countPlanHLL                    // the count is known: decide on "hll"
	countScanHLL                    // reading matches to fill the registers
	countDone                       // send the answer
)

// countJob is a COUNT's state between slices. It is used by one query
// worker at a time.
type countJob struct {
	phase   uint8
	n       int64          // the count so far
	scanF   []nostr.Filter // filters of the running scan
	seen    int            // records read by the running scan
	visible int64          // records of the running scan the client may see
	over    bool           // the running scan passed CountScanLimit
	offset  int            // hll offset
	reg     *[hllRegisters]uint8
}

// runCount runs one slice of a COUNT.
func (q *queryScheduler) runCount(j *queryJob) {
	r, s, c := q.r, j.s, j.cnt
	if c.phase == countStart {
		rej, err := s.planCount(j)
		if err != nil {
			q.fail(j, err)
			return
		}
		if rej != nil {
			j.release()
			s.refuseReq(j.subID, rej)
			return
		}
	}
	deadline := time.Now().Add(r.cfg.QuerySlice)
	for {
		switch c.phase {
		case countScanProtected, countScanHLL:
			done, err := q.scanSlice(j, deadline)
			if err != nil {
				q.fail(j, err)
				return
			}
			if !done {
				q.enqueue(j)
				return
			}
			if c.over {
				r.stats.LimitTrips[limCountScan].Add(1)
			}
			if c.phase == countScanProtected {
				if c.over {
					j.release()
					s.refuseReq(j.subID, nostr.Reject(nostr.PrefixRestricted, "too many events of kinds "+r.pol.protText+
						" match to count the ones you may see; limit authors or #p to your authenticated pubkeys"))
					return
				}
				c.n += c.visible
				c.phase = countPlanHLL
			} else {
				if c.over {
					c.reg = nil
				}
				c.phase = countDone
			}
		case countPlanHLL:
			s.planHLL(j)
		default: // countDone
			j.release()
			n := max(c.n, 0)
			var hll []byte
			if c.reg != nil {
				hll = c.reg[:]
			}
			s.sendControl(func(b []byte) []byte { return nostr.AppendCount(b, j.subID, n, false, hll) })
			return
		}
	}
}

// planCount takes the store counts and decides what is left to do.
func (s *Session) planCount(j *queryJob) (*nostr.Rejection, error) {
	r, c := s.r, j.cnt
	total, err := r.store.Count(r.ctx, j.filters)
	if err != nil {
		return nil, err
	}
	c.n = total
	c.phase = countPlanHLL
	pf := r.protectedPart(j.filters)
	if len(pf) == 0 {
		return nil, nil
	}
	np, err := r.store.Count(r.ctx, pf)
	if err != nil {
		return nil, err
	}
	c.n -= np
	info := s.auth.load()
	if !info.authed() {
		return nil, nil
	}
	if vf, ok := visibleFilters(pf, info); ok {
		if len(vf) > 0 {
			nv, err := r.store.Count(r.ctx, vf)
			if err != nil {
				return nil, err
			}
			c.n += nv
		}
		return nil, nil
	}
	if r.live.Load().CountScanLimit < 0 {
		return nostr.Reject(nostr.PrefixRestricted, "kinds "+r.pol.protText+
			" can be counted only with authors or #p limited to your authenticated pubkeys"), nil
	}
	c.startScan(countScanProtected, pf)
	return nil, nil
}

// planHLL decides whether the answer gets an "hll" field and starts its
// scan.
func (s *Session) planHLL(j *queryJob) {
	r, c := s.r, j.cnt
	c.phase = countDone
	offset, ok := hllFilter(j.filters)
	scanLimit := r.live.Load().CountScanLimit
	if !ok || scanLimit < 0 {
		return
	}
	if c.n > int64(scanLimit) {
		r.stats.LimitTrips[limCountScan].Add(1)
		return
	}
	c.reg = new([hllRegisters]uint8)
	c.offset = offset
	if c.n <= 0 {
		return // nothing matches: all registers are 0
	}
	f := j.filters[0]
	f.HasLimit, f.Limit = false, 0
	c.startScan(countScanHLL, []nostr.Filter{f})
}

func (c *countJob) startScan(phase uint8, filters []nostr.Filter) {
	c.phase, c.scanF = phase, filters
	c.seen, c.visible, c.over = 0, 0, false
}

// scanSlice reads the running scan's records until it ends (done), it
// passes CountScanLimit (done, c.over set) or the deadline passes.
func (q *queryScheduler) scanSlice(j *queryJob, deadline time.Time) (done bool, err error) {
	r, s, c := q.r, j.s, j.cnt
	if j.it == nil {
		it, err := r.store.Query(r.ctx, c.scanF)
		if err != nil {
			return false, err
		}
		j.it = it
	}
	it := j.it
	scanLimit := r.live.Load().CountScanLimit
	for n := 1; ; n++ {
		if n&15 == 0 && time.Now().After(deadline) {
			return false, nil
		}
		if !it.Next() {
			break
		}
		if c.seen++; c.seen > scanLimit {
			c.over = true
			break
		}
		rec := it.Record()
		if !s.canSeeRecord(rec) {
			continue
		}
		c.visible++
		if c.reg != nil {
			hllAdd(c.reg, c.offset, &rec.PubKey)
		}
	}
	err = it.Err()
	it.Close()
	j.it = nil
	return true, err
}

// protectedPart returns, for each filter that may match a protected kind,
// the same filter narrowed to the protected kinds. The filters are copies:
// their lists are never shared with filters.
func (r *Relay) protectedPart(filters []nostr.Filter) []nostr.Filter {
	if r.pol.prot == nil {
		return nil
	}
	var out []nostr.Filter
	for i := range filters {
		f := filters[i]
		if !r.mayMatchProtected(&f) {
			continue
		}
		if f.HasKinds() {
			var ks []int
			for _, k := range f.Kinds {
				if r.pol.prot.has(k) && !slices.Contains(ks, k) {
					ks = append(ks, k)
				}
			}
			f.Kinds = ks
		} else {
			f.Kinds = slices.Clone(r.pol.protKinds)
			f.Present |= nostr.PresentKinds
		}
		out = append(out, f)
	}
	return out
}

// visibleFilters expresses the part of filters (all narrowed to
// protected kinds) that info may see as indexable filters: a wholly
// visible filter as is; one without a "#p" condition split into the
// authenticated authors and the "#p" of authenticated pubkeys. ok is false
// if some filter has a "#p" condition naming another pubkey.
func visibleFilters(filters []nostr.Filter, info *authInfo) (out []nostr.Filter, ok bool) {
	for i := range filters {
		f := filters[i]
		if info.allVisible(&f) {
			out = append(out, f)
			continue
		}
		if tagCond(&f, 'p') != nil {
			return nil, false
		}
		byAuthor := f
		if len(f.Authors) > 0 {
			byAuthor.Authors = nil
			for k := range f.Authors {
				if info.has(&f.Authors[k]) {
					byAuthor.Authors = append(byAuthor.Authors, f.Authors[k])
				}
			}
		} else {
			byAuthor.Authors = slices.Clone(info.pubkeys)
			byAuthor.Present |= nostr.PresentAuthors
		}
		if len(byAuthor.Authors) > 0 {
			out = append(out, byAuthor)
		}
		byTag := f
		byTag.Tags = make([]nostr.TagFilter, 0, len(f.Tags)+1)
		byTag.Tags = append(byTag.Tags, f.Tags...)
		byTag.Tags = append(byTag.Tags, nostr.TagFilter{Name: 'p', Values: slices.Clone(info.hexes)})
		slices.SortFunc(byTag.Tags, func(a, b nostr.TagFilter) int { return int(a.Name) - int(b.Name) })
		out = append(out, byTag)
	}
	return out, true
}
