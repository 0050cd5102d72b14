package relay

import "github.com/petrel-relay/petrel/internal/nostr"

// Relay URLs are compared by nostr's one rule (nostr.NormalizeRelayURL,
// nostr.OwnURL), the rule `petrel import` and NIP-98 use too; this file
// only adapts it to the Relay.

// normalizeRelayURL is nostr.NormalizeRelayURL; New normalizes Config.URL
// with it into Relay.ownURL.
func normalizeRelayURL(s string) (string, bool) { return nostr.NormalizeRelayURL(s) }

// own returns this relay's URL for matching "relay" tags: Config.URL
// normalized, or the zero nostr.OwnURL (loopback hosts only) when
// Config.URL is not set.
func (r *Relay) own() nostr.OwnURL { return nostr.OwnURL(r.ownURL) }
