package nostr

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// sharedXImpls are the ECDH implementations to hold to the same answers:
// btcec's always, and each backend's (libsecp256k1's ecdh module where the
// library loads and has it).
func sharedXImpls(tb testing.TB) map[string]func(*SecretKey, *PubKey) ([32]byte, bool) {
	tb.Helper()
	impls := map[string]func(*SecretKey, *PubKey) ([32]byte, bool){}
	for _, b := range testBackends(tb) {
		impls[b.Name()] = b.sharedX
	}
	return impls
}

// TestECDHSelfTest: every implementation passes the known-answer test,
// and the test fails an implementation that gives a wrong secret or
// accepts a point off the curve.
func TestECDHSelfTest(t *testing.T) {
	for name, f := range sharedXImpls(t) {
		if err := ecdhSelfTest(f); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	good := btcecBackend{}.sharedX
	wrong := func(sk *SecretKey, pub *PubKey) ([32]byte, bool) {
		x, ok := good(sk, pub)
		x[31] ^= 1
		return x, ok
	}
	lax := func(sk *SecretKey, pub *PubKey) ([32]byte, bool) {
		x, _ := good(sk, pub)
		return x, true
	}
	if ecdhSelfTest(wrong) == nil {
		t.Error("a wrong shared secret passed the self-test")
	}
	if ecdhSelfTest(lax) == nil {
		t.Error("an implementation accepting any x passed the self-test")
	}
}

// TestSharedXCrossCheck: for random key pairs every implementation gives
// the same secret, the same from either side (a·B = b·A), and for random
// x coordinates (about half are not on the curve) and the edges of the
// field the same answer, secret or refusal.
func TestSharedXCrossCheck(t *testing.T) {
	impls := sharedXImpls(t)
	rng := rand.New(rand.NewPCG(3, 4))
	seed := func() []byte {
		var s [32]byte
		for i := range s {
			s[i] = byte(rng.Uint32())
		}
		return s[:]
	}
	same := func(what string, sk *SecretKey, pub *PubKey) ([32]byte, bool) {
		t.Helper()
		x, ok, err := sharedXAgree(impls, sk, pub)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return x, ok
	}
	n := 200
	if testing.Short() {
		n = 20
	}
	offCurve := 0
	for i := range n {
		a, b := SecretKeyFromSeed(seed()), SecretKeyFromSeed(seed())
		pa, pb := a.PubKey(), b.PubKey()
		ab, ok1 := same("a·B", &a, &pb)
		ba, ok2 := same("b·A", &b, &pa)
		if !ok1 || !ok2 || ab != ba {
			t.Fatalf("case %d: a·B %x %v, b·A %x %v", i, ab, ok1, ba, ok2)
		}
		var x PubKey
		copy(x[:], seed())
		if _, ok := same("random x", &a, &x); !ok {
			offCurve++
		}
	}
	if offCurve == 0 || offCurve == n {
		t.Fatalf("%d of %d random x off the curve: the refusal is not being exercised", offCurve, n)
	}
	sk := SecretKeyFromSeed([]byte("edges"))
	for _, e := range []struct {
		x      string
		refuse bool
	}{
		{"0000000000000000000000000000000000000000000000000000000000000000", false},
		{"0000000000000000000000000000000000000000000000000000000000000001", false},
		{"fffffffffffffffffffffffffffffffffffffffffffffffffffffffefffffc2e", false}, // p-1
		{"fffffffffffffffffffffffffffffffffffffffffffffffffffffffefffffc2f", true},  // p
		{"fffffffffffffffffffffffffffffffffffffffffffffffffffffffefffffc30", true},  // p+1
		{"ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", true},
	} {
		pub, err := ParsePubKey(e.x)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := same("x = "+e.x, &sk, &pub); ok && e.refuse {
			t.Errorf("x = %s (not below p) accepted", e.x)
		}
	}
}

// TestSharedXErrors: SharedX refuses an invalid secret key with
// ErrSecretKey and a point off the curve with ErrPubKey.
func TestSharedXErrors(t *testing.T) {
	pub := SecretKeyFromSeed([]byte("b")).PubKey()
	if _, err := SharedX(SecretKey{}, pub); !errors.Is(err, ErrSecretKey) {
		t.Errorf("zero secret key: %v", err)
	}
	sk := SecretKeyFromSeed([]byte("a"))
	if _, err := SharedX(sk, PubKey{31: 5}); !errors.Is(err, ErrPubKey) {
		t.Errorf("x = 5: %v", err)
	}
	x, err := SharedX(sk, pub)
	want, _ := btcecBackend{}.sharedX(&sk, &pub)
	if err != nil || x != want {
		t.Errorf("SharedX = %x, %v; want %x", x, err, want)
	}
}

// FuzzSharedX holds the implementations to the same answer on a key
// derived from the fuzz input and an arbitrary x coordinate.
func FuzzSharedX(f *testing.F) {
	f.Add([]byte("seed"), []byte{5})
	f.Add([]byte{}, []byte{0xff, 0xff})
	impls := sharedXImpls(f)
	f.Fuzz(func(t *testing.T, seed, xb []byte) {
		sk := SecretKeyFromSeed(seed)
		var pub PubKey
		copy(pub[:], xb)
		if _, _, err := sharedXAgree(impls, &sk, &pub); err != nil {
			t.Fatal(err)
		}
	})
}

// sharedXAgree runs every implementation on (sk, pub) and returns their
// common answer, or an error naming two that differ.
func sharedXAgree(impls map[string]func(*SecretKey, *PubKey) ([32]byte, bool), sk *SecretKey, pub *PubKey) ([32]byte, bool, error) {
	var first [32]byte
	var firstOK bool
	firstName := ""
	for name, f := range impls {
		x, ok := f(sk, pub)
		if firstName == "" {
			first, firstOK, firstName = x, ok, name
		} else if x != first || ok != firstOK {
			return first, firstOK, fmt.Errorf("%s gives %x %v, %s %x %v", name, x, ok, firstName, first, firstOK)
		}
	}
	return first, firstOK, nil
}

func BenchmarkSharedX(b *testing.B) {
	sk := SecretKeyFromSeed([]byte("a"))
	pub := SecretKeyFromSeed([]byte("b")).PubKey()
	for name, f := range sharedXImpls(b) {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				f(&sk, &pub)
			}
		})
	}
}
