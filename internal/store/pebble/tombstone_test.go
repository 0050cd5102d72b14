package pebble

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

func TestTombstoner(t *testing.T) {
	storetest.RunTombstoner(t, func(t *testing.T) store.Store {
		return checked{openTest(t, Options{NoSync: true}), t}
	})
}

// TestRestoredTombstonesReopen: restored tombstones are on disk, not only
// in the writer's memory: a reopened store refuses what they cover.
func TestRestoredTombstonesReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 7))
	gone := storetest.NewEvent(rng, storetest.Key(1), 1, storetest.BaseTime, nil, "gone")
	old := storetest.NewEvent(rng, storetest.Key(2), 1, storetest.BaseTime, nil, "old")
	wrap := storetest.NewEvent(rng, storetest.Key(3), nostr.KindGiftWrap, storetest.BaseTime, nostr.Tags{{"p", storetest.Key(2).Hex()}}, "")
	s := openTest(t, Options{Path: dir})
	err := s.RestoreTombstones(ctx, []store.Tombstone{
		{Type: store.TombstoneID, ID: gone.ID, PubKey: gone.PubKey},
		{Type: store.TombstoneVanish, PubKey: storetest.Key(2), CreatedAt: storetest.BaseTime + 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, Options{Path: dir})
	defer s.Close()
	res, err := s.Save(ctx, []*nostr.Event{gone, old, wrap})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Outcome != store.Deleted {
			t.Fatalf("event %d after reopen: %v, want deleted", i, r.Outcome)
		}
	}
	if err := checkIntegrity(s.db); err != nil {
		t.Fatal(err)
	}
}

func TestMetaNames(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	defer s.Close()
	names, err := s.MetaNames(ctx)
	if err != nil || len(names) != 0 {
		t.Fatalf("empty store: %q %v", names, err)
	}
	for _, n := range []string{"relay/info", "policy/banned_pubkeys", "policy/allowed_kinds"} {
		if err := s.SaveMeta(ctx, n, []byte(n)); err != nil {
			t.Fatal(err)
		}
	}
	names, err = s.MetaNames(ctx)
	if err != nil || !slices.Equal(names, []string{"policy/allowed_kinds", "policy/banned_pubkeys", "relay/info"}) {
		t.Fatalf("names %q %v", names, err)
	}
}
