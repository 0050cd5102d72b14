package nip59

import (
	"errors"
	"testing"
	"time"

	"github.com/petrel-relay/petrel/internal/nip44"
	"github.com/petrel-relay/petrel/internal/nostr"
)

var (
	alice = nostr.SecretKeyFromSeed([]byte("alice"))
	bob   = nostr.SecretKeyFromSeed([]byte("bob"))
	eve   = nostr.SecretKeyFromSeed([]byte("eve"))
	now   = time.Unix(1_700_000_000, 0)
)

func TestGiftWrapRoundTrip(t *testing.T) {
	r := NewDM(alice.PubKey(), []nostr.PubKey{bob.PubKey()}, "hi \"bob\" <3", now)
	w, err := GiftWrap(r, alice, bob.PubKey(), now)
	if err != nil {
		t.Fatal(err)
	}
	if w.Kind != KindGiftWrap || w.PubKey == alice.PubKey() || len(w.Tags) != 1 || w.Tags[0][1] != bob.PubKey().Hex() {
		t.Fatalf("wrap %+v", w)
	}
	if !nostr.CheckID(w) || !nostr.VerifyEvent(nostr.DefaultVerifier(), w) {
		t.Fatal("the wrap is not a valid event")
	}
	if w.CreatedAt > now.Unix() || w.CreatedAt <= now.Add(-MaxSkew).Unix() {
		t.Fatalf("wrap dated %d", w.CreatedAt)
	}
	got, seal, err := Unwrap(w, bob, nostr.DefaultVerifier())
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != r.ID || got.Content != r.Content || got.PubKey != alice.PubKey() || got.Kind != KindDM || seal.PubKey != alice.PubKey() {
		t.Fatalf("rumor %+v", got)
	}
	if string(got.JSON()) != string(r.JSON()) {
		t.Fatalf("JSON differs:\n%s\n%s", got.JSON(), r.JSON())
	}
	// Not for eve.
	if _, _, err := Unwrap(w, eve, nostr.DefaultVerifier()); !errors.Is(err, nip44.ErrMAC) {
		t.Fatalf("eve: %v", err)
	}
}

func TestUnwrapRefusesImpersonation(t *testing.T) {
	// Eve seals a rumor claiming alice as its author.
	r := NewDM(alice.PubKey(), []nostr.PubKey{bob.PubKey()}, "I am alice", now)
	ck, _ := nip44.NewConversationKey(eve, bob.PubKey())
	content, _ := nip44.Encrypt(ck, string(r.JSON()))
	seal := &nostr.Event{CreatedAt: now.Unix(), Kind: KindSeal, Content: content}
	nostr.SignEvent(seal, eve)
	w, err := Wrap(seal, bob.PubKey(), now)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Unwrap(w, bob, nostr.DefaultVerifier()); !errors.Is(err, ErrImpersonation) {
		t.Fatalf("got %v", err)
	}
	// Seal refuses to make one.
	if _, err := Seal(r, eve, bob.PubKey(), now); !errors.Is(err, ErrImpersonation) {
		t.Fatalf("Seal: %v", err)
	}
}

func TestUnwrapRefusesBadLayers(t *testing.T) {
	r := NewDM(alice.PubKey(), nil, "x", now)
	seal, _ := Seal(r, alice, bob.PubKey(), now)
	// A seal with a broken signature.
	bad := *seal
	bad.Sig[0] ^= 1
	bad.Raw = nostr.Serialize(&bad)
	w, _ := Wrap(&bad, bob.PubKey(), now)
	if _, _, err := Unwrap(w, bob, nostr.DefaultVerifier()); !errors.Is(err, ErrSeal) {
		t.Fatalf("bad seal signature: %v", err)
	}
	// A "seal" of the wrong kind.
	other := &nostr.Event{Kind: 1, Content: seal.Content, Tags: nostr.Tags{}}
	nostr.SignEvent(other, alice)
	w, _ = Wrap(other, bob.PubKey(), now)
	if _, _, err := Unwrap(w, bob, nostr.DefaultVerifier()); !errors.Is(err, ErrSeal) {
		t.Fatalf("kind-1 seal: %v", err)
	}
	// Not a wrap at all.
	if _, _, err := Unwrap(seal, bob, nostr.DefaultVerifier()); !errors.Is(err, ErrWrap) {
		t.Fatalf("a seal as a wrap: %v", err)
	}
}

func TestParseRumor(t *testing.T) {
	pk := alice.PubKey()
	ok := func(in string, check func(*Rumor) bool) {
		t.Helper()
		r, err := ParseRumor([]byte(in), pk, now)
		if err != nil || !check(r) || r.ID != nostr.ComputeID(r.event()) {
			t.Errorf("%s: %+v, %v", in, r, err)
		}
	}
	ok(`{"kind":14,"content":"hi"}`, func(r *Rumor) bool {
		return r.PubKey == pk && r.CreatedAt == now.Unix() && r.Content == "hi" && len(r.Tags) == 0
	})
	ok(`{"kind":1,"created_at":5,"tags":[["p","x"]],"pubkey":"`+pk.Hex()+`"}`, func(r *Rumor) bool {
		return r.CreatedAt == 5 && r.Tags[0][1] == "x"
	})
	full := NewDM(pk, nil, "z", now)
	ok(string(full.JSON()), func(r *Rumor) bool { return r.ID == full.ID })
	bad := func(in string, want error) {
		t.Helper()
		if _, err := ParseRumor([]byte(in), pk, now); !errors.Is(err, want) {
			t.Errorf("%s: got %v, want %v", in, err, want)
		}
	}
	bad(`{"content":"no kind"}`, ErrRumor)
	bad(`{"kind":70000}`, ErrRumor)
	bad(`{"kind":1,"sig":"00"}`, ErrRumor)
	bad(`{"kind":1,"tags":[[1]]}`, ErrRumor)
	bad(`{"kind":1,"id":"`+full.ID.Hex()+`"}`, ErrRumor)
	bad(`{"kind":1,"pubkey":"`+bob.PubKey().Hex()+`"}`, ErrImpersonation)
	bad(`not json`, ErrRumor)
	// A field of the wrong type is told in the JSON's terms.
	if _, err := ParseRumor([]byte(`{"kind":"14"}`), pk, now); err == nil || err.Error() != `nip59: not a valid rumor: "kind" must be a whole number, not a JSON string` {
		t.Errorf("a string kind: %v", err)
	}
}

func FuzzParseRumor(f *testing.F) {
	f.Add(`{"kind":14,"content":"hi","tags":[["p","x"]]}`)
	f.Add(string(NewDM(alice.PubKey(), nil, "z", now).JSON()))
	f.Fuzz(func(t *testing.T, in string) {
		r, err := ParseRumor([]byte(in), alice.PubKey(), now)
		if err != nil {
			return
		}
		// Its JSON parses back to the same rumor.
		r2, err := ParseRumor(r.JSON(), alice.PubKey(), now)
		if err != nil || r2.ID != r.ID {
			t.Fatalf("%s -> %s: %v", in, r.JSON(), err)
		}
	})
}
