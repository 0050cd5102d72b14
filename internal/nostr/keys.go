package nostr

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// SecretKey is a secp256k1 secret key: a big-endian integer in [1, n-1],
// where n is the group order. The zero value is not a valid key. Copies are
// cheap but each copy is secret material; nothing here zeroes the caller's
// copies.
type SecretKey [32]byte

// ErrSecretKey reports a secret key outside [1, n-1].
var ErrSecretKey = errors.New("nostr: invalid secret key")

// GenerateKey returns a uniformly random valid secret key read from
// crypto/rand.
func GenerateKey() SecretKey {
	var sk SecretKey
	for {
		rand.Read(sk[:])
		if sk.Valid() {
			return sk
		}
	}
}

// SecretKeyFromSeed derives a secret key deterministically from seed: the
// SHA-256 of seed, re-hashed (SHA-256 of the previous hash) in the
// vanishingly unlikely case (probability below 2^-127) that it is not in
// [1, n-1]. The derivation is fixed: the load client relies on the same seed
// giving the same key in every version. Keys derived from guessable seeds
// are guessable; use it for tests and load generation, not for real
// identities.
func SecretKeyFromSeed(seed []byte) SecretKey {
	sk := SecretKey(sha256.Sum256(seed))
	for !sk.Valid() {
		sk = sha256.Sum256(sk[:])
	}
	return sk
}

// ParseSecretKey decodes 64 lowercase hex characters and checks that the
// value is a valid secret key.
func ParseSecretKey(s string) (SecretKey, error) {
	var sk SecretKey
	if err := decodeLowerHex(sk[:], s); err != nil {
		return SecretKey{}, err
	}
	if !sk.Valid() {
		return SecretKey{}, fmt.Errorf("%w: not in [1, n-1]", ErrSecretKey)
	}
	return sk, nil
}

// Valid reports whether sk is in [1, n-1]. The check is not constant-time.
func (sk SecretKey) Valid() bool {
	return sk != SecretKey{} && scalarBelowN((*[32]byte)(&sk))
}

// Hex returns the key as 64 lowercase hex characters.
func (sk SecretKey) Hex() string { return hex.EncodeToString(sk[:]) }

// PubKey returns the BIP-340 x-only public key of sk, computed by the same
// implementation SecretKey.Sign uses. It panics if sk is not Valid.
func (sk SecretKey) PubKey() PubKey {
	sk.mustBeValid()
	return defaultBackend().pubKey(&sk)
}

func (sk *SecretKey) mustBeValid() {
	if !sk.Valid() {
		panic(ErrSecretKey.Error() + ": not in [1, n-1] (zero value or bad bytes)")
	}
}
