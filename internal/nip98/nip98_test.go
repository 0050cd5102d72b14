package nip98

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nostr"
)

func TestHeader(t *testing.T) {
	sk := nostr.SecretKeyFromSeed([]byte("admin"))
	body := []byte(`{"method":"supportedmethods","params":[]}`)
	now := time.Unix(1_700_000_000, 0)
	h := Header(sk, "post", "http://127.0.0.1:7447/", body, now)
	tok, ok := strings.CutPrefix(h, "Nostr ")
	if !ok {
		t.Fatalf("header %q", h)
	}
	raw, err := base64.StdEncoding.DecodeString(tok)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := nostr.ParseEvent(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Kind != 27235 || ev.CreatedAt != now.Unix() || ev.PubKey != sk.PubKey() {
		t.Fatalf("event %+v", ev)
	}
	if !nostr.CheckID(ev) || !nostr.VerifyEvent(nostr.DefaultVerifier(), ev) {
		t.Fatal("bad id or signature")
	}
	sum := sha256.Sum256(body)
	want := map[string]string{"u": "http://127.0.0.1:7447/", "method": "POST", "payload": hex.EncodeToString(sum[:])}
	for k, v := range want {
		if tag, ok := ev.Tags.First(k); !ok || tag.Value() != v {
			t.Errorf("tag %s: %v", k, tag)
		}
	}
	if e := Event(sk, "GET", "http://x/", nil, now); len(e.Tags) != 2 {
		t.Errorf("no body, tags %v", e.Tags)
	}
}
