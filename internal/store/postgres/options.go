package postgres

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// Options configures Open. The zero value of every field but URL means
// its default.
type Options struct {
	// URL is the PostgreSQL connection string (a postgres:// URL or a
	// key=value DSN, as pgx parses it). Required.
	URL string

	// Schema is the PostgreSQL schema that holds the store's tables; it
	// is created if missing. Several stores (tests, or separate relays)
	// can share one database with different schemas. Every node of one
	// cluster must use the same schema. Default "petrel". Letters,
	// digits and underscores only, starting with a letter or underscore.
	Schema string

	// NoCreate makes Open fail with ErrNoSchema, instead of creating the
	// schema and its tables, when the schema holds no store (tools that
	// read or change an existing store: a mistyped schema name must not
	// leave a new, empty store behind). Default false.
	NoCreate bool

	// MaxConns is the most connections the store's pool holds (the
	// writer uses one at a time, queries one each while they read).
	// Default 8.
	MaxConns int32

	// MaxBatch is the most events the writer puts in one transaction (a
	// single Save larger than this is still one transaction). Default
	// 512.
	MaxBatch int

	// MaxBatchBytes is the most event bytes the writer puts in one
	// transaction (same caveat). Default 8 MiB.
	MaxBatchBytes int

	// QueueLen is the writer's queue length in requests (one Submit is
	// one request, one Save is one request). Submit and Save block while
	// it is full. Default 4096.
	QueueLen int

	// PurgeInterval is how often this node purges expired events in the
	// background (every node may; they skip each other's rows). Default
	// 1 minute; negative disables the background purge (PurgeExpired
	// still works).
	PurgeInterval time.Duration

	// Logger receives the store's messages. Default slog.Default().
	Logger *slog.Logger

	// DisableSearch turns NIP-50 search off for this node: its writer
	// stores no search terms, filters with Search match nothing, and
	// SupportsSearch reports false. Every node of a cluster should use
	// the same setting: events written by a node with search off are
	// never found by a search on another node. Default false (search
	// on).
	DisableSearch bool

	// SearchCandidates bounds the work of one search filter: only the
	// newest this many events that contain every term (and pass the
	// filter's other conditions) are ranked, so a search for a very
	// common word ranks only its newest matches (like the pebble store's
	// SearchPostingsPerTerm). Default 20000.
	SearchCandidates int

	// ConnectTimeout bounds establishing one database connection.
	// Default 5 seconds.
	ConnectTimeout time.Duration

	// QueryTimeout bounds each read (Query, Count, Items, Has, a page of
	// CommittedSince) and each Delete or purge transaction, when the
	// caller's context has no earlier deadline. Default 30 seconds.
	QueryTimeout time.Duration

	// WriteTimeout bounds one attempt at committing one writer batch.
	// Default 10 seconds.
	WriteTimeout time.Duration

	// ResolveTimeout bounds how long the writer waits, after a COMMIT
	// that failed on a lost connection, for the database to say whether
	// the transaction committed (pg_xact_status): a database that comes
	// back within it gets the batch answered exactly (Stored, with the
	// transaction's position). Past it the batch is answered Failed with
	// store.ErrInDoubt, so that the writer (and every write after it) is
	// not held up, and the store keeps asking in the background; events
	// it then finds stored are passed to OnLateCommit. Default 5 seconds.
	ResolveTimeout time.Duration

	// OnLateCommit receives the events of an in-doubt batch (see
	// ResolveTimeout) that the database reports committed after all,
	// with their commit position, so the relay can still fan them out
	// (relay.Relay.Announce). Called from a background goroutine of the
	// store, one event at a time, in batch order. Nil: they are logged.
	OnLateCommit func(ev *nostr.Event, seq uint64)

	// WriteRetries is how many times the writer retries a batch whose
	// transaction failed for a reason that may pass (a deadlock or
	// serialization failure, a lost connection, a unique violation
	// from a concurrent node): the whole batch is applied again in a
	// new transaction. After the last retry every event of the batch is
	// Failed. Default 4; negative: no retries.
	WriteRetries int

	// StatsInterval is how often Stats' figures that need the database
	// (SizeBytes) are refreshed in the background. Default 30 seconds.
	StatsInterval time.Duration
}

