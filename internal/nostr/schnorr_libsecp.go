//go:build cgo

package nostr

// The libsecp256k1 backend.
//
// The library is loaded at run time with dlopen, trying the sonames
// libsecp256k1.so.1 (Debian 12's libsecp256k1-1, upstream 0.2.x),
// libsecp256k1.so.2 (upstream 0.3 and later) and then libsecp256k1.so, and its
// functions are reached through pointers found with dlsym. The prototypes are
// declared below, so building needs neither the -dev headers nor the library;
// a binary built here runs (with btcec) on a machine that lacks it.
//
// ABI guard: schnorrsig_verify took a fixed 32-byte message before upstream
// gave it a length argument, in the same series that added
// secp256k1_schnorrsig_sign32. Loading requires sign32, so a library whose
// verify has the older shape is refused instead of called wrongly. After
// loading, a known-answer self-test (a BIP-340 vector's signature verified,
// and rejected with one bit flipped) must pass, or the library is refused.
//
// Two contexts, each created with SECP256K1_CONTEXT_VERIFY|
// SECP256K1_CONTEXT_SIGN (what the 0.2 API expects; later versions treat
// both flags as CONTEXT_NONE). The verifying one is created at load; it
// also serves ECDH, whose constant-time multiplication (ecmult_const) uses
// none of a context's blinding. The one for signing and public keys is
// created at the first such operation and randomized with 32 bytes from crypto/rand
// (side-channel blinding for signing and key generation), then the
// signing half of the self-test (the vector's public key and signature)
// must pass, or signing falls back to btcec: a process that only verifies
// (the relay, petrel version, req) pays for neither the randomization nor
// that test (about 0.35 ms here; docs/BENCHMARKS.md). After creation a
// context is only passed as const, which libsecp256k1 documents as safe
// from many threads at once, so no lock is taken.
//
// Verify is one cgo call: a C helper parses the x-only key
// (xonly_pubkey_parse) and checks the signature (schnorrsig_verify) through
// the function pointers. The arguments are declared noescape and nocallback,
// so verifying allocates nothing.

