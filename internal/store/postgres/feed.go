package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// feedPage is how many events one read of CommittedSince's iterator
// fetches.
const feedPage = 1000

// CommittedSince implements store.Feed: the events whose accepted_at
// (the database server's clock when the writer inserted them, shortly
// before their commit) is at or after since, oldest first, each with its
// commit position (the writing transaction's xid). The iterator reads
// feedPage events at a time, each page in its own short statement
// (keyed by the last accepted_at and id read), so it holds no
// connection or transaction between calls and sees events committed
// while it runs. An event's accepted_at precedes its commit by at most
// the writer's transaction time (Options.WriteTimeout bounds it): ask
// from at least that long before the moment of the loss.
func (s *Store) CommittedSince(ctx context.Context, since time.Time) (store.Iterator, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	it := &feedIter{s: s, ctx: context.WithoutCancel(ctx), after: since, first: true}
	if err := it.fill(); err != nil {
		return nil, err
	}
	return it, nil
}

// feedIter implements store.Iterator for CommittedSince.
type feedIter struct {
	s      *Store
	ctx    context.Context
	after  time.Time // accepted_at of the last record read
	lastID []byte    // its id; with first, the page starts at after itself
	first  bool
	recs   []store.Record
	i      int
	done   bool // the last page was short
	err    error
	closed bool
}

// fill reads the next page.
func (it *feedIter) fill() error {
	ctx, cancel := it.s.readCtx(it.ctx)
	defer cancel()
	var rows pgx.Rows
	var err error
	const cols = "SELECT id, pubkey, created_at, kind, raw, seq, accepted_at FROM events"
	if it.first {
		rows, err = it.s.pool.Query(ctx, cols+" WHERE accepted_at >= $1 ORDER BY accepted_at, id LIMIT $2", it.after, feedPage)
	} else {
		rows, err = it.s.pool.Query(ctx, cols+" WHERE (accepted_at, id) > ($1, $2) ORDER BY accepted_at, id LIMIT $3", it.after, it.lastID, feedPage)
	}
	if it.s.note(err) != nil {
		return fmt.Errorf("store/postgres: committed since: %w", err)
	}
	it.recs, it.i = it.recs[:0], -1
	var id, pk, raw []byte
	var createdAt, seq int64
	var kind int32
	var at time.Time
	_, err = pgx.ForEachRow(rows, []any{&id, &pk, &createdAt, &kind, &raw, &seq, &at}, func() error {
		it.recs = append(it.recs, store.Record{ID: nostr.ID(id), PubKey: nostr.PubKey(pk), CreatedAt: createdAt,
			Kind: int(kind), Raw: raw, Seq: uint64(seq)})
		raw = nil
		it.after, it.lastID, it.first = at, append(it.lastID[:0], id...), false
		return nil
	})
	if it.s.note(err) != nil {
		return fmt.Errorf("store/postgres: committed since: %w", err)
	}
	it.done = len(it.recs) < feedPage
	return nil
}

// Next implements store.Iterator.
func (it *feedIter) Next() bool {
	if it.closed || it.err != nil {
		return false
	}
	if it.s.closed.Load() {
		it.err = store.ErrClosed
		return false
	}
	if it.i+1 >= len(it.recs) {
		if it.done {
			return false
		}
		if err := it.fill(); err != nil {
			it.err = err
			return false
		}
		if len(it.recs) == 0 {
			return false
		}
	}
	it.i++
	return true
}

// Record implements store.Iterator.
func (it *feedIter) Record() *store.Record { return &it.recs[it.i] }

// Err implements store.Iterator.
func (it *feedIter) Err() error { return it.err }

// Close implements store.Iterator.
func (it *feedIter) Close() error {
	it.closed = true
	it.recs = nil
	return nil
}

// Snapshot implements store.Iterator. CommittedSince reads in several
// statements and its records carry their own positions (Record.Seq):
// it has no single snapshot, and reports the zero Snapshot.
func (it *feedIter) Snapshot() store.Snapshot { return store.Snapshot{} }
