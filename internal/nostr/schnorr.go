package nostr

import (
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// selfTestVector is BIP-340 test vector 1 (secret key, public key, aux_rand,
// message, signature), used to check a backend before it is trusted.
var selfTestVector = struct{ sk, pub, aux, msg, sig string }{
	sk:  "b7e151628aed2a6abf7158809cf4f3c762e7160f38b4da56a784d9045190cfef",
	pub: "dff1d77f2a671c5f36183726db2341be58feae1da2deced843240f7b502ba659",
	aux: "0000000000000000000000000000000000000000000000000000000000000001",
	msg: "243f6a8885a308d313198a2e03707344a4093822299f31d0082efa98ec4e6c89",
	sig: "6896bd60eeae296db48a229ff71dfe071bde413e6d43f917dc8dcf8c78de33418906d11ac976abccb20b091292bff4ea897efcb639ea871cfa95f6de339e4b0a",
}

// selfTestKeys decodes selfTestVector.
func selfTestKeys() (sk SecretKey, pub PubKey, aux, msg [32]byte, sig Sig) {
	v := selfTestVector
	mustHex(sk[:], v.sk)
	mustHex(pub[:], v.pub)
	mustHex(aux[:], v.aux)
	mustHex(msg[:], v.msg)
	mustHex(sig[:], v.sig)
	return
}

// mustHex decodes a self-test vector's field, exactly len(dst) bytes.
func mustHex(dst []byte, src string) {
	if n, err := hex.Decode(dst, []byte(src)); err != nil || n != len(dst) {
		panic(fmt.Sprintf("BUG: bad self-test vector %q: %v", src, err))
	}
}

// selfTestVerify is the verifying half of the known-answer test: the
// vector's signature verifies, and a one-bit change is rejected. It
// guards against loading a library whose ABI or behaviour is not what
// this package was written for.
func selfTestVerify(v Verifier) error {
	_, pub, _, msg, sig := selfTestKeys()
	if !v.Verify(&pub, &msg, &sig) {
		return errors.New("self-test: valid signature rejected")
	}
	sig[63] ^= 1
	if v.Verify(&pub, &msg, &sig) {
		return errors.New("self-test: invalid signature accepted")
	}
	return nil
}

// selfTestSign is the signing half: the vector's public key derived and
// its signature made with explicit aux randomness.
func selfTestSign(pubKey func(*SecretKey) PubKey, sign func(sk *SecretKey, msg, aux *[32]byte) Sig) error {
	sk, pub, aux, msg, sig := selfTestKeys()
	if pubKey(&sk) != pub {
		return errors.New("self-test: wrong public key")
	}
	if sign(&sk, &msg, &aux) != sig {
		return errors.New("self-test: wrong signature")
	}
	return nil
}

// ecdhSelfTestVector is the first valid get_conversation_key vector of
// NIP-44 (nip44.vectors.json): the conversation key is HKDF-extract
// (SHA-256, salt "nip44-v2") of the ECDH x coordinate of sec1 and pub2.
var ecdhSelfTestVector = struct{ sec1, pub2, conversationKey string }{
	sec1:            "315e59ff51cb9209768cf7da80791ddcaae56ac9775eb25b6dee1234bc5d2268",
	pub2:            "c2f9d9948dc8c7c38321e4b85c8558872eafa0641cd269db76848a6073e69133",
	conversationKey: "3dfef0ce2a4d80a25e7a328accf73448ef67096f65f79588e358d9a0eb9013f1",
}

// ecdhSelfTest is the known-answer test of an ECDH implementation
// (sharedX's contract): NIP-44's vector above, and a public key that is
// not on the curve (x = 5) refused.
func ecdhSelfTest(sharedX func(*SecretKey, *PubKey) ([32]byte, bool)) error {
	v := ecdhSelfTestVector
	var sk SecretKey
	var pub PubKey
	var want [32]byte
	mustHex(sk[:], v.sec1)
	mustHex(pub[:], v.pub2)
	mustHex(want[:], v.conversationKey)
	x, ok := sharedX(&sk, &pub)
	if !ok {
		return errors.New("ECDH self-test: a curve point refused")
	}
	key, err := hkdf.Extract(sha256.New, x[:], []byte("nip44-v2"))
	if err != nil || [32]byte(key) != want {
		return errors.New("ECDH self-test: wrong shared secret")
	}
	pub = PubKey{31: 5} // x^3 + 7 = 132 is not a square mod p
	if _, ok := sharedX(&sk, &pub); ok {
		return errors.New("ECDH self-test: a point off the curve accepted")
	}
	return nil
}
