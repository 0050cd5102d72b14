package relaytest

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

// PostgresURL is the PostgreSQL server the tests use:
// PETREL_TEST_POSTGRES_URL, or the local one with trust authentication.
func PostgresURL() string {
	return cmp.Or(os.Getenv("PETREL_TEST_POSTGRES_URL"), "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
}

// OpenPostgres opens a PostgreSQL store (the real server, PostgresURL)
// in a fresh schema, closed and dropped when the test ends (after a
// relay started later stops: cleanups run last first). The test fails
// when the server cannot be reached.
func OpenPostgres(t testing.TB) *postgres.Store {
	t.Helper()
	url := PostgresURL()
	schema := fmt.Sprintf("petrel_test_%d_%d", os.Getpid(), time.Now().UnixNano())
	ctx := context.Background()
	st, err := postgres.Open(ctx, postgres.Options{URL: url, Schema: schema, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("PostgreSQL at %s (set PETREL_TEST_POSTGRES_URL): %v", url, err)
	}
	t.Cleanup(func() {
		st.Close()
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
	return st
}
