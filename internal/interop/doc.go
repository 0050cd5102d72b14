// Package interop cross-checks petrel's client-side NIP packages against
// an independent implementation, go-nostr (github.com/nbd-wtf/go-nostr
// v0.38.2), in both directions: what petrel encodes, encrypts, wraps or
// mines, go-nostr decodes, decrypts, unwraps and measures, and the
// reverse. It covers NIP-19 (every form, TLV with relay hints), NIP-44 v2
// (conversation keys and payloads; the published vectors are in
// internal/nip44's own tests), NIP-04, NIP-49, NIP-59 and NIP-13, plus
// event signatures.
//
// It is a separate module so that go-nostr and its dependencies stay out
// of petrel's go.mod; `go test ./...` at the repository root skips it
// (scripts/test.sh runs it). Run it with
//
//	cd internal/interop && go test ./...
package interop
