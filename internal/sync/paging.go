package sync

import (
	"context"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// defaultPage is the page size of the fallback paging when the remote
// advertises no max_limit.
const defaultPage = 500

// pageThrough is the fallback for a remote without NIP-77 ("paging"): it
// pages through the remote's events matching the filter with REQ, newest
// first, and saves those the local store lacks.
//
// Each page asks for limit events with until= the oldest created_at of the
// previous page, inclusive, because more events may share that second
// than the page held; the ones already seen at that second are skipped.
// A page that brings nothing new moves until one second further back.
// That never loops (each page either lowers until or adds a new id at the
// boundary second) and never stops before a page comes back empty, so a
// relay that returns fewer events than asked for is paged through to the
// end all the same. Only a second holding more events than a page cannot
// be paged through (REQ has no finer cursor): that is counted in
// Result.PagingGaps and logged.
func (s *syncer) pageThrough(ctx context.Context) error {
	o := &s.o
	s.res.Mode = ModePaging
	s.phase(ModePaging, -1)
	limit := defaultPage
	if l := s.rinfo.Limitation.MaxLimit; l > 0 {
		limit = l
	}
	f := o.Filter
	f.HasLimit, f.Limit = true, limit
	boundary := make(map[nostr.ID]struct{}) // ids seen at second f.Until
	var batch []*nostr.Event
	t := &s.res.Down
	for {
		page, err := s.req(ctx, s.remote, &f)
		if err != nil {
			return err
		}
		s.res.Rounds++
		if len(page) == 0 {
			break
		}
		ok := verifyAll(o.Verifier, page)
		oldest, valid, fresh := int64(-1), 0, 0
		for i, ev := range page {
			if !ok[i] || !o.Filter.Matches(ev) || (f.HasUntil && ev.CreatedAt > f.Until) {
				ok[i] = false
				t.Invalid++
				continue
			}
			valid++
			if oldest < 0 || ev.CreatedAt < oldest {
				oldest = ev.CreatedAt
			}
			if _, seen := boundary[ev.ID]; seen {
				continue
			}
			fresh++
			has, err := o.Store.Has(ctx, ev.ID)
			if err != nil {
				return err
			}
			if has {
				continue
			}
			s.res.Need++
			t.Wanted++
			batch = append(batch, ev)
			if len(batch) >= o.Batch {
				if err := s.save(ctx, batch, t); err != nil {
					return err
				}
				batch = batch[:0]
			}
		}
		if o.Progress != nil {
			o.Progress.Add(int64(len(page)))
		}
		if valid == 0 {
			o.Logger.Warn("a page held no valid event matching the filter; stopping the paging", "relay", s.remote.URL())
			break
		}
		if fresh == 0 {
			// Nothing new at or below until: step below that second.
			if len(page) >= limit {
				s.res.PagingGaps++
				o.Logger.Warn("more events share one second than a page holds; some may be skipped",
					"created_at", f.Until, "page", len(page))
			}
			if !f.HasUntil {
				break // cannot happen: the first page is all fresh
			}
			f.Until--
			clear(boundary)
		} else {
			if !f.HasUntil || oldest < f.Until {
				clear(boundary)
			}
			f.Until, f.HasUntil = oldest, true
			for i, ev := range page {
				if ok[i] && ev.CreatedAt == oldest {
					boundary[ev.ID] = struct{}{}
				}
			}
		}
		if f.Until < 0 || (f.HasSince && f.Until < f.Since) {
			break
		}
	}
	if len(batch) > 0 {
		return s.save(ctx, batch, t)
	}
	return nil
}
