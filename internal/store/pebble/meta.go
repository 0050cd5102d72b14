package pebble

import (
	"context"

	"github.com/cockroachdb/pebble/v2"

	"github.com/petrel-relay/petrel/internal/store"
)

// metaPrefix prefixes the keys of small named blobs kept beside the events
// (the relay's NIP-86 lists and info): "\x00meta/" + name. The "\x00"
// range holds store bookkeeping only (see formatKey), so these keys never
// meet an event index.
const metaPrefix = "\x00meta/"

// LoadMeta returns the blob saved under name, or store.ErrNotFound. The
// returned slice is the caller's.
func (s *Store) LoadMeta(ctx context.Context, name string) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	v, ok, err := getValue(s.db, []byte(metaPrefix+name))
	if err == nil && !ok {
		err = store.ErrNotFound
	}
	return v, err
}

// SaveMeta saves value under name durably (synced) before returning. It
// does not go through the event writer: these blobs are independent of
// events.
func (s *Store) SaveMeta(ctx context.Context, name string, value []byte) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return store.ErrClosed
	}
	if s.opts.ReadOnly {
		return ErrReadOnly
	}
	if err := s.spaceFor(len(name) + len(value) + 64); err != nil {
		return err
	}
	return s.db.Set([]byte(metaPrefix+name), value, pebble.Sync)
}

// MetaNames returns the names of every saved blob, sorted (petrel
// migrate copies them all).
func (s *Store) MetaNames(ctx context.Context) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	lower := []byte(metaPrefix)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		return nil, err
	}
	var names []string
	for it.First(); it.Valid(); it.Next() {
		names = append(names, string(it.Key()[len(metaPrefix):]))
	}
	return names, closeIter(it)
}
