package pebble

import (
	"context"
	"errors"
	"testing"

	"github.com/petrel-relay/petrel/internal/store"
)

// TestMeta: named blobs survive a reopen, absent names are ErrNotFound,
// and they never show up as events.
func TestMeta(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := Open(Options{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.LoadMeta(ctx, "policy/banned_pubkeys"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("absent: %v", err)
	}
	if err := st.SaveMeta(ctx, "policy/banned_pubkeys", []byte(`{"version":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveMeta(ctx, "policy/banned_pubkeys", []byte(`{"version":2}`)); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = Open(Options{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v, err := st.LoadMeta(ctx, "policy/banned_pubkeys")
	if err != nil || string(v) != `{"version":2}` {
		t.Fatalf("after reopen: %q %v", v, err)
	}
	it, err := st.Query(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if it.Next() {
		t.Fatalf("a meta blob came back as an event")
	}
	if err := checkIntegrity(st.db); err != nil {
		t.Fatal(err)
	}
}