/*
#cgo LDFLAGS: -ldl
#cgo noescape petrel_secp_verify
#cgo nocallback petrel_secp_verify
#cgo noescape petrel_secp_verify_batch
#cgo nocallback petrel_secp_verify_batch
#cgo noescape petrel_secp_sign
#cgo nocallback petrel_secp_sign
#cgo noescape petrel_secp_pubkey
#cgo nocallback petrel_secp_pubkey
#cgo noescape petrel_secp_load
#cgo nocallback petrel_secp_load
#cgo noescape petrel_secp_sign_init
#cgo nocallback petrel_secp_sign_init
#cgo noescape petrel_secp_shared_x
#cgo nocallback petrel_secp_shared_x

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

// Opaque types, with the sizes secp256k1_extrakeys.h gives them.
typedef struct petrel_secp_ctx petrel_secp_ctx;
typedef struct { unsigned char data[64]; } petrel_xonly_pubkey;
typedef struct { unsigned char data[96]; } petrel_keypair;
typedef struct { unsigned char data[64]; } petrel_pubkey;
typedef int (*petrel_ecdh_hash_function)(unsigned char *output, const unsigned char *x32, const unsigned char *y32, void *data);

// SECP256K1_CONTEXT_VERIFY | SECP256K1_CONTEXT_SIGN from secp256k1.h.
#define PETREL_SECP_CONTEXT_FLAGS ((1u << 0) | (1u << 8) | (1u << 9))

static petrel_secp_ctx *(*petrel_context_create)(unsigned int flags);
static void (*petrel_context_destroy)(petrel_secp_ctx *ctx);
static int (*petrel_context_randomize)(petrel_secp_ctx *ctx, const unsigned char *seed32);
static int (*petrel_xonly_pubkey_parse)(const petrel_secp_ctx *ctx, petrel_xonly_pubkey *pubkey, const unsigned char *input32);
static int (*petrel_xonly_pubkey_serialize)(const petrel_secp_ctx *ctx, unsigned char *output32, const petrel_xonly_pubkey *pubkey);
static int (*petrel_keypair_create)(const petrel_secp_ctx *ctx, petrel_keypair *keypair, const unsigned char *seckey);
static int (*petrel_keypair_xonly_pub)(const petrel_secp_ctx *ctx, petrel_xonly_pubkey *pubkey, int *pk_parity, const petrel_keypair *keypair);
static int (*petrel_schnorrsig_sign32)(const petrel_secp_ctx *ctx, unsigned char *sig64, const unsigned char *msg32, const petrel_keypair *keypair, const unsigned char *aux_rand32);
static int (*petrel_schnorrsig_verify)(const petrel_secp_ctx *ctx, const unsigned char *sig64, const unsigned char *msg, size_t msglen, const petrel_xonly_pubkey *pubkey);
// Optional (the ecdh module): NULL when the library lacks them, and ECDH
// is then done in Go.
static int (*petrel_ec_pubkey_parse)(const petrel_secp_ctx *ctx, petrel_pubkey *pubkey, const unsigned char *input, size_t inputlen);
static int (*petrel_ecdh)(const petrel_secp_ctx *ctx, unsigned char *output, const petrel_pubkey *pubkey, const unsigned char *seckey, petrel_ecdh_hash_function hashfp, void *data);

// petrel_ctx verifies and does ECDH; petrel_sign_ctx (randomized,
// petrel_secp_sign_init) signs and derives public keys.
static petrel_secp_ctx *petrel_ctx;
static petrel_secp_ctx *petrel_sign_ctx;

// petrel_secp_load opens the library, resolves the symbols and creates the
// verifying context. It returns 1 on success; on failure it returns 0 with
// a message in err. It is called once (Go's sync.Once).
static int petrel_secp_load(char *err, size_t errlen) {
	static const char *names[] = {"libsecp256k1.so.1", "libsecp256k1.so.2", "libsecp256k1.so"};
	void *h = NULL;
	const char *name = NULL;
	char first[256] = "";
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		if (h != NULL) {
			name = names[i];
			break;
		}
		if (i == 0) {
			const char *e = dlerror();
			snprintf(first, sizeof first, "%s", e ? e : "unknown error");
		}
	}
	if (h == NULL) {
		snprintf(err, errlen, "dlopen libsecp256k1.so.1, .so.2, .so: %s", first);
		return 0;
	}
#define PETREL_SYM(var, sym) \
	do { \
		*(void **)(&var) = dlsym(h, sym); \
		if (var == NULL) { \
			snprintf(err, errlen, "%s: missing symbol %s (library too old or built without the schnorrsig/extrakeys modules)", name, sym); \
			dlclose(h); \
			return 0; \
		} \
	} while (0)
	PETREL_SYM(petrel_context_create, "secp256k1_context_create");
	PETREL_SYM(petrel_context_destroy, "secp256k1_context_destroy");
	PETREL_SYM(petrel_context_randomize, "secp256k1_context_randomize");
	PETREL_SYM(petrel_xonly_pubkey_parse, "secp256k1_xonly_pubkey_parse");
	PETREL_SYM(petrel_xonly_pubkey_serialize, "secp256k1_xonly_pubkey_serialize");
	PETREL_SYM(petrel_keypair_create, "secp256k1_keypair_create");
	PETREL_SYM(petrel_keypair_xonly_pub, "secp256k1_keypair_xonly_pub");
	PETREL_SYM(petrel_schnorrsig_sign32, "secp256k1_schnorrsig_sign32");
	PETREL_SYM(petrel_schnorrsig_verify, "secp256k1_schnorrsig_verify");
#undef PETREL_SYM
	*(void **)(&petrel_ec_pubkey_parse) = dlsym(h, "secp256k1_ec_pubkey_parse");
	*(void **)(&petrel_ecdh) = dlsym(h, "secp256k1_ecdh");
	petrel_secp_ctx *ctx = petrel_context_create(PETREL_SECP_CONTEXT_FLAGS);
	if (ctx == NULL) {
		snprintf(err, errlen, "%s: secp256k1_context_create failed", name);
		dlclose(h);
		return 0;
	}
	// The handle and the context live as long as the process.
	petrel_ctx = ctx;
	snprintf(err, errlen, "%s", name);
	return 1;
}

// petrel_secp_sign_init creates and randomizes the context for secret
// keys. It returns 1 on success, 0 on failure. It is called once, after
// petrel_secp_load (Go's sync.Once).
static int petrel_secp_sign_init(const unsigned char *seed32) {
	petrel_secp_ctx *ctx = petrel_context_create(PETREL_SECP_CONTEXT_FLAGS);
	if (ctx == NULL) {
		return 0;
	}
	if (!petrel_context_randomize(ctx, seed32)) {
		petrel_context_destroy(ctx);
		return 0;
	}
	petrel_sign_ctx = ctx;
	return 1;
}

// petrel_secp_verify returns 1 if sig64 is a valid BIP-340 signature of the
// 32-byte msg32 by the x-only key pub32, else 0.
static int petrel_secp_verify(const unsigned char *sig64, const unsigned char *msg32, const unsigned char *pub32) {
	petrel_xonly_pubkey pk;
	if (!petrel_xonly_pubkey_parse(petrel_ctx, &pk, pub32)) {
		return 0;
	}
	return petrel_schnorrsig_verify(petrel_ctx, sig64, msg32, 32, &pk);
}

// petrel_secp_verify_batch checks n signatures packed in in as n records
// of sig(64) msg(32) pub(32), setting ok[i] to petrel_secp_verify's answer
// for record i.
static void petrel_secp_verify_batch(const unsigned char *in, size_t n, unsigned char *ok) {
	for (size_t i = 0; i < n; i++) {
		const unsigned char *r = in + 128 * i;
		ok[i] = (unsigned char)petrel_secp_verify(r, r + 64, r + 96);
	}
}

// petrel_secp_sign writes the BIP-340 signature of msg32 by seckey32 with
// auxiliary randomness aux32 to sig64. It returns 0 if the secret key is
// invalid.
static int petrel_secp_sign(unsigned char *sig64, const unsigned char *msg32, const unsigned char *seckey32, const unsigned char *aux32) {
	petrel_keypair kp;
	int ok = petrel_keypair_create(petrel_sign_ctx, &kp, seckey32) &&
		petrel_schnorrsig_sign32(petrel_sign_ctx, sig64, msg32, &kp, aux32);
	memset(&kp, 0, sizeof kp);
	__asm__ __volatile__("" : : "r"(&kp) : "memory"); // keep the memset
	return ok;
}

// petrel_secp_pubkey writes the x-only public key of seckey32 to pub32. It
// returns 0 if the secret key is invalid.
static int petrel_secp_pubkey(unsigned char *pub32, const unsigned char *seckey32) {
	petrel_keypair kp;
	petrel_xonly_pubkey pk;
	int ok = petrel_keypair_create(petrel_sign_ctx, &kp, seckey32) &&
		petrel_keypair_xonly_pub(petrel_sign_ctx, &pk, NULL, &kp) &&
		petrel_xonly_pubkey_serialize(petrel_sign_ctx, pub32, &pk);
	memset(&kp, 0, sizeof kp);
	__asm__ __volatile__("" : : "r"(&kp) : "memory");
	return ok;
}

// petrel_secp_sign_ready returns 1 once petrel_secp_sign_init succeeded.
static int petrel_secp_sign_ready(void) {
	return petrel_sign_ctx != NULL;
}

// petrel_secp_has_ecdh returns 1 if the library has the ecdh module.
static int petrel_secp_has_ecdh(void) {
	return petrel_ec_pubkey_parse != NULL && petrel_ecdh != NULL;
}

// petrel_copy_x is an ECDH "hash" function that outputs the shared point's
// x coordinate unhashed (what NIP-44 and NIP-04 start from).
static int petrel_copy_x(unsigned char *output, const unsigned char *x32, const unsigned char *y32, void *data) {
	(void)y32;
	(void)data;
	memcpy(output, x32, 32);
	return 1;
}

// petrel_secp_shared_x writes to out32 the x coordinate of seckey32 times
// the point whose x coordinate is pub32 and whose y is even. It returns 1
// on success, -1 if pub32 is not the x coordinate of a curve point, 0 if
// the secret key is invalid. Only after petrel_secp_has_ecdh.
static int petrel_secp_shared_x(unsigned char *out32, const unsigned char *seckey32, const unsigned char *pub32) {
	unsigned char compressed[33];
	petrel_pubkey pk;
	compressed[0] = 0x02;
	memcpy(compressed + 1, pub32, 32);
	if (!petrel_ec_pubkey_parse(petrel_ctx, &pk, compressed, sizeof compressed)) {
		return -1;
	}
	return petrel_ecdh(petrel_ctx, out32, &pk, seckey32, petrel_copy_x, NULL);
}
*/
import "C"

