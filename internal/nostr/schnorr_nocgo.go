//go:build !cgo

package nostr

import "fmt"

// loadLibsecp always fails in a build without cgo: libsecp256k1 is reached
// through cgo and dlopen (see schnorr_libsecp.go), so such a build verifies
// and signs with btcec only.
func loadLibsecp() (backend, error) {
	return nil, fmt.Errorf("%w: built without cgo (CGO_ENABLED=0)", ErrNoLibsecp)
}
