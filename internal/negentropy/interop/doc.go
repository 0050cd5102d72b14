// Package interop tests internal/negentropy against an independent
// implementation of the same protocol, go-nostr's nip77/negentropy
// (github.com/nbd-wtf/go-nostr v0.38.2), and records the transcripts that
// internal/negentropy's TestTranscripts replays byte for byte.
//
// relay_test.go does the same end to end over real WebSockets: go-nostr's
// client (nip77.NegentropySync, and its negentropy session driven by hand)
// against petrel's relay, and petrel's sync client (internal/sync)
// against a minimal relay whose negentropy server is go-nostr's.
// NegentropySync races with itself in v0.38.2, so that one test is skipped
// under -race.
//
// It is a separate module so that go-nostr and its dependencies stay out
// of petrel's go.mod; `go test ./...` at the repository root skips it. Run
// it with
//
//	cd internal/negentropy/interop && go test ./...
//
// and regenerate the transcripts in ../testdata with
//
//	go test -run TestWriteTranscripts -update
package interop
