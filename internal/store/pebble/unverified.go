package pebble

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// Events held unverified (store.Unverified) live under U keys, U id(32)
// sig(64) -> raw JSON, outside every index: no query reads the U table.
// Holding, releasing and rejecting go through the writer like any save,
// so they share its group commits.

var _ store.Unverified = (*Store)(nil)

// SubmitUnverified implements store.Unverified.
func (s *Store) SubmitUnverified(ctx context.Context, ev *nostr.Event, done func(store.SaveResult)) error {
	return s.enqueue(ctx, &request{op: opHold, events: []*nostr.Event{ev}, callback: done})
}

// SubmitVerified implements store.Unverified.
func (s *Store) SubmitVerified(ctx context.Context, ev *nostr.Event, done func(store.SaveResult)) error {
	return s.enqueue(ctx, &request{op: opRelease, events: []*nostr.Event{ev}, callback: done})
}

// SubmitRejected implements store.Unverified.
func (s *Store) SubmitRejected(ctx context.Context, ev *nostr.Event, done func(error)) error {
	return s.enqueue(ctx, &request{op: opReject, events: []*nostr.Event{ev}, rejected: done})
}

// Unverified implements store.Unverified. The events come in key order
// (by id): the embedded store does not record when each was held.
func (s *Store) Unverified(ctx context.Context, fn func(ev *nostr.Event) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return store.ErrClosed
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pfxHeld}, UpperBound: []byte{pfxHeld + 1}})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		if err := ctx.Err(); err != nil {
			it.Close()
			return err
		}
		ev, err := nostr.ParseEvent(it.Value(), nil) // copies
		if err != nil {
			it.Close()
			return fmt.Errorf("%w: held event %x: %v", errCorrupt, it.Key(), err)
		}
		if err := fn(ev); err != nil {
			it.Close()
			return err
		}
	}
	return closeIter(it)
}
