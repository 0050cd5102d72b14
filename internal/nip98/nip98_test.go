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

// TestEventTokensDistinct: the same call in the same second makes two
// events with one id and two valid signatures (two tokens).
func TestEventTokensDistinct(t *testing.T) {
	sk := nostr.SecretKeyFromSeed([]byte("admin"))
	now := time.Unix(1_700_000_000, 0)
	a := Event(sk, "POST", "http://x/", []byte("{}"), now)
	b := Event(sk, "POST", "http://x/", []byte("{}"), now)
	if a.ID != b.ID || a.Sig == b.Sig {
		t.Fatalf("ids %s %s, sigs equal %v: want one id, two signatures", a.ID.Hex(), b.ID.Hex(), a.Sig == b.Sig)
	}
	for _, ev := range []*nostr.Event{a, b} {
		if !nostr.VerifyEvent(nostr.DefaultVerifier(), ev) {
			t.Fatal("invalid signature")
		}
	}
}

func TestReplays(t *testing.T) {
	sk := nostr.SecretKeyFromSeed([]byte("admin"))
	r := NewReplays(2)
	now := int64(1_700_000_000)
	tok := func(created int64) *nostr.Event {
		return Event(sk, "POST", "http://x/", []byte("{}"), time.Unix(created, 0))
	}
	a, b, c := tok(now), tok(now), tok(now)
	if err := r.Use(a, now+60, now); err != nil {
		t.Fatalf("first use: %v", err)
	}
	if err := r.Use(a, now+60, now+1); err != ErrReplayed {
		t.Fatalf("replay: %v, want ErrReplayed", err)
	}
	// At the limit: a second token is remembered; past it, refused.
	if err := r.Use(b, now+60, now+1); err != nil {
		t.Fatalf("second token at the limit: %v", err)
	}
	if err := r.Use(c, now+60, now+1); err != ErrTooMany {
		t.Fatalf("third token past the limit: %v, want ErrTooMany", err)
	}
	if err := r.Use(a, now+60, now+60); err != ErrReplayed {
		t.Fatalf("replay at the last second of the window: %v", err)
	}
	// Once the window is over they are forgotten (the created_at check
	// refuses the token by then).
	if err := r.Use(c, now+122, now+61); err != nil {
		t.Fatalf("after the window: %v", err)
	}
	if n := r.Len(); n != 1 {
		t.Fatalf("%d tokens held after the window, want 1", n)
	}
	// A token a second for many windows: only the live ones are held.
	r = NewReplays(100)
	for i := int64(0); i < 1000; i++ {
		if err := r.Use(tok(now+i), now+i+60, now+i); err != nil {
			t.Fatalf("token %d: %v", i, err)
		}
		if r.Len() > 61 {
			t.Fatalf("%d tokens held at %d", r.Len(), i)
		}
	}
}
