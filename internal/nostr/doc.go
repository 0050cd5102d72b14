// Package nostr is petrel's model of the Nostr protocol: events, filters,
// client and relay messages, their JSON codec, the canonical serialization
// and id hash of NIP-01, Schnorr signature verification (BIP-340), and the
// kind classes that decide how an event is stored.
//
// The package does no I/O. Its hot paths (parsing an event, computing its
// id, matching it against a filter, building a delivery frame) are written
// to allocate little: a parsed Event keeps the raw JSON it arrived as, and
// its strings point into one private copy of that JSON.
//
// Values are not safe for concurrent mutation; an Event that has been handed
// to the store or to the fan-out is treated as immutable by everyone.
package nostr
