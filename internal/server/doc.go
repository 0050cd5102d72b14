// Package server is petrel's network edge: one nbio engine (epoll, no
// goroutine per connection) serving WebSocket upgrades for the relay, the
// NIP-11 document, /stats, /metrics and a landing page on the same port.
// It takes connection slots at accept and releases them exactly once,
// learns the client behind a trusted proxy (from a forwarded-address
// header, or from the PROXY protocol header the connection starts with),
// adapts each WebSocket to relay.Transport, and enforces the HTTP-level
// deadlines. Protocol logic lives in package relay.
package server