import (
	"crypto/rand"
	"fmt"
	"sync"
	"unsafe"
)

// libsecpBackend verifies and signs through libsecp256k1's shared context.
// It exists only after a successful loadLibsecp and is safe for concurrent
// use.
type libsecpBackend struct{}

// Name returns "libsecp256k1".
func (libsecpBackend) Name() string { return VerifierLibsecp }

// Verify implements Verifier. It makes one cgo call and does not allocate.
func (libsecpBackend) Verify(pub *PubKey, msg *[32]byte, sig *Sig) bool {
	return C.petrel_secp_verify(
		(*C.uchar)(unsafe.Pointer(&sig[0])),
		(*C.uchar)(unsafe.Pointer(&msg[0])),
		(*C.uchar)(unsafe.Pointer(&pub[0])),
	) == 1
}

// VerifyEvents implements BatchVerifier: one cgo call per VerifyBatchMax
// events, with the inputs packed into one stack buffer (Go memory passed to
// C must not hold Go pointers).
func (libsecpBackend) VerifyEvents(evs []*Event, ok []bool) {
	var in [VerifyBatchMax * 128]byte
	var res [VerifyBatchMax]C.uchar
	for len(evs) > 0 {
		n := min(len(evs), VerifyBatchMax)
		for i, ev := range evs[:n] {
			r := in[128*i : 128*i+128]
			copy(r, ev.Sig[:])
			copy(r[64:], ev.ID[:])
			copy(r[96:], ev.PubKey[:])
		}
		C.petrel_secp_verify_batch((*C.uchar)(unsafe.Pointer(&in[0])), C.size_t(n), &res[0])
		for i := range n {
			ok[i] = res[i] == 1
		}
		evs, ok = evs[n:], ok[n:]
	}
}

