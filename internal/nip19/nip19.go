package nip19

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/btcsuite/btcd/btcutil/bech32"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// The NIP-19 prefixes (bech32 human-readable parts).
const (
	PrefixPubKey    = "npub"
	PrefixSecretKey = "nsec"
	PrefixNote      = "note"
	PrefixProfile   = "nprofile"
	PrefixEvent     = "nevent"
	PrefixAddress   = "naddr"
)

// MaxLength is the longest string Decode reads, in bytes: room for
// dozens of relay hints, and a bound on the work one string can cost.
const MaxLength = 4096

// MaxTLVValue is the longest TLV value (a relay URL, an identifier): the
// length is one byte.
const MaxTLVValue = 255

// Sentinel errors. Every error of this package wraps one of them.
var (
	// ErrBech32 means the string is not bech32: a bad character, mixed
	// case, no separator, a wrong checksum, a bech32m checksum, bad
	// padding, or longer than MaxLength.
	ErrBech32 = errors.New("nip19: not a valid bech32 string")
	// ErrPrefix means a bech32 string whose prefix is not a NIP-19 one,
	// or not the one the caller asked for.
	ErrPrefix = errors.New("nip19: unexpected prefix")
	// ErrPayload means the payload does not have the shape its prefix
	// requires: a wrong length, a truncated or repeated TLV record, a
	// missing required record, a relay hint that is not text.
	ErrPayload = errors.New("nip19: malformed payload")
	// ErrTooLong means a value to encode does not fit in a TLV record.
	ErrTooLong = errors.New("nip19: value longer than 255 bytes")
)

// TLV record types (NIP-19).
const (
	tlvSpecial = 0
	tlvRelay   = 1
	tlvAuthor  = 2
	tlvKind    = 3
)

// Profile is an nprofile: a public key with relays where its author
// publishes.
type Profile struct {
	PubKey nostr.PubKey
	Relays []string
}

// EventPointer is an nevent: an event id with optional relay hints,
// author and kind.
type EventPointer struct {
	ID        nostr.ID
	Relays    []string
	Author    nostr.PubKey
	HasAuthor bool
	Kind      uint32
	HasKind   bool
}

// Address is an naddr: the coordinate of an addressable (or replaceable)
// event, kind:pubkey:identifier, with relay hints.
type Address struct {
	Identifier string
	PubKey     nostr.PubKey
	Kind       uint32
	Relays     []string
}

// Coordinate returns the "kind:pubkey:identifier" form used in "a" tags.
func (a Address) Coordinate() string {
	return fmt.Sprintf("%d:%s:%s", a.Kind, a.PubKey.Hex(), a.Identifier)
}

// Entity is a decoded NIP-19 string: Prefix says which one field is set.
type Entity struct {
	Prefix    string
	PubKey    nostr.PubKey    // npub
	SecretKey nostr.SecretKey // nsec (not checked to be in [1, n-1]; ParseSecretKey does)
	ID        nostr.ID        // note
	Profile   *Profile        // nprofile
	Event     *EventPointer   // nevent
	Address   *Address        // naddr
}

// EncodePubKey returns the npub of pk.
func EncodePubKey(pk nostr.PubKey) string { return encode(PrefixPubKey, pk[:]) }

// EncodeSecretKey returns the nsec of sk.
func EncodeSecretKey(sk nostr.SecretKey) string { return encode(PrefixSecretKey, sk[:]) }

// EncodeNote returns the note of id.
func EncodeNote(id nostr.ID) string { return encode(PrefixNote, id[:]) }

// EncodeProfile returns the nprofile of p. A relay longer than
// MaxTLVValue bytes is refused with ErrTooLong.
func EncodeProfile(p Profile) (string, error) {
	b := appendTLV(nil, tlvSpecial, p.PubKey[:])
	b, err := appendRelays(b, p.Relays)
	if err != nil {
		return "", err
	}
	return encode(PrefixProfile, b), nil
}

// EncodeEvent returns the nevent of e (the author and kind records only
// when HasAuthor and HasKind are set).
func EncodeEvent(e EventPointer) (string, error) {
	b := appendTLV(nil, tlvSpecial, e.ID[:])
	b, err := appendRelays(b, e.Relays)
	if err != nil {
		return "", err
	}
	if e.HasAuthor {
		b = appendTLV(b, tlvAuthor, e.Author[:])
	}
	if e.HasKind {
		b = appendTLV(b, tlvKind, binary.BigEndian.AppendUint32(nil, e.Kind))
	}
	return encode(PrefixEvent, b), nil
}

// EncodeAddress returns the naddr of a. An identifier or relay longer
// than MaxTLVValue bytes is refused with ErrTooLong.
func EncodeAddress(a Address) (string, error) {
	if len(a.Identifier) > MaxTLVValue {
		return "", fmt.Errorf("%w: identifier of %d bytes", ErrTooLong, len(a.Identifier))
	}
	b := appendTLV(nil, tlvSpecial, []byte(a.Identifier))
	b, err := appendRelays(b, a.Relays)
	if err != nil {
		return "", err
	}
	b = appendTLV(b, tlvAuthor, a.PubKey[:])
	b = appendTLV(b, tlvKind, binary.BigEndian.AppendUint32(nil, a.Kind))
	return encode(PrefixAddress, b), nil
}

