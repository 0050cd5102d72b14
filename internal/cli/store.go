package cli

// req and count with --store: read a local petrel store. While petrel
// serve holds the store, the query goes through its control socket
// (control.go); otherwise the command opens the store itself, read-only,
// through LocalStore.

import (
	"context"
	"errors"
	"os"

	"github.com/spf13/cobra"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// StoreReader reads the petrel store in a data directory that no running
// relay serves, opening it read-only for the call; config is the config
// file petrel serve uses ("" for none).
type StoreReader interface {
	// Query calls each with the raw JSON of every event matching
	// filters, newest first (a search filter: by relevance).
	Query(ctx context.Context, dir, config string, filters []nostr.Filter, each func(raw []byte) error) error
	Count(ctx context.Context, dir, config string, filters []nostr.Filter) (int64, error)
}

// LocalStore is the reader of stores no relay serves. cmd/petrel sets it
// (it links the store engine); it is nil while package early runs a
// client command ahead of the relay's packages, which it does for
// --store only when a running relay serves the store.
var LocalStore StoreReader

// errNoLocalStore is what a --store run gets when it must open the store
// and the store engine is not initialised: the relay that answered when
// package early looked stopped before the query.
var errNoLocalStore = errors.New("the relay serving this store stopped during the command: run it again")

// storeFlags are --store and --config of req and count.
type storeFlags struct {
	dir    string
	config string
}

func (s *storeFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&s.dir, "store", "", "read the petrel store in this data directory instead of relays")
	cmd.Flags().StringVar(&s.config, "config", os.Getenv("PETREL_CONFIG"), "with --store: the config file petrel serve uses (env PETREL_CONFIG)")
}

// query writes the events of filters in the store to sink.
func (s *storeFlags) query(ctx context.Context, filters []nostr.Filter, sink *eventSink) error {
	putRaw := func(raw []byte) error { return sink.putStored(raw, s.dir) }
	if served, err := AskControlQuery(ctx, s.dir, filters, QueryRequest{}, putRaw); served {
		return err
	}
	if LocalStore == nil {
		return errNoLocalStore
	}
	return LocalStore.Query(ctx, s.dir, s.config, filters, putRaw)
}

// count counts the events of filters in the store.
func (s *storeFlags) count(ctx context.Context, filters []nostr.Filter) (int64, error) {
	if n, served, err := AskControlCount(ctx, s.dir, filters); served {
		return n, err
	}
	if LocalStore == nil {
		return 0, errNoLocalStore
	}
	return LocalStore.Count(ctx, s.dir, s.config, filters)
}
