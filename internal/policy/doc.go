// Package policy decides who may write to the relay: static and run-time
// write lists (banned and allowed pubkeys, banned and allowed events,
// allowed and disallowed kinds, blocked addresses), token-bucket rate
// limits, and external write-policy plugins speaking strfry's plugin
// protocol.
//
// The package does not know the relay or the server. The relay calls the
// decision functions on its ingest path; the NIP-86 management API (in the
// server package) changes the lists at run time. Every type here is safe for
// concurrent use.
//
// # Where the relay calls what
//
//   - Lists.CheckIP when a session opens: a blocked address is refused
//     before it can send anything (and, after a NIP-86 block, open
//     sessions from the address are checked again and closed).
//   - Lists.CheckEvent and the per-address EVENT limit (RateLimits.AllowEvent
//     with the client's address) among the cheap checks of an EVENT, before
//     signature verification.
//   - The per-pubkey EVENT limit (RateLimits.AllowEvent with no address) and
//     Plugin.Check after signature verification: an unverified event may
//     carry anyone's pubkey, and must neither drain that pubkey's bucket nor
//     reach a stateful plugin in someone else's name. The plugin answers
//     asynchronously, so a message handler never waits for its process.
//   - RateLimits.AllowReq for each REQ, COUNT and NEG-OPEN.
//
// # Lists: static and dynamic layers
//
// Each list has two layers. The static layer comes from the configuration
// file (replaced whole by SetStatic, at a reload); the dynamic layer is
// changed by NIP-86 calls, persisted through a Persister (one JSON document
// per list, see the Key constants) before the call returns, and loaded at
// start. A value is on a list if either layer holds it. Removing a value
// the file puts on a list (unbanning, unallowing or unblocking it, or
// allowing a pubkey or kind the file bans or disallows) fails with
// ErrStatic: what the file says is changed in the file. Banning a pubkey
// or disallowing a kind the file allows succeeds and leaves the file's
// entry, and the ban or disallowance wins. Adding a value that the file
// already lists records it in the dynamic layer too (listed once, as the
// file's), so the administrator's decision stays if the file's entry goes.
//
// Lookups read an immutable snapshot through an atomic pointer: no lock is
// taken on the hot path. Changes are serialized by a mutex; a change edits
// each list it changes (one or two) as persisted, in one atomic step where
// the Persister is an Updater (a store several nodes share), and publishes
// a new snapshot with the list as saved, so memory never runs ahead of
// what is saved and two nodes' changes never undo each other.
//
// # Rate limits
//
// See RateLimits: token buckets per client address (IPv4 address, IPv6 /64)
// and per pubkey, in a sharded table whose size is bounded; buckets that
// have refilled are forgotten (a full bucket is the same as no bucket).
//
// # Plugins
//
// See Plugin: one long-running process, many requests in flight, answers
// matched by event id, a per-request timeout, restart with backoff when the
// process dies or its file changes.
package policy