func (libsecpBackend) sign(sk *SecretKey, msg, aux *[32]byte) Sig {
	if !libsecpSigner() {
		return btcecBackend{}.sign(sk, msg, aux)
	}
	sig, ok := libsecpSign(sk, msg, aux)
	if !ok {
		panic("BUG: libsecp256k1 refused a secret key that passed the range check")
	}
	return sig
}

func (libsecpBackend) pubKey(sk *SecretKey) PubKey {
	if !libsecpSigner() {
		return btcecBackend{}.pubKey(sk)
	}
	pub, ok := libsecpPubKey(sk)
	if !ok {
		panic("BUG: libsecp256k1 refused a secret key that passed the range check")
	}
	return pub
}

// libsecpSign and libsecpPubKey call the library, false if it refuses the
// secret key; only after petrel_secp_sign_init (libsecpSigner).
func libsecpSign(sk *SecretKey, msg, aux *[32]byte) (Sig, bool) {
	var out Sig
	ok := C.petrel_secp_sign(
		(*C.uchar)(unsafe.Pointer(&out[0])),
		(*C.uchar)(unsafe.Pointer(&msg[0])),
		(*C.uchar)(unsafe.Pointer(&sk[0])),
		(*C.uchar)(unsafe.Pointer(&aux[0])),
	) == 1
	return out, ok
}

