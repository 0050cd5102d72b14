package nip49

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strings"

	"github.com/btcsuite/btcd/btcutil/bech32"
	"golang.org/x/crypto/chacha20poly1305"
	"golang.org/x/crypto/scrypt"
	"golang.org/x/text/unicode/norm"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// Prefix is the bech32 prefix of an encrypted key.
const Prefix = "ncryptsec"

// Version is the payload version written and read.
const Version = 0x02

// DefaultLogN is the scrypt cost Encrypt callers use unless told
// otherwise (NIP-49's example): 2^16 rounds, 64 MiB.
const DefaultLogN = 16

// MaxLogN is the largest cost Decrypt (and Encrypt) accept: 2^22 takes
// 4 GiB of memory. A string naming more is refused before any work, so a
// hostile ncryptsec cannot make the process allocate without bound.
const MaxLogN = 22

// KeySecurity is NIP-49's byte saying how the key was handled before it
// was encrypted.
type KeySecurity byte

// The defined KeySecurity values.
const (
	// KnownInsecure: the key has been handled insecurely (stored
	// unencrypted, pasted into a web page...).
	KnownInsecure KeySecurity = 0x00
	// NotKnownInsecure: the key has not been handled insecurely.
	NotKnownInsecure KeySecurity = 0x01
	// Unknown: the client does not track this.
	Unknown KeySecurity = 0x02
)

// String names the value as NIP-49 describes it.
func (k KeySecurity) String() string {
	switch k {
	case KnownInsecure:
		return "known to have been handled insecurely"
	case NotKnownInsecure:
		return "not known to have been handled insecurely"
	case Unknown:
		return "unknown"
	}
	return fmt.Sprintf("undefined value 0x%02x", byte(k))
}

// payloadLen is version(1) logN(1) salt(16) nonce(24) ad(1) ciphertext(48).
const payloadLen = 1 + 1 + 16 + chacha20poly1305.NonceSizeX + 1 + 32 + chacha20poly1305.Overhead

// Sentinel errors.
var (
	// ErrFormat means the string is not an ncryptsec of version 2 with
	// a 91-byte payload.
	ErrFormat = errors.New("nip49: not an ncryptsec")
	// ErrLogN means a cost above MaxLogN.
	ErrLogN = errors.New("nip49: scrypt cost too large")
	// ErrPassword means the ciphertext does not open with this password
	// (or was changed).
	ErrPassword = errors.New("nip49: wrong password (or a corrupted ncryptsec)")
	// ErrKeySecurity means a key-security byte NIP-49 does not define.
	ErrKeySecurity = errors.New("nip49: undefined key-security value")
)

func checkLogN(logN uint8) error {
	if logN > MaxLogN {
		return fmt.Errorf("%w: log2(N) = %d, at most %d", ErrLogN, logN, MaxLogN)
	}
	return nil
}

func deriveKey(password string, salt []byte, logN uint8) ([]byte, error) {
	k, err := scrypt.Key([]byte(norm.NFKC.String(password)), salt, 1<<logN, 8, 1, 32)
	if err != nil {
		return nil, fmt.Errorf("nip49: scrypt: %w", err)
	}
	return k, nil
}

// Encrypt returns the ncryptsec of sk under password, with cost 2^logN.
func Encrypt(sk nostr.SecretKey, password string, logN uint8, ks KeySecurity) (string, error) {
	if err := checkLogN(logN); err != nil {
		return "", err
	}
	if ks > Unknown {
		return "", fmt.Errorf("%w: 0x%02x", ErrKeySecurity, byte(ks))
	}
	var salt [16]byte
	var nonce [chacha20poly1305.NonceSizeX]byte
	if _, err := rand.Read(salt[:]); err != nil {
		return "", err
	}
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", err
	}
	return encrypt(sk, password, logN, ks, salt[:], nonce[:])
}

func encrypt(sk nostr.SecretKey, password string, logN uint8, ks KeySecurity, salt, nonce []byte) (string, error) {
	key, err := deriveKey(password, salt, logN)
	if err != nil {
		return "", err
	}
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		return "", err
	}
	b := make([]byte, 0, payloadLen)
	b = append(b, Version, logN)
	b = append(b, salt...)
	b = append(b, nonce...)
	b = append(b, byte(ks))
	b = aead.Seal(b, nonce, sk[:], []byte{byte(ks)})
	five, err := bech32.ConvertBits(b, 8, 5, true)
	if err != nil {
		return "", err
	}
	return bech32.Encode(Prefix, five)
}

// Decrypt opens an ncryptsec with password and returns the key and its
// key-security byte. Surrounding spaces are ignored.
func Decrypt(ncryptsec, password string) (nostr.SecretKey, KeySecurity, error) {
	var sk nostr.SecretKey
	prefix, five, version, err := bech32.DecodeNoLimitWithVersion(strings.TrimSpace(ncryptsec))
	if err != nil || version != bech32.Version0 {
		return sk, 0, fmt.Errorf("%w: bad bech32", ErrFormat)
	}
	if prefix != Prefix {
		return sk, 0, fmt.Errorf("%w: prefix %q", ErrFormat, prefix)
	}
	b, err := bech32.ConvertBits(five, 5, 8, false)
	if err != nil || len(b) != payloadLen {
		return sk, 0, fmt.Errorf("%w: payload of %d bytes, want %d", ErrFormat, len(b), payloadLen)
	}
	if b[0] != Version {
		return sk, 0, fmt.Errorf("%w: version 0x%02x, want 0x02", ErrFormat, b[0])
	}
	logN := b[1]
	if err := checkLogN(logN); err != nil {
		return sk, 0, err
	}
	salt, nonce := b[2:18], b[18:42]
	ks := KeySecurity(b[42])
	key, err := deriveKey(password, salt, logN)
	if err != nil {
		return sk, 0, err
	}
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		return sk, 0, err
	}
	plain, err := aead.Open(nil, nonce, b[43:], []byte{byte(ks)})
	if err != nil {
		return sk, 0, ErrPassword
	}
	copy(sk[:], plain)
	if !sk.Valid() {
		return nostr.SecretKey{}, 0, fmt.Errorf("%w: the decrypted key is not in [1, n-1]", ErrFormat)
	}
	if ks > Unknown {
		return sk, ks, fmt.Errorf("%w: 0x%02x", ErrKeySecurity, byte(ks))
	}
	return sk, ks, nil
}
