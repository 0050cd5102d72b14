package nostr

import (
	"encoding/hex"
	"errors"
	"fmt"
)

// ID is an event id: the SHA-256 of the event's canonical serialization.
type ID [32]byte

// PubKey is a BIP-340 x-only public key.
type PubKey [32]byte

// Sig is a BIP-340 Schnorr signature.
type Sig [64]byte

// ErrHex reports a value that is not lowercase hex of the expected length.
var ErrHex = errors.New("nostr: bad hex")

// Hex returns the id as 64 lowercase hex characters.
func (id ID) Hex() string { return hex.EncodeToString(id[:]) }

// String returns the id as 64 lowercase hex characters.
func (id ID) String() string { return id.Hex() }

// Hex returns the key as 64 lowercase hex characters.
func (pk PubKey) Hex() string { return hex.EncodeToString(pk[:]) }

// String returns the key as 64 lowercase hex characters.
func (pk PubKey) String() string { return pk.Hex() }

// Hex returns the signature as 128 lowercase hex characters.
func (s Sig) Hex() string { return hex.EncodeToString(s[:]) }

// ParseID decodes 64 lowercase hex characters.
func ParseID(s string) (ID, error) {
	var id ID
	err := decodeLowerHex(id[:], s)
	return id, err
}

// ParsePubKey decodes 64 lowercase hex characters.
func ParsePubKey(s string) (PubKey, error) {
	var pk PubKey
	err := decodeLowerHex(pk[:], s)
	return pk, err
}

// ParseSig decodes 128 lowercase hex characters.
func ParseSig(s string) (Sig, error) {
	var sig Sig
	err := decodeLowerHex(sig[:], s)
	return sig, err
}

// decodeLowerHex decodes s into dst, which must be exactly len(s)/2 bytes.
// Uppercase hex is refused: NIP-01 requires lowercase.
func decodeLowerHex(dst []byte, s string) error {
	if len(s) != 2*len(dst) {
		return fmt.Errorf("%w: want %d hex characters, got %d", ErrHex, 2*len(dst), len(s))
	}
	if !lowerHexInto(dst, s) {
		return fmt.Errorf("%w: not lowercase hex", ErrHex)
	}
	return nil
}

// ParseHex32 decodes exactly 64 lowercase hex characters (an event id or
// a pubkey, as in tag values); ok is false for anything else. Unlike
// ParseID it does not allocate an error, for hot paths that test many
// values.
func ParseHex32(s string) (b [32]byte, ok bool) {
	return b, len(s) == 64 && lowerHexInto(b[:], s)
}

// lowerHexInto decodes s (2*len(dst) characters) into dst and reports
// whether every character was lowercase hex.
func lowerHexInto(dst []byte, s string) bool {
	for i := range dst {
		hi, ok1 := fromHexChar(s[2*i])
		lo, ok2 := fromHexChar(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func fromHexChar(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// Tag is one entry of an event's tags array: a name followed by values.
// A tag may be empty (NIP-01 does not forbid it); Name returns "" then.
type Tag []string

// Name returns the tag's first element, or "" for an empty tag.
func (t Tag) Name() string {
	if len(t) == 0 {
		return ""
	}
	return t[0]
}

// Value returns the tag's second element, or "" if it has none.
func (t Tag) Value() string {
	if len(t) < 2 {
		return ""
	}
	return t[1]
}

// Tags is an event's tags array.
type Tags []Tag

// First returns the first tag named name that has a value, and whether one
// was found.
func (ts Tags) First(name string) (Tag, bool) {
	for _, t := range ts {
		if len(t) >= 2 && t[0] == name {
			return t, true
		}
	}
	return nil, false
}

// Event is a signed Nostr event (NIP-01).
//
// Raw holds the event's JSON object exactly as it arrived (or as produced by
// Serialize for an event built in code); it is what the relay stores and
// sends, so a delivery never re-encodes the event. The string fields of an
// event produced by ParseEvent may point into Raw's memory: neither Raw nor
// anything reachable from the Event may be modified after parsing. An Event
// handed to the store or the fan-out is shared read-only by many goroutines.
type Event struct {
	ID        ID
	PubKey    PubKey
	CreatedAt int64 // unix seconds, 0 <= CreatedAt <= MaxTimestamp
	Kind      int   // 0 <= Kind <= 65535
	Tags      Tags
	Content   string
	Sig       Sig
	Raw       []byte
}

// MaxTimestamp is the largest created_at (and since/until) petrel accepts:
// 2^53-1, the largest integer every JSON client represents exactly.
const MaxTimestamp = 1<<53 - 1

// MaxKind is the largest event kind (NIP-01: an integer between 0 and 65535).
const MaxKind = 65535
