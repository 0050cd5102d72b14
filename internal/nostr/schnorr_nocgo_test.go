//go:build !cgo

package nostr

import (
	"errors"
	"testing"
)

// TestNoCgoVerifierIsBtcec checks that a CGO_ENABLED=0 build reports
// libsecp256k1 as unavailable and verifies with btcec.
func TestNoCgoVerifierIsBtcec(t *testing.T) {
	if _, err := LibsecpVerifier(); !errors.Is(err, ErrNoLibsecp) {
		t.Fatalf("LibsecpVerifier error = %v, want ErrNoLibsecp", err)
	}
	if got := DefaultVerifier().Name(); got != VerifierBtcec {
		t.Fatalf("DefaultVerifier = %q, want btcec", got)
	}
}
