// Package cluster is the live bus between the nodes of a petrel cluster:
// N identical `petrel serve` processes that share a store of record
// (PostgreSQL, a store.Feed) and a NATS core subject. The bus is lossy by
// design and never on the durability path: a node answers OK:true after
// its database commit alone; the bus only makes other nodes' live
// subscribers hear of the event at once, and the store fills in whatever
// the bus loses.
//
// # The path of one event
//
// The node that accepts an event commits it, answers OK, fans it out to
// its own subscribers, then calls Bridge.Publish (relay.Bus) with the
// event and its commit position. Publish queues it (bounded; a full queue
// drops, counted) for the publisher goroutine, which wraps the raw event
// JSON in an envelope (envelope.go: origin, per-origin sequence number,
// send time, commit position) and publishes it once on the subject.
// Every node receives every message; a node ignores its own (the echo),
// and hands the others' events to its relay (Relay.Publish(ev, seq)),
// which fans them out through the same index and out-queues as local
// events, applying the store's hand-off rule (store.Snapshot) so a
// subscription whose stored query saw the commit does not get it again.
// Ephemeral events travel the same way with no commit position and are
// never stored.
//
// # Losses, and catching up from the store
//
// NATS core drops messages: everything published while a node is
// disconnected, messages past a slow subscriber's pending limits, and a
// publisher's messages past its reconnect buffer. A node notices a loss
// in one of these ways, and each asks for a catch-up from a point in time:
//
//   - its own connection dropped: from the send time of its last own
//     message heard back (each node hears its heartbeats, every
//     HeartbeatInterval) or its last connect, less CatchUpMargin;
//   - a gap in another node's sequence numbers (a lost message, a slow
//     consumer drop, a publish that failed at the origin): from the send
//     time of the last message heard in order, less the margin. Each node
//     publishes a heartbeat carrying its last sequence number, so the loss
//     of its last messages shows even when it then goes quiet;
//   - another node not heard for SilenceTimeout (it crashed between
//     commit and publish, or is cut off the bus but not the database):
//     from its last message's send time, less the margin.
//
// A catch-up reads Feed.CommittedSince(since): the events the store
// accepted since then, by the store's clock (never the client's
// created_at), with their commit positions, and hands the relay each one
// this node has not fanned out yet. While a loss goes on (this node is
// cut off, or another node is silent) the node polls the store every
// PollInterval, so those events reach its subscribers late rather than
// when the bus heals. The margin must cover the longest time from a
// commit to the bus receiving the event (the accepting node's fan-out
// backlog, the time a store transaction takes from stamping an event to
// its commit becoming visible) and the clock skew between nodes and store.
//
// # Exactly once per subscription, at node level
//
// Catch-ups overlap what the bus delivered (the margin makes sure of it),
// so each node keeps a window of the ids it has fanned out lately, by
// every path: accepted here, received from the bus, replayed by a
// catch-up (window.go). A catch-up hands the relay only ids the window
// does not hold; a bus message whose id a catch-up delivered first is
// skipped. The window is per node, not per subscription, on purpose: the
// relay fans an event out to every matching subscription the node has,
// so an event fanned out once per node reaches each subscription once,
// and the cost is one entry per recent event instead of one per recent
// event per subscription (a node must hold a million subscriptions at
// about 2 KiB each). A subscription opened after an event was fanned out
// gets it from its stored query instead; one whose stored query saw the
// commit is kept from getting it again by the relay's hand-off rule.
// Entries are kept for DedupWindow, and longer while a pending catch-up
// reaches back further (a pin); at most DedupMax of them (past it the
// oldest go, counted: a catch-up may then repeat an event, never lose
// one). Catch-ups run on one goroutine, one at a time, merged into the
// earliest point asked for, and start no earlier than what the last
// completed one covered.
//
// An event this node committed is visible to a catch-up's read before
// the relay has fanned it out, so a look at the window cannot decide
// alone. The window is written in one place, FirstFanout
// (relay.FanoutGate), which the relay's dispatcher calls before it fans
// out any stored event, whichever path brought it: the first copy is fanned
// out, later ones are skipped. The bus and catch-up paths only look, to
// avoid handing on what is surely fanned out already.
//
// # Deletions
//
// A deletion (NIP-09) or request to vanish (NIP-62) accepted on one node
// is committed in the shared store, so stored queries on every node stop
// returning what it removed, and it travels on the bus like any event.
// The bus keeps order per origin only, so a deleted event accepted on
// another node may reach a node after its deletion; the node remembers
// what recent deletions removed (removal.go, by the store's rules) and
// does not fan such an event out.
//
// # Bounds
//
// Everything is bounded: the publish queue (PublishQueue events), NATS's
// reconnect buffer (ReconnectBuffer bytes), the subscription's pending
// messages (PendingMsgs, PendingBytes), the de-duplication window
// (DedupMax ids), the removals remembered, and the records a catch-up
// holds (CatchUpBatch). Reconnects never give up; a dead connection is
// noticed within about PingInterval × (MaxPingsOut+1).
//
// # Goroutines
//
// Per bridge: the publisher (queue to NATS, heartbeats), the monitor
// (silence, expiry), the catch-up loop, and nats.go's own (reader,
// flusher, the subscription's handler, callbacks). Delivery into the
// relay happens on the subscription's handler and on the catch-up loop;
// both may block on the relay's fan-out queue (backpressure; NATS then
// drops past the pending limits, and the gap is caught up).
package cluster
