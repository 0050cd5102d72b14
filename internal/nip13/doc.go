// Package nip13 is NIP-13 proof of work: the difficulty of an event id
// (its leading zero bits) and mining, which varies a "nonce" tag until
// the id has the difficulty asked for.
//
// Functions are safe for concurrent use; Mine uses the goroutines it is
// told to and returns when they have stopped.
package nip13
