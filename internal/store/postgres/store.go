package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// Sentinel errors.
var (
	// ErrOptions is returned by Open for invalid Options.
	ErrOptions = errors.New("store/postgres: invalid options")
	// ErrSchema is returned by Open for a schema it cannot use: one
	// migrated by a newer build, or broken migrations.
	ErrSchema = errors.New("store/postgres: unusable schema")
	// ErrNoSchema is returned by Open with Options.NoCreate when the
	// schema holds no store.
	ErrNoSchema = errors.New("store/postgres: no store in the schema")
	// ErrWrite is the Err (wrapped with the cause) of the results of a
	// batch the writer could not commit.
	ErrWrite = errors.New("store/postgres: write failed")
)

// Store is the PostgreSQL event store. It implements store.Store,
// store.Searcher and store.Feed; all methods are safe for concurrent
// use. Several Stores (one per relay node) may share one database and
// schema: the database decides every rule (see the package doc).
type Store struct {
	opts Options
	pool *pgxpool.Pool
	log  *slog.Logger
	node string // this store's row in search_stats

	// mu guards the transition to closed: enqueues hold it for reading;
	// Close takes it for writing once closed is set and closing closed.
	mu      sync.RWMutex
	closed  atomic.Bool
	closing chan struct{}

	queue      chan *request
	writerDone chan struct{}
	bg         sync.WaitGroup // background loops

	// Figures for Stats.
	sizeBytes   atomic.Int64
	events      atomic.Int64 // refreshSize's count of stored events
	errs        atomic.Int64
	unavailable atomic.Bool
	commits     atomic.Int64 // write transactions committed
	retries     atomic.Int64 // write transactions tried again
	// inDoubtCommitted counts batches whose COMMIT failed on a lost
	// connection but which the database reported committed in time;
	// lateCommitted the events of those it reported committed only
	// after they were answered Failed (indoubt.go).
	inDoubtCommitted atomic.Int64
	lateCommitted    atomic.Int64
	late             inDoubtList
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Searcher = (*Store)(nil)
	_ store.Feed     = (*Store)(nil)
)

// Open connects to the database, creates or migrates the schema (under an
// advisory lock, so nodes starting together apply each migration once),
// and starts the writer. It fails when the database cannot be reached
// within ctx (or Options.ConnectTimeout when ctx has no deadline).
func Open(ctx context.Context, opts Options) (*Store, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg, err := parseURL(o.URL)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = o.MaxConns
	cfg.MinConns = 0
	cfg.ConnConfig.ConnectTimeout = o.ConnectTimeout
	rp := cfg.ConnConfig.RuntimeParams
	rp["search_path"] = pgx.Identifier{o.Schema}.Sanitize()
	// OK:true means durable: every commit waits for its WAL flush,
	// whatever the server's or role's default.
	rp["synchronous_commit"] = "on"
	// Plan every statement for its parameters: a generic plan cannot
	// tell a rare search term or tag from a common one, nor a recent
	// time range from an old one, and picks a plan that reads the
	// whole history for some of them.
	rp["plan_cache_mode"] = "force_custom_plan"
	if rp["application_name"] == "" {
		rp["application_name"] = "petrel"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store/postgres: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.ConnectTimeout+o.QueryTimeout)
		defer cancel()
	}
	applied, err := migrate(ctx, pool, o.Schema, o.NoCreate)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("store/postgres: open schema %q: %w", o.Schema, oneLine(err))
	}
	if applied > 0 {
		o.Logger.Info("store: migrated the PostgreSQL schema", "schema", o.Schema, "applied", applied, "version", SchemaVersion())
	}
	var nb [8]byte
	rand.Read(nb[:])
	s := &Store{
		opts:       o,
		pool:       pool,
		log:        o.Logger,
		node:       hex.EncodeToString(nb[:]),
		closing:    make(chan struct{}),
		queue:      make(chan *request, o.QueueLen),
		writerDone: make(chan struct{}),
	}
	s.late.wake = make(chan struct{}, 1)
	if err := s.foldSearchStats(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store/postgres: open: %w", err)
	}
	s.refreshSize(ctx)
	w := newWriter(s)
	go w.run()
	s.bg.Add(2)
	go s.maintain()
	go s.resolveLoop()
	return s, nil
}

