// Package blevebench compares petrel's in-pebble NIP-50 index with bleve
// (github.com/blevesearch/bleve/v2) on the same 100,000-note corpus: index
// time per event, disk size, and the latency of a 500-result search. It
// is its own module so that bleve never becomes a dependency of petrel;
// its test skips unless PETREL_BLEVE_BENCH is set:
//
//	cd internal/search/blevebench && PETREL_BLEVE_BENCH=1 go test -run Compare -v -timeout 60m
//
// The figures and the decision they support are in docs/storage.md
// ("Search: why an index inside pebble").
package blevebench
