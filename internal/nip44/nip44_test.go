package nip44

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
)

type vectors struct {
	V2 struct {
		Valid struct {
			GetConversationKey []struct {
				Sec1, Pub2      string
				ConversationKey string `json:"conversation_key"`
			} `json:"get_conversation_key"`
			GetMessageKeys struct {
				ConversationKey string `json:"conversation_key"`
				Keys            []struct {
					Nonce       string
					ChachaKey   string `json:"chacha_key"`
					ChachaNonce string `json:"chacha_nonce"`
					HmacKey     string `json:"hmac_key"`
				}
			} `json:"get_message_keys"`
			CalcPaddedLen  [][2]int `json:"calc_padded_len"`
			EncryptDecrypt []struct {
				Sec1, Sec2      string
				ConversationKey string `json:"conversation_key"`
				Nonce           string
				Plaintext       string
				Payload         string
			} `json:"encrypt_decrypt"`
			Long []struct {
				ConversationKey string `json:"conversation_key"`
				Nonce           string
				Pattern         string
				Repeat          int
				PlaintextSHA256 string `json:"plaintext_sha256"`
				PayloadSHA256   string `json:"payload_sha256"`
			} `json:"encrypt_decrypt_long_msg"`
		}
		Invalid struct {
			EncryptMsgLengths  []int `json:"encrypt_msg_lengths"`
			GetConversationKey []struct {
				Sec1, Pub2, Note string
			} `json:"get_conversation_key"`
			Decrypt []struct {
				ConversationKey string `json:"conversation_key"`
				Plaintext       string
				Payload         string
				Note            string
			}
		}
	}
}

func loadVectors(t *testing.T) *vectors {
	t.Helper()
	b, err := os.ReadFile("testdata/nip44.vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return &v
}

func h32(t *testing.T, s string) [32]byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		t.Fatalf("hex32 %q: %v", s, err)
	}
	return [32]byte(b)
}

