package postgres

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/search"
	"github.com/petrel-relay/petrel/internal/store"
)

// The planner: each filter becomes one SQL statement shaped so that
// PostgreSQL reads about as many index entries as the filter's limit,
// whatever the store's size (docs/storage.md, "PostgreSQL backend",
// shows each shape's EXPLAIN). Like the pebble planner it drives each
// filter by its most selective index: ids, then a tag (fewest values,
// then ids and addresses before pubkeys before the rest; after authors
// unless it is an id or address tag), then authors (with kinds: one
// stream per (author, kind) pair up to maxPairs), then kinds, then
// created_at. A filter driven by a list (tag values, authors, pairs,
// kinds) reads the newest limit matches of each list entry through a
// LATERAL subquery that stops at the limit (an index scan in
// created_at order with every other condition applied), then keeps the
// newest limit of their union: the work is the list's length times the
// limit at most, never the history behind it.

// maxPairs is the most (author, kind) streams a filter gets; above it
// the planner streams per author and checks the kind.
const maxPairs = 4096

// spec is one filter, normalized: lists deduplicated, impossible values
// dropped, and its time range clamped.
type spec struct {
	f        *nostr.Filter
	ids      [][]byte
	authors  [][]byte
	kinds    []int32
	hasKinds bool
	tags     []tagCond
	since    int64
	until    int64
	limit    int // -1: none
	terms    [][]byte
	df       []int64 // document frequency of each term (multi-term searches)
}

// tagCond is one tag condition: the keys of its values.
type tagCond struct {
	name byte
	keys [][]byte
}

// newSpec normalizes f; it returns nil when f matches nothing (empty, a
// limit of 0 or less with forQuery, an empty time range, no valid kind,
// or a search without terms or without search support).
func (s *Store) newSpec(f *nostr.Filter, forQuery bool) *spec {
	if f.Empty() || (forQuery && f.HasLimit && f.Limit <= 0) {
		return nil
	}
	sp := &spec{f: f, since: 0, until: nostr.MaxTimestamp, limit: -1}
	if f.HasSince && f.Since > sp.since {
		sp.since = f.Since
	}
	if f.HasUntil && f.Until < sp.until {
		sp.until = f.Until
	}
	if sp.since > sp.until {
		return nil
	}
	if forQuery && f.HasLimit {
		sp.limit = f.Limit
	}
	if f.HasIDs() {
		sp.ids = distinct32(f.IDs)
	}
	if f.HasAuthors() {
		sp.authors = distinct32(f.Authors)
	}
	if f.HasKinds() {
		sp.hasKinds = true
		for _, k := range f.Kinds {
			if 0 <= k && k <= nostr.MaxKind && !slices.Contains(sp.kinds, int32(k)) {
				sp.kinds = append(sp.kinds, int32(k))
			}
		}
		if len(sp.kinds) == 0 {
			return nil
		}
		slices.Sort(sp.kinds)
	}
	for _, tf := range f.Tags {
		tc := tagCond{name: tf.Name}
		for _, v := range tf.Values {
			k := tagKey(tf.Name, v)
			if !slices.ContainsFunc(tc.keys, func(b []byte) bool { return bytes.Equal(b, k) }) {
				tc.keys = append(tc.keys, k)
			}
		}
		sp.tags = append(sp.tags, tc)
	}
	if f.Search != "" {
		if s.opts.DisableSearch {
			return nil
		}
		q := search.ParseQuery(f.Search)
		if len(q.Terms) == 0 {
			return nil
		}
		for _, t := range q.Terms {
			sp.terms = append(sp.terms, []byte(t))
		}
	}
	return sp
}

func distinct32[K ~[32]byte](list []K) [][]byte {
	out := make([][]byte, 0, len(list))
	for i := range list {
		b := list[i][:]
		if !slices.ContainsFunc(out, func(x []byte) bool { return bytes.Equal(x, b) }) {
			out = append(out, b)
		}
	}
	return out
}

// tagRank orders tag names by how selective their values tend to be:
// ids and addresses first, then pubkeys, then the rest (as pebble's).
func tagRank(name byte) int {
	switch name {
	case 'e', 'a', 'd', 'E', 'A', 'q':
		return 0
	case 'p', 'P':
		return 1
	}
	return 2
}

