package interop

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	gonostr "github.com/nbd-wtf/go-nostr"
	gnip04 "github.com/nbd-wtf/go-nostr/nip04"
	gnip13 "github.com/nbd-wtf/go-nostr/nip13"
	gnip19 "github.com/nbd-wtf/go-nostr/nip19"
	gnip44 "github.com/nbd-wtf/go-nostr/nip44"
	gnip49 "github.com/nbd-wtf/go-nostr/nip49"
	gnip59 "github.com/nbd-wtf/go-nostr/nip59"

	"github.com/petrel-relay/petrel/internal/nip13"
	"github.com/petrel-relay/petrel/internal/nip19"
	"github.com/petrel-relay/petrel/internal/nip44"
	"github.com/petrel-relay/petrel/internal/nip49"
	"github.com/petrel-relay/petrel/internal/nip59"
	"github.com/petrel-relay/petrel/internal/nostr"
)

// rounds is how many random cases each cross-check runs.
const rounds = 200

func rng(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 7))
}

func randKey(r *rand.Rand) nostr.SecretKey {
	var seed [16]byte
	for i := range seed {
		seed[i] = byte(r.Uint32())
	}
	return nostr.SecretKeyFromSeed(seed[:])
}

func rand32(r *rand.Rand) [32]byte {
	var b [32]byte
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func randRelays(r *rand.Rand) []string {
	var out []string
	for range r.IntN(4) {
		out = append(out, fmt.Sprintf("wss://relay%d.example/%s", r.IntN(1000), strings.Repeat("p", r.IntN(40))))
	}
	return out
}

func randText(r *rand.Rand, max int) string {
	alphabet := []rune("abc xyz 0123 \"\\\n\t é 🦄 ф 表")
	n := 1 + r.IntN(max)
	var b strings.Builder
	for b.Len() < n {
		b.WriteRune(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

func sameRelays(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestNIP19BothWays(t *testing.T) {
	r := rng(t)
	for range rounds {
		sk := randKey(r)
		pk := sk.PubKey()
		id := nostr.ID(rand32(r))
		relays := randRelays(r)

		// petrel encodes, go-nostr decodes.
		check := func(s, wantPrefix string, wantValue any) {
			t.Helper()
			prefix, v, err := gnip19.Decode(s)
			if err != nil || prefix != wantPrefix {
				t.Fatalf("go-nostr decode %s: %s %v", s, prefix, err)
			}
			if fmt.Sprint(v) != fmt.Sprint(wantValue) {
				t.Fatalf("go-nostr decode %s:\n got %v\nwant %v", s, v, wantValue)
			}
		}
		check(nip19.EncodePubKey(pk), "npub", pk.Hex())
		check(nip19.EncodeSecretKey(sk), "nsec", sk.Hex())
		check(nip19.EncodeNote(id), "note", id.Hex())
		s, _ := nip19.EncodeProfile(nip19.Profile{PubKey: pk, Relays: relays})
		check(s, "nprofile", gonostr.ProfilePointer{PublicKey: pk.Hex(), Relays: relays})
		kind := r.IntN(40000)
		s, _ = nip19.EncodeEvent(nip19.EventPointer{ID: id, Relays: relays, Author: pk, HasAuthor: true, Kind: uint32(kind), HasKind: true})
		check(s, "nevent", gonostr.EventPointer{ID: id.Hex(), Relays: relays, Author: pk.Hex(), Kind: kind})
		ident := randText(r, 30)
		akind := 30000 + r.IntN(10000)
		s, _ = nip19.EncodeAddress(nip19.Address{Identifier: ident, PubKey: pk, Kind: uint32(akind), Relays: relays})
		check(s, "naddr", gonostr.EntityPointer{PublicKey: pk.Hex(), Kind: akind, Identifier: ident, Relays: relays})

		// go-nostr encodes, petrel decodes.
		dec := func(s string) nip19.Entity {
			t.Helper()
			e, err := nip19.Decode(s)
			if err != nil {
				t.Fatalf("petrel decode %s: %v", s, err)
			}
			return e
		}
		g, _ := gnip19.EncodePublicKey(pk.Hex())
		if e := dec(g); e.Prefix != "npub" || e.PubKey != pk {
			t.Fatalf("npub %s", g)
		}
		g, _ = gnip19.EncodePrivateKey(sk.Hex())
		if e := dec(g); e.Prefix != "nsec" || e.SecretKey != sk {
			t.Fatalf("nsec %s", g)
		}
		g, _ = gnip19.EncodeNote(id.Hex())
		if e := dec(g); e.Prefix != "note" || e.ID != id {
			t.Fatalf("note %s", g)
		}
		g, _ = gnip19.EncodeProfile(pk.Hex(), relays)
		if e := dec(g); e.Profile.PubKey != pk || !sameRelays(e.Profile.Relays, relays) {
			t.Fatalf("nprofile %s: %+v", g, e.Profile)
		}
		g, _ = gnip19.EncodeEvent(id.Hex(), relays, pk.Hex())
		if e := dec(g); e.Event.ID != id || !e.Event.HasAuthor || e.Event.Author != pk || e.Event.HasKind || !sameRelays(e.Event.Relays, relays) {
			t.Fatalf("nevent %s: %+v", g, e.Event)
		}
		g, _ = gnip19.EncodeEntity(pk.Hex(), akind, ident, relays)
		if e := dec(g); e.Address.PubKey != pk || int(e.Address.Kind) != akind || e.Address.Identifier != ident || !sameRelays(e.Address.Relays, relays) {
			t.Fatalf("naddr %s: %+v", g, e.Address)
		}
		// The same inputs give the same strings.
		if mine := nip19.EncodePubKey(pk); mine != mustEnc(gnip19.EncodePublicKey(pk.Hex())) {
			t.Fatalf("npub differs: %s", mine)
		}
		if mine, _ := nip19.EncodeProfile(nip19.Profile{PubKey: pk, Relays: relays}); mine != mustEnc(gnip19.EncodeProfile(pk.Hex(), relays)) {
			t.Fatalf("nprofile differs: %s", mine)
		}
	}
}

func mustEnc(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}

func TestNIP44BothWays(t *testing.T) {
	r := rng(t)
	for range rounds {
		a, b := randKey(r), randKey(r)
		ck, err := nip44.NewConversationKey(a, b.PubKey())
		if err != nil {
			t.Fatal(err)
		}
		gck, err := gnip44.GenerateConversationKey(b.PubKey().Hex(), a.Hex())
		if err != nil || gck != [32]byte(ck) {
			t.Fatalf("conversation keys differ: %x %x %v", ck, gck, err)
		}
		msg := randText(r, 2000)
		p, err := nip44.Encrypt(ck, msg)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := gnip44.Decrypt(p, gck); err != nil || got != msg {
			t.Fatalf("go-nostr decrypt of petrel's payload: %v", err)
		}
		gp, err := gnip44.Encrypt(msg, gck)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := nip44.Decrypt(ck, gp); err != nil || got != msg {
			t.Fatalf("petrel decrypt of go-nostr's payload: %v", err)
		}
		// Same nonce, same payload.
		nonce := rand32(r)
		mine, _ := nip44.EncryptNonce(ck, msg, &nonce)
		theirs, _ := gnip44.Encrypt(msg, gck, gnip44.WithCustomNonce(nonce[:]))
		if mine != theirs {
			t.Fatalf("payloads differ for one nonce")
		}
	}
}

func TestNIP04BothWays(t *testing.T) {
	r := rng(t)
	for range rounds / 4 {
		a, b := randKey(r), randKey(r)
		msg := randText(r, 500)
		shared, err := gnip04.ComputeSharedSecret(b.PubKey().Hex(), a.Hex())
		if err != nil {
			t.Fatal(err)
		}
		p, err := nip44.EncryptNIP04(a, b.PubKey(), msg)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := gnip04.Decrypt(p, shared); err != nil || got != msg {
			t.Fatalf("go-nostr decrypt: %v", err)
		}
		gp, err := gnip04.Encrypt(msg, shared)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := nip44.DecryptNIP04(b, a.PubKey(), gp); err != nil || got != msg {
			t.Fatalf("petrel decrypt: %v", err)
		}
	}
}

func TestNIP49BothWays(t *testing.T) {
	r := rng(t)
	for i := range 8 {
		sk := randKey(r)
		pw := randText(r, 20)
		logN := uint8(1 + i)
		s, err := nip49.Encrypt(sk, pw, logN, nip49.KeySecurity(i%3))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := gnip49.Decrypt(s, pw); err != nil || got != sk.Hex() {
			t.Fatalf("go-nostr decrypt: %v", err)
		}
		g, err := gnip49.Encrypt(sk.Hex(), pw, logN, gnip49.KeySecurityByte(i%3))
		if err != nil {
			t.Fatal(err)
		}
		got, ks, err := nip49.Decrypt(g, pw)
		if err != nil || got != sk || int(ks) != i%3 {
			t.Fatalf("petrel decrypt: %v", err)
		}
		if _, err := gnip49.Decrypt(s, pw+"x"); err == nil {
			t.Fatal("go-nostr opened petrel's ncryptsec with a wrong password")
		}
	}
}

// toGo converts a petrel event to go-nostr's.
func toGo(ev *nostr.Event) gonostr.Event {
	tags := make(gonostr.Tags, len(ev.Tags))
	for i, t := range ev.Tags {
		tags[i] = gonostr.Tag(t)
	}
	return gonostr.Event{ID: ev.ID.Hex(), PubKey: ev.PubKey.Hex(), CreatedAt: gonostr.Timestamp(ev.CreatedAt),
		Kind: ev.Kind, Tags: tags, Content: ev.Content, Sig: hex.EncodeToString(ev.Sig[:])}
}

func TestNIP59BothWays(t *testing.T) {
	r := rng(t)
	now := time.Now()
	for range rounds / 4 {
		alice, bob := randKey(r), randKey(r)
		content := randText(r, 300)
		// petrel wraps, go-nostr unwraps.
		rumor := nip59.NewDM(alice.PubKey(), []nostr.PubKey{bob.PubKey()}, content, now)
		w, err := nip59.GiftWrap(rumor, alice, bob.PubKey(), now)
		if err != nil {
			t.Fatal(err)
		}
		gw := toGo(w)
		if ok, err := gw.CheckSignature(); !ok || err != nil {
			t.Fatalf("go-nostr: the wrap's signature: %v", err)
		}
		got, err := gnip59.GiftUnwrap(gw, func(other, ct string) (string, error) {
			ck, err := gnip44.GenerateConversationKey(other, bob.Hex())
			if err != nil {
				return "", err
			}
			return gnip44.Decrypt(ct, ck)
		})
		if err != nil || got.Content != content || got.PubKey != alice.PubKey().Hex() || got.ID != rumor.ID.Hex() || got.Kind != 14 {
			t.Fatalf("go-nostr unwrap: %+v %v", got, err)
		}
		// go-nostr wraps, petrel unwraps.
		grumor := gonostr.Event{PubKey: alice.PubKey().Hex(), CreatedAt: gonostr.Timestamp(now.Unix()), Kind: 14,
			Tags: gonostr.Tags{{"p", bob.PubKey().Hex()}}, Content: content}
		grumor.ID = grumor.GetID()
		gwrap, err := gnip59.GiftWrap(grumor, bob.PubKey().Hex(),
			func(pt string) (string, error) {
				ck, err := gnip44.GenerateConversationKey(bob.PubKey().Hex(), alice.Hex())
				if err != nil {
					return "", err
				}
				return gnip44.Encrypt(pt, ck)
			},
			func(ev *gonostr.Event) error { return ev.Sign(alice.Hex()) }, nil)
		if err != nil {
			t.Fatal(err)
		}
		pw, err := nostr.ParseEvent([]byte(gwrap.String()), nil)
		if err != nil {
			t.Fatal(err)
		}
		mine, seal, err := nip59.Unwrap(pw, bob, nostr.DefaultVerifier())
		if err != nil || mine.Content != content || mine.PubKey != alice.PubKey() || mine.ID.Hex() != grumor.ID || seal.PubKey != alice.PubKey() {
			t.Fatalf("petrel unwrap: %+v %v", mine, err)
		}
	}
}

func TestNIP13BothWays(t *testing.T) {
	r := rng(t)
	for i := range 6 {
		sk := randKey(r)
		target := 8 + i
		ev := &nostr.Event{PubKey: sk.PubKey(), CreatedAt: time.Now().Unix(), Kind: 1, Content: randText(r, 100), Tags: nostr.Tags{}}
		if err := nip13.Mine(context.Background(), ev, target, 2); err != nil {
			t.Fatal(err)
		}
		nostr.SignEvent(ev, sk)
		g := toGo(ev)
		if d := gnip13.Difficulty(g.ID); d != nip13.Difficulty(ev.ID) || d < target {
			t.Fatalf("difficulty: go-nostr %d, petrel %d, target %d", d, nip13.Difficulty(ev.ID), target)
		}
		if gnip13.CommittedDifficulty(&g) != target {
			t.Fatalf("committed difficulty %d", gnip13.CommittedDifficulty(&g))
		}
		if ok, err := g.CheckSignature(); !ok || err != nil {
			t.Fatal("go-nostr: bad signature on a mined event")
		}
		// go-nostr mines, petrel measures.
		gev := gonostr.Event{PubKey: sk.PubKey().Hex(), CreatedAt: gonostr.Now(), Kind: 1, Content: "x", Tags: gonostr.Tags{}}
		tag, err := gnip13.DoWork(context.Background(), gev, target)
		if err != nil {
			t.Fatal(err)
		}
		gev.Tags = append(gev.Tags, tag)
		gev.Sign(sk.Hex())
		pe, err := nostr.ParseEvent([]byte(gev.String()), nil)
		if err != nil {
			t.Fatal(err)
		}
		if c, ok := nip13.Committed(pe); nip13.Difficulty(pe.ID) < target || !ok || c != target {
			t.Fatalf("petrel: difficulty %d, committed %d", nip13.Difficulty(pe.ID), c)
		}
	}
}

func TestSignaturesBothWays(t *testing.T) {
	r := rng(t)
	for range rounds {
		sk := randKey(r)
		ev := &nostr.Event{CreatedAt: int64(r.IntN(2_000_000_000)), Kind: r.IntN(40000), Content: randText(r, 200),
			Tags: nostr.Tags{{"t", randText(r, 10)}, {"p", sk.PubKey().Hex(), randText(r, 5)}}}
		nostr.SignEvent(ev, sk)
		g := toGo(ev)
		if g.GetID() != ev.ID.Hex() {
			t.Fatalf("ids differ for %s", ev.Raw)
		}
		if ok, err := g.CheckSignature(); !ok || err != nil {
			t.Fatalf("go-nostr rejects petrel's signature: %v", err)
		}
		g2 := gonostr.Event{CreatedAt: g.CreatedAt, Kind: g.Kind, Content: g.Content, Tags: g.Tags}
		g2.Sign(sk.Hex())
		pe, err := nostr.ParseEvent([]byte(g2.String()), nil)
		if err != nil || !nostr.CheckID(pe) || !nostr.VerifyEvent(nostr.DefaultVerifier(), pe) {
			t.Fatalf("petrel rejects go-nostr's event: %v", err)
		}
	}
}
