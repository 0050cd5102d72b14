package nostr

import (
	"strings"
	"testing"
)

// knownEvents are events signed elsewhere: the outputs of the `nak event`
// examples in fiatjaf/nak (signed by go-nostr with btcec's RFC 6979 nonces,
// so the signatures differ from what SignEvent would produce for the same
// key), with their secret keys (nak's --sec, left-padded hex).
var knownEvents = []struct {
	sk  string
	raw string
}{
	{
		sk:  "0000000000000000000000000000000000000000000000000000000000000001",
		raw: `{"id":"36d88cf5fcc449f2390a424907023eda7a74278120eebab8d02797cd92e7e29c","pubkey":"79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798","created_at":1699485669,"kind":1,"tags":[],"content":"hello from the nostr army knife","sig":"68e71a192e8abcf8582a222434ac823ecc50607450ebe8cc4c145eb047794cc382dc3f888ce879d2f404f5ba6085a47601360a0fa2dd4b50d317bd0c6197c2c2"}`,
	},
	{
		sk:  "0000000000000000000000000000000000000000000000000000000000000017",
		raw: `{"id":"aec4de6d051a7c2b6ca2d087903d42051a31e07fb742f1240970084822de10a6","pubkey":"2fa2104d6b38d11b0230010559879124e42ab8dfeff5ff29dc9cdadd4ecacc3f","created_at":1699485669,"kind":11,"tags":[["t","spam"],["r","https://abc.def","nothing"],["e","36d88cf5fcc449f2390a424907023eda7a74278120eebab8d02797cd92e7e29c"]],"content":"skjdbaskd","sig":"1165ac7a27d774d351ef19c8e918fb22f4005fcba193976c3d7edba6ef87ead7f14467f376a9e199f8371835368d86a8506f591e382528d00287fb168a7b8f38"}`,
	},
}

func TestVerifyKnownEvents(t *testing.T) {
	for i, k := range knownEvents {
		ev, err := ParseEvent([]byte(k.raw), &Limits{})
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if !CheckID(ev) {
			t.Errorf("event %d: id does not match content", i)
		}
		sk, err := ParseSecretKey(k.sk)
		if err != nil {
			t.Fatal(err)
		}
		if got := sk.PubKey(); got != ev.PubKey {
			t.Errorf("event %d: PubKey() = %s, event has %s", i, got, ev.PubKey)
		}
		for _, b := range testBackends(t) {
			if !VerifyEvent(b, ev) {
				t.Errorf("event %d: %s rejects it", i, b.Name())
			}
			bad := *ev
			bad.Sig[10] ^= 4
			if VerifyEvent(b, &bad) {
				t.Errorf("event %d: %s accepts a changed signature", i, b.Name())
			}
			bad = *ev
			bad.ID[0] ^= 1
			if VerifyEvent(b, &bad) {
				t.Errorf("event %d: %s accepts a changed id", i, b.Name())
			}
		}
		// Re-signing with SignEvent yields the same id and a signature that
		// verifies (BIP-340 signatures of one message by one key differ
		// with the nonce, so the bytes need not match).
		re := Event{CreatedAt: ev.CreatedAt, Kind: ev.Kind, Tags: ev.Tags, Content: ev.Content}
		SignEvent(&re, sk)
		if re.ID != ev.ID {
			t.Errorf("event %d: SignEvent id %s, want %s", i, re.ID, ev.ID)
		}
		if !VerifyEvent(DefaultVerifier(), &re) {
			t.Errorf("event %d: re-signed event does not verify", i)
		}
	}
}

