package main

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/petrel-relay/petrel/internal/config"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/pebble"
)

// openStore opens the configured store.
func openStore(cfg config.Config, log *slog.Logger) (store.Store, error) {
	switch cfg.Store.Backend {
	case "pebble":
		st, err := pebble.Open(pebbleOptions(cfg, log))
		if err != nil {
			return nil, openError(cfg.Store.Path, err)
		}
		return st, nil
	}
	return nil, fmt.Errorf("store backend %q: want pebble", cfg.Store.Backend)
}

// errStoreLocked is what every command (petrel serve and the maintenance
// commands) says when another process (a running petrel serve, or a
// maintenance command) holds the data directory.
var errStoreLocked = errors.New("the data directory is locked by another process (is petrel serve running?)")

// openError is the error of every command whose pebble.Open of the store
// at path failed: errStoreLocked for a directory another process holds,
// so that serve and the tools say the same thing.
func openError(path string, err error) error {
	if errors.Is(err, pebble.ErrLocked) {
		return fmt.Errorf("%s: %w", path, errStoreLocked)
	}
	return fmt.Errorf("open store %s: %w", path, err)
}

// pebbleOptions are the store options every command uses, so that a tool
// run never opens the store differently from serve (a different search
// setting would drop or rebuild the search index).
func pebbleOptions(cfg config.Config, log *slog.Logger) pebble.Options {
	return pebble.Options{
		Path:             cfg.Store.Path,
		NoSync:           cfg.Store.NoSync,
		CacheSize:        cfg.Store.CacheBytes,
		IDFilterMaxBytes: cfg.Store.IDFilterBytes,
		BodyCacheBytes:   cfg.Store.BodyCacheBytes,
		DisableSearch:    cfg.Store.DisableSearch,
		Logger:           log,
	}
}
