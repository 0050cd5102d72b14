package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/search"
)

// ExplainOp names the method whose statements Explain describes.
type ExplainOp uint8

const (
	// ExplainQuery: Query's statements, one per filter.
	ExplainQuery ExplainOp = iota
	// ExplainCount: Count's statement, one for all the filters.
	ExplainCount
	// ExplainScan: Scan's statement, one for all the filters.
	ExplainScan
)

// planNotes says, for each of plainSQL's plans and for search, how the
// statement reads the events.
var planNotes = map[string]string{
	"ids":           "point lookups by id (events_pkey)",
	"tags":          "one newest-first stream per tag value (tags_key), each stopping at the limit, then the newest of their union",
	"authors+kinds": "one newest-first stream per (author, kind) pair (events_pubkey_kind), each stopping at the limit, then the newest of their union",
	"authors":       "one newest-first stream per author (events_pubkey), each stopping at the limit, then the newest of their union",
	"kinds":         "one newest-first stream per kind (events_kind), each stopping at the limit, then the newest of their union",
	"created":       "the newest-first created_at stream (events_created), stopping at the limit",
	"search":        "the newest candidates holding every term (events_terms or events_created), ranked by BM25",
}

// Explain describes the statements op would run for filters, for
// operators (petrel scan --explain): for each statement, the plan this
// store's planner chose (for Query), the SQL, and PostgreSQL's EXPLAIN of
// it with the filters' values (the plan the server would pick now;
// nothing is run). Query has one statement per filter (a filter that
// matches nothing has none, and says so); Count and Scan have one for
// all the filters. Bounded by Options.QueryTimeout like a read.
func (s *Store) Explain(ctx context.Context, filters []nostr.Filter, op ExplainOp) ([]string, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	now := time.Now().Unix()
	switch op {
	case ExplainCount, ExplainScan:
		var sql string
		var a *args
		what := "count of the union of the filters' matches"
		if op == ExplainCount {
			sql, a = s.matchAll(filters)
			if sql != "" {
				sql = "SELECT count(*) FROM (" + sql + ") m"
			}
		} else {
			what = "every match of any filter, newest first, streamed"
			sql, a = s.scanSQL(filters, now)
		}
		if sql == "" {
			return []string{"matches nothing (empty lists, since > until, or no valid kind)"}, nil
		}
		plan, err := s.explainSQL(ctx, sql, a)
		if err != nil {
			return nil, err
		}
		return []string{what + "\n" + plan}, nil
	}
	out := make([]string, len(filters))
	for i := range filters {
		sp := s.newSpec(&filters[i], true)
		if sp == nil {
			out[i] = "matches nothing (empty list, since > until, no valid kind, a limit of 0, or a search this store cannot answer)"
			continue
		}
		var sql, plan string
		var a *args
		if sp.terms != nil {
			var stats search.Stats
			b := &pgx.Batch{}
			s.queueSearchStats(b, []*spec{sp}, &stats)
			if err := s.note(s.pool.SendBatch(ctx, b).Close()); err != nil {
				return nil, fmt.Errorf("store/postgres: explain: %w", err)
			}
			sql, a = s.searchSQL(sp, stats, now)
			plan = "search"
		} else {
			sql, a, plan = sp.plainSQL(now)
		}
		text, err := s.explainSQL(ctx, sql, a)
		if err != nil {
			return nil, err
		}
		out[i] = "plan " + plan + ": " + planNotes[plan] + "\n" + text
	}
	return out, nil
}

// explainSQL returns the statement and PostgreSQL's EXPLAIN of it, one
// indented line each.
func (s *Store) explainSQL(ctx context.Context, sql string, a *args) (string, error) {
	rows, err := s.pool.Query(ctx, "EXPLAIN "+sql, a.vals...)
	if s.note(err) != nil {
		return "", fmt.Errorf("store/postgres: explain: %w", err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if s.note(err) != nil {
		return "", fmt.Errorf("store/postgres: explain: %w", err)
	}
	var b strings.Builder
	b.WriteString("  SQL: ")
	b.WriteString(sql)
	for _, l := range lines {
		b.WriteString("\n  ")
		b.WriteString(l)
	}
	return b.String(), nil
}
