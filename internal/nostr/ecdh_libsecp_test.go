//go:build cgo

package nostr

import (
	"os"
	"testing"
)

// TestLibsecpECDHInUse: where libsecp256k1 loads and has its ecdh module
// (Debian's libsecp256k1-1 does: the dev and CI machines), SharedX goes
// through it, and its answers are the known ones.
func TestLibsecpECDHInUse(t *testing.T) {
	if os.Getenv(VerifierEnv) == VerifierBtcec {
		t.Skipf("%s=btcec is set in the environment", VerifierEnv)
	}
	if _, err := LibsecpVerifier(); err != nil {
		t.Skipf("libsecp256k1 cannot be used here: %v", err)
	}
	if !libsecpHasECDH() {
		t.Skip("this libsecp256k1 was built without the ecdh module: ECDH is done in Go")
	}
	if !libsecpECDH() {
		t.Fatalf("the library has the ecdh module but is not used: %v", ecdhSelfTest(libsecpSharedX))
	}
}
