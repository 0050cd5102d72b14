package store

import (
	"context"
	"crypto/sha256"
	"fmt"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// TombstoneType says what a Tombstone records.
type TombstoneType uint8

const (
	// TombstoneID: a NIP-09 "e" deletion. The event ID by author PubKey
	// is deleted: an event with that id and author is refused as Deleted.
	TombstoneID TombstoneType = iota + 1
	// TombstoneAddr: a NIP-09 "a" deletion. Every version of the address
	// (PubKey, Kind, D) with created_at <= CreatedAt is deleted.
	TombstoneAddr
	// TombstoneVanish: a NIP-62 request to vanish. Every event of PubKey,
	// and every gift wrap addressed to PubKey, with created_at <=
	// CreatedAt is deleted (except the request itself).
	TombstoneVanish
)

// String names the type.
func (t TombstoneType) String() string {
	switch t {
	case TombstoneID:
		return "id"
	case TombstoneAddr:
		return "address"
	case TombstoneVanish:
		return "vanish"
	}
	return "tombstone(?)"
}

// MaxInlineD is the longest address d part a Tombstone carries as is:
// every backend keeps a d this long or shorter in full, and longer ones
// at least by their SHA-256 (the pebble store keeps only the hash of
// longer ones), so Tombstone.D holds the hash beyond it (DHashed).
const MaxInlineD = 200

// Tombstone is one of the deletion records a store keeps forever (see the
// Store contract: deleted ids, "a" deletions, vanished authors). A
// tombstone normally comes from a stored deletion or vanish request, and
// saving that request into another store records it again; a store also
// keeps the tombstones of requests that are gone (removed by an operator's
// Delete, or purged when their NIP-40 expiration passed), which only a
// copy of the tombstones themselves carries over (Tombstoner).
type Tombstone struct {
	Type TombstoneType
	// PubKey is the deleter (TombstoneID), the address's author
	// (TombstoneAddr) or the author who vanished (TombstoneVanish).
	PubKey nostr.PubKey
	// ID is the deleted id (TombstoneID).
	ID nostr.ID
	// Kind is the address's kind (TombstoneAddr).
	Kind int
	// D is the address's d part (TombstoneAddr): the d tag's value when
	// it is at most MaxInlineD bytes long, else its SHA-256 (32 bytes)
	// with DHashed set. NormalizeD makes that form from a d value.
	D       string
	DHashed bool
	// CreatedAt is the horizon of a TombstoneAddr or TombstoneVanish:
	// what was created at or before it is deleted. 0 for TombstoneID.
	CreatedAt int64
}

// NormalizeD returns the Tombstone form of an address's d part: d itself
// up to MaxInlineD bytes, else its SHA-256 and true.
func NormalizeD(d string) (string, bool) {
	if len(d) <= MaxInlineD {
		return d, false
	}
	h := sha256.Sum256([]byte(d))
	return string(h[:]), true
}

// Key identifies the record a tombstone sets: two tombstones with one Key
// are one record (an address's or an author's horizon is the larger
// CreatedAt of the two).
func (t *Tombstone) Key() string {
	switch t.Type {
	case TombstoneID:
		return "i" + string(t.ID[:]) + string(t.PubKey[:])
	case TombstoneAddr:
		h := "d"
		if t.DHashed {
			h = "h"
		}
		return fmt.Sprintf("a%s%d/%s%s", t.PubKey[:], t.Kind, h, t.D)
	case TombstoneVanish:
		return "v" + string(t.PubKey[:])
	}
	return ""
}

// Check reports whether t is well formed: a known type, an address of a
// replaceable or addressable kind with its d part in the NormalizeD form,
// a horizon within 0-nostr.MaxTimestamp.
func (t *Tombstone) Check() error {
	switch t.Type {
	case TombstoneID:
		return nil
	case TombstoneAddr:
		if !nostr.IsReplaceable(t.Kind) && !nostr.IsAddressable(t.Kind) {
			return fmt.Errorf("%w: address tombstone of kind %d", ErrInvalid, t.Kind)
		}
		if (t.DHashed && len(t.D) != sha256.Size) || (!t.DHashed && len(t.D) > MaxInlineD) {
			return fmt.Errorf("%w: address tombstone d part of %d bytes (hashed %v)", ErrInvalid, len(t.D), t.DHashed)
		}
	case TombstoneVanish:
	default:
		return fmt.Errorf("%w: tombstone type %d", ErrInvalid, t.Type)
	}
	if t.CreatedAt < 0 || t.CreatedAt > nostr.MaxTimestamp {
		return fmt.Errorf("%w: tombstone created_at %d", ErrInvalid, t.CreatedAt)
	}
	return nil
}

// Tombstoner is implemented by stores that can list their tombstones and
// record tombstones taken from another store (`petrel migrate` copies
// them, so that a copy refuses what the original refuses even where the
// request that made a tombstone is gone).
type Tombstoner interface {
	// Tombstones calls fn for every tombstone the store holds, from one
	// consistent view, in no particular order. fn must not call back
	// into the store; its tombstone is valid during the call only. An
	// error from fn ends the listing and is returned.
	Tombstones(ctx context.Context, fn func(*Tombstone) error) error

	// RestoreTombstones records the tombstones, committed (and synced,
	// if the store syncs) before it returns; each must pass Check. An
	// address's or author's horizon only ever grows (the larger
	// CreatedAt wins), and restoring a tombstone the store has is a
	// no-op. It records the deletions only: events the store already
	// holds that a restored tombstone covers are not removed (a copy
	// restores tombstones after the events, none of which the source's
	// tombstones cover).
	RestoreTombstones(ctx context.Context, tombs []Tombstone) error
}