func TestSignEvent(t *testing.T) {
	sk := SecretKeyFromSeed([]byte("petrel test author"))
	ev := &Event{
		CreatedAt: 1700000000,
		Kind:      1,
		Tags:      Tags{{"t", "petrel"}, {"p", strings.Repeat("ab", 32), "wss://relay.example"}},
		Content:   "line one\nline \"two\" \\ \t\u0001 héllo",
	}
	SignEvent(ev, sk)
	if ev.PubKey != sk.PubKey() {
		t.Error("PubKey not set")
	}
	if !CheckID(ev) {
		t.Error("ID is not the hash of the canonical form")
	}
	for _, b := range testBackends(t) {
		if !VerifyEvent(b, ev) {
			t.Errorf("%s rejects the signed event", b.Name())
		}
	}
	// Raw parses back to the same event.
	back, err := ParseEvent(ev.Raw, &Limits{})
	if err != nil {
		t.Fatalf("parse Raw %s: %v", ev.Raw, err)
	}
	if back.ID != ev.ID || back.PubKey != ev.PubKey || back.Sig != ev.Sig || back.Content != ev.Content ||
		back.CreatedAt != ev.CreatedAt || back.Kind != ev.Kind || len(back.Tags) != len(ev.Tags) {
		t.Errorf("Raw round trip differs:\n got %+v\nwant %+v", back, ev)
	}
	if !VerifyEvent(DefaultVerifier(), back) || !CheckID(back) {
		t.Error("parsed Raw does not verify")
	}
	// Signing is deterministic.
	again := &Event{CreatedAt: ev.CreatedAt, Kind: ev.Kind, Tags: ev.Tags, Content: ev.Content}
	SignEvent(again, sk)
	if again.Sig != ev.Sig || string(again.Raw) != string(ev.Raw) {
		t.Error("SignEvent is not deterministic")
	}
	// A change to the content after signing breaks the id, not the
	// signature over the old id.
	ev.Content += "!"
	if CheckID(ev) {
		t.Error("CheckID accepts changed content")
	}
}

func TestSignDeterministicAndAux(t *testing.T) {
	sk := SecretKeyFromSeed([]byte("aux"))
	pub := sk.PubKey()
	msg := [32]byte{9}
	s1, s2 := sk.Sign(&msg), sk.Sign(&msg)
	if s1 != s2 {
		t.Error("Sign is not deterministic")
	}
	var zero [32]byte
	if s := sk.SignAux(&msg, &zero); s != s1 {
		t.Error("Sign differs from SignAux with zero aux")
	}
	aux := [32]byte{1}
	s3 := sk.SignAux(&msg, &aux)
	if s3 == s1 {
		t.Error("aux randomness does not change the signature")
	}
	for _, b := range testBackends(t) {
		for _, s := range []Sig{s1, s3} {
			if !b.Verify(&pub, &msg, &s) {
				t.Errorf("%s rejects %x", b.Name(), s)
			}
		}
	}
}

func TestSecretKeys(t *testing.T) {
	f := func(s string, wantErr bool) {
		t.Helper()
		sk, err := ParseSecretKey(s)
		if (err != nil) != wantErr {
			t.Fatalf("ParseSecretKey(%q) error = %v, want error %v", s, err, wantErr)
		}
		if err == nil && sk.Hex() != s {
			t.Errorf("Hex() = %q, want %q", sk.Hex(), s)
		}
	}
	f("0000000000000000000000000000000000000000000000000000000000000001", false)
	f("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364140", false) // n-1
	f("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141", true)  // n
	f("0000000000000000000000000000000000000000000000000000000000000000", true)
	f("FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364140", true) // uppercase
	f("01", true)

	// SecretKeyFromSeed is sha256(seed): fixed so load runs are reproducible.
	sk := SecretKeyFromSeed([]byte("abc"))
	if got, want := sk.Hex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; got != want {
		t.Errorf("SecretKeyFromSeed(abc) = %s, want %s", got, want)
	}
	if SecretKeyFromSeed([]byte("abd")) == sk {
		t.Error("different seeds gave the same key")
	}

	a, b := GenerateKey(), GenerateKey()
	if !a.Valid() || !b.Valid() || a == b {
		t.Errorf("GenerateKey gave %s and %s", a.Hex(), b.Hex())
	}

	// sk = 1 has the generator's x coordinate as its public key.
	one, _ := ParseSecretKey("0000000000000000000000000000000000000000000000000000000000000001")
	for _, be := range testBackends(t) {
		if got := be.pubKey(&one); got.Hex() != "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798" {
			t.Errorf("%s: pubKey(1) = %s", be.Name(), got)
		}
	}
}

func TestInvalidSecretKeyPanics(t *testing.T) {
	f := func(name string, fn func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s with the zero key did not panic", name)
			}
		}()
		fn()
	}
	var zero SecretKey
	var msg [32]byte
	f("Sign", func() { zero.Sign(&msg) })
	f("SignAux", func() { zero.SignAux(&msg, &msg) })
	f("PubKey", func() { zero.PubKey() })
	f("SignEvent", func() { SignEvent(&Event{}, zero) })
}
