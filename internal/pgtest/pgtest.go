// Package pgtest opens PostgreSQL stores for tests, on the real server
// (PETREL_TEST_POSTGRES_URL, or the local one). It is apart from
// relaytest so that the modules that import relaytest (the interop
// tests) do not need the PostgreSQL driver.
package pgtest

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/petrel-relay/petrel/internal/store/postgres"
)

// URL is the PostgreSQL server the tests use:
// PETREL_TEST_POSTGRES_URL, or the local one with trust authentication.
func URL() string {
	return cmp.Or(os.Getenv("PETREL_TEST_POSTGRES_URL"), "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
}

// Open opens a PostgreSQL store (the real server, URL)
// in a fresh schema, closed and dropped when the test ends (after a
// relay started later stops: cleanups run last first). The test fails
// when the server cannot be reached.
func Open(t testing.TB) *postgres.Store {
	t.Helper()
	return Nodes(t, 1)[0]
}

// Nodes opens n PostgreSQL stores on one fresh schema, as the nodes of a
// cluster share it; closed, and the schema dropped, as Open's.
func Nodes(t testing.TB, n int) []*postgres.Store {
	t.Helper()
	url := URL()
	schema := fmt.Sprintf("petrel_test_%d_%d", os.Getpid(), time.Now().UnixNano())
	ctx := context.Background()
	var sts []*postgres.Store
	for range n {
		st, err := postgres.Open(ctx, postgres.Options{URL: url, Schema: schema, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			for _, st := range sts {
				st.Close()
			}
			t.Fatalf("PostgreSQL at %s (set PETREL_TEST_POSTGRES_URL): %v", url, err)
		}
		sts = append(sts, st)
	}
	t.Cleanup(func() {
		for _, st := range sts {
			st.Close()
		}
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return sts
}
