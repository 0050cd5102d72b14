//go:build cgo

package nostr

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestLibsecpECDHInUse: where libsecp256k1 loads and has its ecdh module
// (Debian's libsecp256k1-1 does: the dev and CI machines), SharedX goes
// through it, and its answers are the known ones.
func TestLibsecpECDHInUse(t *testing.T) {
	skipWithoutLibsecp(t)
	if !libsecpHasECDH() {
		t.Skip("this libsecp256k1 was built without the ecdh module: ECDH is done in Go")
	}
	if !libsecpECDH() {
		t.Fatalf("the library has the ecdh module but is not used: %v", ecdhSelfTest(libsecpSharedXOK))
	}
}

// TestLibsecpSignerInUse: where libsecp256k1 loads, it signs and derives
// public keys too (its context for secret keys is made and passes the
// signing half of the self-test).
func TestLibsecpSignerInUse(t *testing.T) {
	skipWithoutLibsecp(t)
	if !libsecpSigner() {
		t.Fatal("libsecp256k1 loads but does not sign")
	}
}

// TestVerifyingProcessMakesNoSigningContext: a process that loads the
// library and verifies (the relay, petrel version) or does ECDH (encrypt,
// decrypt) neither creates nor randomizes the context for signing, nor
// runs the signing self-test.
// The check runs in a fresh process (this test binary again), since the
// other tests of this one sign.
func TestVerifyingProcessMakesNoSigningContext(t *testing.T) {
	if os.Getenv("PETREL_TEST_VERIFY_ONLY") == "1" {
		v, err := LibsecpVerifier()
		if err != nil {
			t.Skipf("libsecp256k1 cannot be used here: %v", err)
		}
		_, pub, _, msg, sig := selfTestKeys()
		if !v.Verify(&pub, &msg, &sig) {
			t.Fatal("the vector does not verify")
		}
		if libsecpSignReady() {
			t.Fatal("verifying made the context for secret keys")
		}
		// ECDH (encrypt, decrypt) runs on the verifying context.
		sk, err := ParseSecretKey(ecdhSelfTestVector.sec1)
		if err != nil {
			t.Fatal(err)
		}
		peer, err := ParsePubKey(ecdhSelfTestVector.pub2)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := SharedX(sk, peer); err != nil {
			t.Fatal(err)
		}
		if libsecpHasECDH() && !libsecpECDH() {
			t.Fatal("the library's ECDH is not in use")
		}
		if libsecpSignReady() {
			t.Fatal("an ECDH made the context for secret keys")
		}
		return
	}
	if _, err := LibsecpVerifier(); err != nil {
		t.Skipf("libsecp256k1 cannot be used here: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestVerifyingProcessMakesNoSigningContext$", "-test.v")
	cmd.Env = append(os.Environ(), "PETREL_TEST_VERIFY_ONLY=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestVerifyingProcessMakesNoSigningContext") {
		t.Fatalf("the verifying process: %v\n%s", err, out)
	}
}
