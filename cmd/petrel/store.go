package main

import (
	"fmt"
	"log/slog"

	"github.com/petrel-relay/petrel/internal/config"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

// openStore opens the configured store.
func openStore(cfg config.Config, log *slog.Logger) (store.Store, error) {
	switch cfg.Store.Backend {
	case "pebble":
		// TEMPORARY until the pebble store lands.
		return storetest.NewModel(), nil
	}
	return nil, fmt.Errorf("store backend %q: want pebble", cfg.Store.Backend)
}
