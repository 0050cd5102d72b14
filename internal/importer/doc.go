// Package importer loads events from JSONL into a store: the library
// behind `petrel import`.
//
// A line is an event object, or a relay or client envelope holding one
// (["EVENT",{...}] or ["EVENT","<subid>",{...}]); other messages and
// blank lines are skipped and counted. Every event's id is recomputed and,
// unless Options.NoVerify, its signature verified. Ephemeral events,
// events whose NIP-40 expiration has passed and requests to vanish
// (NIP-62) not addressed to this relay are skipped and counted; whether a
// request to vanish is addressed to this relay is decided by
// nostr.VanishAddressedTo, the rule the relay applies to published ones.
// Everything else goes to store.Save, whose rules (duplicates,
// replaceable and addressable versions, deletions, requests to vanish)
// apply as for published events. The relay's write policy (lists, rate
// limits, created_at window, proof of work) does not: import is an
// operator's tool.
//
// # Goroutines
//
// Run reads on one goroutine, parses and verifies chunks of lines on
// Options.Workers goroutines, puts the chunks back in input order on the
// caller's goroutine and saves batches on one more, so the store sees the
// events in file order while the next batch is being checked. Every
// goroutine has ended when Run returns. Memory stays bounded whatever the
// input's size: a few chunks per worker and two batches are in flight.
//
// The package holds no global state; Run may be called concurrently on
// different stores.
package importer