func libsecpPubKey(sk *SecretKey) (PubKey, bool) {
	var out PubKey
	ok := C.petrel_secp_pubkey(
		(*C.uchar)(unsafe.Pointer(&out[0])),
		(*C.uchar)(unsafe.Pointer(&sk[0])),
	) == 1
	return out, ok
}

func (libsecpBackend) sharedX(sk *SecretKey, pub *PubKey) ([32]byte, bool) {
	if !libsecpECDH() {
		return btcecBackend{}.sharedX(sk, pub)
	}
	x, r := libsecpSharedX(sk, pub)
	if r == 0 {
		panic("BUG: libsecp256k1 refused a secret key that passed the range check")
	}
	return x, r == 1
}

// libsecpSharedX calls the library: 1 with the secret, -1 if pub is not on
// the curve, 0 if it refuses the secret key (petrel_secp_shared_x); only
// after libsecpHasECDH.
func libsecpSharedX(sk *SecretKey, pub *PubKey) ([32]byte, int) {
	var out [32]byte
	r := C.petrel_secp_shared_x(
		(*C.uchar)(unsafe.Pointer(&out[0])),
		(*C.uchar)(unsafe.Pointer(&sk[0])),
		(*C.uchar)(unsafe.Pointer(&pub[0])),
	)
	if r != 1 {
		return [32]byte{}, int(r)
	}
	return out, 1
}

// libsecpECDH reports whether the loaded library does ECDH: it has the
// ecdh module, and it passes a known-answer test (ecdhSelfTest) at the
// first ECDH of the process, not at load, so that commands without one
// (petrel version, the relay) do not pay for it. Otherwise ECDH is done in
// Go (btcecBackend.sharedX).
var libsecpECDH = sync.OnceValue(func() bool {
	return libsecpHasECDH() && ecdhSelfTest(libsecpSharedXOK) == nil
})

// libsecpSharedXOK is libsecpSharedX in sharedX's shape, a refused secret
// key counted as a failure (for the self-test).
func libsecpSharedXOK(sk *SecretKey, pub *PubKey) ([32]byte, bool) {
	x, r := libsecpSharedX(sk, pub)
	return x, r == 1
}

// libsecpSigner reports whether the library serves the operations on
// secret keys: at the first one of the process it creates and randomizes
// their context, and the signing half of the self-test must pass.
// Otherwise they are done by btcec. Only after a successful loadLibsecp.
var libsecpSigner = sync.OnceValue(func() bool {
	var seed [32]byte
	rand.Read(seed[:])
	if C.petrel_secp_sign_init((*C.uchar)(unsafe.Pointer(&seed[0]))) != 1 {
		return false
	}
	// A refused key gives a zero result, which the test reports as wrong.
	return selfTestSign(
		func(sk *SecretKey) PubKey { pub, _ := libsecpPubKey(sk); return pub },
		func(sk *SecretKey, msg, aux *[32]byte) Sig { sig, _ := libsecpSign(sk, msg, aux); return sig },
	) == nil
})

// libsecpSignReady reports whether this process has created the context
// for secret keys (for the test that a verifying process does not).
func libsecpSignReady() bool { return C.petrel_secp_sign_ready() == 1 }

// libsecpHasECDH reports whether the loaded library has the ecdh module.
func libsecpHasECDH() bool { return C.petrel_secp_has_ecdh() == 1 }

var libsecpLoad = sync.OnceValues(func() (backend, error) {
	var msg [256]C.char
	if C.petrel_secp_load(&msg[0], C.size_t(len(msg))) != 1 {
		return nil, fmt.Errorf("%w: %s", ErrNoLibsecp, C.GoString(&msg[0]))
	}
	b := libsecpBackend{}
	if err := selfTestVerify(b); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNoLibsecp, C.GoString(&msg[0]), err)
	}
	return b, nil
})

// loadLibsecp loads libsecp256k1 on the first call and returns the backend,
// or an error wrapping ErrNoLibsecp. Later calls return the same result.
func loadLibsecp() (backend, error) { return libsecpLoad() }