func appendTLV(b []byte, typ byte, v []byte) []byte {
	b = append(b, typ, byte(len(v)))
	return append(b, v...)
}

func appendRelays(b []byte, relays []string) ([]byte, error) {
	for _, r := range relays {
		if len(r) > MaxTLVValue {
			return nil, fmt.Errorf("%w: relay of %d bytes", ErrTooLong, len(r))
		}
		b = appendTLV(b, tlvRelay, []byte(r))
	}
	return b, nil
}

// encode bech32-encodes data under prefix. It cannot fail: the prefix is
// one of ours and the data is regrouped here.
func encode(prefix string, data []byte) string {
	five, err := bech32.ConvertBits(data, 8, 5, true)
	if err != nil {
		panic("BUG: nip19: regroup: " + err.Error())
	}
	s, err := bech32.Encode(prefix, five)
	if err != nil {
		panic("BUG: nip19: encode: " + err.Error())
	}
	return s
}

// Decode decodes any NIP-19 string (surrounding spaces are ignored; the
// string may be all upper case, as bech32 allows). TLV records of types
// this package does not know are skipped, as NIP-19 asks; a known
// single-valued record given twice, a missing required record or a
// record of the wrong length is refused with ErrPayload.
func Decode(s string) (Entity, error) {
	prefix, data, err := decodeBech32(s)
	if err != nil {
		return Entity{}, err
	}
	e := Entity{Prefix: prefix}
	switch prefix {
	case PrefixPubKey:
		err = fixed(data, e.PubKey[:], prefix)
	case PrefixSecretKey:
		err = fixed(data, e.SecretKey[:], prefix)
	case PrefixNote:
		err = fixed(data, e.ID[:], prefix)
	case PrefixProfile:
		e.Profile, err = decodeProfile(data)
	case PrefixEvent:
		e.Event, err = decodeEvent(data)
	case PrefixAddress:
		e.Address, err = decodeAddress(data)
	default:
		return Entity{}, fmt.Errorf("%w: %q is not a NIP-19 prefix (npub, nsec, note, nprofile, nevent, naddr)", ErrPrefix, prefix)
	}
	if err != nil {
		return Entity{}, err
	}
	return e, nil
}

// decodeBech32 checks and decodes s, returning the lower-case prefix and
// the payload in bytes.
func decodeBech32(s string) (string, []byte, error) {
	s = strings.TrimSpace(s)
	if len(s) > MaxLength {
		return "", nil, fmt.Errorf("%w: %d bytes, more than %d", ErrBech32, len(s), MaxLength)
	}
	prefix, five, version, err := bech32.DecodeNoLimitWithVersion(s)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %s", ErrBech32, bech32Reason(s, err))
	}
	if version != bech32.Version0 {
		return "", nil, fmt.Errorf("%w: a bech32m checksum (NIP-19 uses bech32)", ErrBech32)
	}
	data, err := bech32.ConvertBits(five, 5, 8, false)
	if err != nil {
		return "", nil, fmt.Errorf("%w: the data does not end on a whole byte", ErrBech32)
	}
	return prefix, data, nil
}

// bech32Reason says in words what the bech32 decoder's err found wrong
// with s (its own texts name separator indexes and checksums in hex),
// never showing more of s than one character.
func bech32Reason(s string, err error) string {
	var (
		length  bech32.ErrInvalidLength
		char    bech32.ErrInvalidCharacter
		sep     bech32.ErrInvalidSeparatorIndex
		charset bech32.ErrNonCharsetChar
		mixed   bech32.ErrMixedCase
		sum     bech32.ErrInvalidChecksum
	)
	switch {
	case errors.As(err, &length):
		return fmt.Sprintf("%s, too short to be one", characters(int(length)))
	case errors.As(err, &char):
		return fmt.Sprintf("%q is not a bech32 character", rune(char))
	case errors.As(err, &mixed):
		return "upper and lower case mixed"
	case errors.As(err, &sep):
		switch i := int(sep); {
		case i < 0:
			return `no "1" between a prefix and the data`
		case i == 0:
			return `no prefix before the "1"`
		default:
			return fmt.Sprintf(`%s after the last "1", too few to be one`, characters(len(s)-i-1))
		}
	case errors.As(err, &charset):
		return fmt.Sprintf("%q is not a bech32 character (every letter and digit but 1, b, i and o)", rune(charset))
	case errors.As(err, &sum):
		return "the checksum does not match: a character is mistyped, missing or extra"
	}
	return err.Error()
}

// characters is "1 character" or "n characters".
func characters(n int) string {
	if n == 1 {
		return "1 character"
	}
	return fmt.Sprintf("%d characters", n)
}

func fixed(data, dst []byte, prefix string) error {
	if len(data) != len(dst) {
		return fmt.Errorf("%w: %s of %d bytes, want %d", ErrPayload, prefix, len(data), len(dst))
	}
	copy(dst, data)
	return nil
}

