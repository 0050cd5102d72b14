package nostr

import (
	"errors"
	"fmt"
)

// ErrPubKey reports a public key that is not the x coordinate of a point
// on the curve.
var ErrPubKey = errors.New("nostr: invalid public key")

// SharedX returns the x coordinate of sk times the point whose x
// coordinate is pub and whose y is even: the unhashed ECDH secret that
// NIP-44 and NIP-04 start from. It is computed by the implementation
// SecretKey.Sign uses: libsecp256k1's ecdh module (constant-time, about
// 2.6x faster: BenchmarkSharedX; loading the library costs a command that
// did not need it 0.3-0.5 ms, docs/BENCHMARKS.md) where it loads and has
// the module, else
// github.com/btcsuite/btcd/btcec/v2 (which wraps decred's secp256k1;
// its scalar multiplication is not constant-time). The error wraps
// ErrSecretKey or ErrPubKey.
func SharedX(sk SecretKey, pub PubKey) ([32]byte, error) {
	if !sk.Valid() {
		return [32]byte{}, fmt.Errorf("%w: not in [1, n-1]", ErrSecretKey)
	}
	x, ok := defaultBackend().sharedX(&sk, &pub)
	if !ok {
		return [32]byte{}, fmt.Errorf("%w: %s is not the x coordinate of a curve point", ErrPubKey, pub.Hex())
	}
	return x, nil
}
