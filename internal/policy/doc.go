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
//   - Lists.CheckIP at accept (or when a session starts): a blocked address
//     is refused before it can send anything.
//   - Lists.CheckEvent and RateLimits.AllowEvent among the cheap checks of an
//     EVENT, before signature verification.
//   - RateLimits.AllowReq for each REQ (and COUNT).
//   - Plugin.Check after the cheap checks and before verification; it
//     answers asynchronously, so a message handler never waits for the
//     plugin process.
//
// # Lists: static and dynamic layers
//
// Each list has two layers. The static layer comes from the configuration
// file and is fixed for the life of the process; the dynamic layer is
// changed by NIP-86 calls, persisted through a Persister (one JSON document
// per list, see the Key constants) before the call returns, and loaded at
// start. A value is on a list if either layer holds it. A call that would
// have to remove a value from the static layer fails with ErrStatic: what
// the file says is changed in the file. Adding a value that the file already
// lists is a no-op.
//
// Lookups read an immutable snapshot through an atomic pointer: no lock is
// taken on the hot path. Changes are serialized by a mutex, copy the one
// list they change, persist it, then publish a new snapshot.
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
