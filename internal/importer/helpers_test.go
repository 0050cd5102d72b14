package importer

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store/pebble"
)

// fixtureBase is the created_at the test events count from.
const fixtureBase = 1_700_000_000

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// openStore opens a pebble store in a temporary directory, as `petrel
// import` opens it (NoSync); it is closed at the end of the test.
func openStore(t testing.TB) *pebble.Store {
	t.Helper()
	st, err := pebble.Open(pebble.Options{Path: t.TempDir(), NoSync: true, Logger: quietLog, PurgeInterval: -1, BodyCacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// storedRaws returns the raw JSON of every event in st, newest first.
func storedRaws(t *testing.T, st *pebble.Store) []string {
	t.Helper()
	it, err := st.Query(context.Background(), []nostr.Filter{{}})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out []string
	for it.Next() {
		out = append(out, string(it.Record().Raw))
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// ownURL is nostr.ParseOwnURL for a URL the test knows to be valid.
func ownURL(t testing.TB, s string) nostr.OwnURL {
	t.Helper()
	o, err := nostr.ParseOwnURL(s)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// bytesLine returns ev as one JSONL line.
func bytesLine(ev *nostr.Event) io.Reader {
	return bytes.NewReader(append(append([]byte{}, ev.Raw...), '\n'))
}
