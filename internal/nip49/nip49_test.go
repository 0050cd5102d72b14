package nip49

import (
	"errors"
	"strings"
	"testing"

	"github.com/btcsuite/btcd/btcutil/bech32"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// The example of NIP-49.
const (
	specNcryptsec = "ncryptsec1qgg9947rlpvqu76pj5ecreduf9jxhselq2nae2kghhvd5g7dgjtcxfqtd67p9m0w57lspw8gsq6yphnm8623nsl8xn9j4jdzz84zm3frztj3z7s35vpzmqf6ksu8r89qk5z2zxfmu5gv8th8wclt0h4p"
	specPassword  = "nostr"
	specKey       = "3501454135014541350145413501453fefb02227e449e57cf4d3a3ce05378683"
)

func TestSpecExample(t *testing.T) {
	sk, ks, err := Decrypt(specNcryptsec, specPassword)
	if err != nil || sk.Hex() != specKey {
		t.Fatalf("got %s, %v", sk.Hex(), err)
	}
	if ks != Unknown && ks != KnownInsecure && ks != NotKnownInsecure {
		t.Fatalf("key security %v", ks)
	}
	if _, _, err := Decrypt(specNcryptsec, "nostR"); !errors.Is(err, ErrPassword) {
		t.Fatalf("wrong password: %v", err)
	}
}

func TestRoundTrip(t *testing.T) {
	sk := nostr.SecretKeyFromSeed([]byte("nip49"))
	f := func(password string, logN uint8, ks KeySecurity) {
		t.Helper()
		s, err := Encrypt(sk, password, logN, ks)
		if err != nil {
			t.Fatal(err)
		}
		got, gotKS, err := Decrypt(s, password)
		if err != nil || got != sk || gotKS != ks {
			t.Fatalf("%q logN %d: got %v %v", password, logN, gotKS, err)
		}
	}
	f("correct horse", 4, Unknown)
	f("", 1, KnownInsecure)
	f("ÅΩẛ̣", 8, NotKnownInsecure)
	// NFKC: the decomposed and composed forms of a password are one
	// password.
	s, err := Encrypt(sk, "Å", 4, Unknown)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err := Decrypt(s, "A\u030a"); err != nil || got != sk {
		t.Fatalf("NFKC: %v", err)
	}
}

func TestLogNLimit(t *testing.T) {
	if err := checkLogN(MaxLogN); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	if err := checkLogN(MaxLogN + 1); !errors.Is(err, ErrLogN) {
		t.Fatalf("past the limit: %v", err)
	}
	sk := nostr.SecretKeyFromSeed([]byte("x"))
	if _, err := Encrypt(sk, "p", MaxLogN+1, Unknown); !errors.Is(err, ErrLogN) {
		t.Fatalf("Encrypt past the limit: %v", err)
	}
	// A string naming a huge cost is refused before scrypt runs.
	s, err := encrypt(sk, "p", 1, Unknown, make([]byte, 16), make([]byte, 24))
	if err != nil {
		t.Fatal(err)
	}
	_, five, _ := bech32.DecodeNoLimit(s)
	b, _ := bech32.ConvertBits(five, 5, 8, false)
	b[1] = 255
	five, _ = bech32.ConvertBits(b, 8, 5, true)
	huge, _ := bech32.Encode(Prefix, five)
	if _, _, err := Decrypt(huge, "p"); !errors.Is(err, ErrLogN) {
		t.Fatalf("logN 255: %v", err)
	}
}

func TestDecryptRejects(t *testing.T) {
	f := func(name, s string, want error) {
		t.Helper()
		if _, _, err := Decrypt(s, "p"); !errors.Is(err, want) {
			t.Errorf("%s: got %v, want %v", name, err, want)
		}
	}
	f("not bech32", "hello", ErrFormat)
	f("nsec prefix", strings.Replace(specNcryptsec, "ncryptsec", "nsec", 1), ErrFormat)
	five, _ := bech32.ConvertBits(make([]byte, 90), 8, 5, true)
	short, _ := bech32.Encode(Prefix, five)
	f("90-byte payload", short, ErrFormat)
	b := make([]byte, payloadLen)
	b[0] = 0x01
	five, _ = bech32.ConvertBits(b, 8, 5, true)
	v1, _ := bech32.Encode(Prefix, five)
	f("version 1", v1, ErrFormat)
}

func FuzzDecrypt(f *testing.F) {
	f.Add(specNcryptsec)
	f.Fuzz(func(t *testing.T, s string) {
		// Keep fuzzing cheap: only strings naming a small cost reach
		// scrypt.
		_, five, err := bech32.DecodeNoLimit(s)
		if err == nil {
			if b, err := bech32.ConvertBits(five, 5, 8, false); err == nil && len(b) > 1 && b[1] > 10 {
				return
			}
		}
		_, _, _ = Decrypt(s, "p")
	})
}
