package postgres

import (
	"context"
	"slices"
	"testing"

	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

func TestTombstoner(t *testing.T) {
	storetest.RunTombstoner(t, func(t *testing.T) store.Store {
		return openTest(t, Options{})
	})
}

func TestMetaNames(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	defer s.Close()
	names, err := s.MetaNames(ctx)
	if err != nil || len(names) != 0 {
		t.Fatalf("empty store: %q %v", names, err)
	}
	for _, n := range []string{"relay/info", "policy/banned_pubkeys", "policy/allowed_kinds", "policy_x"} {
		if err := s.SaveMeta(ctx, n, []byte(n)); err != nil {
			t.Fatal(err)
		}
	}
	names, err = s.MetaNames(ctx)
	if err != nil || !slices.Equal(names, []string{"policy/allowed_kinds", "policy/banned_pubkeys", "policy_x", "relay/info"}) {
		t.Fatalf("names %q %v", names, err)
	}
}
