package store

import (
	"context"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// Unverified is implemented by stores that can hold events whose
// signatures are not checked yet: the relay's optimistic mode
// (relay.verify_mode = "optimistic") answers OK:true once such an event is
// held durably, and checks the signature behind.
//
// # Held events are never served, and never applied
//
// A held event is kept apart from the stored events: no Query, Count,
// Items, Has, Feed, export or scan sees it, and it takes no part in any
// rule. It does not replace or supersede a replaceable or addressable
// version, a held deletion (kind 5) or request to vanish (kind 62)
// deletes nothing and leaves no tombstone, and a held event is not
// refused as Deleted or Superseded. All of that is decided only when the
// event is released (SubmitVerified), by the same rules and in the same
// way as Submit, against the store as it is then: an unverified event can
// never displace, delete or block a verified one.
//
// # The life of a held event
//
//   - SubmitUnverified holds it: Outcome Held (and Seq 0: holding is not
//     a commit position, nothing became visible), or Duplicate when the
//     id is stored, or Failed (as Submit: invalid, ephemeral, or the
//     commit failed). Holding is idempotent: holding an event (id and
//     signature) that is held already is Held again, and each caller
//     that got Held must release or reject it. Only the id and the
//     signature name a held event: another copy of the same id with
//     another signature is held beside it, so a forged copy cannot keep
//     the genuine one out (nor can a rejection of the forged copy).
//   - SubmitVerified, once its signature is checked, saves it exactly as
//     Submit does (the Outcome, Seq and Removed mean the same) and, in the
//     same commit, removes its held copy (its id and signature). A held
//     copy of the id with another signature stays until it is released
//     (Duplicate now) or rejected in turn.
//   - SubmitRejected, when its signature is found invalid, removes that
//     held copy (its id and signature) in a commit. Nothing of it remains
//     that could be served or released later.
//
// All three go through the store's writer, so a release or a rejection
// queued after a hold commits after it. A hold is durable when reported,
// like a save; a commit that holds only releases and rejections need not
// be synced (a backend may skip waiting for the disk): if a crash takes
// it back, the held copy is back too, and is checked again at the next
// start. Each step is idempotent, so a
// crash between any two leaves something the next start can finish:
// Unverified lists what is still held, the relay checks each signature
// again and releases or rejects it; releasing an event that is stored
// already is Duplicate, rejecting one that is gone does nothing. A held
// event is servable only once released.
type Unverified interface {
	// SubmitUnverified queues ev to be held (see above); done is called as
	// for Submit, after the commit. ev must have a valid id; its signature
	// is not checked.
	SubmitUnverified(ctx context.Context, ev *nostr.Event, done func(SaveResult)) error
	// SubmitVerified queues ev, held earlier, whose signature is now
	// verified: it is saved as Submit would save it and its held copies
	// are removed in the same commit. done as for Submit.
	SubmitVerified(ctx context.Context, ev *nostr.Event, done func(SaveResult)) error
	// SubmitRejected queues the removal of the held copy of ev (its id and
	// signature); done is called after the commit with nil, or the error
	// that failed it.
	SubmitRejected(ctx context.Context, ev *nostr.Event, done func(error)) error
	// Unverified calls fn with every held event, oldest hold first where
	// the backend knows it; fn must not call back into the store. The
	// events are fresh copies that fn may keep. It stops at fn's first
	// error and returns it.
	Unverified(ctx context.Context, fn func(ev *nostr.Event) error) error
}
