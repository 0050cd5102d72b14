// Package relaytest starts a real petrel relay on loopback for tests and
// talks to it over real WebSockets: a test client (a thin layer over
// internal/client that keeps every message in order, unbounded, and fails
// the test on surprises), and a factory of signed events.
package relaytest
