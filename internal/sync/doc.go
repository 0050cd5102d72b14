// Package sync brings two event sets in line: the local store (or a relay
// standing in for it) and a remote relay. It is the library behind
// `petrel sync`.
//
// With a remote that speaks NIP-77, Run reconciles the local items
// ((created_at, id) of the events matching the filter) against the
// remote's with negentropy (internal/negentropy as the client), which
// costs a few round trips and bytes proportional to the difference, not
// to the sets. It then downloads what the local side lacks (REQ by ids, in
// chunks sized by the remote's NIP-11 limits; every event's id and
// signature are checked before it is saved, and saves are committed in
// batches) and uploads what the remote lacks (EVENT with a bounded window
// of unacknowledged events, backing off when the remote answers
// "rate-limited:").
//
// When the local side is another relay (Options.From), neither side's
// items are at hand. Run then opens a negentropy session with each relay
// and reconciles them with each other (negentropy.Bridge): each relay's
// description of a range (a fingerprint, or the ids of a small range) is
// passed to the other as a fingerprint, until every differing range is
// narrowed to both relays' ids. No relay's ids are ever listed: the
// bytes follow the difference, as with a local store. It then moves the
// difference directly between the relays (REQ by ids on one, EVENT on
// the other).
//
// A remote without NIP-77 (it answers NEG-OPEN with NOTICE, CLOSED or
// NEG-ERR, or not at all within Options.OpenTimeout) makes Run fail with
// ErrUnsupported or ErrRefused, unless Options.FallbackPaging is set: Run
// then pages through the remote's events with REQ, newest first with
// until= (re-requesting the boundary second, so ties are not skipped),
// and saves those the local store lacks. Paging only downloads.
//
// A relay that refuses a NEG-OPEN, a REQ or an uploaded event with
// "auth-required:" (NIP-42) gets an AUTH signed with Options.AuthKey, on
// that connection, and the request or event once more; without a key
// Run fails with an error matching client.ErrAuthRequired (a NIP-70
// protected event's refusal is only counted). A NEG-OPEN refused for
// authentication is not taken for a relay without NIP-77.
//
// Run is resumable: whatever it saved or uploaded before it was
// interrupted is no longer a difference the next time, so a second run
// picks up where the first stopped.
//
// Relays are reached through internal/client (one client.Conn per relay,
// with its NIP-11 limits read first).
//
// For internal/stream, which runs Run as the catch-up of a live mirror:
// Options.Claim is asked about every id before it is moved (an id the
// live feed carried already is left out), and Uploader publishes over a
// connection the caller holds with the same window and retries as Run's
// uploads.
//
// The package holds no global state. Run may be called concurrently with
// different Options; a Progress is called from Run's goroutine only.
package sync
