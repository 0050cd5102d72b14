package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// Events held unverified (store.Unverified) are rows of unverified_events
// (id, sig, raw, held_at), a table no query, count, feed or scan reads.
// Holding, releasing and rejecting go through the writer, in its
// transactions: a hold is a row inserted (unless the id is stored), a
// rejection deletes its (id, sig) row, and a release saves the event as
// any Submit does and deletes its row in the same transaction.
// Each is idempotent, so the writer may retry its transaction as a whole.

var _ store.Unverified = (*Store)(nil)

// heldOp says what a request does with held events.
type heldOp uint8

const (
	heldNone    heldOp = iota // Save or Submit
	heldHold                  // SubmitUnverified
	heldRelease               // SubmitVerified
	heldReject                // SubmitRejected
)

// heldItem is one event of a batch to hold.
type heldItem struct {
	ev  *nostr.Event
	res *store.SaveResult
}

// holdSQL holds the events whose ids are not stored and returns the ids
// that are (Duplicate), in one statement, so one snapshot decides both.
// A row that is held already stays as it is (the hold is idempotent).
const holdSQL = `WITH u AS (SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::bytea[]) AS u(id, sig, raw)),
	dup AS (SELECT DISTINCT u.id FROM u JOIN events e ON e.id = u.id),
	ins AS (INSERT INTO unverified_events (id, sig, raw)
		SELECT u.id, u.sig, u.raw FROM u WHERE u.id NOT IN (SELECT id FROM dup)
		ON CONFLICT DO NOTHING)
	SELECT id FROM dup`

// writeHeld applies the batch's holds, rejections and the removal of
// released events' held copies in tx, in one round trip, and sets the
// holds' results.
func (w *writer) writeHeld(ctx context.Context, tx pgx.Tx, b *batch) error {
	if len(b.holds) == 0 && len(b.rejects) == 0 && len(b.released) == 0 {
		return nil
	}
	q := &pgx.Batch{}
	dups := map[nostr.ID]bool{}
	if len(b.holds) > 0 {
		ids, sigs, raws := make([][]byte, len(b.holds)), make([][]byte, len(b.holds)), make([][]byte, len(b.holds))
		for i, h := range b.holds {
			ids[i], sigs[i] = h.ev.ID[:], h.ev.Sig[:]
			raws[i] = h.ev.Raw
			if len(raws[i]) == 0 {
				raws[i] = nostr.Serialize(h.ev)
			}
		}
		q.Queue(holdSQL, ids, sigs, raws).Query(func(rows pgx.Rows) error {
			var id []byte
			_, err := pgx.ForEachRow(rows, []any{&id}, func() error {
				dups[nostr.ID(id)] = true
				return nil
			})
			return err
		})
	}
	if len(b.rejects) > 0 {
		ids, sigs := make([][]byte, len(b.rejects)), make([][]byte, len(b.rejects))
		for i, ev := range b.rejects {
			ids[i], sigs[i] = ev.ID[:], ev.Sig[:]
		}
		q.Queue(`DELETE FROM unverified_events WHERE (id, sig) IN (SELECT * FROM unnest($1::bytea[], $2::bytea[]))`, ids, sigs)
	}
	if len(b.released) > 0 {
		ids, sigs := make([][]byte, len(b.released)), make([][]byte, len(b.released))
		for i, ev := range b.released {
			ids[i], sigs[i] = ev.ID[:], ev.Sig[:]
		}
		q.Queue(`DELETE FROM unverified_events WHERE (id, sig) IN (SELECT * FROM unnest($1::bytea[], $2::bytea[]))`, ids, sigs)
	}
	if len(b.holds) == 0 && len(b.items) == len(b.released) {
		// Only releases and rejections: no need to wait for the WAL flush
		// (store.Unverified), a crash leaves the held rows to check again.
		q.Queue(`SET LOCAL synchronous_commit TO off`)
	}
	if err := tx.SendBatch(ctx, q).Close(); err != nil {
		return err
	}
	for _, h := range b.holds {
		if dups[h.ev.ID] {
			*h.res = store.SaveResult{Outcome: store.Duplicate}
		} else {
			*h.res = store.SaveResult{Outcome: store.Held}
		}
	}
	return nil
}

// SubmitUnverified implements store.Unverified.
func (s *Store) SubmitUnverified(ctx context.Context, ev *nostr.Event, done func(store.SaveResult)) error {
	return s.enqueue(ctx, &request{op: heldHold, events: []*nostr.Event{ev}, callback: done})
}

// SubmitVerified implements store.Unverified.
func (s *Store) SubmitVerified(ctx context.Context, ev *nostr.Event, done func(store.SaveResult)) error {
	return s.enqueue(ctx, &request{op: heldRelease, events: []*nostr.Event{ev}, callback: done})
}

// SubmitRejected implements store.Unverified.
func (s *Store) SubmitRejected(ctx context.Context, ev *nostr.Event, done func(error)) error {
	return s.enqueue(ctx, &request{op: heldReject, events: []*nostr.Event{ev}, rejected: done})
}

// Unverified implements store.Unverified: every held row, oldest hold
// first, including those other nodes sharing the database hold (a node
// that verifies another's held event releases or rejects it exactly as
// that node would; both doing it is harmless).
func (s *Store) Unverified(ctx context.Context, fn func(ev *nostr.Event) error) error {
	if err := s.check(); err != nil {
		return err
	}
	rows, err := s.pool.Query(ctx, `SELECT raw FROM unverified_events ORDER BY held_at, id, sig`)
	if err != nil {
		return s.note(err)
	}
	defer rows.Close()
	for rows.Next() {
		raw := rows.RawValues()[0]
		ev, err := nostr.ParseEvent(raw, nil) // copies
		if err != nil {
			return fmt.Errorf("store/postgres: held event: %w", err)
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
	return s.note(rows.Err())
}
