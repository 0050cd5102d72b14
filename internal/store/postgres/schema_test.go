package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestNoCreate: with NoCreate, Open refuses a schema that holds no store
// (missing, or created by someone else without petrel's tables) and
// leaves nothing behind; it opens one that holds a store.
func TestNoCreate(t *testing.T) {
	needDB(t)
	ctx := context.Background()
	name := freshSchema(t)
	schemaExists := func() bool {
		t.Helper()
		c, err := pgx.Connect(ctx, testURL())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		var ok bool
		if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", name).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	open := func(noCreate bool) (*Store, error) {
		return Open(ctx, Options{URL: testURL(), Schema: name, NoCreate: noCreate, Logger: quiet})
	}
	if _, err := open(true); !errors.Is(err, ErrNoSchema) {
		t.Fatalf("missing schema: %v", err)
	}
	if schemaExists() {
		t.Fatal("NoCreate created the schema")
	}
	c, err := pgx.Connect(ctx, testURL())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)
	if _, err := open(true); !errors.Is(err, ErrNoSchema) {
		t.Fatalf("empty schema: %v", err)
	}
	s, err := open(false)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = open(true)
	if err != nil {
		t.Fatalf("schema with a store: %v", err)
	}
	s.Close()
}
