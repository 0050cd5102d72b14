package nip13

import (
	"context"
	"errors"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
)

func TestDifficulty(t *testing.T) {
	f := func(hex string, want int) {
		t.Helper()
		id, err := nostr.ParseID(hex)
		if err != nil {
			t.Fatal(err)
		}
		if got := Difficulty(id); got != want {
			t.Errorf("%s: got %d, want %d", hex, got, want)
		}
	}
	// NIP-13's example.
	f("000000000e9d97a1ab09fc381030b346cdd7a142ad57e6df0b46dc9bef6c7e2d", 36)
	f("ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", 0)
	f("0fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", 4)
	f("00ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", 8)
	f("0000000000000000000000000000000000000000000000000000000000000001", 255)
	f("0000000000000000000000000000000000000000000000000000000000000000", 256)
}

func TestMine(t *testing.T) {
	sk := nostr.SecretKeyFromSeed([]byte("pow"))
	ev := &nostr.Event{PubKey: sk.PubKey(), CreatedAt: 1700000000, Kind: 1, Content: "mined \"quoted\"",
		Tags: nostr.Tags{{"t", "x"}, {"nonce", "old", "1"}, {"p", "y"}}}
	if err := Mine(context.Background(), ev, 12, 2); err != nil {
		t.Fatal(err)
	}
	if Difficulty(ev.ID) < 12 || ev.ID != nostr.ComputeID(ev) {
		t.Fatalf("id %s", ev.ID.Hex())
	}
	if len(ev.Tags) != 3 || ev.Tags[1][0] != "nonce" || ev.Tags[1][2] != "12" || ev.Tags[2][0] != "p" {
		t.Fatalf("tags %v", ev.Tags)
	}
	if n, ok := Committed(ev); !ok || n != 12 {
		t.Fatalf("committed %d %v", n, ok)
	}
	nostr.SignEvent(ev, sk)
	if Difficulty(ev.ID) < 12 || !nostr.VerifyEvent(nostr.DefaultVerifier(), ev) {
		t.Fatal("signing changed the id or the signature does not verify")
	}
	// Without a nonce tag one is added last.
	ev2 := &nostr.Event{PubKey: sk.PubKey(), Kind: 1}
	if err := Mine(context.Background(), ev2, 4, 1); err != nil {
		t.Fatal(err)
	}
	if len(ev2.Tags) != 1 || ev2.Tags[0][0] != "nonce" || Difficulty(ev2.ID) < 4 {
		t.Fatalf("%v %s", ev2.Tags, ev2.ID.Hex())
	}
}

func TestMineLimits(t *testing.T) {
	ev := &nostr.Event{Kind: 1}
	for _, bad := range []int{-1, MaxDifficulty + 1} {
		if err := Mine(context.Background(), ev, bad, 1); !errors.Is(err, ErrTarget) {
			t.Errorf("target %d: %v", bad, err)
		}
	}
	// At the limit the target is accepted: the search starts and stops
	// with the context.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Mine(ctx, ev, MaxDifficulty, 2); !errors.Is(err, context.Canceled) {
		t.Errorf("target %d: %v", MaxDifficulty, err)
	}
	if len(ev.Tags) != 0 {
		t.Errorf("a cancelled Mine changed the event: %v", ev.Tags)
	}
}

func BenchmarkMine16(b *testing.B) {
	b.ReportAllocs()
	sk := nostr.SecretKeyFromSeed([]byte("pow"))
	for i := range b.N {
		ev := &nostr.Event{PubKey: sk.PubKey(), CreatedAt: int64(i), Kind: 1, Content: "bench"}
		if err := Mine(context.Background(), ev, 16, 2); err != nil {
			b.Fatal(err)
		}
	}
}
