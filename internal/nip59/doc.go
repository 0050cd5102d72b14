// Package nip59 is NIP-59 gift wrapping and the NIP-17 direct messages
// built on it. A rumor (an unsigned event: it cannot be proven to anyone
// else) is sealed (kind 13, signed by the author, its content the
// NIP-44 encryption of the rumor for the recipient) and the seal is
// wrapped (kind 1059, signed by a one-time key, tagged with the
// recipient, its content the NIP-44 encryption of the seal). Both outer
// layers get created_at times drawn up to two days into the past, so the
// time a message was sent does not leak.
//
// Unwrap checks every layer: the wrap decrypts, the seal is kind 13 with
// a valid id and signature, the rumor's author is the seal's signer (so
// nobody can seal a rumor in someone else's name), and the rumor's id is
// the hash of its fields.
//
// Functions are safe for concurrent use.
package nip59
