// Package pebble is petrel's embedded event store, built on
// github.com/cockroachdb/pebble/v2. It implements store.Store.
//
// Each event body is stored once under a compact serial number; indexes
// (by id, created_at, author, kind, author and kind, tag value, address,
// expiration) point at the serial and carry a small summary of the event
// (kind, author prefix, expiration), so that most filter conditions are
// checked without reading the body. Index keys invert created_at, so a
// forward scan runs newest first and a query that stops at its limit
// touches about limit entries whatever the store's size. Tombstones record
// NIP-09 deletions and NIP-62 requests to vanish. A NIP-50 search index
// (a posting list per term, in blocks of one write batch's postings,
// written in the same batch as the events, see
// internal/search for what is indexed) answers filters with Search by
// BM25 relevance; Options.DisableSearch turns it off. docs/storage.md
// documents every key layout, the planner and the write path.
//
// Writes go through one writer goroutine that commits whatever is queued
// as one pebble batch (group commit), synced unless Options.NoSync.
// Queries read a pebble snapshot through pull iterators that can be
// paused and resumed from any goroutine.
package pebble
