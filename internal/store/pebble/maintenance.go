package pebble

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/petrel-relay/petrel/internal/store"
)

// This file holds what the maintenance commands (petrel backup, import,
// compact) need of the store beyond store.Store. Each method is safe for
// concurrent use with reads and writes, returns store.ErrClosed after
// Close, and holds Close off until it returns.

// whileOpen runs fn unless the store is closed; Close waits for it.
func (s *Store) whileOpen(fn func() error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return store.ErrClosed
	}
	return fn()
}

// Checkpoint writes a consistent copy of the database into dir, which
// must not exist: a directory that Open opens as it is. Every write
// committed before the call is in the copy, with Options.NoSync too (the
// write-ahead log is flushed first). Files are hard-linked when dir is on
// the store's filesystem (instant, and no space until the store moves on),
// copied otherwise.
//
// The copy is written beside dir under dir's name and ".partial-" and
// renamed into place once whole, so dir exists only complete: a process
// killed during a long copy leaves the partial directory under that name
// (pebble removes it itself on an error), and a store never opens on it.
func (s *Store) Checkpoint(dir string) error {
	// "copy/" names copy: the temporary directory goes beside it, not
	// into it.
	dir = filepath.Clean(dir)
	return s.whileOpen(func() error {
		fsys := s.opts.FS
		if fsys == nil {
			fsys = vfs.Default
		}
		if _, err := fsys.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			if err == nil {
				err = os.ErrExist
			}
			return fmt.Errorf("store/pebble: checkpoint into %s: %w", dir, err)
		}
		tmp := fmt.Sprintf("%s.partial-%d-%d", dir, os.Getpid(), checkpoints.Add(1))
		if err := s.db.Checkpoint(tmp, pebble.WithFlushedWAL()); err != nil {
			return fmt.Errorf("store/pebble: checkpoint into %s: %w", dir, err)
		}
		if err := fsys.Rename(tmp, dir); err != nil {
			fsys.RemoveAll(tmp)
			return fmt.Errorf("store/pebble: checkpoint into %s: %w", dir, err)
		}
		// The rename is durable once the parent directory is synced.
		parent, err := fsys.OpenDir(fsys.PathDir(dir))
		if err == nil {
			err = parent.Sync()
			if cerr := parent.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return fmt.Errorf("store/pebble: checkpoint into %s: sync its parent directory: %w", dir, err)
		}
		return nil
	})
}

// checkpoints numbers the temporary directories of Checkpoint.
var checkpoints atomic.Uint64

// Sync makes every write committed so far durable. Commits are synced
// already unless Options.NoSync (bulk import); with it, call Sync before
// reporting the writes done. It appends one empty record to the
// write-ahead log and syncs it, which syncs every record before it.
// Writes still queued (a Submit not yet reported) are not covered.
func (s *Store) Sync() error {
	return s.whileOpen(func() error {
		if err := s.db.LogData(nil, pebble.Sync); err != nil {
			return fmt.Errorf("store/pebble: sync: %w", err)
		}
		return nil
	})
}

// Compact rewrites the whole keyspace (every table, see keyspace) into
// pebble's bottom level, dropping deleted and overwritten entries, so the
// space of removed events comes back and reads touch fewer files. Pebble
// compacts in the background anyway; this is for after a large delete or
// import. It needs free disk space for the rewritten tables (up to the
// size of the store), and runs until done or ctx ends: Close waits for
// it.
//
// The search index's posting segments are folded into S blocks first
// (segments.go), so that the rewritten tables hold the folded postings
// rather than segments a later batch would fold and rewrite again.
func (s *Store) Compact(ctx context.Context) error {
	if !s.opts.ReadOnly {
		if err := s.foldSegments(ctx); err != nil {
			return fmt.Errorf("store/pebble: compact: %w", err)
		}
	}
	return s.whileOpen(func() error {
		start, end := keyspace()
		if err := s.db.Compact(ctx, start, end, true); err != nil {
			return fmt.Errorf("store/pebble: compact: %w", err)
		}
		return nil
	})
}
