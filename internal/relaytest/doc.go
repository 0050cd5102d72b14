// Package relaytest starts a real petrel relay on loopback for tests and
// talks to it over real WebSockets: a test client that parses relay
// messages, and a factory of signed events.
package relaytest
