// Package storetest is the conformance suite every store backend must pass,
// and the naive model of the store contract it is checked against.
//
// Run is the suite: a backend's test calls it with a function that opens a
// fresh, empty store, and each subtest opens its own. Model is a plain
// in-memory implementation of store.Store that scans every event for every
// query; it is slow on purpose, so that it is obviously correct, and the
// suite's differential test compares a backend with it on thousands of
// random events and filters.
//
// Search (NIP-50) is optional: a store that implements store.Searcher
// and reports SupportsSearch gets the Search subtests, and search filters
// in the differential test, compared with the model as sets (stores rank
// differently; the model ranks by the sum of the query terms'
// frequencies, and matches by internal/search's analysis, like a real
// index). A store without search gets SearchUnsupported instead.
//
// The helpers (NewEvent, WithID, Key, FixtureEvents, LoadFixture,
// BenchQuery, BenchIngest) build events that carry random ids and
// signatures: the store does not verify them, but each event's Raw is its
// JSON (nostr.Serialize), because the store stores and returns Raw. The
// differential test's seed is printed on failure; SeedEnv replays it.
package storetest
