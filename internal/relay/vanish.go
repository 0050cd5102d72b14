package relay

import (
	"github.com/petrel-relay/petrel/internal/nostr"
)

// NIP-62 requests to vanish. The store applies vanish semantics to every
// kind-62 event it is given, in the request's own commit: it deletes the
// author's events up to the request's created_at, and the NIP-59 gift wraps
// addressed to the author ("p") up to it, and refuses both afterwards. So
// the relay lets through only the requests addressed to it
// (nostr.VanishAddressedTo: a "relay" tag naming this relay, or
// "ALL_RELAYS"), by the rule `petrel import` applies too.

// checkVanish accepts a request to vanish addressed to this relay (nil)
// and refuses others with "invalid:". Requests to vanish skip the rest of
// the write policy: NIP-62 applies whatever the user's status.
func (r *Relay) checkVanish(ev *nostr.Event) *nostr.Rejection {
	if nostr.VanishAddressedTo(ev, r.own) {
		return nil
	}
	return nostr.Reject(nostr.PrefixInvalid, "request to vanish is for another relay")
}