// Every published vector, valid and invalid; the counts guard against a
// section silently going missing from the file.
func TestVectors(t *testing.T) {
	v := loadVectors(t).V2
	counts := map[string][2]int{
		"get_conversation_key":        {len(v.Valid.GetConversationKey), 35},
		"get_message_keys":            {len(v.Valid.GetMessageKeys.Keys), 32},
		"calc_padded_len":             {len(v.Valid.CalcPaddedLen), 24},
		"encrypt_decrypt":             {len(v.Valid.EncryptDecrypt), 10},
		"encrypt_decrypt_long_msg":    {len(v.Valid.Long), 3},
		"invalid encrypt_msg_lengths": {len(v.Invalid.EncryptMsgLengths), 4},
		"invalid get_conversation":    {len(v.Invalid.GetConversationKey), 8},
		"invalid decrypt":             {len(v.Invalid.Decrypt), 12},
	}
	for name, c := range counts {
		if c[0] != c[1] {
			t.Errorf("%s: %d vectors, want %d", name, c[0], c[1])
		}
	}
	for i, c := range v.Valid.GetConversationKey {
		ck, err := NewConversationKey(nostr.SecretKey(h32(t, c.Sec1)), nostr.PubKey(h32(t, c.Pub2)))
		if err != nil || hex.EncodeToString(ck[:]) != c.ConversationKey {
			t.Errorf("conversation key %d: got %x, %v", i, ck, err)
		}
	}
	mk := ConversationKey(h32(t, v.Valid.GetMessageKeys.ConversationKey))
	for i, c := range v.Valid.GetMessageKeys.Keys {
		nonce := h32(t, c.Nonce)
		k, n, hk := MessageKeys(mk, &nonce)
		if hex.EncodeToString(k[:]) != c.ChachaKey || hex.EncodeToString(n[:]) != c.ChachaNonce || hex.EncodeToString(hk[:]) != c.HmacKey {
			t.Errorf("message keys %d: %x %x %x", i, k, n, hk)
		}
	}
	for _, c := range v.Valid.CalcPaddedLen {
		if got := PaddedLen(c[0]); got != c[1] {
			t.Errorf("PaddedLen(%d) = %d, want %d", c[0], got, c[1])
		}
	}
	for i, c := range v.Valid.EncryptDecrypt {
		sk2 := nostr.SecretKey(h32(t, c.Sec2))
		ck, err := NewConversationKey(nostr.SecretKey(h32(t, c.Sec1)), sk2.PubKey())
		if err != nil || hex.EncodeToString(ck[:]) != c.ConversationKey {
			t.Errorf("encrypt_decrypt %d: conversation key %x, %v", i, ck, err)
			continue
		}
		// Symmetric: the other side derives the same key.
		back, err := NewConversationKey(sk2, nostr.SecretKey(h32(t, c.Sec1)).PubKey())
		if err != nil || back != ck {
			t.Errorf("encrypt_decrypt %d: not symmetric", i)
		}
		nonce := h32(t, c.Nonce)
		p, err := EncryptNonce(ck, c.Plaintext, &nonce)
		if err != nil || p != c.Payload {
			t.Errorf("encrypt_decrypt %d: payload %s, %v", i, p, err)
		}
		pt, err := Decrypt(ck, c.Payload)
		if err != nil || pt != c.Plaintext {
			t.Errorf("encrypt_decrypt %d: decrypt %q, %v", i, pt, err)
		}
	}
	for i, c := range v.Valid.Long {
		pt := strings.Repeat(c.Pattern, c.Repeat)
		if s := sha256.Sum256([]byte(pt)); hex.EncodeToString(s[:]) != c.PlaintextSHA256 {
			t.Fatalf("long %d: plaintext hash", i)
		}
		ck, nonce := ConversationKey(h32(t, c.ConversationKey)), h32(t, c.Nonce)
		p, err := EncryptNonce(ck, pt, &nonce)
		if s := sha256.Sum256([]byte(p)); err != nil || hex.EncodeToString(s[:]) != c.PayloadSHA256 {
			t.Errorf("long %d: payload hash, %v", i, err)
		}
		if back, err := Decrypt(ck, p); err != nil || back != pt {
			t.Errorf("long %d: decrypt: %v", i, err)
		}
	}
	for _, n := range v.Invalid.EncryptMsgLengths {
		var nonce [32]byte
		if _, err := EncryptNonce(ConversationKey{1}, strings.Repeat("x", n), &nonce); !errors.Is(err, ErrPlaintext) {
			t.Errorf("plaintext of %d bytes: %v", n, err)
		}
	}
	for i, c := range v.Invalid.GetConversationKey {
		if _, err := NewConversationKey(nostr.SecretKey(h32(t, c.Sec1)), nostr.PubKey(h32(t, c.Pub2))); !errors.Is(err, ErrKey) {
			t.Errorf("invalid conversation key %d (%s): %v", i, c.Note, err)
		}
	}
	want := map[string]error{
		"unknown encryption version":   ErrVersion,
		"unknown encryption version 0": ErrVersion,
		"invalid base64":               ErrPayload,
		"invalid MAC":                  ErrMAC,
		"invalid padding":              ErrPadding,
	}
	for i, c := range v.Invalid.Decrypt {
		_, err := Decrypt(ConversationKey(h32(t, c.ConversationKey)), c.Payload)
		w := want[c.Note]
		if strings.HasPrefix(c.Note, "invalid payload length") {
			w = ErrPayload
		}
		if w == nil || !errors.Is(err, w) {
			t.Errorf("invalid decrypt %d (%s): got %v, want %v", i, c.Note, err, w)
		}
	}
}

func TestPlaintextLimits(t *testing.T) {
	ck := ConversationKey{7}
	for _, n := range []int{MinPlaintext, MaxPlaintext} {
		p, err := Encrypt(ck, strings.Repeat("a", n))
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if pt, err := Decrypt(ck, p); err != nil || len(pt) != n {
			t.Fatalf("%d bytes: decrypt %v", n, err)
		}
	}
	for _, n := range []int{MinPlaintext - 1, MaxPlaintext + 1} {
		if _, err := Encrypt(ck, strings.Repeat("a", n)); !errors.Is(err, ErrPlaintext) {
			t.Fatalf("%d bytes: %v", n, err)
		}
	}
}

