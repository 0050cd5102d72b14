package nip19

import (
	"errors"
	"fmt"
	"strings"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// Errors of the Parse functions; each also wraps the cause (ErrBech32,
// ErrPrefix, ErrPayload, nostr.ErrSecretKey) when there is one. A string
// of hex digits of the wrong length is told by its length, and wraps no
// cause.
var (
	// ErrNotPubKey: not 64 hex characters, an npub or an nprofile.
	ErrNotPubKey = errors.New("nip19: not a public key (64 hex characters, npub or nprofile)")
	// ErrNotID: not 64 hex characters, a note or an nevent.
	ErrNotID = errors.New("nip19: not an event id (64 hex characters, note or nevent)")
	// ErrNotSecretKey: not 64 hex characters or an nsec, or not a valid
	// secp256k1 secret key.
	ErrNotSecretKey = errors.New("nip19: not a secret key (64 hex characters or nsec)")
)

// Reason is err's text without this package's "nip19: ", for a message
// that gives its own context ("server: admins: not a public key (...)").
func Reason(err error) string { return strings.TrimPrefix(err.Error(), "nip19: ") }

// isHex64 reports whether s is 64 hex digits of either case.
func isHex64(s string) bool { return len(s) == 64 && isHex(s) }

// parseError is a Parse function's error: what was wanted (kind), the
// input quoted (unless it may be a secret), and why it is not one,
// without the cause's own "nip19: ".
type parseError struct {
	kind  error
	input string // quoted, or ""
	why   string
	cause error // nil for hex of the wrong length
}

func (e *parseError) Error() string {
	msg := e.kind.Error()
	if e.input != "" {
		msg += ": " + e.input
		if strings.HasPrefix(e.why, "is ") {
			return msg + " " + e.why
		}
	}
	return msg + ": " + e.why
}

func (e *parseError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.cause}
}

// notParsed tells why s, neither 64 hex digits nor a string Decode
// takes (err), is not a kind; quote says whether s may be shown.
func notParsed(kind error, s string, quote bool, err error) error {
	e := &parseError{kind: kind, cause: err}
	// A mistyped nsec is still most of a secret key: not shown.
	if quote && !secretLike(s) {
		e.input = fmt.Sprintf("%q", short(s))
	}
	switch {
	case s == "":
		e.why, e.cause = "empty", nil
	case isHex(s):
		e.why, e.cause = fmt.Sprintf("%d hex characters, not 64", len(s)), nil
	default:
		e.why = Reason(err)
	}
	return e
}

// wrongPrefix tells that s is a NIP-19 string of another kind (prefix).
// An nsec is not shown, nor is anything given for a secret key.
func wrongPrefix(kind error, s, prefix string) error {
	a := "an " + prefix // npub, nsec, nprofile, nevent, naddr, nrelay
	if prefix == PrefixNote {
		a = "a note"
	}
	e := &parseError{kind: kind, why: a + " was given", cause: ErrPrefix}
	if prefix != PrefixSecretKey && kind != ErrNotSecretKey {
		e.input = fmt.Sprintf("%q", short(s))
		e.why = "is " + a
	}
	return e
}

// isHex reports whether s is all hex digits.
func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// ParsePubKey reads a public key given as 64 hex characters (either
// case), an npub, or an nprofile (its relay hints are dropped).
// Surrounding spaces are ignored.
func ParsePubKey(s string) (nostr.PubKey, error) {
	s = strings.TrimSpace(s)
	if isHex64(s) {
		return nostr.ParsePubKey(strings.ToLower(s))
	}
	e, err := Decode(s)
	if err != nil {
		return nostr.PubKey{}, notParsed(ErrNotPubKey, s, true, err)
	}
	switch e.Prefix {
	case PrefixPubKey:
		return e.PubKey, nil
	case PrefixProfile:
		return e.Profile.PubKey, nil
	}
	return nostr.PubKey{}, wrongPrefix(ErrNotPubKey, s, e.Prefix)
}

// ParseID reads an event id given as 64 hex characters (either case), a
// note, or an nevent (its hints are dropped). Surrounding spaces are
// ignored.
func ParseID(s string) (nostr.ID, error) {
	s = strings.TrimSpace(s)
	if isHex64(s) {
		return nostr.ParseID(strings.ToLower(s))
	}
	e, err := Decode(s)
	if err != nil {
		return nostr.ID{}, notParsed(ErrNotID, s, true, err)
	}
	switch e.Prefix {
	case PrefixNote:
		return e.ID, nil
	case PrefixEvent:
		return e.Event.ID, nil
	}
	return nostr.ID{}, wrongPrefix(ErrNotID, s, e.Prefix)
}

// ParseSecretKey reads a secret key given as 64 hex characters (either
// case) or an nsec, and checks that it is a valid key (in [1, n-1]).
// Surrounding spaces are ignored. Errors never quote the input.
func ParseSecretKey(s string) (nostr.SecretKey, error) {
	s = strings.TrimSpace(s)
	if isHex64(s) {
		sk, err := nostr.ParseSecretKey(strings.ToLower(s))
		if err != nil {
			return sk, fmt.Errorf("%w: %w", ErrNotSecretKey, err)
		}
		return sk, nil
	}
	e, err := Decode(s)
	if err != nil {
		return nostr.SecretKey{}, notParsed(ErrNotSecretKey, s, false, err)
	}
	if e.Prefix != PrefixSecretKey {
		return nostr.SecretKey{}, wrongPrefix(ErrNotSecretKey, s, e.Prefix)
	}
	if !e.SecretKey.Valid() {
		return nostr.SecretKey{}, fmt.Errorf("%w: %w: not in [1, n-1]", ErrNotSecretKey, nostr.ErrSecretKey)
	}
	return e.SecretKey, nil
}

// Shown is how an error shows an input s that did not decode: quoted,
// at most 80 bytes of it, or "an nsec" for anything that starts like
// one (a mistyped nsec is still most of a secret key).
func Shown(s string) string {
	if secretLike(s) {
		return "an nsec"
	}
	return fmt.Sprintf("%q", short(s))
}

// secretLike reports whether s starts like an nsec, valid or not.
func secretLike(s string) bool {
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(s)), PrefixSecretKey+"1")
}

// short quotes at most 80 bytes of s in an error.
func short(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}