// bestTag returns the index of the tag condition to drive by, or -1.
func (sp *spec) bestTag() int {
	if len(sp.tags) == 0 {
		return -1
	}
	best := 0
	for i := 1; i < len(sp.tags); i++ {
		a, b := &sp.tags[i], &sp.tags[best]
		if len(a.keys) < len(b.keys) || (len(a.keys) == len(b.keys) && tagRank(a.name) < tagRank(b.name)) {
			best = i
		}
	}
	if sp.authors != nil && tagRank(sp.tags[best].name) != 0 {
		return -1 // authors are the better index
	}
	return best
}

// args collects a statement's parameters.
type args struct{ vals []any }

func (a *args) add(v any) string {
	a.vals = append(a.vals, v)
	return "$" + strconv.Itoa(len(a.vals))
}

// skip names conditions a plan expresses through its driving index.
type skip struct {
	authors, kinds, time bool
	tag                  int // index of the driving tag; -1 for none
}

// conds returns the filter's conditions on the events alias al, minus
// those in sk, plus "not expired at now" (now < 0: no expiry check).
func (sp *spec) conds(al string, a *args, sk skip, now int64) []string {
	var c []string
	if sp.ids != nil {
		c = append(c, al+".id = ANY("+a.add(sp.ids)+"::bytea[])")
	}
	if sp.authors != nil && !sk.authors {
		c = append(c, al+".pubkey = ANY("+a.add(sp.authors)+"::bytea[])")
	}
	if sp.hasKinds && !sk.kinds {
		c = append(c, al+".kind = ANY("+a.add(sp.kinds)+"::int4[])")
	}
	if !sk.time {
		if sp.since > 0 {
			c = append(c, al+".created_at >= "+a.add(sp.since))
		}
		if sp.until < nostr.MaxTimestamp {
			c = append(c, al+".created_at <= "+a.add(sp.until))
		}
	}
	for i := range sp.tags {
		if i != sk.tag {
			c = append(c, al+".tagkeys && "+a.add(sp.tags[i].keys)+"::bytea[]")
		}
	}
	if sp.terms != nil {
		c = append(c, al+".terms @> "+a.add(sp.terms)+"::bytea[]")
	}
	if now >= 0 {
		c = append(c, "("+al+".expiration IS NULL OR "+al+".expiration > "+a.add(now)+")")
	}
	return c
}

func where(c []string) string {
	if len(c) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(c, " AND ")
}

func and(c []string) string {
	if len(c) == 0 {
		return ""
	}
	return " AND " + strings.Join(c, " AND ")
}

// recordCols are the columns of a Query result.
const recordCols = "e.id, e.pubkey, e.created_at, e.kind, e.raw"

// newest is the order of Query results.
const newest = " ORDER BY %[1]s.created_at DESC, %[1]s.id"

func orderNewest(al string) string { return fmt.Sprintf(newest, al) }

func limitSQL(sp *spec, a *args) string {
	if sp.limit < 0 {
		return ""
	}
	return " LIMIT " + a.add(int64(sp.limit))
}

