// Package interop tests internal/negentropy against an independent
// implementation of the same protocol, go-nostr's nip77/negentropy
// (github.com/nbd-wtf/go-nostr v0.38.2), and records the transcripts that
// internal/negentropy's TestTranscripts replays byte for byte.
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
