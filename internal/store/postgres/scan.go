package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

// Scan calls fn for every stored event matching any of filters, newest
// first (created_at descending, then id ascending, as Query orders),
// each event once. Limits are ignored, as Count ignores them, and so is
// search ranking: a filter with Search matches every event holding all
// its terms, in the same order. Unlike Query, which reads its results
// into memory before it returns, Scan runs one statement and streams its
// rows, so memory does not grow with the number of matches: it is how a
// tool reads a whole store (petrel export, petrel migrate). The
// statement sees one snapshot of the store.
//
// Scan holds one connection, and the statement's snapshot (and so
// PostgreSQL's vacuum horizon), until it returns; it is bounded by ctx
// only, not by Options.QueryTimeout. fn may call the store's other
// methods (they use other connections). The record, its Raw included, is
// valid during the call only. An error from fn ends the scan and is
// returned.
func (s *Store) Scan(ctx context.Context, filters []nostr.Filter, fn func(*store.Record) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.check(); err != nil {
		return err
	}
	sql, a := s.scanSQL(filters, time.Now().Unix())
	if sql == "" {
		return nil
	}
	rows, err := s.pool.Query(ctx, sql, a.vals...)
	if s.note(err) != nil {
		return fmt.Errorf("store/postgres: scan: %w", err)
	}
	var rec store.Record
	var id, pk []byte
	var kind int32
	var fnErr error
	_, err = pgx.ForEachRow(rows, []any{&id, &pk, &rec.CreatedAt, &kind, &rec.Raw}, func() error {
		rec.ID, rec.PubKey, rec.Kind = nostr.ID(id), nostr.PubKey(pk), int(kind)
		fnErr = fn(&rec)
		return fnErr
	})
	if fnErr != nil {
		return fnErr
	}
	if err != nil {
		if ctx.Err() == nil {
			s.note(err)
		}
		return fmt.Errorf("store/postgres: scan: %w", err)
	}
	s.note(nil)
	return nil
}

// scanSQL returns Scan's statement: the records matching any filter,
// newest first; "" when no filter can match. With one filter the
// conditions let PostgreSQL walk the index that orders them (the
// created_at index for {}, an author's stream for one author) and stream
// without sorting.
func (s *Store) scanSQL(filters []nostr.Filter, now int64) (string, *args) {
	a := &args{}
	var ors []string
	for i := range filters {
		sp := s.newSpec(&filters[i], false)
		if sp == nil {
			continue
		}
		c := sp.conds("e", a, skip{tag: -1}, now)
		ors = append(ors, "("+strings.Join(c, " AND ")+")")
	}
	if len(ors) == 0 {
		return "", nil
	}
	return "SELECT " + recordCols + " FROM events e WHERE " + strings.Join(ors, " OR ") + orderNewest("e"), a
}
