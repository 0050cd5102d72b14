package policy

import (
	"errors"
	"testing"

	"github.com/petrel-relay/petrel/internal/nip19"
)

// TestListsAcceptBech32: config lists take the npub/nprofile forms
// people paste, as the client commands do (one parser, internal/nip19).
func TestListsAcceptBech32(t *testing.T) {
	banned, allowed := keyN(11), keyN(12)
	prof, err := nip19.EncodeProfile(nip19.Profile{PubKey: allowed.PubKey(), Relays: []string{"wss://x.example"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{BannedPubKeys: []string{nip19.EncodePubKey(banned.PubKey())}, AllowedPubKeys: []string{prof}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	l := newTestLists(t, cfg, nil)
	if rej := l.CheckEvent(testEventBy(banned, 1, "x")); rej != rejPubKeyBanned {
		t.Fatalf("npub on banned_pubkeys: %v", rej)
	}
	if rej := l.CheckEvent(testEventBy(allowed, 1, "x")); rej != nil {
		t.Fatalf("nprofile on allowed_pubkeys: %v", rej)
	}
	// A note is not a pubkey.
	var id [32]byte
	bad := Config{BannedPubKeys: []string{nip19.EncodeNote(id)}}
	if err := bad.Validate(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a note on banned_pubkeys: %v", err)
	}
}
