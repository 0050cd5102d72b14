package nostr

import (
	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
)

// btcecBackend verifies and signs with the pure-Go
// github.com/btcsuite/btcd/btcec/v2/schnorr. It has no state, so it is safe
// for concurrent use. It allocates a few small objects per call (parsed key
// and signature); that is noise next to the ~200 µs of curve arithmetic.
type btcecBackend struct{}

// Name returns "btcec".
func (btcecBackend) Name() string { return VerifierBtcec }

// Verify implements Verifier.
func (btcecBackend) Verify(pub *PubKey, msg *[32]byte, sig *Sig) bool {
	// btcec v2.3.5's ParseSignature reduces s modulo n instead of rejecting
	// s >= n as BIP-340 requires, which would accept (r, s+n) wherever
	// (r, s) is valid and s+n < 2^256. Refuse such s here so both verifiers
	// agree on every input.
	if !scalarBelowN((*[32]byte)(sig[32:64])) {
		return false
	}
	s, err := schnorr.ParseSignature(sig[:])
	if err != nil {
		return false
	}
	pk, err := schnorr.ParsePubKey(pub[:])
	if err != nil {
		return false
	}
	return s.Verify(msg[:], pk)
}

func (btcecBackend) sign(sk *SecretKey, msg, aux *[32]byte) Sig {
	priv, _ := btcec.PrivKeyFromBytes(sk[:])
	defer priv.Zero()
	s, err := schnorr.Sign(priv, msg[:], schnorr.CustomNonce(*aux))
	if err != nil {
		// sk was checked by the caller and msg is 32 bytes, and with
		// CustomNonce the only other failure (k = 0) has negligible
		// probability.
		panic("BUG: btcec schnorr.Sign: " + err.Error())
	}
	var out Sig
	copy(out[:], s.Serialize())
	return out
}

func (btcecBackend) pubKey(sk *SecretKey) PubKey {
	priv, pub := btcec.PrivKeyFromBytes(sk[:])
	priv.Zero()
	var out PubKey
	copy(out[:], schnorr.SerializePubKey(pub))
	return out
}

func (btcecBackend) sharedX(sk *SecretKey, pub *PubKey) ([32]byte, bool) {
	var out [32]byte
	var compressed [33]byte
	compressed[0] = 0x02
	copy(compressed[1:], pub[:])
	pk, err := btcec.ParsePubKey(compressed[:])
	if err != nil {
		return out, false
	}
	priv, _ := btcec.PrivKeyFromBytes(sk[:])
	defer priv.Zero()
	copy(out[:], btcec.GenerateSharedSecret(priv, pk))
	return out, true
}

// curveOrder is n, the order of the secp256k1 group, big-endian.
var curveOrder = [32]byte{
	0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe,
	0xba, 0xae, 0xdc, 0xe6, 0xaf, 0x48, 0xa0, 0x3b,
	0xbf, 0xd2, 0x5e, 0x8c, 0xd0, 0x36, 0x41, 0x41,
}

// scalarBelowN reports whether the big-endian 256-bit integer b is below the
// group order n. It is not constant-time; use it on public values, or where
// a secret's range check may leak whether the secret was valid.
func scalarBelowN(b *[32]byte) bool {
	for i := range b {
		if b[i] != curveOrder[i] {
			return b[i] < curveOrder[i]
		}
	}
	return false // equal to n
}
