package store

import (
	"bytes"
	"fmt"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// CheckEvent returns the error a store reports (with Outcome Failed) for an
// event it refuses whatever its state: nil (ErrInvalid), ephemeral
// (ErrEphemeral), or with a kind or created_at outside the NIP-01 ranges
// (ErrInvalid). It returns nil for an event a store may hold.
func CheckEvent(ev *nostr.Event) error {
	switch {
	case ev == nil:
		return fmt.Errorf("%w: nil event", ErrInvalid)
	case ev.Kind < 0 || ev.Kind > nostr.MaxKind:
		return fmt.Errorf("%w: kind %d out of range", ErrInvalid, ev.Kind)
	case ev.CreatedAt < 0 || ev.CreatedAt > nostr.MaxTimestamp:
		return fmt.Errorf("%w: created_at %d out of range", ErrInvalid, ev.CreatedAt)
	case nostr.IsEphemeral(ev.Kind):
		return ErrEphemeral
	}
	return nil
}

// Newer reports whether the version (aCreatedAt, aID) of a replaceable or
// addressable event wins over (bCreatedAt, bID): a higher created_at, or
// the same created_at and a lower id.
func Newer(aCreatedAt int64, aID *nostr.ID, bCreatedAt int64, bID *nostr.ID) bool {
	if aCreatedAt != bCreatedAt {
		return aCreatedAt > bCreatedAt
	}
	return bytes.Compare(aID[:], bID[:]) < 0
}
