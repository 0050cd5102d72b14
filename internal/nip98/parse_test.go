package nip98

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
)

func TestParse(t *testing.T) {
	sk := nostr.SecretKeyFromSeed([]byte("admin"))
	h := Header(sk, "POST", "http://127.0.0.1:7447/", []byte("{}"), time.Unix(1_700_000_000, 0))
	ev, err := Parse(h, len(h))
	if err != nil || ev.PubKey != sk.PubKey() || ev.Kind != nostr.KindHTTPAuth {
		t.Fatalf("Parse(Header) = %+v, %v", ev, err)
	}
	// The limit: a header of exactly maxLen bytes is read, one more byte is not.
	if _, err := Parse(h, len(h)-1); err == nil || err.Error() != "Authorization header too large" {
		t.Fatalf("one byte past the limit: %v", err)
	}
	tok := strings.TrimPrefix(h, "Nostr ")
	raw, _ := base64.StdEncoding.DecodeString(tok)
	for _, ok := range []string{
		"nostr " + tok, "NOSTR  " + tok + " ",
		"Nostr " + base64.RawStdEncoding.EncodeToString(raw),
		"Nostr " + base64.URLEncoding.EncodeToString(raw),
		"Nostr " + base64.RawURLEncoding.EncodeToString(raw),
	} {
		if _, err := Parse(ok, 1<<16); err != nil {
			t.Errorf("Parse(%.20q...): %v", ok, err)
		}
	}
	bad := []struct{ in, want string }{
		{"", "missing Authorization header (NIP-98)"},
		{"Bearer " + tok, "Authorization scheme must be Nostr"},
		{"Nostr", "Authorization event: "},
		{"Nostr !!!", "Authorization token is not base64"},
		{"Nostr " + base64.StdEncoding.EncodeToString([]byte(`{}`)), "Authorization event: "},
		{"Nostr " + base64.StdEncoding.EncodeToString(raw[:len(raw)-1]), "Authorization event: "},
	}
	for _, b := range bad {
		if _, err := Parse(b.in, 1<<16); err == nil || !strings.HasPrefix(err.Error(), b.want) {
			t.Errorf("Parse(%.30q) = %v, want %q", b.in, err, b.want)
		}
	}
	note := &nostr.Event{Kind: 1, CreatedAt: 1, Tags: nostr.Tags{}}
	note.PubKey = sk.PubKey()
	note.ID = nostr.ComputeID(note)
	note.Sig = sk.Sign((*[32]byte)(&note.ID))
	if _, err := Parse("Nostr "+base64.StdEncoding.EncodeToString(nostr.Serialize(note)), 1<<16); err == nil ||
		err.Error() != "Authorization event has kind 1, want 27235" {
		t.Fatalf("kind 1: %v", err)
	}
}

// FuzzParse feeds arbitrary Authorization headers to Parse: it must not
// panic, must honour maxLen, and whatever it accepts is a kind-27235 event
// whose tags can be read.
func FuzzParse(f *testing.F) {
	sk := nostr.SecretKeyFromSeed([]byte("admin"))
	h := Header(sk, "POST", "https://relay.example.com/", []byte(`{"method":"banpubkey","params":["x"]}`), time.Unix(1_700_000_000, 0))
	f.Add(h, uint16(0))
	f.Add(strings.ToLower(h[:6])+strings.TrimRight(h[6:], "="), uint16(0))
	f.Add("Nostr e30=", uint16(0))
	f.Add("Nostr", uint16(0))
	f.Add("", uint16(0))
	f.Add(h, uint16(len(h)-1))
	f.Fuzz(func(t *testing.T, auth string, max uint16) {
		maxLen := 16 << 10
		if max != 0 {
			maxLen = int(max)
		}
		ev, err := Parse(auth, maxLen)
		if err != nil {
			if ev != nil {
				t.Fatal("an event with an error")
			}
			return
		}
		if len(auth) > maxLen {
			t.Fatalf("accepted %d bytes over a limit of %d", len(auth), maxLen)
		}
		if ev.Kind != nostr.KindHTTPAuth {
			t.Fatalf("accepted kind %d", ev.Kind)
		}
		for _, k := range []string{"u", "method", "payload"} {
			if tag, ok := ev.Tags.First(k); ok {
				_ = tag.Value()
			}
		}
		_ = nostr.CheckID(ev)
	})
}
