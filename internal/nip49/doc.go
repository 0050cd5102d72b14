// Package nip49 encrypts secret keys with a password (NIP-49): the
// "ncryptsec" bech32 string of version 0x02, holding log2 of scrypt's
// cost, a random 16-byte salt, a random 24-byte nonce, a key-security byte
// (authenticated as associated data) and the XChaCha20-Poly1305
// ciphertext of the 32-byte key. The key is scrypt(NFKC(password), salt,
// N = 2^logN, r = 8, p = 1).
//
// scrypt, XChaCha20-Poly1305 and NFKC are golang.org/x/crypto and
// golang.org/x/text; bech32 is internal/nip19's library. Functions are
// safe for concurrent use. scrypt takes 1 KiB times 2^logN of memory and
// time to match: logN 16 (the default) is 64 MiB and a fraction of a
// second, by design.
package nip49
