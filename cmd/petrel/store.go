package main

import (
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
		st, err := pebble.Open(pebble.Options{
			Path:      cfg.Store.Path,
			NoSync:    cfg.Store.NoSync,
			CacheSize: cfg.Store.CacheBytes,
			Logger:    log,
		})
		if err != nil {
			return nil, fmt.Errorf("open store %s: %w", cfg.Store.Path, err)
		}
		return st, nil
	}
	return nil, fmt.Errorf("store backend %q: want pebble", cfg.Store.Backend)
}
