package nip44

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// ErrNIP04 means a NIP-04 payload that does not decrypt: not
// "<base64>?iv=<base64>", a wrong length, or bad padding (a wrong key
// shows up as bad padding, or as garbage when the padding happens to
// look right: NIP-04 has no MAC).
var ErrNIP04 = errors.New("nip44: malformed or undecryptable NIP-04 payload")

// MaxNIP04Payload caps the payload DecryptNIP04 reads, in bytes.
const MaxNIP04Payload = 1 << 20

// EncryptNIP04 encrypts plaintext with the legacy NIP-04 scheme:
// AES-256-CBC with the unhashed ECDH x coordinate as the key, a random
// IV and PKCS#7 padding, written "<base64 ciphertext>?iv=<base64 iv>".
// NIP-04 leaks metadata and has no authentication: it exists for kind-4
// messages only.
func EncryptNIP04(sk nostr.SecretKey, pub nostr.PubKey, plaintext string) (string, error) {
	var iv [aes.BlockSize]byte
	if _, err := rand.Read(iv[:]); err != nil {
		return "", fmt.Errorf("nip44: iv: %w", err)
	}
	return encryptNIP04IV(sk, pub, plaintext, &iv)
}

func encryptNIP04IV(sk nostr.SecretKey, pub nostr.PubKey, plaintext string, iv *[aes.BlockSize]byte) (string, error) {
	key, err := SharedX(sk, pub)
	if err != nil {
		return "", err
	}
	block, err := aes.NewCipher(key[:])
	if err != nil {
		panic("BUG: nip44: aes: " + err.Error())
	}
	pad := aes.BlockSize - len(plaintext)%aes.BlockSize
	buf := make([]byte, len(plaintext)+pad)
	copy(buf, plaintext)
	for i := len(plaintext); i < len(buf); i++ {
		buf[i] = byte(pad)
	}
	cipher.NewCBCEncrypter(block, iv[:]).CryptBlocks(buf, buf)
	return base64.StdEncoding.EncodeToString(buf) + "?iv=" + base64.StdEncoding.EncodeToString(iv[:]), nil
}

// DecryptNIP04 decrypts a NIP-04 payload.
func DecryptNIP04(sk nostr.SecretKey, pub nostr.PubKey, payload string) (string, error) {
	if len(payload) > MaxNIP04Payload {
		return "", fmt.Errorf("%w: %d bytes, more than %d", ErrNIP04, len(payload), MaxNIP04Payload)
	}
	ctB64, ivB64, ok := strings.Cut(payload, "?iv=")
	if !ok {
		return "", fmt.Errorf("%w: no \"?iv=\"", ErrNIP04)
	}
	ct, err := base64.StdEncoding.DecodeString(ctB64)
	if err != nil {
		return "", fmt.Errorf("%w: ciphertext: %v", ErrNIP04, err)
	}
	iv, err := base64.StdEncoding.DecodeString(ivB64)
	if err != nil || len(iv) != aes.BlockSize {
		return "", fmt.Errorf("%w: iv is not 16 bytes of base64", ErrNIP04)
	}
	if len(ct) == 0 || len(ct)%aes.BlockSize != 0 {
		return "", fmt.Errorf("%w: ciphertext of %d bytes", ErrNIP04, len(ct))
	}
	key, err := SharedX(sk, pub)
	if err != nil {
		return "", err
	}
	block, err := aes.NewCipher(key[:])
	if err != nil {
		panic("BUG: nip44: aes: " + err.Error())
	}
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(ct, ct)
	pad := int(ct[len(ct)-1])
	if pad < 1 || pad > aes.BlockSize || !bytes.Equal(ct[len(ct)-pad:], bytes.Repeat([]byte{byte(pad)}, pad)) {
		return "", fmt.Errorf("%w: bad padding (wrong key?)", ErrNIP04)
	}
	return string(ct[:len(ct)-pad]), nil
}
