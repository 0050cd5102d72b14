package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"syscall"
	"time"

	"github.com/petrel-relay/petrel/internal/cli"
	"github.com/petrel-relay/petrel/internal/config"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/pebble"
	"github.com/petrel-relay/petrel/internal/store/postgres"
)

// openStoreWith opens the configured store for petrel serve: lateCommit receives the
// events of a postgres commit that was in doubt when their OK was due and
// turned out to have taken effect (postgres.Options.OnLateCommit), so the
// relay still fans them out.
func openStoreWith(cfg config.Config, log *slog.Logger, lateCommit func(*nostr.Event, uint64)) (store.Store, error) {
	return openStoreFor(cfg, log, lateCommit, backgroundPause(cfg.Store, servingProcs(cfg.Runtime)))
}

var errNoPostgresURL = errors.New("store backend postgres: store.postgres_url (PETREL_STORE_POSTGRES_URL) is required")

// openStoreFor opens the configured store; a pebble store's flushes and
// compactions pause for pause after each block while it commits (petrel
// serve's store.background_pause; a tool's run at full speed: 0).
func openStoreFor(cfg config.Config, log *slog.Logger, lateCommit func(*nostr.Event, uint64), pause time.Duration) (store.Store, error) {
	switch cfg.Store.Backend {
	case "pebble":
		opts := pebbleOptions(cfg, log)
		opts.BackgroundPause = pause
		st, err := pebble.Open(opts)
		if err != nil {
			return nil, openError(cfg.Store.Path, err)
		}
		return st, nil
	case "postgres":
		if cfg.Store.PostgresURL == "" {
			return nil, errNoPostgresURL
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		opts := postgresOptions(cfg, log)
		opts.OnLateCommit = lateCommit
		st, err := postgres.Open(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("open postgres store: %w", err)
		}
		return st, nil
	}
	return nil, fmt.Errorf("store backend %q: want pebble or postgres", cfg.Store.Backend)
}

// postgresOptions are the postgres store options every command uses.
func postgresOptions(cfg config.Config, log *slog.Logger) postgres.Options {
	return postgres.Options{
		URL:           cfg.Store.PostgresURL,
		Schema:        cfg.Store.PostgresSchema,
		MaxConns:      int32(cfg.Store.PostgresMaxConns),
		DisableSearch: cfg.Store.DisableSearch,
		Logger:        log,
	}
}

// errStoreLocked is what every command (petrel serve and the maintenance
// commands) says when another process (a running petrel serve, or a
// maintenance command) holds the data directory.
var errStoreLocked = errors.New("the data directory is locked by another process (is petrel serve running?)")

// heldByServe reports whether err is errStoreLocked for the pebble store
// of cfg and a petrel serve answers on its control socket: the commands
// that cannot go through the socket then say what to do instead.
func heldByServe(err error, cfg config.Config) bool {
	return errors.Is(err, errStoreLocked) && cfg.Store.Backend == "pebble" && cli.ControlServed(cfg.Store.Path)
}

// openError is the error of every command whose pebble.Open of the store
// at path failed: errStoreLocked for a directory another process holds,
// so that serve and the tools say the same thing; otherwise "open store
// PATH: " and the cause, without the store's own "open pebble store
// PATH: " before it (the path once, and once more where the system's
// error names a file).
func openError(path string, err error) error {
	if errors.Is(err, pebble.ErrLocked) {
		return fmt.Errorf("%s: %w", path, errStoreLocked)
	}
	if errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("open store %s: %w", path, errNotDir)
	}
	var oe *pebble.OpenError
	if errors.As(err, &oe) {
		err = oe.Err
	}
	return fmt.Errorf("open store %s: %w", path, err)
}

// autoBackgroundPause is store.background_pause's default when the
// relay's Go code runs on one processor. Serve's default timer slack
// there (1 ms) may stretch the sleep to about 1.2 ms.
const autoBackgroundPause = 200 * time.Microsecond

// backgroundPause is the pause after each block a flush or compaction of
// petrel serve writes while the relay commits (store.background_pause),
// with Go code on procs processors; 0: none.
func backgroundPause(c config.Store, procs int) time.Duration {
	return oneProcessorDefault(c.BackgroundPause, procs, autoBackgroundPause)
}

// pebbleOptions are the store options every command uses, so that a tool
// run never opens the store differently from serve (a different search
// setting would drop or rebuild the search index).
func pebbleOptions(cfg config.Config, log *slog.Logger) pebble.Options {
	return pebble.Options{
		Path:             cfg.Store.Path,
		NoSync:           cfg.Store.NoSync,
		CacheSize:        cfg.Store.CacheBytes,
		MinFreeBytes:     cfg.Store.MinFreeBytes,
		MemTableSize:     uint64(max(cfg.Store.MemTableBytes, 0)),
		WALSpares:        max(cfg.Store.WALSpares, 0),
		IDFilterMaxBytes: cfg.Store.IDFilterBytes,
		BodyCacheBytes:   cfg.Store.BodyCacheBytes,
		DisableSearch:    cfg.Store.DisableSearch,
		Logger:           log,
	}
}