// plainSQL returns the statement of a filter without Search: its
// records, newest first, at most its limit. The plan names the driving
// index (for tests and docs/storage.md).
func (sp *spec) plainSQL(now int64) (sql string, a *args, plan string) {
	a = &args{}
	tag := -1
	if sp.ids == nil {
		tag = sp.bestTag()
	}
	switch {
	case sp.ids != nil:
		return "SELECT " + recordCols + " FROM events e" + where(sp.conds("e", a, skip{tag: -1}, now)) +
			orderNewest("e") + limitSQL(sp, a), a, "ids"
	case tag >= 0:
		tc := &sp.tags[tag]
		keys := a.add(tc.keys)
		var tc2 []string
		if sp.since > 0 {
			tc2 = append(tc2, "t.created_at >= "+a.add(sp.since))
		}
		if sp.until < nostr.MaxTimestamp {
			tc2 = append(tc2, "t.created_at <= "+a.add(sp.until))
		}
		if sp.hasKinds {
			tc2 = append(tc2, "t.kind = ANY("+a.add(sp.kinds)+"::int4[])")
		}
		inner := "SELECT t.created_at, t.id FROM tags t JOIN events e2 ON e2.id = t.id WHERE t.tagkey = v.k" +
			and(tc2) + and(sp.conds("e2", a, skip{kinds: true, time: true, tag: tag}, now)) +
			orderNewest("t") + limitSQL(sp, a)
		top := "SELECT DISTINCT x.created_at, x.id FROM unnest(" + keys + "::bytea[]) AS v(k) CROSS JOIN LATERAL (" + inner + ") x" +
			orderNewest("x") + limitSQL(sp, a)
		return wrapTop(top), a, "tags"
	case sp.authors != nil:
		if sp.hasKinds && len(sp.authors)*len(sp.kinds) <= maxPairs {
			var pks [][]byte
			var kinds []int32
			for _, pk := range sp.authors {
				for _, k := range sp.kinds {
					pks, kinds = append(pks, pk), append(kinds, k)
				}
			}
			src := "unnest(" + a.add(pks) + "::bytea[], " + a.add(kinds) + "::int4[]) AS v(pk, k)"
			inner := "SELECT e2.created_at, e2.id FROM events e2 WHERE e2.pubkey = v.pk AND e2.kind = v.k" +
				and(sp.conds("e2", a, skip{authors: true, kinds: true, tag: -1}, now)) + orderNewest("e2") + limitSQL(sp, a)
			return wrapTop(lateral(src, inner, sp, a)), a, "authors+kinds"
		}
		src := "unnest(" + a.add(sp.authors) + "::bytea[]) AS v(pk)"
		inner := "SELECT e2.created_at, e2.id FROM events e2 WHERE e2.pubkey = v.pk" +
			and(sp.conds("e2", a, skip{authors: true, tag: -1}, now)) + orderNewest("e2") + limitSQL(sp, a)
		return wrapTop(lateral(src, inner, sp, a)), a, "authors"
	case sp.hasKinds:
		src := "unnest(" + a.add(sp.kinds) + "::int4[]) AS v(k)"
		inner := "SELECT e2.created_at, e2.id FROM events e2 WHERE e2.kind = v.k" +
			and(sp.conds("e2", a, skip{kinds: true, tag: -1}, now)) + orderNewest("e2") + limitSQL(sp, a)
		return wrapTop(lateral(src, inner, sp, a)), a, "kinds"
	}
	return "SELECT " + recordCols + " FROM events e" + where(sp.conds("e", a, skip{tag: -1}, now)) +
		orderNewest("e") + limitSQL(sp, a), a, "created"
}

// lateral is the union of the inner query's newest rows for each row
// of src, newest first, at most the limit.
func lateral(src, inner string, sp *spec, a *args) string {
	return "SELECT x.created_at, x.id FROM " + src + " CROSS JOIN LATERAL (" + inner + ") x" + orderNewest("x") + limitSQL(sp, a)
}

// wrapTop reads the records of the (created_at, id) rows of top.
func wrapTop(top string) string {
	return "SELECT " + recordCols + " FROM (" + top + ") top JOIN events e ON e.id = top.id" + orderNewest("top")
}

// matchSQL returns a statement selecting (created_at, id) of every
// event the filter matches, ignoring its limit (Count and Items).
func (sp *spec) matchSQL(a *args, now int64) string {
	tag := -1
	if sp.ids == nil && sp.terms == nil {
		tag = sp.bestTag()
	}
	c := sp.conds("e", a, skip{tag: tag}, now)
	if tag >= 0 {
		c = append(c, "e.id IN (SELECT t.id FROM tags t WHERE t.tagkey = ANY("+a.add(sp.tags[tag].keys)+"::bytea[]))")
	}
	return "SELECT e.created_at, e.id FROM events e" + where(c)
}

// snapshot is the parsed text of pg_current_snapshot(): xmin:xmax:xip,...
func parseSnapshot(s string) (store.Snapshot, error) {
	parts := strings.SplitN(s, ":", 3)
	if len(parts) != 3 {
		return store.Snapshot{}, fmt.Errorf("store/postgres: snapshot %q", s)
	}
	lo, err1 := strconv.ParseUint(parts[0], 10, 64)
	hi, err2 := strconv.ParseUint(parts[1], 10, 64)
	if err1 != nil || err2 != nil {
		return store.Snapshot{}, fmt.Errorf("store/postgres: snapshot %q", s)
	}
	snap := store.Snapshot{Low: lo, High: hi}
	if parts[2] != "" {
		for _, x := range strings.Split(parts[2], ",") {
			v, err := strconv.ParseUint(x, 10, 64)
			if err != nil {
				return store.Snapshot{}, fmt.Errorf("store/postgres: snapshot %q", s)
			}
			snap.Open = append(snap.Open, v)
		}
		slices.Sort(snap.Open)
	}
	return snap, nil
}

