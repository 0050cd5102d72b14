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

// UpdateMeta calls f with the blob saved under name (nil and found false
// if there is none) and saves what f returns, in one transaction that
// holds name's row locked: an UpdateMeta or SaveMeta of name by another
// node waits for it, so that two changes made at once both stay (the
// NIP-86 lists, edited through several nodes). If f fails, nothing is
// saved and UpdateMeta returns f's error.
func (s *Store) UpdateMeta(ctx context.Context, name string, f func(old []byte, found bool) ([]byte, error)) error {
	if err := s.check(); err != nil {
		return err
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	err := s.updateMeta(ctx, name, f)
	if fe, ok := err.(fnErr); ok {
		return fe.error
	}
	if s.note(err) != nil {
		return fmt.Errorf("store/postgres: update meta %q: %w", name, err)
	}
	return nil
}

// fnErr is an error of UpdateMeta's f.
type fnErr struct{ error }

func (s *Store) updateMeta(ctx context.Context, name string, f func(old []byte, found bool) ([]byte, error)) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	// The row is made first if it is missing (seen by nobody else until
	// the commit; a node making it at the same time waits on the key),
	// so that there is always a row to lock.
	tag, err := tx.Exec(ctx, "INSERT INTO meta (name, value) VALUES ($1, '') ON CONFLICT (name) DO NOTHING", name)
	if err != nil {
		return err
	}
	found := tag.RowsAffected() == 0
	var old []byte
	if err := tx.QueryRow(ctx, "SELECT value FROM meta WHERE name = $1 FOR UPDATE", name).Scan(&old); err != nil {
		return err
	}
	if !found {
		old = nil
	}
	v, err := f(old, found)
	if err != nil {
		return fnErr{err}
	}
	if v == nil {
		v = []byte{}
	}
	if _, err := tx.Exec(ctx, "UPDATE meta SET value = $2 WHERE name = $1", name, v); err != nil {
		return err
	}
	return tx.Commit(ctx)
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
