package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrations holds the schema migrations, named NNNN_name.sql and applied
// in order, each in its own transaction. A database records the ones it
// has in schema_version; a migration, once released, never changes.
//
//go:embed migrations/*.sql
var migrations embed.FS

// migrationLock is the key of the session advisory lock Open holds while
// it migrates, so that nodes starting at once apply each migration once.
// It is one key for the whole database (every schema).
const migrationLock int64 = 0x706574726c6d6967 // "petrlmig"

// migration is one embedded migration.
type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations returns the embedded migrations in order.
func loadMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrations, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 || !strings.HasSuffix(name, ".sql") {
			return nil, fmt.Errorf("%w: migration file name %q", ErrSchema, name)
		}
		b, err := migrations.ReadFile("migrations/" + name)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: strings.TrimSuffix(name, ".sql"), sql: string(b)})
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("%w: migration %d missing", ErrSchema, i+1)
		}
	}
	return out, nil
}

// SchemaVersion is the schema version this build writes and reads: the
// number of its migrations.
func SchemaVersion() int {
	m, err := loadMigrations()
	if err != nil {
		return 0
	}
	return len(m)
}

// migrate creates the schema if needed and applies the migrations it
// lacks, holding the migration lock. It refuses a schema newer than this
// build knows, and, with noCreate, a schema that holds no store
// (ErrNoSchema).
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string, noCreate bool) (applied int, err error) {
	ms, err := loadMigrations()
	if err != nil {
		return 0, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLock); err != nil {
		return 0, err
	}
	defer func() {
		// A lost connection drops the lock by itself; otherwise release
		// it, and do not hand a connection with a lock back to the pool.
		if _, uerr := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLock); uerr != nil {
			conn.Conn().Close(context.Background())
			if err == nil {
				err = uerr
			}
		}
	}()
	q := pgx.Identifier{schema}.Sanitize()
	if noCreate {
		var exists bool
		if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", q+".schema_version").Scan(&exists); err != nil {
			return 0, err
		}
		if !exists {
			return 0, fmt.Errorf("%w: %s", ErrNoSchema, q)
		}
	}
	stmts := []string{
		"CREATE SCHEMA IF NOT EXISTS " + q,
		"SET search_path TO " + q,
		`CREATE TABLE IF NOT EXISTS schema_version (
			version    integer     NOT NULL PRIMARY KEY,
			name       text        NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`,
	}
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return 0, fmt.Errorf("prepare schema %s: %w", q, err)
		}
	}
	var have int
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_version").Scan(&have); err != nil {
		return 0, err
	}
	if have > len(ms) {
		return 0, fmt.Errorf("%w: schema %s is at version %d, this build knows %d", ErrSchema, q, have, len(ms))
	}
	for _, m := range ms[have:] {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return applied, err
		}
		if _, err := tx.Conn().PgConn().Exec(ctx, m.sql).ReadAll(); err != nil {
			tx.Rollback(ctx)
			return applied, fmt.Errorf("migration %s: %w", m.name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO schema_version (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
			tx.Rollback(ctx)
			return applied, fmt.Errorf("migration %s: %w", m.name, err)
		}
		if err := tx.Commit(ctx); err != nil {
			return applied, fmt.Errorf("migration %s: %w", m.name, err)
		}
		applied++
	}
	return applied, nil
}
