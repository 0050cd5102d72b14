// Package nip19 encodes and decodes the NIP-19 bech32 forms of Nostr
// keys, ids and pointers: npub, nsec and note (32 bytes each), and the
// TLV forms nprofile, nevent and naddr with their relay hints.
//
// Bech32 itself (the checksum, the character set and the 8-to-5 bit
// regrouping) is github.com/btcsuite/btcd/btcutil/bech32; this package
// adds the NIP-19 prefixes, payload lengths and the TLV records. Strings
// are decoded without BIP-173's 90-character cap (NIP-19 lifts it for
// the TLV forms) but with MaxLength, and only with the original bech32
// checksum (a bech32m string is refused).
//
// The Parse functions (ParsePubKey, ParseID, ParseSecretKey) are the one
// place where petrel reads a key or an id a person typed: 64 hex
// characters in either case, or the bech32 form that carries it. Config
// lists, the client commands and the scan/delete filters use them, so a
// string accepted in one place is accepted in all. HexFilter rewrites the
// bech32 values of a JSON filter to hex for the same reason.
//
// Everything here is a pure function of its arguments, safe for
// concurrent use.
package nip19