// foldSearchStats moves the search_stats rows of other nodes into the
// 'base' row, so that the table holds one row per live node (a live
// node whose row is folded makes it again with its next update: the
// sum never changes).
func (s *Store) foldSearchStats(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, `WITH gone AS (DELETE FROM search_stats WHERE node <> 'base' RETURNING docs, total_len)
		INSERT INTO search_stats (node, docs, total_len)
		SELECT 'base', coalesce(sum(docs), 0), coalesce(sum(total_len), 0) FROM gone
		ON CONFLICT (node) DO UPDATE SET docs = search_stats.docs + excluded.docs,
			total_len = search_stats.total_len + excluded.total_len`)
	return err
}

// maintain runs the background work until the store closes: the purge
// of expired events and the refresh of Stats' size.
func (s *Store) maintain() {
	defer s.bg.Done()
	var purge <-chan time.Time
	if s.opts.PurgeInterval > 0 {
		t := time.NewTicker(s.opts.PurgeInterval)
		defer t.Stop()
		purge = t.C
	}
	size := time.NewTicker(s.opts.StatsInterval)
	defer size.Stop()
	for {
		select {
		case <-s.closing:
			return
		case <-size.C:
			s.refreshSize(context.Background())
		case <-purge:
			n, err := s.PurgeExpired(context.Background(), time.Now().Unix())
			switch {
			case errors.Is(err, store.ErrClosed):
				return
			case err != nil:
				s.log.Error("store: purging expired events", "err", err)
			case n > 0:
				s.log.Debug("store: purged expired events", "count", n)
			}
		}
	}
}

// sizeTables are the tables SizeBytes counts.
var sizeTables = []string{"events", "tags", "deleted_ids", "deleted_addrs", "vanished", "search_stats", "meta", "schema_version", "unverified_events"}

