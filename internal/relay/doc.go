// Package relay is petrel's protocol engine: sessions, subscriptions, the
// live subscription index and fan-out, the ingest pipeline (cheap checks,
// verification pool, the store's single writer), stored-query scheduling,
// limits and statistics. It knows nothing of sockets: the server package
// adapts WebSocket connections to the Transport interface and feeds
// inbound messages to Session.HandleMessage.
//
// # Goroutines
//
//   - Message handlers: the transport's goroutines (nbio's handler pool)
//     call Session.HandleMessage, serially per connection. Handlers never
//     block on other connections or on the store's writer: work is handed
//     off through bounded queues, and a full queue is an explicit refusal.
//   - Verifiers: Config.VerifyWorkers goroutines verify signatures and
//     submit events to the store's writer.
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
//
// # Lock order
//
// Session.mu, then index.mu, then outbox.mu, then a pendingFanout shard
// lock (a leaf). The dispatcher holds index.mu (read) while taking
// outbox.mu of candidate sessions; it never takes Session.mu. Nothing is
// written to a socket while any of these is held.
package relay
