package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/search"
	"github.com/petrel-relay/petrel/internal/store"
)

// request is one unit of work for the writer (one Save or one Submit).
// The writer owns it from enqueue until it closes done (or calls
// callback).
type request struct {
	op       heldOp
	events   []*nostr.Event
	callback func(store.SaveResult)
	rejected func(error) // heldReject's callback

	// Set by the writer before done is closed.
	results []store.SaveResult
	err     error
	done    chan struct{}
}

// Weight is the request's share of a batch (store.Weighed), in events
// and bytes.
func (r *request) Weight() (int, int) {
	b := 0
	for _, ev := range r.events {
		if ev != nil {
			b += len(ev.Raw) + 256
		}
	}
	return len(r.events), b
}

// writer is the single goroutine of a Store that writes events. It
// drains whatever is queued (up to MaxBatch events or MaxBatchBytes
// bytes) and applies it in one transaction (rules.go), retried as a
// whole when it fails for a passing reason, then reports to every
// request in order.
type writer struct {
	s  *Store
	an *search.Analyzer // nil when search is off
}

func newWriter(s *Store) *writer {
	w := &writer{s: s}
	if !s.opts.DisableSearch {
		w.an = new(search.Analyzer)
	}
	return w
}

func (w *writer) run() {
	defer close(w.s.writerDone)
	maxEvents, maxBytes := w.s.opts.MaxBatch, w.s.opts.MaxBatchBytes
	var reqs []*request
	for {
		var open bool
		reqs, open = store.NextBatch(w.s.queue, reqs, maxEvents, maxBytes)
		if len(reqs) > 0 {
			w.commit(reqs)
			clear(reqs)
		}
		if !open {
			return
		}
	}
}

// commit applies reqs in one transaction, retrying it as a whole on a
// deadlock, a serialization failure, a unique violation or a lost
// connection (at most Options.WriteRetries times; none once the store is
// closing and the database is unreachable), then reports.
func (w *writer) commit(reqs []*request) {
	b := w.prepare(reqs)
	var err error
	if len(b.items) > 0 || len(b.holds) > 0 || len(b.rejects) > 0 {
		for attempt := 0; ; attempt++ {
			err = w.s.note(w.attempt(b))
			var d *inDoubt
			if errors.As(err, &d) {
				// Answering now could refuse events the database stored
				// (and that would then never be fanned out): find out.
				w.s.log.Warn("store: commit in doubt, asking the database", "events", len(b.items), "xid", d.xid, "err", d.err)
				ok, rerr := w.resolve(d)
				switch {
				case rerr != nil:
					// Answered Failed (in doubt); asked again later.
					w.s.deferResolve(d, b)
					err = fmt.Errorf("%w: %w", store.ErrInDoubt, rerr)
				case ok:
					committed(b, d.xid, d.removed)
					w.s.inDoubtCommitted.Add(1)
					err = nil
				}
			}
			if err == nil || errors.Is(err, store.ErrInDoubt) || attempt >= w.s.opts.WriteRetries || !retryable(err) ||
				(w.s.closed.Load() && w.s.unavailable.Load()) {
				break
			}
			w.s.log.Warn("store: write batch failed, retrying", "events", len(b.items), "attempt", attempt+1, "err", err)
			w.s.retries.Add(1)
			time.Sleep(backoff(attempt))
		}
		if err == nil {
			w.s.commits.Add(1)
		}
	}
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrWrite, err)
		w.s.log.Error("store: write batch failed", "events", len(b.items), "err", err)
	}
	for _, r := range reqs {
		if err != nil {
			r.err = err
			for i := range r.results {
				r.results[i] = store.SaveResult{Outcome: store.Failed, Err: err}
			}
		}
		if r.op == heldReject {
			if r.rejected != nil {
				r.rejected(err)
			}
			continue
		}
		if r.callback != nil {
			r.callback(r.results[0])
			continue
		}
		close(r.done)
	}
}

