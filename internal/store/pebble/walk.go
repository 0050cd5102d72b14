package pebble

import (
	"context"
	"slices"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// walk calls fn for every distinct event matching any of filters
// (ignoring limits), newest first, without loading bodies unless a check
// needs them.
func (s *Store) walk(ctx context.Context, filters []nostr.Filter, fn func(e *entry) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return store.ErrClosed
	}
	q, err := s.newQuery()
	if err != nil {
		return err
	}
	defer q.close()
	m, err := q.newMerger(filters, false, false)
	if err != nil {
		return err
	}
	// Search matches first (they need their bodies parsed anyway), then
	// the other filters' matches that are not among them.
	var seen map[nostr.ID]struct{}
	for _, ss := range q.newSearches(filters, false, false) {
		if seen == nil {
			seen = make(map[nostr.ID]struct{})
		}
		for n := 0; ; n++ {
			if n&1023 == 1023 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			ok, err := ss.next()
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			if _, dup := seen[ss.cur.id]; dup {
				continue
			}
			seen[ss.cur.id] = struct{}{}
			if err := fn(&ss.cur); err != nil {
				return err
			}
		}
	}
	for n := 0; ; n++ {
		if n&1023 == 1023 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		fs, err := m.next()
		if err != nil || fs == nil {
			return err
		}
		if seen != nil {
			if _, dup := seen[fs.cur.id]; dup {
				continue
			}
		}
		if err := fn(&fs.cur); err != nil {
			return err
		}
	}
}

// Count implements store.Store.
func (s *Store) Count(ctx context.Context, filters []nostr.Filter) (int64, error) {
	var n int64
	err := s.walk(ctx, filters, func(*entry) error { n++; return nil })
	if err != nil {
		return 0, err
	}
	return n, nil
}

// Items implements store.Store.
func (s *Store) Items(ctx context.Context, filters []nostr.Filter, max int) ([]store.Item, error) {
	var items []store.Item
	err := s.walk(ctx, filters, func(e *entry) error {
		if max > 0 && len(items) == max {
			return store.ErrTooMany
		}
		items = append(items, store.Item{CreatedAt: e.createdAt, ID: e.id})
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(items, store.CompareItems)
	return items, nil
}
