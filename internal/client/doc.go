// Package client is a Nostr relay client over one WebSocket connection:
// the code that `petrel sync`, the test client of internal/relaytest and
// the client commands share. (`petrel bench` keeps its own connection
// loop, tuned for timing.)
//
// Dial connects to a ws:// or wss:// URL and starts one reader goroutine
// per Conn, which parses every frame with nostr.ParseRelayMessage and
// hands the message to exactly one destination:
//
//   - a message carrying a subscription id (EVENT, EOSE, CLOSED, COUNT,
//     NEG-MSG, NEG-ERR) to the Sub registered for that id (Req, NegOpen,
//     Subscribe, and Count while it waits);
//   - an OK to whoever waits for that event id (Publish, Auth, SendEvent);
//   - everything else, in arrival order, to the Conn's inbox (Inbox,
//     Next): NOTICE, AUTH challenges, OKs and subscription messages
//     nobody registered for, and frames that do not parse (Message.Err).
//
// Messages someone registered for are never dropped: while a Sub's
// buffer (or a SendEvent channel) is full the reader waits, which pushes
// back on the relay through TCP, and with it every other destination of
// the connection waits too. So read every Sub you open until you close
// it. The inbox holds Options.InboxSize messages; what arrives while it is
// full is dropped and counted (Stats.Dropped), unless Options.InboxWait
// makes the reader wait for it as well.
//
// Sends (SendRaw and the typed methods) are safe for concurrent use and
// serialized on the connection; each is bounded by Options.WriteTimeout.
// Waits (Publish, Count, Auth, Next) take a context.
//
// The connection lives until Close or until the relay ends it. Then Done
// is closed and Err says why; the channels of the Subs still registered
// and the inbox are closed after their last message, so a consumer that
// ranges over them stops.
//
// FetchInfo reads a relay's NIP-11 document over HTTP(S).
package client