// prepare gives every request its results, decides the events the store
// refuses whatever its state (store.CheckEvent), and derives what the
// rules and the tables need from the others.
func (w *writer) prepare(reqs []*request) *batch {
	b := &batch{}
	for _, r := range reqs {
		r.results = make([]store.SaveResult, len(r.events))
		for i, ev := range r.events {
			if r.op == heldReject {
				if ev != nil {
					b.rejects = append(b.rejects, ev)
				}
				continue
			}
			if err := store.CheckEvent(ev); err != nil {
				r.results[i] = store.SaveResult{Outcome: store.Failed, Err: err}
				continue
			}
			switch r.op {
			case heldHold:
				b.holds = append(b.holds, heldItem{ev: ev, res: &r.results[i]})
				continue
			case heldRelease:
				b.released = append(b.released, ev)
			}
			b.items = append(b.items, w.newItem(ev, &r.results[i]))
		}
	}
	return b
}

// newItem derives an event's rows and rule inputs.
func (w *writer) newItem(ev *nostr.Event, res *store.SaveResult) *item {
	it := &item{ev: ev, res: res, raw: ev.Raw, docLen: -1}
	if len(it.raw) == 0 {
		it.raw = nostr.Serialize(ev)
	}
	if a, ok := ev.Address(); ok {
		it.dkey = dKey(a.D)
	}
	if exp, ok := ev.Expiration(); ok {
		it.exp = &exp
	}
	it.tagkeys = eventTagKeys(ev)
	if w.an != nil {
		doc := w.an.Analyze(ev)
		if !doc.Empty() {
			it.docLen = int32(doc.Len)
			it.terms = make([][]byte, len(doc.Terms))
			it.freqs = make([]int16, len(doc.Terms))
			for i, t := range doc.Terms {
				it.terms[i] = slices.Clone(t.Text)
				it.freqs[i] = int16(t.Freq)
			}
		}
	}
	switch ev.Kind {
	case nostr.KindDeletion:
		ids, addrs := ev.DeletionTargets()
		it.delIDs = ids
		for _, a := range addrs {
			if a.PubKey != ev.PubKey || !(nostr.IsReplaceable(a.Kind) || nostr.IsAddressable(a.Kind)) {
				continue
			}
			it.delAddrs = append(it.delAddrs, addrTarget{kind: a.Kind, dkey: dKey(a.D)})
		}
	case nostr.KindGiftWrap:
		for _, t := range ev.Tags {
			if len(t) >= 2 && t[0] == "p" {
				if pk, ok := nostr.ParseHex32(t[1]); ok && !slices.Contains(it.wrapTo, nostr.PubKey(pk)) {
					it.wrapTo = append(it.wrapTo, pk)
				}
			}
		}
	}
	return it
}

// attempt applies the batch in one transaction: author locks, one
// pipelined read of the state the rules need, the rules (in Go, over
// that state: rules.go), then the writes and COMMIT. Nothing it decides
// is reported unless the commit succeeds.
func (w *writer) attempt(b *batch) error {
	ctx, cancel := context.WithTimeout(context.Background(), w.s.opts.WriteTimeout)
	defer cancel()
	tx, err := w.s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := w.writeHeld(ctx, tx, b); err != nil {
		return err
	}
	if len(b.items) == 0 {
		return tx.Commit(ctx)
	}
	st := newState()
	if err := w.read(ctx, tx, b, st); err != nil {
		return err
	}
	st.decide(b)
	return w.write(ctx, tx, b, st)
}

