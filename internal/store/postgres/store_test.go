package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
	"github.com/petrel-relay/petrel/internal/store/storetest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testURL is the database the tests use: PETREL_TEST_POSTGRES_URL, or a
// local server with trust authentication.
func testURL() string {
	if u := os.Getenv("PETREL_TEST_POSTGRES_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// needDB fails the test when the database cannot be reached, unless
// PETREL_TEST_POSTGRES=skip (CI must run these tests: a missing server
// is a failure, not a skip).
func needDB(t testing.TB) {
	t.Helper()
	if os.Getenv("PETREL_TEST_POSTGRES") == "skip" {
		t.Skip("PETREL_TEST_POSTGRES=skip")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, testURL())
	if err != nil {
		t.Fatalf("PostgreSQL at %s unreachable (set PETREL_TEST_POSTGRES_URL, or PETREL_TEST_POSTGRES=skip to skip): %v", testURL(), err)
	}
	c.Close(ctx)
}

var schemaSeq atomic.Int64

// freshSchema returns the name of a schema no one uses, dropped (with
// everything in it) when the test ends.
func freshSchema(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("petrel_test_%d_%d", os.Getpid(), schemaSeq.Add(1))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, testURL())
		if err != nil {
			t.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+name+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// openTest opens a store in a fresh schema (unless opts names one).
func openTest(t testing.TB, opts Options) *Store {
	t.Helper()
	needDB(t)
	if opts.URL == "" {
		opts.URL = testURL()
	}
	if opts.Schema == "" {
		opts.Schema = freshSchema(t)
	}
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	s, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return openTest(t, Options{})
	})
}

// TestConformanceNoSearch runs the suite with search off (the search
// subtests then check that search filters match nothing).
func TestConformanceNoSearch(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return openTest(t, Options{DisableSearch: true})
	})
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// TestStatsEvents: Stats' event count follows the table (counted exactly
// while the table is small), refreshed every StatsInterval.
func TestStatsEvents(t *testing.T) {
	s := openTest(t, Options{StatsInterval: 20 * time.Millisecond})
	defer s.Close()
	if n := s.Stats().Events; n != 0 {
		t.Fatalf("Events = %d in a new store, want 0", n)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	var evs []*nostr.Event
	for i := 0; i < 25; i++ {
		evs = append(evs, storetest.NewEvent(rng, storetest.Key(i%4), 1, storetest.BaseTime+int64(i), nil, "n"))
	}
	if _, err := s.Save(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().Events != 25 {
		if time.Now().After(deadline) {
			t.Fatalf("Events = %d after 25 stored, want 25", s.Stats().Events)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStatsWriterAndPool: Stats counts the writer's transactions and
// reports the connection pool: its size, what is in use, and a query
// that had to wait for a connection (the pool full) counted with its
// wait.
func TestStatsWriterAndPool(t *testing.T) {
	// No periodic size refresh to take a connection meanwhile.
	s := openTest(t, Options{MaxConns: 3, StatsInterval: time.Hour})
	defer s.Close()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 7))
	before := s.Stats()
	if before.Postgres == nil {
		t.Fatal("no PostgreSQL figures")
	}
	if pg := before.Postgres; pg.PoolMaxConns != 3 || pg.WriteRetries != 0 || pg.InDoubtCommitted != 0 || pg.LateCommitted != 0 {
		t.Fatalf("a new store's figures: %+v", *pg)
	}
	if before.Background != nil {
		t.Fatalf("background figures for PostgreSQL: %+v", *before.Background)
	}
	const saves = 4
	for i := range saves {
		ev := storetest.NewEvent(rng, storetest.Key(1), 1, storetest.BaseTime+int64(i), nil, "counted")
		if res, err := s.Save(ctx, []*nostr.Event{ev}); err != nil || res[0].Outcome != store.Stored {
			t.Fatalf("Save: %+v, %v", res, err)
		}
	}
	st := s.Stats()
	if n := st.Commits - before.Commits; n != saves {
		t.Fatalf("%d commits for %d saves one after another", n, saves)
	}
	pg := st.Postgres
	if pg.PoolAcquires < before.Postgres.PoolAcquires+saves || pg.PoolConns < 1 || pg.PoolConnsOpened < 1 ||
		pg.PoolConns != pg.PoolAcquiredConns+pg.PoolIdleConns || pg.PoolConns > 3 {
		t.Fatalf("pool after %d saves: %+v", saves, *pg)
	}
	// One operation at a time never fills the pool: the only
	// acquisitions that waited are those that made a connection.
	if pg.PoolAcquireWaits != pg.PoolConnsOpened {
		t.Fatalf("%d acquisitions waited, %d connections made, the pool never full", pg.PoolAcquireWaits, pg.PoolConnsOpened)
	}

	// Hold every connection: a count whose deadline passes first gives
	// up (canceled); one that gets a connection given back has waited.
	var held []*pgxpool.Conn
	hold := func() {
		t.Helper()
		for range 3 {
			c, err := s.pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, c)
		}
	}
	release := func() {
		for _, c := range held {
			c.Release()
		}
		held = nil
	}
	defer release() // before Close, which waits for them
	hold()
	pg = s.Stats().Postgres
	if pg.PoolAcquiredConns != 3 || pg.PoolIdleConns != 0 {
		t.Fatalf("pool with every connection held: %+v", *pg)
	}
	waits, waited := pg.PoolAcquireWaits, pg.PoolAcquireWaitSeconds
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	if _, err := s.Count(tctx, []nostr.Filter{{}}); err == nil {
		t.Fatal("a count ran with every connection held")
	}
	cancel()
	if pg := s.Stats().Postgres; pg.PoolAcquiresCanceled != 1 || pg.PoolAcquireWaits != waits {
		t.Fatalf("pool after a count gave up: %+v", *pg)
	}
	// Nothing says when the count has begun to wait: give it longer each
	// round until it has (it then waits however long it is given).
	for wait := 20 * time.Millisecond; ; wait *= 2 {
		done := make(chan error, 1)
		go func() {
			_, err := s.Count(ctx, []nostr.Filter{{}})
			done <- err
		}()
		select {
		case err := <-done:
			t.Fatalf("a count ran with every connection held: %v", err)
		case <-time.After(wait):
		}
		held[0].Release()
		held = held[1:]
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		release()
		if s.Stats().Postgres.PoolAcquireWaits > waits || wait > 5*time.Second {
			break
		}
		hold()
	}
	pg = s.Stats().Postgres
	if pg.PoolAcquireWaits != waits+1 || pg.PoolAcquireWaitSeconds <= waited || pg.PoolAcquiresCanceled != 1 {
		t.Fatalf("pool after one count waited: %+v", *pg)
	}
}
