// Package stream mirrors events live between two relays: the local relay
// (the one petrel serve runs, reached over its WebSocket like any client)
// and a remote one. It is the library behind `petrel stream` and
// `petrel router`, after strfry's commands of the same names.
//
// A Stream moves events one way or both: Down copies what arrives at the
// remote to the local relay, Up what arrives at the local relay to the
// remote. Each direction is a pipe of two connections, a live
// subscription (REQ with the filter and limit 0: new events only) on the
// source and a publisher (internal/sync's Uploader: a window of events
// awaiting their OK, "rate-limited:" retried) on the target. Keeping the
// subscription and the publisher on separate connections means a
// target that is slow to answer OKs never stops the other direction's
// reader, so the two pipes cannot wait on each other.
//
// Nothing is lost across a disconnection. A session connects every pipe,
// waits for each subscription's EOSE (from then on every new event
// reaches it), and then catches up with internal/sync: a NIP-77
// reconciliation of the two relays over the filter, limited to events
// created from Options.CatchUp before the moment the previous session
// was last known alive (before the start, for the first), moving what
// one side lacks in the stream's directions. A window the relays refuse
// as too large for one negentropy session is halved until it passes.
// When any connection ends (the relay closed it, the network failed, a
// ping went unanswered, the relay closed the subscription because we
// were too slow), the session ends; the Stream waits (exponential
// backoff from Options.MinBackoff to Options.MaxBackoff, with jitter,
// reset after a session that lived a minute) and starts a new one, for
// ever, until its context ends.
//
// A relay that refuses the live subscription, a catch-up's request or a
// forwarded event with "auth-required:" (NIP-42) gets an AUTH signed
// with Options.AuthKey on that connection, and the request or event
// again; each session's connections authenticate anew. Without a key
// Run stops with that refusal instead of reconnecting for ever.
//
// No echoes: each session remembers the last Options.Remember ids it
// received or moved (a bounded FIFO set). An event that comes back from
// the relay it was just sent to is not sent again, and the catch-up
// skips ids the live pipes already carried (sync.Options.Claim). The set
// is per session: a new session starts empty, and the catch-up's
// reconciliation, not memory, decides what is missing. Relays drop
// duplicates, so even an id the set has forgotten cannot loop.
//
// A Stream's methods are safe for concurrent use; Run runs one session
// at a time on the calling goroutine and a few goroutines per session.
package stream
