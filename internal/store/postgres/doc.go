// Package postgres is petrel's shared event store, on PostgreSQL through
// pgx (github.com/jackc/pgx/v5, with its pool). It implements
// store.Store, store.Searcher and store.Feed, and is what the nodes of a
// cluster share as their store of record: any number of Stores (one per
// node) may open one database and schema at once.
//
// Open creates the schema (Options.Schema) and applies the embedded,
// versioned migrations (migrations/*.sql, recorded in schema_version)
// under a PostgreSQL advisory lock, so nodes starting together apply each
// one once. Every event is one row of the events table, indexed
// newest-first for each filter shape the pebble store serves (ids,
// created_at, author, kind, author and kind, address, expiration,
// accepted_at, NIP-50 terms), with its single-letter tags in the tags
// table, indexed (tag, value, created_at, id) so that a tag feed is an
// index scan that stops at its limit. Tombstones (deleted_ids,
// deleted_addrs, vanished) keep NIP-09 and NIP-62 deletions forever.
// docs/storage.md ("PostgreSQL backend") documents the schema, the
// planner's statement shapes with their EXPLAIN, and the write path.
//
// Writes go through one writer goroutine per Store: it drains the queue
// into batches and applies each in one READ COMMITTED transaction: it
// takes advisory locks on the batch's authors (sorted, exclusive for the
// authors of replaceable, addressable, deletion and vanish events, shared
// otherwise), reads every row the storage rules look at in one pipelined
// round trip, decides the outcomes in batch order, writes (COPY for the
// new rows) and commits with synchronous_commit on. The locks make the
// decisions atomic across nodes: two nodes saving versions of one
// address, or a deletion and its target, serialize on the author's lock,
// and a unique index on (pubkey, kind, d) keeps one version per address
// whatever happens. A batch that fails on a deadlock, a serialization
// failure, a unique violation or a lost connection is retried whole
// (Options.WriteRetries), then Failed.
//
// A Query runs in one REPEATABLE READ READ ONLY transaction whose first
// statement reads pg_current_snapshot(): that snapshot is the iterator's
// Snapshot, and each stored event's commit position (SaveResult.Seq,
// Record.Seq) is the xid8 of the transaction that wrote it, so the
// relay's stored-to-live hand-off is exact across nodes. The results are
// read into memory before Query returns (bounded by the filters' limits,
// which the relay clamps), so a parked iterator holds no connection.
//
// The Store implements Has but not store.Prechecker: a database round
// trip per incoming EVENT on the relay's handler path would cost more
// than the verification it could spare, and the writer detects
// duplicates itself, in its batch read.
//
// When the database is unreachable, Save and Submit report Failed (never
// Stored) once the writer's retries are spent, reads return errors within
// Options.QueryTimeout, Stats reports Unavailable, and the pool
// reconnects by itself when the database returns.
package postgres
