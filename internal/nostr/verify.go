package nostr

import (
	"errors"
	"os"
	"sync"
)

// VerifierEnv is the environment variable that forces the pure-Go verifier:
// PETREL_VERIFIER=btcec makes DefaultVerifier (and SecretKey.Sign) use btcec
// even where libsecp256k1 loads. Any other value, or none, selects
// automatically. It is read once, at the first call of DefaultVerifier (or
// of SecretKey.Sign, SignAux or PubKey, which use the same choice).
const VerifierEnv = "PETREL_VERIFIER"

// Names reported by Verifier.Name.
const (
	VerifierLibsecp = "libsecp256k1"
	VerifierBtcec   = "btcec"
)

// ErrNoLibsecp reports that the libsecp256k1 verifier cannot be used in this
// process; the wrapping error says why (no cgo, library not found, symbol
// missing, self-test failed).
var ErrNoLibsecp = errors.New("nostr: libsecp256k1 unavailable")

// Verifier checks BIP-340 signatures. Implementations are safe for concurrent
// use and hold no per-call state; Verify does not retain its arguments.
type Verifier interface {
	// Verify reports whether sig is a valid BIP-340 signature of msg by the
	// x-only public key pub. A pub that is not the x coordinate of a curve
	// point, or a sig whose r is not below the field size or whose s is not
	// below the group order, makes it return false.
	Verify(pub *PubKey, msg *[32]byte, sig *Sig) bool
	// Name returns "libsecp256k1" or "btcec".
	Name() string
}

// backend is a Verifier that can also sign; both implementations are
// backends. sk must be a valid secret key (checked by the callers).
type backend interface {
	Verifier
	// sign writes the BIP-340 signature of msg with auxiliary randomness aux.
	sign(sk *SecretKey, msg, aux *[32]byte) Sig
	// pubKey returns the x-only public key of sk.
	pubKey(sk *SecretKey) PubKey
	// sharedX returns the x coordinate of sk times the point whose x
	// coordinate is pub and whose y is even, and false if pub is not the
	// x coordinate of a curve point. sk must be Valid.
	sharedX(sk *SecretKey, pub *PubKey) ([32]byte, bool)
}

// DefaultVerifier returns the verifier the relay should use. It is chosen
// once, at the first call: libsecp256k1 if it loads and PETREL_VERIFIER is
// not "btcec", else btcec. It logs nothing; a caller that wants to say why
// libsecp256k1 is not in use calls LibsecpVerifier for the error.
//
// The two implementations give the same answer on every input (the BIP-340
// test vectors, a cross-check and two fuzz targets hold them to that):
//
//   - "libsecp256k1" is the C library bitcoin-core/secp256k1, loaded at run
//     time with dlopen ("libsecp256k1.so.1", then ".so.2", then ".so"; Debian
//     package libsecp256k1-1 or later) through cgo, with the prototypes
//     declared in this package so that no -dev headers are needed to build.
//     One context, created and randomized at load time and read-only after,
//     is shared by all goroutines; a verify is one cgo call (parse the key,
//     check the signature) that allocates nothing. It is about 4x faster
//     than btcec (≈55 µs against ≈225 µs per verify on the 2-core dev
//     machine), and verification is most of the CPU an ingested event
//     costs, so it sets the relay's ingest ceiling. See schnorr_libsecp.go.
//   - "btcec" is the pure-Go github.com/btcsuite/btcd/btcec/v2/schnorr. It is
//     always available and is the only implementation in a CGO_ENABLED=0
//     build or where the library is missing.
func DefaultVerifier() Verifier { return defaultBackend() }

var defaultBackend = sync.OnceValue(func() backend {
	return selectBackend(os.Getenv(VerifierEnv))
})

// selectBackend is DefaultVerifier's choice for the given value of
// PETREL_VERIFIER.
func selectBackend(env string) backend {
	if env == VerifierBtcec {
		return btcecBackend{}
	}
	if b, err := loadLibsecp(); err == nil {
		return b
	}
	return btcecBackend{}
}

// LibsecpVerifier returns the libsecp256k1 verifier, loading the library on
// the first call (later calls return the same result). The error wraps
// ErrNoLibsecp and explains why the library is unavailable. It ignores
// PETREL_VERIFIER.
func LibsecpVerifier() (Verifier, error) {
	b, err := loadLibsecp()
	if err != nil {
		return nil, err
	}
	return b, nil
}

// BtcecVerifier returns the pure-Go verifier. It is always available.
func BtcecVerifier() Verifier { return btcecBackend{} }

// VerifyEvent reports whether ev.Sig is a valid signature of ev.ID by
// ev.PubKey. It does not recompute the id from the event's content; CheckID
// does that, and an event is valid only if both hold.
func VerifyEvent(v Verifier, ev *Event) bool {
	return v.Verify(&ev.PubKey, (*[32]byte)(&ev.ID), &ev.Sig)
}

// BatchVerifier is a Verifier that checks several events' signatures in
// one call. The libsecp256k1 verifier is one: a cgo call that runs for the
// ~50 µs of a verify lets the Go scheduler's monitor take the caller's P
// and hand it to another thread, and on a busy core those handoffs (thread
// switches) cost a measurable share of the CPU; one call per batch makes
// at most one per batch.
type BatchVerifier interface {
	Verifier
	// VerifyEvents sets ok[i] to VerifyEvent(v, evs[i]). len(ok) must be
	// at least len(evs).
	VerifyEvents(evs []*Event, ok []bool)
}

// VerifyBatchMax is the most events the libsecp256k1 verifier checks in
// one cgo call: 16 verifies are under a millisecond, and their packed
// inputs (2 KiB) fit on the stack. VerifyEvents takes any number.
const VerifyBatchMax = 16

// VerifyEvents sets ok[i] to whether evs[i] has a valid signature
// (VerifyEvent), in one call to v when v is a BatchVerifier.
func VerifyEvents(v Verifier, evs []*Event, ok []bool) {
	if bv, batch := v.(BatchVerifier); batch {
		bv.VerifyEvents(evs, ok)
		return
	}
	for i, ev := range evs {
		ok[i] = VerifyEvent(v, ev)
	}
}
