package nostr

import (
	"encoding/csv"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// testBackends returns every backend available in this process: btcec
// always, libsecp256k1 when it loads (the test logs why when it does not).
func testBackends(tb testing.TB) []backend {
	tb.Helper()
	bs := []backend{btcecBackend{}}
	if b, err := loadLibsecp(); err == nil {
		bs = append(bs, b)
	} else {
		tb.Logf("testing btcec only: %v", err)
	}
	return bs
}

// bip340Vector is one row of testdata/bip340_vectors.csv, the official
// BIP-340 test vectors (bitcoin/bips, bip-0340/test-vectors.csv).
type bip340Vector struct {
	index   int
	sk      *SecretKey // nil for verification-only vectors
	pub     PubKey
	aux     *[32]byte
	msg     [32]byte
	sig     Sig
	valid   bool
	comment string
}

func loadBIP340Vectors(t *testing.T) []bip340Vector {
	t.Helper()
	f, err := os.Open("testdata/bip340_vectors.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rows[0], ","); got != "index,secret key,public key,aux_rand,message,signature,verification result,comment" {
		t.Fatalf("unexpected header %q", got)
	}
	unhex := func(dst []byte, s string) {
		t.Helper()
		if _, err := hex.Decode(dst, []byte(strings.ToLower(s))); err != nil || len(s) != 2*len(dst) {
			t.Fatalf("bad hex %q (want %d bytes): %v", s, len(dst), err)
		}
	}
	var vs []bip340Vector
	for _, r := range rows[1:] {
		var v bip340Vector
		if v.index, err = strconv.Atoi(r[0]); err != nil {
			t.Fatal(err)
		}
		if r[1] != "" {
			v.sk = new(SecretKey)
			unhex(v.sk[:], r[1])
		}
		unhex(v.pub[:], r[2])
		if r[3] != "" {
			v.aux = new([32]byte)
			unhex(v.aux[:], r[3])
		}
		unhex(v.msg[:], r[4])
		unhex(v.sig[:], r[5])
		switch r[6] {
		case "TRUE":
			v.valid = true
		case "FALSE":
		default:
			t.Fatalf("vector %d: bad result %q", v.index, r[6])
		}
		v.comment = r[7]
		vs = append(vs, v)
	}
	// The final BIP-340 vector set with 32-byte messages: 0-3 signing,
	// 4 valid verification-only, 5-14 invalid.
	if len(vs) != 15 {
		t.Fatalf("want 15 vectors, got %d", len(vs))
	}
	return vs
}

func TestVerifyBIP340Vectors(t *testing.T) {
	vs := loadBIP340Vectors(t)
	for _, b := range testBackends(t) {
		t.Run(b.Name(), func(t *testing.T) {
			signed := 0
			for _, v := range vs {
				if got := b.Verify(&v.pub, &v.msg, &v.sig); got != v.valid {
					t.Errorf("vector %d (%s): Verify = %v, want %v", v.index, v.comment, got, v.valid)
				}
				if v.sk == nil {
					continue
				}
				signed++
				if got := b.pubKey(v.sk); got != v.pub {
					t.Errorf("vector %d: pubKey = %x, want %x", v.index, got, v.pub)
				}
				if got := b.sign(v.sk, &v.msg, v.aux); got != v.sig {
					t.Errorf("vector %d: sign = %x, want %x", v.index, got, v.sig)
				}
			}
			if signed != 4 {
				t.Errorf("checked %d signing vectors, want 4", signed)
			}
		})
	}
}

// TestVerifyBIP340PublicAPI runs the signing vectors through the exported
// API (SecretKey.PubKey, SecretKey.SignAux) and the verification vectors
// through DefaultVerifier.
func TestVerifyBIP340PublicAPI(t *testing.T) {
	v := DefaultVerifier()
	for _, tv := range loadBIP340Vectors(t) {
		if got := v.Verify(&tv.pub, &tv.msg, &tv.sig); got != tv.valid {
			t.Errorf("vector %d: %s.Verify = %v, want %v", tv.index, v.Name(), got, tv.valid)
		}
		if tv.sk == nil {
			continue
		}
		if got := tv.sk.PubKey(); got != tv.pub {
			t.Errorf("vector %d: PubKey = %x, want %x", tv.index, got, tv.pub)
		}
		if got := tv.sk.SignAux(&tv.msg, tv.aux); got != tv.sig {
			t.Errorf("vector %d: SignAux = %x, want %x", tv.index, got, tv.sig)
		}
	}
}

// TestVerifySelfTest: both halves of the known-answer test pass on every
// backend (with its own signing).
func TestVerifySelfTest(t *testing.T) {
	for _, b := range testBackends(t) {
		if err := selfTestVerify(b); err != nil {
			t.Errorf("%s: %v", b.Name(), err)
		}
		if err := selfTestSign(b.pubKey, b.sign); err != nil {
			t.Errorf("%s: %v", b.Name(), err)
		}
	}
}

func TestScalarBelowN(t *testing.T) {
	f := func(hexval string, want bool) {
		t.Helper()
		var b [32]byte
		if _, err := hex.Decode(b[:], []byte(hexval)); err != nil {
			t.Fatal(err)
		}
		if got := scalarBelowN(&b); got != want {
			t.Errorf("scalarBelowN(%s) = %v, want %v", hexval, got, want)
		}
	}
	f("0000000000000000000000000000000000000000000000000000000000000000", true)
	f("0000000000000000000000000000000000000000000000000000000000000001", true)
	f("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364140", true)  // n-1
	f("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141", false) // n
	f("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364142", false) // n+1
	f("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd1364140", false)
	f("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cc0364141", true)
	f("ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", false)
}

// TestVerifyRejectsLargeS checks that a signature whose s is n or more is
// refused by every backend (BIP-340: fail if s >= n), with r and the key
// taken from a valid signature. btcec's ParseSignature reduces s modulo n
// instead of refusing it; btcecBackend guards against that with
// scalarBelowN (tested above). A valid signature with s+n < 2^256 would need
// s below ~2^128.3, which cannot be produced on purpose, so the guard itself
// is only observable through scalarBelowN.
func TestVerifyRejectsLargeS(t *testing.T) {
	sk := SecretKeyFromSeed([]byte("large s"))
	msg := [32]byte{1, 2, 3}
	f := func(b backend, shex string) {
		t.Helper()
		pub := b.pubKey(&sk)
		sig := b.sign(&sk, &msg, &[32]byte{})
		if !b.Verify(&pub, &msg, &sig) {
			t.Fatalf("%s: valid signature rejected", b.Name())
		}
		if _, err := hex.Decode(sig[32:], []byte(shex)); err != nil {
			t.Fatal(err)
		}
		if b.Verify(&pub, &msg, &sig) {
			t.Errorf("%s accepted s = %s", b.Name(), shex)
		}
	}
	for _, b := range testBackends(t) {
		f(b, "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141") // n
		f(b, "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364142") // n+1
		f(b, "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff")
	}
}

// TestVerifyCrossCheck signs random messages with random keys and auxiliary
// randomness on every backend, requires identical signatures, verification
// by every backend, and rejection by every backend after any one bit of the
// signature, message or key is flipped.
func TestVerifyCrossCheck(t *testing.T) {
	bs := testBackends(t)
	rng := rand.New(rand.NewPCG(1, 2))
	n := 40
	if testing.Short() {
		n = 10
	}
	for i := range n {
		var seed, msg, aux [32]byte
		for _, a := range []*[32]byte{&seed, &msg, &aux} {
			for j := range a {
				a[j] = byte(rng.Uint32())
			}
		}
		sk := SecretKeyFromSeed(seed[:])
		pub := bs[0].pubKey(&sk)
		sig := bs[0].sign(&sk, &msg, &aux)
		for _, b := range bs {
			if got := b.pubKey(&sk); got != pub {
				t.Fatalf("case %d: %s pubKey %x, %s gave %x", i, b.Name(), got, bs[0].Name(), pub)
			}
			if got := b.sign(&sk, &msg, &aux); got != sig {
				t.Fatalf("case %d: %s sign %x, %s gave %x", i, b.Name(), got, bs[0].Name(), sig)
			}
		}
		for _, b := range bs {
			if !b.Verify(&pub, &msg, &sig) {
				t.Fatalf("case %d: %s rejects a valid signature", i, b.Name())
			}
		}
		// Flip one random bit of each input in turn.
		flip := func(p []byte) { p[rng.IntN(len(p))] ^= 1 << rng.IntN(8) }
		bsig, bmsg, bpub := sig, msg, pub
		flip(bsig[:])
		flip(bmsg[:])
		flip(bpub[:])
		for _, b := range bs {
			if b.Verify(&pub, &msg, &bsig) {
				t.Errorf("case %d: %s accepts a flipped signature", i, b.Name())
			}
			if b.Verify(&pub, &bmsg, &sig) {
				t.Errorf("case %d: %s accepts a flipped message", i, b.Name())
			}
			if b.Verify(&bpub, &msg, &sig) {
				t.Errorf("case %d: %s accepts a flipped key", i, b.Name())
			}
		}
	}
}

// TestVerifyConcurrent verifies from many goroutines at once through the
// shared libsecp256k1 context (and btcec), mixing valid and invalid
// signatures, and checks every answer.
func TestVerifyConcurrent(t *testing.T) {
	type item struct {
		pub   PubKey
		msg   [32]byte
		sig   Sig
		valid bool
	}
	items := make([]item, 16)
	for i := range items {
		sk := SecretKeyFromSeed([]byte{byte(i)})
		it := &items[i]
		it.msg[0] = byte(i)
		it.pub = btcecBackend{}.pubKey(&sk)
		it.sig = btcecBackend{}.sign(&sk, &it.msg, &it.msg)
		it.valid = i%3 != 0
		if !it.valid {
			it.sig[i] ^= 0x80
		}
	}
	for _, b := range testBackends(t) {
		t.Run(b.Name(), func(t *testing.T) {
			const goroutines = 16
			iters := 64
			if b.Name() == VerifierBtcec {
				iters = 4 // ~50x slower under -race
			}
			var wg sync.WaitGroup
			errs := make(chan string, goroutines)
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range iters {
						it := &items[(g+i)%len(items)]
						if got := b.Verify(&it.pub, &it.msg, &it.sig); got != it.valid {
							errs <- fmt.Sprintf("goroutine %d: item %d: Verify = %v, want %v", g, (g+i)%len(items), got, it.valid)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Error(e)
			}
		})
	}
}

// FuzzVerify feeds arbitrary signature, message and key bytes (padded or cut
// to 64, 32 and 32 bytes) to both verifiers: they must agree and not crash.
// The seed corpus holds the BIP-340 vectors, so mutations start next to
// valid signatures.
func FuzzVerify(f *testing.F) {
	rows := []struct{ pub, msg, sig string }{
		{selfTestVector.pub, selfTestVector.msg, selfTestVector.sig},
		// BIP-340 vector 4 (valid, r with leading zeros) and 6, 9, 13, 14
		// (R with odd y, R at infinity, s = n, key x >= p).
		{"d69c3509bb99e412e68b0fe8544e72837dfa30746d8be2aa65975f29d22dc7b9", "4df3c3f68fcc83b27e9d42c90431a72499f17875c81a599b566c9889b9696703", "00000000000000000000003b78ce563f89a0ed9414f5aa28ad0d96d6795f9c6376afb1548af603b3eb45c9f8207dee1060cb71c04e80f593060b07d28308d7f4"},
		{"dff1d77f2a671c5f36183726db2341be58feae1da2deced843240f7b502ba659", "243f6a8885a308d313198a2e03707344a4093822299f31d0082efa98ec4e6c89", "fff97bd5755eeea420453a14355235d382f6472f8568a18b2f057a14602975563cc27944640ac607cd107ae10923d9ef7a73c643e166be5ebeafa34b1ac553e2"},
		{"dff1d77f2a671c5f36183726db2341be58feae1da2deced843240f7b502ba659", "243f6a8885a308d313198a2e03707344a4093822299f31d0082efa98ec4e6c89", "0000000000000000000000000000000000000000000000000000000000000000123dda8328af9c23a94c1feecfd123ba4fb73476f0d594dcb65c6425bd186051"},
		{"dff1d77f2a671c5f36183726db2341be58feae1da2deced843240f7b502ba659", "243f6a8885a308d313198a2e03707344a4093822299f31d0082efa98ec4e6c89", "6cff5c3ba86c69ea4b7376f31a9bcb4f74c1976089b2d9963da2e5543e177769fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141"},
		{"fffffffffffffffffffffffffffffffffffffffffffffffffffffffefffffc30", "243f6a8885a308d313198a2e03707344a4093822299f31d0082efa98ec4e6c89", "6cff5c3ba86c69ea4b7376f31a9bcb4f74c1976089b2d9963da2e5543e17776969e89b4c5564d00349106b8497785dd7d1d713a8ae82b32fa79d5f7fc407d39b"},
	}
	for _, r := range rows {
		sig, _ := hex.DecodeString(r.sig)
		msg, _ := hex.DecodeString(r.msg)
		pub, _ := hex.DecodeString(r.pub)
		f.Add(sig, msg, pub)
	}
	f.Add([]byte{}, []byte{}, []byte{})
	bs := testBackends(f)
	f.Fuzz(func(t *testing.T, sigb, msgb, pubb []byte) {
		var sig Sig
		var msg [32]byte
		var pub PubKey
		copy(sig[:], sigb)
		copy(msg[:], msgb)
		copy(pub[:], pubb)
		want := bs[0].Verify(&pub, &msg, &sig)
		for _, b := range bs[1:] {
			if got := b.Verify(&pub, &msg, &sig); got != want {
				t.Fatalf("%s = %v, %s = %v for sig %x msg %x pub %x", b.Name(), got, bs[0].Name(), want, sig, msg, pub)
			}
		}
	})
}

// benchInputs returns a valid (pub, msg, sig) triple.
func benchInputs() (PubKey, [32]byte, Sig) {
	sk := SecretKeyFromSeed([]byte("bench"))
	msg := [32]byte{0xbe, 0x4c}
	b := btcecBackend{}
	return b.pubKey(&sk), msg, b.sign(&sk, &msg, &[32]byte{})
}

func BenchmarkVerify(b *testing.B) {
	pub, msg, sig := benchInputs()
	for _, be := range testBackends(b) {
		b.Run(be.Name(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !be.Verify(&pub, &msg, &sig) {
					b.Fatal("valid signature rejected")
				}
			}
		})
	}
}

func BenchmarkVerifyParallel(b *testing.B) {
	pub, msg, sig := benchInputs()
	for _, be := range testBackends(b) {
		b.Run(be.Name(), func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if !be.Verify(&pub, &msg, &sig) {
						b.Error("valid signature rejected")
						return
					}
				}
			})
		})
	}
}

