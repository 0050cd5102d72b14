package relay

import (
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// authState is a session's NIP-42 state.
type authState struct{}

// onOpen runs when a session starts.
func (r *Relay) onOpen(s *Session) {}

// handleAuth answers an AUTH message.
func (s *Session) handleAuth(ev *nostr.Event) {
	s.ok(ev.ID, false, "restricted: this relay does not support AUTH yet")
}

// policy returns the write-policy decision for ev (nil: accept).
func (s *Session) policy(ev *nostr.Event) *nostr.Rejection {
	if ev.Kind == nostr.KindClientAuth {
		return nostr.Reject(nostr.PrefixInvalid, "kind 22242 events are sent with AUTH, not EVENT")
	}
	return nil
}

// checkRead returns a rejection when the session may not run these
// filters at all.
func (s *Session) checkRead(filters []nostr.Filter) *nostr.Rejection { return nil }

// canSee reports whether a live event may be delivered to this session.
func (s *Session) canSee(ev *nostr.Event) bool { return true }

// canSeeRecord reports whether a stored event may be delivered.
func (s *Session) canSeeRecord(rec *store.Record) bool { return true }
