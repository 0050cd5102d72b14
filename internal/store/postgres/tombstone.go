package postgres

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/petrel-relay/petrel/internal/nostr"
	"github.com/petrel-relay/petrel/internal/store"
)

var _ store.Tombstoner = (*Store)(nil)

// Tombstones implements store.Tombstoner: the rows of deleted_ids,
// deleted_addrs and vanished, read in one REPEATABLE READ READ ONLY
// transaction (one consistent view) and streamed to fn. It is bounded
// by ctx only, not by Options.QueryTimeout: a store may hold millions
// of deleted ids.
func (s *Store) Tombstones(ctx context.Context, fn func(*store.Tombstone) error) error {
	if err := s.check(); err != nil {
		return err
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if s.note(err) != nil {
		return fmt.Errorf("store/postgres: tombstones: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var t store.Tombstone
	var id, pk, dk []byte
	var kind int32
	var ts int64
	each := func(sql string, dst []any, set func() error) error {
		rows, err := tx.Query(ctx, sql)
		if s.note(err) != nil {
			return err
		}
		_, err = pgx.ForEachRow(rows, dst, func() error {
			t = store.Tombstone{}
			if err := set(); err != nil {
				return err
			}
			return fn(&t)
		})
		return err
	}
	err = each("SELECT id, deleter FROM deleted_ids", []any{&id, &pk}, func() error {
		if len(id) != 32 || len(pk) != 32 {
			return fmt.Errorf("deleted_ids row of %d and %d bytes", len(id), len(pk))
		}
		t.Type, t.ID, t.PubKey = store.TombstoneID, nostr.ID(id), nostr.PubKey(pk)
		return nil
	})
	if err == nil {
		err = each("SELECT pubkey, kind, dkey, created_at FROM deleted_addrs", []any{&pk, &kind, &dk, &ts}, func() error {
			if len(pk) != 32 || len(dk) == 0 {
				return fmt.Errorf("deleted_addrs row with a %d-byte pubkey and a %d-byte dkey", len(pk), len(dk))
			}
			t.Type, t.PubKey, t.Kind, t.CreatedAt = store.TombstoneAddr, nostr.PubKey(pk), int(kind), ts
			switch {
			case dk[0] == dInline:
				t.D, t.DHashed = store.NormalizeD(string(dk[1:]))
			case dk[0] == dHashed && len(dk) == 1+sha256.Size:
				t.D, t.DHashed = string(dk[1:]), true
			default:
				return fmt.Errorf("deleted_addrs dkey %x", dk)
			}
			return nil
		})
	}
	if err == nil {
		err = each("SELECT pubkey, created_at FROM vanished", []any{&pk, &ts}, func() error {
			if len(pk) != 32 {
				return fmt.Errorf("vanished row with a %d-byte pubkey", len(pk))
			}
			t.Type, t.PubKey, t.CreatedAt = store.TombstoneVanish, nostr.PubKey(pk), ts
			return nil
		})
	}
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		return fmt.Errorf("store/postgres: tombstones: %w", err)
	}
	return nil
}

// RestoreTombstones implements store.Tombstoner. It writes the
// tombstones in one transaction holding the exclusive author locks of
// their pubkeys (the locks the writer takes for deletions and requests
// to vanish), so that a writer on any node decides its next batch of
// those authors with them. An address tombstone whose d part is hashed
// is recorded under the hash, which this store uses for d parts longer
// than 256 bytes only: one taken from a store that hashes shorter ones
// (pebble hashes past store.MaxInlineD) for a d of 201-256 bytes matches
// nothing here.
func (s *Store) RestoreTombstones(ctx context.Context, tombs []store.Tombstone) error {
	if err := s.check(); err != nil {
		return err
	}
	var ids, dels, apk, adk, vpk [][]byte
	var akind []int32
	var ats, vts []int64
	addrAt := map[string]int{}
	vanAt := map[nostr.PubKey]int{}
	locks := map[int32]bool{}
	for i := range tombs {
		t := &tombs[i]
		if err := t.Check(); err != nil {
			return fmt.Errorf("store/postgres: restore tombstones: %w", err)
		}
		locks[authorLock(&t.PubKey)] = true
		switch t.Type {
		case store.TombstoneID:
			ids, dels = append(ids, t.ID[:]), append(dels, t.PubKey[:])
		case store.TombstoneAddr:
			dk := dKey(t.D)
			if t.DHashed {
				dk = append([]byte{dHashed}, t.D...)
			}
			// One row per address in a statement: ON CONFLICT DO
			// UPDATE may not touch a row twice.
			k := t.Key()
			if j, ok := addrAt[k]; ok {
				ats[j] = max(ats[j], t.CreatedAt)
				continue
			}
			addrAt[k] = len(apk)
			apk, akind, adk, ats = append(apk, t.PubKey[:]), append(akind, int32(t.Kind)), append(adk, dk), append(ats, t.CreatedAt)
		case store.TombstoneVanish:
			if j, ok := vanAt[t.PubKey]; ok {
				vts[j] = max(vts[j], t.CreatedAt)
				continue
			}
			vanAt[t.PubKey] = len(vpk)
			vpk, vts = append(vpk, t.PubKey[:]), append(vts, t.CreatedAt)
		}
	}
	if len(tombs) == 0 {
		return nil
	}
	keys := make([]int32, 0, len(locks))
	for k := range locks {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	excl := make([]bool, len(keys))
	for i := range excl {
		excl[i] = true
	}
	err := s.restoreTx(ctx, func(b *pgx.Batch) {
		b.Queue("SELECT petrel_lock_authors($1::int4[], $2::bool[])", keys, excl)
		if len(ids) > 0 {
			b.Queue(`INSERT INTO deleted_ids (id, deleter) SELECT * FROM unnest($1::bytea[], $2::bytea[]) ON CONFLICT DO NOTHING`, ids, dels)
		}
		if len(apk) > 0 {
			b.Queue(`INSERT INTO deleted_addrs (pubkey, kind, dkey, created_at)
				SELECT * FROM unnest($1::bytea[], $2::int4[], $3::bytea[], $4::int8[])
				ON CONFLICT (pubkey, kind, dkey) DO UPDATE SET created_at = greatest(deleted_addrs.created_at, excluded.created_at)`,
				apk, akind, adk, ats)
		}
		if len(vpk) > 0 {
			b.Queue(`INSERT INTO vanished (pubkey, created_at) SELECT * FROM unnest($1::bytea[], $2::int8[])
				ON CONFLICT (pubkey) DO UPDATE SET created_at = greatest(vanished.created_at, excluded.created_at)`, vpk, vts)
		}
	})
	if err != nil {
		return fmt.Errorf("store/postgres: restore tombstones: %w", err)
	}
	return nil
}

// restoreTx runs the statements queue queues in one transaction,
// retrying it as the writer retries a batch.
func (s *Store) restoreTx(ctx context.Context, queue func(*pgx.Batch)) error {
	for attempt := 0; ; attempt++ {
		err := s.note(s.restoreOnce(ctx, queue))
		if err == nil || attempt >= s.opts.WriteRetries || !retryable(err) || ctx.Err() != nil {
			return err
		}
		time.Sleep(backoff(attempt))
	}
}

func (s *Store) restoreOnce(ctx context.Context, queue func(*pgx.Batch)) error {
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	b := &pgx.Batch{}
	queue(b)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
