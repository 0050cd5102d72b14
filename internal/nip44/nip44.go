package nip44

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"golang.org/x/crypto/chacha20"
	"golang.org/x/crypto/hkdf"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// Version is the payload version this package writes and reads.
const Version = 2

// Plaintext bounds, in bytes (NIP-44 v2).
const (
	MinPlaintext = 1
	MaxPlaintext = 65535
)

// Payload bounds: the base64 text and the bytes it decodes to.
const (
	minPayload = 132
	maxPayload = 87472
	minData    = 99
	maxData    = 65603
)

// Sentinel errors.
var (
	// ErrKey means a conversation key cannot be made: the secret key is
	// not in [1, n-1] or the public key is not the x coordinate of a
	// curve point.
	ErrKey = errors.New("nip44: invalid key")
	// ErrPlaintext means a plaintext outside MinPlaintext..MaxPlaintext
	// bytes.
	ErrPlaintext = errors.New("nip44: plaintext must be 1 to 65535 bytes")
	// ErrVersion means a payload of another version than 2 (including
	// the "#" that marks a future non-base64 one).
	ErrVersion = errors.New("nip44: unknown encryption version")
	// ErrPayload means a payload that is not valid base64 or has an
	// impossible length.
	ErrPayload = errors.New("nip44: malformed payload")
	// ErrMAC means the payload fails authentication: wrong keys, or a
	// payload changed on the way.
	ErrMAC = errors.New("nip44: invalid MAC")
	// ErrPadding means the decrypted padding is not what the length
	// prefix requires.
	ErrPadding = errors.New("nip44: invalid padding")
)

// ConversationKey is the key two parties share: the same for (a's secret,
// b's public) as for (b's secret, a's public).
type ConversationKey [32]byte

// SharedX returns the x coordinate of sk times the point whose x
// coordinate is pub (even y), unhashed: the ECDH secret NIP-44 and
// NIP-04 start from (nostr.SharedX: libsecp256k1 when loaded).
func SharedX(sk nostr.SecretKey, pub nostr.PubKey) ([32]byte, error) {
	x, err := nostr.SharedX(sk, pub)
	switch {
	case errors.Is(err, nostr.ErrSecretKey):
		return x, fmt.Errorf("%w: secret key not in [1, n-1]", ErrKey)
	case err != nil:
		return x, fmt.Errorf("%w: public key %s is not the x coordinate of a curve point", ErrKey, pub.Hex())
	}
	return x, nil
}

// NewConversationKey returns the conversation key of sk and pub.
func NewConversationKey(sk nostr.SecretKey, pub nostr.PubKey) (ConversationKey, error) {
	x, err := SharedX(sk, pub)
	if err != nil {
		return ConversationKey{}, err
	}
	return ConversationKey(hkdf.Extract(sha256.New, x[:], []byte("nip44-v2"))), nil
}

// MessageKeys returns the ChaCha20 key, ChaCha20 nonce and HMAC key of
// one message: HKDF-expand(conversation key, info nonce, 76 bytes).
func MessageKeys(ck ConversationKey, nonce *[32]byte) (chachaKey [32]byte, chachaNonce [12]byte, hmacKey [32]byte) {
	var keys [76]byte
	r := hkdf.Expand(sha256.New, ck[:], nonce[:])
	if _, err := io.ReadFull(r, keys[:]); err != nil {
		panic("BUG: nip44: HKDF-expand of 76 bytes: " + err.Error())
	}
	copy(chachaKey[:], keys[:32])
	copy(chachaNonce[:], keys[32:44])
	copy(hmacKey[:], keys[44:])
	return
}

// PaddedLen returns the length NIP-44 pads an n-byte plaintext to
// (n >= 1): 32 up to 32 bytes, then multiples of a power-of-two chunk.
func PaddedLen(n int) int {
	if n <= 32 {
		return 32
	}
	next := 1
	for next < n {
		next <<= 1
	}
	chunk := 32
	if next > 256 {
		chunk = next / 8
	}
	return chunk * ((n-1)/chunk + 1)
}

// Encrypt encrypts plaintext for the conversation with a fresh random
// nonce and returns the base64 payload.
func Encrypt(ck ConversationKey, plaintext string) (string, error) {
	var nonce [32]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", fmt.Errorf("nip44: nonce: %w", err)
	}
	return EncryptNonce(ck, plaintext, &nonce)
}

// EncryptNonce is Encrypt with the given nonce. A nonce must never be
// used twice with one conversation key; this exists for test vectors.
func EncryptNonce(ck ConversationKey, plaintext string, nonce *[32]byte) (string, error) {
	n := len(plaintext)
	if n < MinPlaintext || n > MaxPlaintext {
		return "", fmt.Errorf("%w: %d bytes", ErrPlaintext, n)
	}
	ckey, cnonce, hkey := MessageKeys(ck, nonce)
	plen := PaddedLen(n)
	data := make([]byte, 1+32+2+plen+32)
	data[0] = Version
	copy(data[1:33], nonce[:])
	body := data[33 : 33+2+plen]
	binary.BigEndian.PutUint16(body, uint16(n))
	copy(body[2:], plaintext)
	c, err := chacha20.NewUnauthenticatedCipher(ckey[:], cnonce[:])
	if err != nil {
		panic("BUG: nip44: chacha20: " + err.Error())
	}
	c.XORKeyStream(body, body)
	mac := hmac.New(sha256.New, hkey[:])
	mac.Write(nonce[:])
	mac.Write(body)
	mac.Sum(data[:33+len(body)])
	return base64.StdEncoding.EncodeToString(data), nil
}

// Decrypt checks and decrypts a payload of the conversation.
func Decrypt(ck ConversationKey, payload string) (string, error) {
	plen := len(payload)
	if plen > 0 && payload[0] == '#' {
		return "", fmt.Errorf("%w: the payload is not base64 of version 2", ErrVersion)
	}
	if plen < minPayload || plen > maxPayload {
		return "", fmt.Errorf("%w: invalid payload length: %d", ErrPayload, plen)
	}
	data, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return "", fmt.Errorf("%w: invalid base64: %v", ErrPayload, err)
	}
	dlen := len(data)
	if dlen < minData || dlen > maxData {
		return "", fmt.Errorf("%w: invalid data length: %d", ErrPayload, dlen)
	}
	if data[0] != Version {
		return "", fmt.Errorf("%w: %d", ErrVersion, data[0])
	}
	nonce := (*[32]byte)(data[1:33])
	body, mac := data[33:dlen-32], data[dlen-32:]
	ckey, cnonce, hkey := MessageKeys(ck, nonce)
	h := hmac.New(sha256.New, hkey[:])
	h.Write(nonce[:])
	h.Write(body)
	if subtle.ConstantTimeCompare(h.Sum(nil), mac) != 1 {
		return "", ErrMAC
	}
	c, err := chacha20.NewUnauthenticatedCipher(ckey[:], cnonce[:])
	if err != nil {
		panic("BUG: nip44: chacha20: " + err.Error())
	}
	c.XORKeyStream(body, body)
	n := int(binary.BigEndian.Uint16(body))
	if n < MinPlaintext || 2+n > len(body) || len(body) != 2+PaddedLen(n) {
		return "", ErrPadding
	}
	return string(body[2 : 2+n]), nil
}
