package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/petrel-relay/petrel/internal/store"
)

// LoadMeta returns the blob saved under name, or store.ErrNotFound. The
// returned slice is the caller's. (The same methods as the pebble
// store's: petrel serve keeps the NIP-86 lists and the relay's
// information in them, here shared by every node.)
func (s *Store) LoadMeta(ctx context.Context, name string) ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	var v []byte
	err := s.pool.QueryRow(ctx, "SELECT value FROM meta WHERE name = $1", name).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		s.note(nil)
		return nil, store.ErrNotFound
	}
	if s.note(err) != nil {
		return nil, fmt.Errorf("store/postgres: load meta %q: %w", name, err)
	}
	return v, nil
}

// SaveMeta saves value under name, committed before it returns. It does
// not go through the event writer.
func (s *Store) SaveMeta(ctx context.Context, name string, value []byte) error {
	if err := s.check(); err != nil {
		return err
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	if value == nil {
		value = []byte{}
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO meta (name, value) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`, name, value)
	if s.note(err) != nil {
		return fmt.Errorf("store/postgres: save meta %q: %w", name, err)
	}
	return nil
}

// MetaNames returns the names of every saved blob, sorted (petrel
// migrate copies them all).
func (s *Store) MetaNames(ctx context.Context) ([]string, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, "SELECT name FROM meta")
	if s.note(err) != nil {
		return nil, fmt.Errorf("store/postgres: meta names: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if s.note(err) != nil {
		return nil, fmt.Errorf("store/postgres: meta names: %w", err)
	}
	slices.Sort(names) // bytewise, whatever the database's collation
	return names, nil
}
