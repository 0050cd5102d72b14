// Package nip44 is NIP-44 version 2 encryption (the payloads of NIP-17
// direct messages and NIP-59 seals and gift wraps), and the legacy NIP-04
// scheme that kind-4 messages still use.
//
// NIP-44 v2: a conversation key is HKDF-extract(salt "nip44-v2", the
// x coordinate of the secp256k1 ECDH point); each message draws a random
// 32-byte nonce, expands the conversation key with it (HKDF-expand, 76
// bytes) into a ChaCha20 key and nonce and an HMAC-SHA256 key, pads the
// plaintext to a power-of-two-based length, encrypts it with ChaCha20 and
// authenticates nonce and ciphertext. The payload is base64 of
// version(1) || nonce(32) || ciphertext || mac(32).
//
// The primitives are libraries: ChaCha20 and HKDF from golang.org/x/crypto,
// HMAC-SHA256 and AES-CBC from the standard library, the ECDH point
// multiplication from nostr.SharedX (libsecp256k1's ecdh module when the
// library is loaded, else btcec's, which is decred's secp256k1). This
// package holds the NIP's own rules: the key schedule,
// the padding and the payload layout, checked against every published
// NIP-44 test vector (testdata/nip44.vectors.json).
//
// All functions are safe for concurrent use. A ConversationKey is secret
// material: keep it no longer than the conversation needs it.
package nip44
