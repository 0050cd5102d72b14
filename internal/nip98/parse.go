package nip98

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// Parse reads an Authorization header value the way the relay's NIP-86
// handler does: the scheme "Nostr" (any case), one space and a base64
// token (standard or URL alphabet, padded or not) of a kind-27235 event.
// A header longer than maxLen bytes is refused before it is decoded. It
// checks the form only: the caller checks created_at, the "u", "method"
// and "payload" tags, the id and the signature.
func Parse(auth string, maxLen int) (*nostr.Event, error) {
	if auth == "" {
		return nil, errors.New("missing Authorization header (NIP-98)")
	}
	if len(auth) > maxLen {
		return nil, errors.New("Authorization header too large")
	}
	scheme, token, _ := strings.Cut(auth, " ")
	if !strings.EqualFold(scheme, "Nostr") {
		return nil, errors.New("Authorization scheme must be Nostr")
	}
	raw, err := decodeBase64(strings.TrimSpace(token))
	if err != nil {
		return nil, errors.New("Authorization token is not base64")
	}
	ev, err := nostr.ParseEvent(raw, nil)
	if err != nil {
		return nil, fmt.Errorf("Authorization event: %v", err)
	}
	if ev.Kind != nostr.KindHTTPAuth {
		return nil, fmt.Errorf("Authorization event has kind %d, want %d", ev.Kind, nostr.KindHTTPAuth)
	}
	return ev, nil
}

// decodeBase64 accepts the four base64 forms clients send.
func decodeBase64(s string) ([]byte, error) {
	var err error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		var b []byte
		if b, err = enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, err
}