// read takes the batch's author locks and reads the state its rules
// look at, in one round trip: the locks come first, so every read sees
// the commits of the writers that held them before.
func (w *writer) read(ctx context.Context, tx pgx.Tx, b *batch, st *state) error {
	keys, excl := b.locks()
	var ids, authors [][]byte
	var apk [][]byte
	var akind []int32
	var adkey [][]byte
	seenAddr := map[addrID]bool{}
	addAddr := func(pk []byte, kind int, dkey []byte) {
		id := makeAddrID(pk, kind, dkey)
		if !seenAddr[id] {
			seenAddr[id] = true
			apk, akind, adkey = append(apk, pk), append(akind, int32(kind)), append(adkey, dkey)
		}
	}
	var vpk [][]byte
	var vts []int64
	var wpk, wkey [][]byte
	var wts []int64
	vanish := map[nostr.PubKey]int64{}
	seenPK := map[nostr.PubKey]bool{}
	addPK := func(pk *nostr.PubKey) {
		if !seenPK[*pk] {
			seenPK[*pk] = true
			authors = append(authors, pk[:])
		}
	}
	for _, it := range b.items {
		ev := it.ev
		ids = append(ids, ev.ID[:])
		addPK(&ev.PubKey)
		for i := range it.wrapTo {
			addPK(&it.wrapTo[i])
		}
		if it.dkey != nil {
			addAddr(ev.PubKey[:], ev.Kind, it.dkey)
		}
		for i := range it.delIDs {
			ids = append(ids, it.delIDs[i][:])
		}
		for _, a := range it.delAddrs {
			addAddr(ev.PubKey[:], a.kind, a.dkey)
		}
		if ev.Kind == nostr.KindRequestToVanish {
			if ts, ok := vanish[ev.PubKey]; !ok || ev.CreatedAt > ts {
				vanish[ev.PubKey] = ev.CreatedAt
			}
		}
	}
	for pk, ts := range vanish {
		vpk, vts = append(vpk, pk[:]), append(vts, ts)
		wpk, wkey, wts = append(wpk, pk[:]), append(wkey, pubkeyTagKey(&pk)), append(wts, ts)
	}

	q := &pgx.Batch{}
	q.Queue("SELECT petrel_lock_authors($1::int4[], $2::bool[])", keys, excl)
	q.Queue(`SELECT id, pubkey, kind, created_at, dkey, doc_len FROM events WHERE id = ANY($1::bytea[])`, ids).
		Query(func(rows pgx.Rows) error { return st.scanRows(rows, false) })
	q.Queue(`SELECT id, deleter FROM deleted_ids WHERE id = ANY($1::bytea[])`, ids).
		Query(func(rows pgx.Rows) error {
			var id, del []byte
			_, err := pgx.ForEachRow(rows, []any{&id, &del}, func() error {
				st.tombs[tombKey(id, del)] = struct{}{}
				return nil
			})
			return err
		})
	q.Queue(`SELECT pubkey, created_at FROM vanished WHERE pubkey = ANY($1::bytea[])`, authors).
		Query(func(rows pgx.Rows) error {
			var pk []byte
			var ts int64
			_, err := pgx.ForEachRow(rows, []any{&pk, &ts}, func() error {
				st.vanished[nostr.PubKey(pk)] = ts
				return nil
			})
			return err
		})
	if len(apk) > 0 {
		q.Queue(`SELECT d.pubkey, d.kind, d.dkey, d.created_at FROM deleted_addrs d
			JOIN unnest($1::bytea[], $2::int4[], $3::bytea[]) AS u(pk, k, dk) ON d.pubkey = u.pk AND d.kind = u.k AND d.dkey = u.dk`,
			apk, akind, adkey).
			Query(func(rows pgx.Rows) error {
				var pk, dk []byte
				var kind int32
				var ts int64
				_, err := pgx.ForEachRow(rows, []any{&pk, &kind, &dk, &ts}, func() error {
					st.addrDel[makeAddrID(pk, int(kind), dk)] = ts
					return nil
				})
				return err
			})
		q.Queue(`SELECT e.id, e.pubkey, e.kind, e.created_at, e.dkey, e.doc_len FROM events e
			JOIN unnest($1::bytea[], $2::int4[], $3::bytea[]) AS u(pk, k, dk) ON e.pubkey = u.pk AND e.kind = u.k AND e.dkey = u.dk`,
			apk, akind, adkey).
			Query(func(rows pgx.Rows) error { return st.scanRows(rows, false) })
	}
	if len(vpk) > 0 {
		q.Queue(`SELECT e.id, e.pubkey, e.kind, e.created_at, e.dkey, e.doc_len FROM events e
			JOIN unnest($1::bytea[], $2::int8[]) AS u(pk, ts) ON e.pubkey = u.pk AND e.created_at <= u.ts`, vpk, vts).
			Query(func(rows pgx.Rows) error { return st.scanRows(rows, false) })
		q.Queue(`SELECT e.id, e.pubkey, e.kind, e.created_at, e.dkey, e.doc_len, u.pk FROM unnest($1::bytea[], $2::bytea[], $3::int8[]) AS u(pk, tk, ts)
			JOIN tags t ON t.tagkey = u.tk AND t.created_at <= u.ts AND t.kind = $4
			JOIN events e ON e.id = t.id`, wpk, wkey, wts, nostr.KindGiftWrap).
			Query(func(rows pgx.Rows) error { return st.scanRows(rows, true) })
	}
	return tx.SendBatch(ctx, q).Close()
}

