package nostr

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// skipWithoutLibsecp skips t where libsecp256k1 is not the default
// backend: PETREL_VERIFIER=btcec, or the library cannot be used here (a
// machine without it, a CGO_ENABLED=0 build).
func skipWithoutLibsecp(t *testing.T) {
	t.Helper()
	if os.Getenv(VerifierEnv) == VerifierBtcec {
		t.Skipf("%s=btcec is set in the environment", VerifierEnv)
	}
	if _, err := LibsecpVerifier(); err != nil {
		t.Skipf("libsecp256k1 cannot be used here, so btcec is expected: %v", err)
	}
}

// TestDefaultVerifierIsLibsecp checks that where libsecp256k1 loads (it is
// installed on the dev and CI machines), DefaultVerifier uses it. On a
// machine without the library, or in a CGO_ENABLED=0 build, it skips and
// says why.
func TestDefaultVerifierIsLibsecp(t *testing.T) {
	skipWithoutLibsecp(t)
	if got := DefaultVerifier().Name(); got != VerifierLibsecp {
		t.Fatalf("DefaultVerifier is %q, want %q", got, VerifierLibsecp)
	}
}

func TestSelectBackend(t *testing.T) {
	auto := VerifierBtcec
	if _, err := LibsecpVerifier(); err == nil {
		auto = VerifierLibsecp
	}
	f := func(env, want string) {
		t.Helper()
		if got := selectBackend(env).Name(); got != want {
			t.Errorf("selectBackend(%q) = %q, want %q", env, got, want)
		}
	}
	f("btcec", VerifierBtcec)
	f("", auto)
	f("libsecp256k1", auto)
	f("BTCEC", auto) // exact value only
	f("something else", auto)
}

func TestLibsecpVerifierError(t *testing.T) {
	v, err := LibsecpVerifier()
	if err != nil {
		if !errors.Is(err, ErrNoLibsecp) {
			t.Errorf("error %q does not wrap ErrNoLibsecp", err)
		}
		if v != nil {
			t.Errorf("non-nil verifier %v with error", v)
		}
		return
	}
	if v.Name() != VerifierLibsecp {
		t.Errorf("Name = %q", v.Name())
	}
	// Later calls return the same.
	if v2, err2 := LibsecpVerifier(); err2 != nil || v2 != v {
		t.Errorf("second call gave %v, %v", v2, err2)
	}
}

func TestBtcecVerifier(t *testing.T) {
	if got := BtcecVerifier().Name(); got != VerifierBtcec {
		t.Errorf("Name = %q", got)
	}
}

// TestVerifierEnvSubprocess runs this test binary again with
// PETREL_VERIFIER=btcec and checks the choice DefaultVerifier makes there.
func TestVerifierEnvSubprocess(t *testing.T) {
	if os.Getenv("PETREL_TEST_PRINT_VERIFIER") == "1" {
		// Child: report and stop.
		fmt.Printf("verifier=%s\n", DefaultVerifier().Name())
		return
	}
	f := func(env, want string) {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestVerifierEnvSubprocess$", "-test.count=1")
		cmd.Env = append(os.Environ(), "PETREL_TEST_PRINT_VERIFIER=1", VerifierEnv+"="+env)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s=%s: %v\n%s", VerifierEnv, env, err, out)
		}
		if !strings.Contains(string(out), "verifier="+want+"\n") {
			t.Errorf("%s=%q: want verifier=%s, child said:\n%s", VerifierEnv, env, want, out)
		}
	}
	f("btcec", VerifierBtcec)
	auto := VerifierBtcec
	if _, err := LibsecpVerifier(); err == nil {
		auto = VerifierLibsecp
	}
	f("", auto)
}

// TestVerifyEvents checks the batch form against VerifyEvent, one event at
// a time, on every backend, over more events than one cgo call takes and
// with invalid ones (bad signature, wrong id, key off the curve) at the
// ends and in the middle of a call's chunk.
func TestVerifyEvents(t *testing.T) {
	const n = 2*VerifyBatchMax + 5
	evs := make([]*Event, n)
	for i := range evs {
		ev := &Event{CreatedAt: int64(1700000000 + i), Kind: 1, Content: fmt.Sprintf("note %d", i)}
		SignEvent(ev, SecretKeyFromSeed([]byte{byte(i % 3)}))
		evs[i] = ev
	}
	evs[0].Sig[5] ^= 1
	evs[VerifyBatchMax-1].ID[0] ^= 1
	evs[VerifyBatchMax].PubKey = PubKey(bytes.Repeat([]byte{0xff}, 32))
	evs[n-1].Sig[63] ^= 0x80
	invalid := map[int]bool{0: true, VerifyBatchMax - 1: true, VerifyBatchMax: true, n - 1: true}
	for _, be := range testBackends(t) {
		t.Run(be.Name(), func(t *testing.T) {
			for _, m := range []int{0, 1, VerifyBatchMax, n} {
				ok := make([]bool, m)
				for i := range ok {
					ok[i] = invalid[i] // the opposite of every expected answer
				}
				VerifyEvents(be, evs[:m], ok)
				for i := range m {
					if ok[i] != !invalid[i] || ok[i] != VerifyEvent(be, evs[i]) {
						t.Errorf("%d events: ok[%d] = %v, want %v", m, i, ok[i], !invalid[i])
					}
				}
			}
		})
	}
}
