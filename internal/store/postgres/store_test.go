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