func TestRandomNonces(t *testing.T) {
	ck := ConversationKey{9}
	a, _ := Encrypt(ck, "same")
	b, _ := Encrypt(ck, "same")
	if a == b {
		t.Fatal("two encryptions of one plaintext gave one payload")
	}
}

func TestTamperedPayloads(t *testing.T) {
	ck := ConversationKey{3}
	p, err := Encrypt(ck, "hello")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decrypt(ConversationKey{4}, p); !errors.Is(err, ErrMAC) {
		t.Errorf("wrong key: %v", err)
	}
	b := []byte(p)
	b[60] ^= 1
	if b[60] == '+' || b[60] == '/' || b[60] == '=' {
		b[60] = 'A'
	}
	if _, err := Decrypt(ck, string(b)); err == nil {
		t.Error("a changed payload decrypted")
	}
}

func TestNIP04(t *testing.T) {
	a, b := nostr.SecretKeyFromSeed([]byte("a")), nostr.SecretKeyFromSeed([]byte("b"))
	for _, msg := range []string{"", "x", "exactly 16 bytes", strings.Repeat("é", 100)} {
		p, err := EncryptNIP04(a, b.PubKey(), msg)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecryptNIP04(b, a.PubKey(), p)
		if err != nil || got != msg {
			t.Fatalf("%q: got %q, %v", msg, got, err)
		}
	}
	// A known answer: fixed keys and IV (the AES-CBC layer is the
	// standard library's; this pins the key derivation and framing).
	var iv [16]byte
	p, err := encryptNIP04IV(a, b.PubKey(), "nip04", &iv)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(p, "?iv=AAAAAAAAAAAAAAAAAAAAAA==") {
		t.Fatalf("framing: %s", p)
	}
	bad := func(name, payload string) {
		t.Helper()
		if _, err := DecryptNIP04(b, a.PubKey(), payload); !errors.Is(err, ErrNIP04) {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad("no iv", "AAAA")
	bad("bad base64", "!!!?iv=AAAAAAAAAAAAAAAAAAAAAA==")
	bad("short iv", "AAAAAAAAAAAAAAAAAAAAAA==?iv=AAAA")
	bad("not blocks", "AAAA?iv=AAAAAAAAAAAAAAAAAAAAAA==")
	bad("too long", strings.Repeat("A", MaxNIP04Payload+1))
	// At the limit the payload is read (and refused for its shape, not
	// its size).
	if _, err := DecryptNIP04(b, a.PubKey(), strings.Repeat("A", MaxNIP04Payload)); err == nil || strings.Contains(err.Error(), "more than") {
		t.Errorf("at the limit: %v", err)
	}
	c := nostr.SecretKeyFromSeed([]byte("c"))
	if got, err := DecryptNIP04(c, a.PubKey(), p); err == nil && got == "nip04" {
		t.Error("a third key decrypted the message")
	}
}

func FuzzDecrypt(f *testing.F) {
	ck := ConversationKey{5}
	p, _ := Encrypt(ck, "seed")
	f.Add(p)
	f.Add("#abc")
	f.Add("")
	f.Fuzz(func(t *testing.T, payload string) {
		pt, err := Decrypt(ck, payload)
		if err != nil {
			return
		}
		// What decrypts re-encrypts to a payload that decrypts the same.
		again, err := Encrypt(ck, pt)
		if err != nil {
			t.Fatalf("re-encrypt: %v", err)
		}
		if back, err := Decrypt(ck, again); err != nil || back != pt {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func FuzzDecryptNIP04(f *testing.F) {
	a, b := nostr.SecretKeyFromSeed([]byte("a")), nostr.SecretKeyFromSeed([]byte("b"))
	p, _ := EncryptNIP04(a, b.PubKey(), "seed")
	f.Add(p)
	f.Add("x?iv=y")
	f.Fuzz(func(t *testing.T, payload string) {
		_, _ = DecryptNIP04(b, a.PubKey(), payload)
	})
}