// Defaults.
const (
	DefaultSchema           = "petrel"
	DefaultMaxConns         = 8
	DefaultMaxBatch         = 512
	DefaultMaxBatchBytes    = 8 << 20
	DefaultQueueLen         = 4096
	DefaultPurgeInterval    = time.Minute
	DefaultSearchCandidates = 20000
	DefaultConnectTimeout   = 5 * time.Second
	DefaultQueryTimeout     = 30 * time.Second
	DefaultWriteTimeout     = 10 * time.Second
	DefaultWriteRetries     = 4
	DefaultStatsInterval    = 30 * time.Second
)

// MaxSchemaName is the longest schema name the store accepts, in bytes
// (PostgreSQL's identifier limit, NAMEDATALEN-1).
const MaxSchemaName = 63

// ValidSchemaName reports whether name is a schema name the store
// accepts: 1 to MaxSchemaName ASCII letters, digits and underscores, not
// starting with a digit (so that it needs no quoting). Written out rather
// than as a package-level regexp: compiling `{0,62}` at start-up cost
// every petrel command about 725 allocations and 30 page faults
// (docs/BENCHMARKS.md, issue 15).
func ValidSchemaName(name string) bool {
	if len(name) == 0 || len(name) > MaxSchemaName {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// Check reports what Open would refuse in o without connecting (petrel
// serve --check): no URL, a URL pgx cannot parse, a schema name that is
// not a plain identifier.
func (o Options) Check() error {
	d, err := o.withDefaults()
	if err != nil {
		return err
	}
	_, err = parseURL(d.URL)
	return err
}

// parseURL parses Options.URL into the pool's configuration.
func parseURL(url string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("%w: URL: %v", ErrOptions, err)
	}
	return cfg, nil
}

func (o *Options) withDefaults() (Options, error) {
	r := *o
	if r.URL == "" {
		return r, fmt.Errorf("%w: Options.URL is empty", ErrOptions)
	}
	if r.Schema == "" {
		r.Schema = DefaultSchema
	}
	if !ValidSchemaName(r.Schema) {
		return r, fmt.Errorf("%w: schema name %q", ErrOptions, r.Schema)
	}
	if r.MaxConns <= 0 {
		r.MaxConns = DefaultMaxConns
	}
	if r.MaxBatch <= 0 {
		r.MaxBatch = DefaultMaxBatch
	}
	if r.MaxBatchBytes <= 0 {
		r.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if r.QueueLen <= 0 {
		r.QueueLen = DefaultQueueLen
	}
	if r.PurgeInterval == 0 {
		r.PurgeInterval = DefaultPurgeInterval
	}
	if r.Logger == nil {
		r.Logger = slog.Default()
	}
	if r.SearchCandidates <= 0 {
		r.SearchCandidates = DefaultSearchCandidates
	}
	if r.ConnectTimeout <= 0 {
		r.ConnectTimeout = DefaultConnectTimeout
	}
	if r.QueryTimeout <= 0 {
		r.QueryTimeout = DefaultQueryTimeout
	}
	if r.ResolveTimeout <= 0 {
		r.ResolveTimeout = 5 * time.Second
	}
	if r.WriteTimeout <= 0 {
		r.WriteTimeout = DefaultWriteTimeout
	}
	switch {
	case r.WriteRetries == 0:
		r.WriteRetries = DefaultWriteRetries
	case r.WriteRetries < 0:
		r.WriteRetries = 0
	}
	if r.StatsInterval <= 0 {
		r.StatsInterval = DefaultStatsInterval
	}
	return r, nil
}