// write applies the decided changes, then commits: removals first (they
// free addresses the new versions take), tombstones, the new events and
// their tags (COPY), the search figures.
func (w *writer) write(ctx context.Context, tx pgx.Tx, b *batch, st *state) error {
	stored := false
	for _, it := range b.items {
		stored = stored || it.res.Outcome == store.Stored
	}
	removed := map[nostr.ID]bool{}
	delta := st.stats
	q := &pgx.Batch{}
	if len(st.removeDB) > 0 {
		ids := make([][]byte, len(st.removeDB))
		for i := range st.removeDB {
			ids[i] = st.removeDB[i][:]
		}
		q.Queue(removeByID, ids).Query(func(rows pgx.Rows) error {
			var id []byte
			var docLen *int32
			_, err := pgx.ForEachRow(rows, []any{&id, &docLen}, func() error {
				removed[nostr.ID(id)] = true
				if docLen != nil {
					delta.docs--
					delta.totalLen -= int64(*docLen)
				}
				return nil
			})
			return err
		})
	}
	if len(st.newTombs) > 0 {
		var ids, dels [][]byte
		for _, t := range st.newTombs {
			ids, dels = append(ids, t[:32]), append(dels, t[32:])
		}
		q.Queue(`INSERT INTO deleted_ids (id, deleter) SELECT * FROM unnest($1::bytea[], $2::bytea[]) ON CONFLICT DO NOTHING`, ids, dels)
	}
	if len(st.newAddrDel) > 0 {
		var pks, dks [][]byte
		var kinds []int32
		var tss []int64
		for _, a := range st.newAddrDel {
			pks, kinds, dks, tss = append(pks, a.pk), append(kinds, int32(a.kind)), append(dks, a.dkey), append(tss, a.ts)
		}
		q.Queue(`INSERT INTO deleted_addrs (pubkey, kind, dkey, created_at)
			SELECT * FROM unnest($1::bytea[], $2::int4[], $3::bytea[], $4::int8[])
			ON CONFLICT (pubkey, kind, dkey) DO UPDATE SET created_at = greatest(deleted_addrs.created_at, excluded.created_at)`,
			pks, kinds, dks, tss)
	}
	if len(st.newVanish) > 0 {
		var pks [][]byte
		var tss []int64
		for pk, ts := range st.newVanish {
			pks, tss = append(pks, pk[:]), append(tss, ts)
		}
		q.Queue(`INSERT INTO vanished (pubkey, created_at) SELECT * FROM unnest($1::bytea[], $2::int8[])
			ON CONFLICT (pubkey) DO UPDATE SET created_at = greatest(vanished.created_at, excluded.created_at)`, pks, tss)
	}
	var seq uint64
	if stored {
		q.Queue("SELECT pg_current_xact_id()::text").QueryRow(func(row pgx.Row) error {
			var s string
			if err := row.Scan(&s); err != nil {
				return err
			}
			var err error
			seq, err = strconv.ParseUint(s, 10, 64)
			return err
		})
	}
	if q.Len() > 0 {
		if err := tx.SendBatch(ctx, q).Close(); err != nil {
			return err
		}
	}
	var evRows, tagRows [][]any
	for _, it := range b.items {
		r := it.row
		if it.res.Outcome != store.Stored || r == nil || r.gone {
			continue
		}
		ev := it.ev
		var docLen *int32
		if it.docLen >= 0 {
			docLen = &it.docLen
		}
		evRows = append(evRows, []any{ev.ID[:], ev.PubKey[:], ev.CreatedAt, int32(ev.Kind), it.dkey, it.exp,
			it.tagkeys, docLen, it.terms, it.freqs, int64(seq), it.raw})
		for _, k := range it.tagkeys {
			tagRows = append(tagRows, []any{k, ev.CreatedAt, ev.ID[:], int32(ev.Kind)})
		}
	}
	if len(evRows) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"events"}, eventColumns, pgx.CopyFromRows(evRows)); err != nil {
			return err
		}
	}
	if len(tagRows) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"tags"}, tagColumns, pgx.CopyFromRows(tagRows)); err != nil {
			return err
		}
	}
	if !w.s.opts.DisableSearch || delta != (statsDelta{}) {
		if err := w.s.addStats(ctx, tx, delta); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		if stored && connectivity(err) {
			// The COMMIT was sent, or may have been: whether it took
			// effect is known only to the database (commit resolves it).
			return &inDoubt{xid: seq, removed: removed, err: err}
		}
		return err
	}
	committed(b, seq, removed)
	return nil
}