// tlv is one record.
type tlv struct {
	typ byte
	v   []byte
}

// records splits data into TLV records.
func records(data []byte, prefix string) ([]tlv, error) {
	var out []tlv
	for len(data) > 0 {
		if len(data) < 2 || int(data[1]) > len(data)-2 {
			return nil, fmt.Errorf("%w: %s: truncated TLV record", ErrPayload, prefix)
		}
		n := int(data[1])
		out = append(out, tlv{data[0], data[2 : 2+n]})
		data = data[2+n:]
	}
	return out, nil
}

// once tracks the single-valued records seen.
type once [4]bool

func (o *once) see(typ byte, prefix, name string) error {
	if o[typ] {
		return fmt.Errorf("%w: %s: %s given twice", ErrPayload, prefix, name)
	}
	o[typ] = true
	return nil
}

func relay(v []byte, prefix string) (string, error) {
	if !utf8.Valid(v) {
		return "", fmt.Errorf("%w: %s: a relay hint that is not UTF-8 text", ErrPayload, prefix)
	}
	return string(v), nil
}

func decodeProfile(data []byte) (*Profile, error) {
	rs, err := records(data, PrefixProfile)
	if err != nil {
		return nil, err
	}
	p := &Profile{}
	var seen once
	for _, r := range rs {
		switch r.typ {
		case tlvSpecial:
			if err := seen.see(r.typ, PrefixProfile, "the public key"); err != nil {
				return nil, err
			}
			if err := fixed(r.v, p.PubKey[:], "nprofile public key"); err != nil {
				return nil, err
			}
		case tlvRelay:
			s, err := relay(r.v, PrefixProfile)
			if err != nil {
				return nil, err
			}
			p.Relays = append(p.Relays, s)
		}
	}
	if !seen[tlvSpecial] {
		return nil, fmt.Errorf("%w: nprofile without a public key", ErrPayload)
	}
	return p, nil
}

func decodeEvent(data []byte) (*EventPointer, error) {
	rs, err := records(data, PrefixEvent)
	if err != nil {
		return nil, err
	}
	e := &EventPointer{}
	var seen once
	for _, r := range rs {
		switch r.typ {
		case tlvSpecial:
			if err := seen.see(r.typ, PrefixEvent, "the id"); err != nil {
				return nil, err
			}
			if err := fixed(r.v, e.ID[:], "nevent id"); err != nil {
				return nil, err
			}
		case tlvRelay:
			s, err := relay(r.v, PrefixEvent)
			if err != nil {
				return nil, err
			}
			e.Relays = append(e.Relays, s)
		case tlvAuthor:
			if err := seen.see(r.typ, PrefixEvent, "the author"); err != nil {
				return nil, err
			}
			if err := fixed(r.v, e.Author[:], "nevent author"); err != nil {
				return nil, err
			}
			e.HasAuthor = true
		case tlvKind:
			if err := seen.see(r.typ, PrefixEvent, "the kind"); err != nil {
				return nil, err
			}
			if len(r.v) != 4 {
				return nil, fmt.Errorf("%w: nevent kind of %d bytes, want 4", ErrPayload, len(r.v))
			}
			e.Kind, e.HasKind = binary.BigEndian.Uint32(r.v), true
		}
	}
	if !seen[tlvSpecial] {
		return nil, fmt.Errorf("%w: nevent without an id", ErrPayload)
	}
	return e, nil
}

func decodeAddress(data []byte) (*Address, error) {
	rs, err := records(data, PrefixAddress)
	if err != nil {
		return nil, err
	}
	a := &Address{}
	var seen once
	for _, r := range rs {
		switch r.typ {
		case tlvSpecial:
			if err := seen.see(r.typ, PrefixAddress, "the identifier"); err != nil {
				return nil, err
			}
			if !utf8.Valid(r.v) {
				return nil, fmt.Errorf("%w: naddr identifier that is not UTF-8 text", ErrPayload)
			}
			a.Identifier = string(r.v)
		case tlvRelay:
			s, err := relay(r.v, PrefixAddress)
			if err != nil {
				return nil, err
			}
			a.Relays = append(a.Relays, s)
		case tlvAuthor:
			if err := seen.see(r.typ, PrefixAddress, "the author"); err != nil {
				return nil, err
			}
			if err := fixed(r.v, a.PubKey[:], "naddr author"); err != nil {
				return nil, err
			}
		case tlvKind:
			if err := seen.see(r.typ, PrefixAddress, "the kind"); err != nil {
				return nil, err
			}
			if len(r.v) != 4 {
				return nil, fmt.Errorf("%w: naddr kind of %d bytes, want 4", ErrPayload, len(r.v))
			}
			a.Kind = binary.BigEndian.Uint32(r.v)
		}
	}
	switch {
	case !seen[tlvSpecial]:
		return nil, fmt.Errorf("%w: naddr without an identifier", ErrPayload)
	case !seen[tlvAuthor]:
		return nil, fmt.Errorf("%w: naddr without an author", ErrPayload)
	case !seen[tlvKind]:
		return nil, fmt.Errorf("%w: naddr without a kind", ErrPayload)
	}
	return a, nil
}
