package pebble

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

var _ store.Tombstoner = (*Store)(nil)

// The address encoding of R keys is the Tombstone form: d in full up to
// maxInlineD bytes, its SHA-256 beyond.
var _ [maxInlineD - store.MaxInlineD]struct{}
var _ [store.MaxInlineD - maxInlineD]struct{}

// Tombstones implements store.Tombstoner: the D, R and W tables, read
// from one pebble snapshot. Close waits for it to return.
func (s *Store) Tombstones(ctx context.Context, fn func(*store.Tombstone) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return store.ErrClosed
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()
	var t store.Tombstone
	for _, pfx := range []byte{pfxDelID, pfxDelAddr, pfxVanish} {
		it, err := snap.NewIter(&pebble.IterOptions{LowerBound: []byte{pfx}, UpperBound: []byte{pfx + 1}})
		if err != nil {
			return err
		}
		n := 0
		for it.First(); it.Valid(); it.Next() {
			if n++; n&1023 == 0 {
				if err := ctx.Err(); err != nil {
					it.Close()
					return err
				}
			}
			if err := decodeTombstone(pfx, it.Key(), it.Value(), &t); err != nil {
				it.Close()
				return err
			}
			if err := fn(&t); err != nil {
				it.Close()
				return err
			}
		}
		if err := closeIter(it); err != nil {
			return err
		}
	}
	return nil
}

// decodeTombstone reads one D, R or W entry into t.
func decodeTombstone(pfx byte, k, v []byte, t *store.Tombstone) error {
	*t = store.Tombstone{}
	bad := func() error { return fmt.Errorf("%w: tombstone %x", errCorrupt, k) }
	switch pfx {
	case pfxDelID:
		if len(k) != 65 {
			return bad()
		}
		t.Type, t.ID, t.PubKey = store.TombstoneID, nostr.ID(k[1:33]), nostr.PubKey(k[33:])
		return nil
	case pfxVanish:
		ts, ok := decodeTS(v)
		if len(k) != 33 || !ok {
			return bad()
		}
		t.Type, t.PubKey, t.CreatedAt = store.TombstoneVanish, nostr.PubKey(k[1:]), ts
		return nil
	}
	// R pubkey(32) kind(2) dtype(1) d
	ts, ok := decodeTS(v)
	if len(k) < 1+32+2+1 || !ok {
		return bad()
	}
	t.Type, t.PubKey, t.CreatedAt = store.TombstoneAddr, nostr.PubKey(k[1:33]), ts
	t.Kind = int(binary.BigEndian.Uint16(k[33:35]))
	d := k[36:]
	switch k[35] {
	case dInline:
		if len(d) > maxInlineD {
			return bad()
		}
		t.D = string(d)
	case dHashed:
		if len(d) != sha256.Size {
			return bad()
		}
		t.D, t.DHashed = string(d), true
	default:
		return bad()
	}
	return nil
}

// tombstoneKey returns the D, R or W key of t.
func tombstoneKey(t *store.Tombstone) []byte {
	switch t.Type {
	case store.TombstoneID:
		return delIDKey(&t.ID, &t.PubKey)
	case store.TombstoneVanish:
		return vanishKey(&t.PubKey)
	}
	k := make([]byte, 0, 1+32+2+1+len(t.D))
	k = append(append(k, pfxDelAddr), t.PubKey[:]...)
	k = appendU16(k, uint16(t.Kind))
	if t.DHashed {
		k = append(k, dHashed)
	} else {
		k = append(k, dInline)
	}
	return append(k, t.D...)
}

// RestoreTombstones implements store.Tombstoner. The writer records them
// in one batch, as it records the tombstones of a deletion or a request
// to vanish (with the in-memory state that spares saves their lookups).
func (s *Store) RestoreTombstones(ctx context.Context, tombs []store.Tombstone) error {
	for i := range tombs {
		if err := tombs[i].Check(); err != nil {
			return fmt.Errorf("store/pebble: restore tombstones: %w", err)
		}
	}
	if len(tombs) == 0 {
		return nil
	}
	r := &request{op: opTombstones, tombs: tombs, done: make(chan struct{})}
	if err := s.enqueue(ctx, r); err != nil {
		return err
	}
	return wait(r)
}

// restoreTombstones applies an opTombstones request to the batch.
func (w *writer) restoreTombstones(tombs []store.Tombstone) error {
	for i := range tombs {
		t := &tombs[i]
		k := tombstoneKey(t)
		switch t.Type {
		case store.TombstoneID:
			if err := w.b.Set(k, nil, nil); err != nil {
				return err
			}
			w.tombstoned.add(&t.ID)
		case store.TombstoneAddr:
			if err := w.setMaxTS(k, t.CreatedAt); err != nil {
				return err
			}
		case store.TombstoneVanish:
			if err := w.setMaxTS(k, t.CreatedAt); err != nil {
				return err
			}
			if ts, ok := w.vanishedAt(&t.PubKey); !ok || t.CreatedAt > ts {
				w.pendingVanish[t.PubKey] = t.CreatedAt
			}
		}
	}
	return nil
}