// readTx runs fn on a connection inside a REPEATABLE READ READ ONLY
// transaction whose first statement reads the snapshot, and commits.
// fn queues its statements on the batch it is given (already holding
// BEGIN and the snapshot); they are sent in one round trip with the
// COMMIT. more, when non-nil, runs after that batch and may run more
// statements in the same transaction before it commits.
func (s *Store) readTx(ctx context.Context, first func(*pgx.Batch) error, more func(context.Context, *pgxpool.Conn) error) (store.Snapshot, error) {
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return store.Snapshot{}, s.note(err)
	}
	defer func() {
		if c.Conn().PgConn().TxStatus() != 'I' {
			rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
			if _, err := c.Exec(rctx, "ROLLBACK"); err != nil {
				c.Conn().Close(rctx)
			}
			rcancel()
		}
		c.Release()
	}()
	var snapText string
	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
	b.Queue("SELECT pg_current_snapshot()::text").QueryRow(func(r pgx.Row) error { return r.Scan(&snapText) })
	if err := first(b); err != nil {
		return store.Snapshot{}, err
	}
	if more == nil {
		b.Queue("COMMIT")
	}
	if err := c.SendBatch(ctx, b).Close(); err != nil {
		return store.Snapshot{}, s.note(err)
	}
	if more != nil {
		if err := more(ctx, c); err != nil {
			return store.Snapshot{}, s.note(err)
		}
		if _, err := c.Exec(ctx, "COMMIT"); err != nil {
			return store.Snapshot{}, s.note(err)
		}
	}
	s.note(nil)
	return parseSnapshot(snapText)
}

// scanRecords reads Query result rows into recs.
func scanRecords(rows pgx.Rows, recs *[]store.Record) error {
	var id, pk, raw []byte
	var createdAt int64
	var kind int32
	_, err := pgx.ForEachRow(rows, []any{&id, &pk, &createdAt, &kind, &raw}, func() error {
		*recs = append(*recs, store.Record{ID: nostr.ID(id), PubKey: nostr.PubKey(pk), CreatedAt: createdAt, Kind: int(kind), Raw: raw})
		raw = nil // a fresh slice for the next row
		return nil
	})
	return err
}

// Query implements store.Store. The whole query runs in one REPEATABLE
// READ READ ONLY transaction, whose snapshot is the iterator's Snapshot;
// its results are read into memory and the transaction ends before Query
// returns, so a parked iterator holds no connection, transaction or
// lock. Memory: the records of every filter up to its limit (the relay
// clamps limits; a filter without a limit reads all its matches).
func (s *Store) Query(ctx context.Context, filters []nostr.Filter) (store.Iterator, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	now := time.Now().Unix()
	var plain, searches []*spec
	for i := range filters {
		if sp := s.newSpec(&filters[i], true); sp != nil {
			if sp.terms != nil {
				searches = append(searches, sp)
			} else {
				plain = append(plain, sp)
			}
		}
	}
	it := &iterator{s: s, i: -1}
	if len(plain) == 0 && len(searches) == 0 {
		return it, nil // reads nothing: the zero Snapshot
	}
	plainRecs := make([][]store.Record, len(plain))
	searchRecs := make([][]store.Record, len(searches))
	queuePlain := func(b *pgx.Batch) error {
		for i, sp := range plain {
			sql, a, _ := sp.plainSQL(now)
			b.Queue(sql, a.vals...).Query(func(rows pgx.Rows) error { return scanRecords(rows, &plainRecs[i]) })
		}
		return nil
	}
	var more func(context.Context, *pgxpool.Conn) error
	first := queuePlain
	var stats search.Stats
	if len(searches) > 0 {
		first = func(b *pgx.Batch) error {
			s.queueSearchStats(b, searches, &stats)
			return nil
		}
		more = func(ctx context.Context, c *pgxpool.Conn) error {
			b := &pgx.Batch{}
			queuePlain(b)
			for i, sp := range searches {
				sql, a := s.searchSQL(sp, stats, now)
				b.Queue(sql, a.vals...).Query(func(rows pgx.Rows) error { return scanRecords(rows, &searchRecs[i]) })
			}
			return c.SendBatch(ctx, b).Close()
		}
	}
	snap, err := s.readTx(ctx, first, more)
	if err != nil {
		return nil, fmt.Errorf("store/postgres: query: %w", err)
	}
	it.snap = snap
	it.recs = merge(searchRecs, plainRecs)
	return it, nil
}