// refreshSize reads the size of the store's tables (with their indexes
// and TOAST) into sizeBytes.
func (s *Store) refreshSize(ctx context.Context) {
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	var n, est int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint,
			coalesce(max(c.reltuples) FILTER (WHERE c.relname = 'events'), -1)::bigint
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = ANY($2) AND c.relkind = 'r'`, s.opts.Schema, sizeTables).Scan(&n, &est)
	if s.note(err) != nil {
		return
	}
	s.sizeBytes.Store(n)
	// The planner's estimate (-1 before the table's first ANALYZE) is
	// good enough for a large table; a small one is counted exactly.
	if est < exactCountBelow {
		err = s.pool.QueryRow(ctx, `SELECT count(*) FROM events`).Scan(&est)
		if s.note(err) != nil {
			return
		}
	}
	s.events.Store(est)
}

// exactCountBelow is the number of events (estimated) under which
// refreshSize counts the events table exactly.
const exactCountBelow = 100_000

// connectError is pgx's ConnectError told on one line: pgx gives each
// address it dialled a line of its own, and with sslmode=prefer (the
// default) tries each twice, so "connection refused" came out as three
// lines, two of them the same. Errors.As still finds the ConnectError.
type connectError struct{ *pgconn.ConnectError }

func (e connectError) Error() string {
	var why []string
	var each interface{ Unwrap() []error }
	if errors.As(e.ConnectError.Unwrap(), &each) {
		for _, err := range each.Unwrap() {
			if s := err.Error(); !slices.Contains(why, s) {
				why = append(why, s)
			}
		}
	} else {
		why = append(why, e.ConnectError.Unwrap().Error())
	}
	return fmt.Sprintf("cannot connect as user=%s database=%s: %s",
		e.Config.User, e.Config.Database, strings.Join(why, "; "))
}

func (e connectError) Unwrap() error { return e.ConnectError }

// oneLine returns err told on one line when it is a pgx ConnectError
// (and says nothing more); any other error as it is.
func oneLine(err error) error {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) && err.Error() == ce.Error() {
		return connectError{ce}
	}
	return err
}

// readCtx bounds ctx by Options.QueryTimeout unless it ends earlier.
func (s *Store) readCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= s.opts.QueryTimeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.opts.QueryTimeout)
}

// note records the outcome of a database operation for Stats: a failure
// counts in Errors, and a failure to reach the database sets
// Unavailable until an operation succeeds. It returns err.
func (s *Store) note(err error) error {
	if err == nil {
		s.unavailable.Store(false)
		return nil
	}
	if errors.Is(err, context.Canceled) {
		return err // the caller gave up; says nothing about the database
	}
	s.errs.Add(1)
	if connectivity(err) {
		s.unavailable.Store(true)
	}
	return err
}

// connectivity reports whether err is a failure to reach or keep a
// connection to the database (as opposed to an error the server
// reported for a statement).
func connectivity(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case len(pe.Code) == 5 && pe.Code[:2] == "08": // connection exception
			return true
		case pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03": // shutdown, cannot connect now
			return true
		}
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded) ||
		pgconn.SafeToRetry(err) || errors.Is(err, pgx.ErrTxClosed) || isConnClosed(err)
}

func isConnClosed(err error) bool {
	var ce *pgconn.ConnectError
	return errors.As(err, &ce)
}

// enqueue hands a request to the writer. It blocks while the queue is
// full, until ctx ends or the store closes.
func (s *Store) enqueue(ctx context.Context, r *request) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return store.ErrClosed
	}
	select {
	case s.queue <- r:
		return nil
	default:
	}
	select {
	case s.queue <- r:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.closing:
		return store.ErrClosed
	}
}

// Save implements store.Store.
func (s *Store) Save(ctx context.Context, events []*nostr.Event) ([]store.SaveResult, error) {
	r := &request{events: events, done: make(chan struct{})}
	if err := s.enqueue(ctx, r); err != nil {
		return nil, err
	}
	// Handed to the writer: waited for whatever ctx does (store.Store),
	// as the writer answers every request it was handed, Close included.
	<-r.done
	return r.results, r.err
}

// Submit implements store.Store.
func (s *Store) Submit(ctx context.Context, ev *nostr.Event, done func(store.SaveResult)) error {
	return s.enqueue(ctx, &request{events: []*nostr.Event{ev}, callback: done})
}

// check returns ErrClosed after Close.
func (s *Store) check() error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return nil
}

// Has implements store.Store. It is one indexed lookup; the store does
// not implement store.Prechecker (see the package doc).
func (s *Store) Has(ctx context.Context, id nostr.ID) (bool, error) {
	if err := s.check(); err != nil {
		return false, err
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	var found bool
	err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM events WHERE id = $1)", id[:]).Scan(&found)
	if s.note(err) != nil {
		return false, fmt.Errorf("store/postgres: has: %w", err)
	}
	return found, nil
}

// Delete implements store.Store. It runs in its own transaction, beside
// the writer's (the database orders them).
func (s *Store) Delete(ctx context.Context, ids []nostr.ID) (int, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, nil
	}
	keys := make([][]byte, len(ids))
	for i := range ids {
		keys[i] = ids[i][:]
	}
	n, err := s.removeTx(ctx, removeByID, keys)
	if err != nil {
		return 0, fmt.Errorf("store/postgres: delete: %w", err)
	}
	return n, nil
}

// purgeChunk is the most expired events one purge transaction removes.
const purgeChunk = 2048

// PurgeExpired implements store.Store. It removes the expired events in
// transactions of at most purgeChunk events; rows another node is
// purging at the same time are skipped (SKIP LOCKED), so nodes do not
// wait for each other.
func (s *Store) PurgeExpired(ctx context.Context, now int64) (int, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	total := 0
	for {
		n, err := s.removeTx(ctx, removeExpired, now, purgeChunk)
		total += n
		if err != nil {
			return total, fmt.Errorf("store/postgres: purge: %w", err)
		}
		if n < purgeChunk {
			return total, nil
		}
		if err := s.check(); err != nil {
			return total, err
		}
	}
}

// removeTx runs one removal statement (removeByID or removeExpired) in
// its own transaction, with the search figures' update, retrying a
// deadlock or serialization failure. It returns how many events it
// removed.
func (s *Store) removeTx(ctx context.Context, sql string, args ...any) (int, error) {
	for attempt := 0; ; attempt++ {
		n, err := s.removeOnce(ctx, sql, args...)
		if s.note(err) == nil || attempt >= s.opts.WriteRetries || !retryable(err) || ctx.Err() != nil {
			return n, err
		}
		time.Sleep(backoff(attempt))
	}
}

func (s *Store) removeOnce(ctx context.Context, sql string, args ...any) (int, error) {
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return 0, err
	}
	var st statsDelta
	n := 0
	for rows.Next() {
		var id []byte
		var docLen *int32
		if err := rows.Scan(&id, &docLen); err != nil {
			rows.Close()
			return 0, err
		}
		n++
		if docLen != nil {
			st.docs--
			st.totalLen -= int64(*docLen)
		}
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if err := s.addStats(ctx, tx, st); err != nil {
		return 0, err
	}
	// Not cancelled once it commits: a cancellation landing during the
	// COMMIT would leave the count unknown (store.Store's Delete).
	return n, tx.Commit(context.WithoutCancel(ctx))
}

// statsDelta is a change to the search collection figures.
type statsDelta struct{ docs, totalLen int64 }

// addStats adds d to this node's search_stats row.
func (s *Store) addStats(ctx context.Context, tx pgx.Tx, d statsDelta) error {
	if d == (statsDelta{}) {
		return nil
	}
	_, err := tx.Exec(ctx, `INSERT INTO search_stats (node, docs, total_len) VALUES ($1, $2, $3)
		ON CONFLICT (node) DO UPDATE SET docs = search_stats.docs + excluded.docs,
			total_len = search_stats.total_len + excluded.total_len`, s.node, d.docs, d.totalLen)
	return err
}

// The removal statements: delete the events rows and their tags rows,
// and return each removed event's id and doc_len (for the search
// figures).
const (
	removeTail = `, t AS (
		DELETE FROM tags USING (SELECT d.id, d.created_at, k FROM d CROSS JOIN LATERAL unnest(d.tagkeys) AS k) x
		WHERE tags.tagkey = x.k AND tags.created_at = x.created_at AND tags.id = x.id)
	SELECT id, doc_len FROM d`
	removeByID = `WITH d AS (DELETE FROM events WHERE id = ANY($1::bytea[]) RETURNING id, created_at, tagkeys, doc_len)` + removeTail
	// removeExpired: $1 now, $2 the most to remove.
	removeExpired = `WITH v AS (
		SELECT id FROM events WHERE expiration IS NOT NULL AND expiration <= $1
		ORDER BY expiration LIMIT $2 FOR UPDATE SKIP LOCKED),
	d AS (DELETE FROM events e USING v WHERE e.id = v.id RETURNING e.id, e.created_at, e.tagkeys, e.doc_len)` + removeTail
)

// retryable reports whether a failed transaction may succeed if run
// again: a deadlock, a serialization failure, a unique violation (two
// nodes storing the same event at once), or a lost connection.
func retryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40P01", "40001", "23505":
			return true
		}
	}
	return connectivity(err)
}

// backoff is the pause before retry attempt+1.
func backoff(attempt int) time.Duration {
	return min(25*time.Millisecond<<attempt, time.Second)
}

// SupportsSearch implements store.Searcher: it reports whether this node
// answers NIP-50 search (Options.DisableSearch is false).
func (s *Store) SupportsSearch() bool { return !s.opts.DisableSearch }

var _ store.Availability = (*Store)(nil)

// Unavailable implements store.Availability: whether the last operation
// failed to reach the database (Stats().Unavailable).
func (s *Store) Unavailable() bool { return s.unavailable.Load() }

// Stats implements store.Store. SizeBytes is the size of the store's
// tables with their indexes, refreshed every Options.StatsInterval;
// Unavailable and Errors tell whether the database is reachable;
// Commits and Postgres count the writer's transactions and report the
// connection pool, as of the call.
func (s *Store) Stats() store.Stats {
	ps := s.pool.Stat()
	return store.Stats{
		Backend:     "postgres",
		SizeBytes:   s.sizeBytes.Load(),
		Events:      s.events.Load(),
		Unavailable: s.unavailable.Load(),
		Errors:      s.errs.Load(),
		Commits:     s.commits.Load(),
		Postgres: &store.Postgres{
			WriteRetries:           s.retries.Load(),
			InDoubtCommitted:       s.inDoubtCommitted.Load(),
			LateCommitted:          s.lateCommitted.Load(),
			PoolMaxConns:           int64(ps.MaxConns()),
			PoolConns:              int64(ps.TotalConns()),
			PoolAcquiredConns:      int64(ps.AcquiredConns()),
			PoolIdleConns:          int64(ps.IdleConns()),
			PoolAcquires:           ps.AcquireCount(),
			PoolAcquireWaits:       ps.EmptyAcquireCount(),
			PoolAcquireWaitSeconds: ps.EmptyAcquireWaitTime().Seconds(),
			PoolAcquiresCanceled:   ps.CanceledAcquireCount(),
			PoolConnsOpened:        ps.NewConnsCount(),
		},
	}
}

// Close implements store.Store: it stops accepting writes, lets the
// writer commit everything queued (each batch still bounded by
// Options.WriteTimeout and its retries), then closes the pool. Open
// iterators hold no connection; they end with ErrClosed.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return store.ErrClosed
	}
	close(s.closing)
	s.mu.Lock() // wait for in-flight enqueues
	s.mu.Unlock()
	close(s.queue)
	<-s.writerDone
	s.bg.Wait()
	s.pool.Close()
	return nil
}
