package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/petrel-relay/petrel/internal/nostr"
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

// TestAuthorLockClass: petrel_lock_authors takes the advisory locks the
// Go side names (authorLockClass, authorLock), exclusive or shared as
// asked, so an operator reading pg_locks finds the writer's author locks
// as docs/storage.md describes them (classid 1885697138, "petr").
func TestAuthorLockClass(t *testing.T) {
	needDB(t)
	ctx := context.Background()
	name := freshSchema(t)
	s, err := Open(ctx, Options{URL: testURL(), Schema: name, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	c, err := pgx.Connect(ctx, testURL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var pk nostr.PubKey
	pk[0], pk[1], pk[2], pk[3] = 0xf0, 0x01, 0x02, 0x03 // a key whose int4 is negative
	for _, excl := range []bool{true, false} {
		tx, err := c.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "SELECT "+pgx.Identifier{name, "petrel_lock_authors"}.Sanitize()+"($1::int4[], $2::bool[])",
			[]int32{authorLock(&pk)}, []bool{excl}); err != nil {
			t.Fatal(err)
		}
		var classid, objid int64
		var mode string
		if err := tx.QueryRow(ctx, `SELECT classid::int8, objid::int8, mode FROM pg_locks
			WHERE locktype = 'advisory' AND pid = pg_backend_pid()`).Scan(&classid, &objid, &mode); err != nil {
			t.Fatal(err)
		}
		want := "ShareLock"
		if excl {
			want = "ExclusiveLock"
		}
		if classid != authorLockClass || objid != int64(uint32(authorLock(&pk))) || mode != want {
			t.Fatalf("exclusive %v: lock (%d, %d) %s, want (%d, %d) %s", excl, classid, objid, mode,
				authorLockClass, uint32(authorLock(&pk)), want)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