func BenchmarkSign(b *testing.B) {
	sk := SecretKeyFromSeed([]byte("bench"))
	msg := [32]byte{0xbe, 0x4c}
	var aux [32]byte
	for _, be := range testBackends(b) {
		b.Run(be.Name(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				msg[31]++
				_ = be.sign(&sk, &msg, &aux)
			}
		})
	}
}

// FuzzSignVerify derives a key, message and aux randomness from the fuzz
// input, signs with every backend (the signatures must be identical and
// verify everywhere) and flips the bit chosen by flip, after which every
// backend must reject. Unlike FuzzVerify it keeps exploring valid
// signatures.
func FuzzSignVerify(f *testing.F) {
	f.Add([]byte("seed"), []byte("message"), []byte{}, uint16(0))
	f.Add([]byte{}, []byte{0xff}, []byte{1}, uint16(1000))
	bs := testBackends(f)
	f.Fuzz(func(t *testing.T, seed, msgb, auxb []byte, flip uint16) {
		sk := SecretKeyFromSeed(seed)
		var msg, aux [32]byte
		copy(msg[:], msgb)
		copy(aux[:], auxb)
		pub := bs[0].pubKey(&sk)
		sig := bs[0].sign(&sk, &msg, &aux)
		for _, b := range bs {
			if got := b.sign(&sk, &msg, &aux); got != sig {
				t.Fatalf("%s signs %x, %s %x", b.Name(), got, bs[0].Name(), sig)
			}
			if !b.Verify(&pub, &msg, &sig) {
				t.Fatalf("%s rejects a valid signature", b.Name())
			}
		}
		// Flip one bit of sig (bits 0-511), msg (512-767) or pub (768-1023).
		bit := int(flip) % 1024
		switch {
		case bit < 512:
			sig[bit/8] ^= 1 << (bit % 8)
		case bit < 768:
			msg[(bit-512)/8] ^= 1 << (bit % 8)
		default:
			pub[(bit-768)/8] ^= 1 << (bit % 8)
		}
		for _, b := range bs {
			if b.Verify(&pub, &msg, &sig) {
				t.Fatalf("%s accepts after flipping bit %d", b.Name(), bit)
			}
		}
	})
}

// BenchmarkVerifyEvents is VerifyEvents over a full batch; ns/event is
// comparable with BenchmarkVerify's ns/op.
func BenchmarkVerifyEvents(b *testing.B) {
	evs := make([]*Event, VerifyBatchMax)
	for i := range evs {
		evs[i] = &Event{CreatedAt: int64(1700000000 + i), Kind: 1, Content: "bench"}
		SignEvent(evs[i], SecretKeyFromSeed([]byte{byte(i)}))
	}
	ok := make([]bool, len(evs))
	for _, be := range testBackends(b) {
		b.Run(be.Name(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				VerifyEvents(be, evs, ok)
			}
			if !ok[len(ok)-1] {
				b.Fatal("valid signature rejected")
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
		})
	}
}
