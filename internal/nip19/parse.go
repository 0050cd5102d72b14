package nip19

import (
	"errors"
	"fmt"
	"strings"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// Errors of the Parse functions; each also wraps the cause (ErrBech32,
// ErrPrefix, ErrPayload, nostr.ErrSecretKey) when there is one.
var (
	// ErrNotPubKey: not 64 hex characters, an npub or an nprofile.
	ErrNotPubKey = errors.New("nip19: not a public key (64 hex characters, npub or nprofile)")
	// ErrNotID: not 64 hex characters, a note or an nevent.
	ErrNotID = errors.New("nip19: not an event id (64 hex characters, note or nevent)")
	// ErrNotSecretKey: not 64 hex characters or an nsec, or not a valid
	// secp256k1 secret key.
	ErrNotSecretKey = errors.New("nip19: not a secret key (64 hex characters or nsec)")
)

// isHex64 reports whether s is 64 hex digits of either case.
func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
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
		return nostr.PubKey{}, fmt.Errorf("%w: %q: %w", ErrNotPubKey, short(s), err)
	}
	switch e.Prefix {
	case PrefixPubKey:
		return e.PubKey, nil
	case PrefixProfile:
		return e.Profile.PubKey, nil
	}
	return nostr.PubKey{}, fmt.Errorf("%w: %q is an %s: %w", ErrNotPubKey, short(s), e.Prefix, ErrPrefix)
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
		return nostr.ID{}, fmt.Errorf("%w: %q: %w", ErrNotID, short(s), err)
	}
	switch e.Prefix {
	case PrefixNote:
		return e.ID, nil
	case PrefixEvent:
		return e.Event.ID, nil
	}
	return nostr.ID{}, fmt.Errorf("%w: %q is an %s: %w", ErrNotID, short(s), e.Prefix, ErrPrefix)
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
		return nostr.SecretKey{}, fmt.Errorf("%w: %w", ErrNotSecretKey, err)
	}
	if e.Prefix != PrefixSecretKey {
		return nostr.SecretKey{}, fmt.Errorf("%w: an %s was given: %w", ErrNotSecretKey, e.Prefix, ErrPrefix)
	}
	if !e.SecretKey.Valid() {
		return nostr.SecretKey{}, fmt.Errorf("%w: %w: not in [1, n-1]", ErrNotSecretKey, nostr.ErrSecretKey)
	}
	return e.SecretKey, nil
}

// short quotes at most 80 bytes of s in an error.
func short(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}