// committed fills in the results of a batch whose transaction committed
// as transaction seq, which removed the ids in removed.
func committed(b *batch, seq uint64, removed map[nostr.ID]bool) {
	for _, it := range b.items {
		if it.res.Outcome != store.Stored {
			continue
		}
		it.res.Seq = seq
		for _, r := range it.removed {
			if !r.inDB || removed[r.id] {
				it.res.Removed = append(it.res.Removed, r.id)
			}
		}
	}
}

// inDoubt is the error of an attempt whose COMMIT failed on a lost
// connection: the transaction (xid) may have committed all the same. Its
// results are those of the attempt if it did.
type inDoubt struct {
	xid     uint64
	removed map[nostr.ID]bool
	err     error
}

func (e *inDoubt) Error() string {
	return fmt.Sprintf("commit of transaction %d in doubt: %v", e.xid, e.err)
}

func (e *inDoubt) Unwrap() error { return e.err }

// resolve asks the database, once it answers again, what became of an
// in-doubt transaction: pg_xact_status reports "committed", "aborted" or
// "in progress" (the server has not finished with it yet). It returns
// whether the transaction committed, or an error if the database did not
// answer within the store's resolve time.
func (w *writer) resolve(d *inDoubt) (bool, error) {
	deadline := time.Now().Add(w.s.opts.ResolveTimeout)
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), w.s.opts.QueryTimeout)
		var status *string
		err := w.s.pool.QueryRow(ctx, "SELECT pg_xact_status($1::text::xid8)", strconv.FormatUint(d.xid, 10)).Scan(&status)
		cancel()
		err = w.s.note(err)
		switch {
		case err == nil && status != nil && *status == "committed":
			return true, nil
		case err == nil && (status == nil || *status == "aborted"):
			return false, nil
		}
		if time.Now().After(deadline) || (w.s.closed.Load() && w.s.unavailable.Load()) {
			if err == nil {
				err = fmt.Errorf("transaction %d still in progress", d.xid)
			}
			return false, fmt.Errorf("%w (outcome unknown)", err)
		}
		time.Sleep(backoff(attempt))
	}
}

var (
	eventColumns = []string{"id", "pubkey", "created_at", "kind", "dkey", "expiration", "tagkeys", "doc_len", "terms", "tfreqs", "seq", "raw"}
	tagColumns   = []string{"tagkey", "created_at", "id", "kind"}
)
