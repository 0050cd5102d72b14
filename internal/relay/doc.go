// Package relay is petrel's protocol engine: sessions, subscriptions, the
// live subscription index and fan-out, the ingest pipeline (cheap checks,
// verification pool, the store's single writer), stored-query scheduling,
// limits and statistics. It knows nothing of sockets: the server package
// adapts WebSocket connections to the Transport interface and feeds
// inbound messages to Session.HandleMessage.
//
// # Files
//
// Each path through the engine has its files, named after it:
//
//   - session.go: one connection, its message dispatch and control frames
//   - ingest.go: EVENT, from the cheap checks through the verify pool (in
//     per-connection order) to the store's writer; policy.go, pow.go and
//     vanish.go hold the write policy it applies
//   - query.go: REQ and the stored-query scheduler; count.go (and hll.go)
//     NIP-45 COUNT
//   - subscription.go: subscriptions and the stored-to-live hand-off rule
//   - fanout.go: the dispatcher (OKs, fan-out of committed events);
//     fanout_index.go: the live subscription index it looks up
//   - outbox.go: the per-connection out-queue; flush.go: the flushers that
//     hand it to the transport
//   - sync.go: NIP-77 negentropy sync sessions
//   - auth.go: NIP-42 and the read protection of DMs and gift wraps
//   - relay.go (the engine, the sweeper, shutdown), config.go, stats.go,
//     info.go and nips.go (NIP-11)
//
// # Goroutines
//
//   - Message handlers: the transport's goroutines (nbio's handler pool)
//     call Session.HandleMessage, serially per connection. Handlers never
//     block on other connections or on the store's writer: work is handed
//     off through bounded queues, and a full queue is an explicit refusal.
//   - Verifiers: Config.VerifyWorkers goroutines verify signatures in
//     batches and submit events to the store's writer, each batch in its
//     turn, so that one connection's events reach the writer in the order
//     they were read (ingest.go).
//   - The store's writer commits batches and calls back; the callback hands
//     the result to the dispatcher.
//   - The dispatcher (one goroutine) writes OKs, looks up candidate
//     subscriptions in the live index, matches them exactly and appends
//     event frames to the out-queues, then schedules the touched sessions
//     for flushing once per batch.
//   - Query workers (Config.QueryWorkers) run stored queries in time slices.
//   - Flushers hand each session's queued frames to its transport in one
//     write.
//   - The sweeper pings idle connections, closes dead and stuck ones.
//   - With a write-policy plugin (policy.go): the plugin's own goroutines
//     call back with each decision and never block; one poster goroutine
//     takes the decisions in the order the events were verified (a
//     sequencer of capacity policy.Config.PluginMaxInflight; full:
//     "rate-limited:") and does what may block for accepted events, the
//     store's Submit or the dispatcher's queue.
//
// # The stored-to-live hand-off
//
// A REQ's subscription is listed in the live index before its stored
// query runs. The query's iterator reports the store's snapshot (the
// commit positions its answer reflects, store.Snapshot); every event
// reaches the fan-out with its commit position (store.SaveResult.Seq).
// A subscription skips a live event whose position its snapshot includes
// (sub.sawCommit); while its query runs, it holds the others and sends
// them after EOSE, deciding by the same rule once the snapshot is known.
// Nothing else is needed: no list of ids in flight, no per-subscription
// record of what the query sent.
//
// # Lock order
//
// Session.mu, then index.mu, then outbox.mu. The dispatcher holds index.mu (read) while taking
// outbox.mu of candidate sessions; it never takes Session.mu. Nothing is
// written to a socket while any of these is held.
//
// A session's NIP-42 state (auth.go) is an immutable value behind an
// atomic pointer: written only by the session's message handler, read by
// the dispatcher (canSee) and the query workers (canSeeRecord) without a
// lock. The write lists are lock-free for readers. The rate limits'
// shard locks and the plugin's lock are leaves, taken with none of the
// locks above held. ingest.mu (read: enqueuers; write: close) guards
// only the closing of the verify queue; the turns' takeMu and turnMu and
// the sequencer's lock are taken alone (a verifier may block on the
// store's Submit in its turn, with no lock held).
package relay