// merge returns the search results (each filter's in its order, first
// filter first) and then the other filters' results newest first,
// without repeating an event.
func merge(searchRecs, plainRecs [][]store.Record) []store.Record {
	var out []store.Record
	seen := map[nostr.ID]bool{}
	for _, rs := range searchRecs {
		for _, r := range rs {
			if !seen[r.ID] {
				seen[r.ID] = true
				out = append(out, r)
			}
		}
	}
	var rest []store.Record
	if len(plainRecs) == 1 {
		rest = plainRecs[0]
	} else {
		for _, rs := range plainRecs {
			rest = append(rest, rs...)
		}
		slices.SortFunc(rest, func(a, b store.Record) int {
			if a.CreatedAt != b.CreatedAt {
				if a.CreatedAt > b.CreatedAt {
					return -1
				}
				return 1
			}
			return bytes.Compare(a.ID[:], b.ID[:])
		})
	}
	for i, r := range rest {
		if i > 0 && rest[i-1].ID == r.ID {
			continue
		}
		if len(searchRecs) > 0 && seen[r.ID] {
			continue
		}
		out = append(out, r)
	}
	return out
}

// iterator implements store.Iterator over records read into memory.
type iterator struct {
	s      *Store
	recs   []store.Record
	i      int
	snap   store.Snapshot
	err    error
	closed bool
}

// Next implements store.Iterator.
func (it *iterator) Next() bool {
	if it.closed || it.err != nil {
		return false
	}
	if it.s.closed.Load() {
		it.err = store.ErrClosed
		it.recs = nil
		return false
	}
	if it.i+1 >= len(it.recs) {
		it.i = len(it.recs)
		it.recs = nil
		return false
	}
	it.i++
	return true
}

// Record implements store.Iterator.
func (it *iterator) Record() *store.Record { return &it.recs[it.i] }

// Err implements store.Iterator.
func (it *iterator) Err() error { return it.err }

// Close implements store.Iterator.
func (it *iterator) Close() error {
	it.closed = true
	it.recs = nil
	return nil
}

// Snapshot implements store.Iterator: the snapshot of the query's
// transaction (xmin, xmax and the in-progress xids of
// pg_current_snapshot()), against which each event's position (the
// xid that stored it) is visible exactly when the query saw the event.
func (it *iterator) Snapshot() store.Snapshot { return it.snap }

// matchAll returns the statement (with its arguments) selecting
// (created_at, id) of every distinct event any filter matches, or ""
// when none can match.
func (s *Store) matchAll(filters []nostr.Filter) (string, *args) {
	now := time.Now().Unix()
	a := &args{}
	var parts []string
	for i := range filters {
		if sp := s.newSpec(&filters[i], false); sp != nil {
			parts = append(parts, sp.matchSQL(a, now))
		}
	}
	if len(parts) == 0 {
		return "", nil
	}
	return strings.Join(parts, " UNION "), a
}

// Count implements store.Store.
func (s *Store) Count(ctx context.Context, filters []nostr.Filter) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := s.check(); err != nil {
		return 0, err
	}
	sql, a := s.matchAll(filters)
	if sql == "" {
		return 0, nil
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	var n int64
	err := s.pool.QueryRow(ctx, "SELECT count(*) FROM ("+sql+") m", a.vals...).Scan(&n)
	if s.note(err) != nil {
		return 0, fmt.Errorf("store/postgres: count: %w", err)
	}
	return n, nil
}

// Items implements store.Store.
func (s *Store) Items(ctx context.Context, filters []nostr.Filter, max int) ([]store.Item, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	sql, a := s.matchAll(filters)
	if sql == "" {
		return nil, nil
	}
	sql = "SELECT m.created_at, m.id FROM (" + sql + ") m ORDER BY m.created_at, m.id"
	if max > 0 {
		sql += " LIMIT " + a.add(int64(max)+1)
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, sql, a.vals...)
	if s.note(err) != nil {
		return nil, fmt.Errorf("store/postgres: items: %w", err)
	}
	var items []store.Item
	var id []byte
	var ts int64
	_, err = pgx.ForEachRow(rows, []any{&ts, &id}, func() error {
		items = append(items, store.Item{CreatedAt: ts, ID: nostr.ID(id)})
		return nil
	})
	if s.note(err) != nil {
		return nil, fmt.Errorf("store/postgres: items: %w", err)
	}
	if max > 0 && len(items) > max {
		return nil, store.ErrTooMany
	}
	return items, nil
}
