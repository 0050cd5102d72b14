#!/usr/bin/env bash
# test.sh: the whole test suite, as CI runs it. Installs what is missing,
# then runs every package's tests (fuzz seed corpora included) and the
# relay packages again under the race detector.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
./scripts/setup.sh
go vet ./...
go test -count=1 -timeout 30m ./...
# Interoperability with an independent NIP-77 implementation (go-nostr),
# kept in its own module so its dependencies do not leak into petrel's.
(cd internal/negentropy/interop && go test -count=1 ./...)
# The client-side NIPs (19, 44, 04, 49, 59, 13) against go-nostr, both ways.
(cd internal/interop && go test -count=1 ./...)
# The nbio fork's own tests, one or more per patch (third_party/nbio/PATCHES.md),
# in the fork's module; under -race, which one of them needs.
(cd third_party/nbio && go test -count=1 -race ./...)
go test -count=1 -race -timeout 30m ./internal/relay/... ./internal/server/... ./internal/nostr/... ./internal/negentropy/... ./internal/cluster/...
# The reliability battery, short (about 2 minutes: hostile inputs, kill -9
# cycles, slow readers, slowloris, compression bomb, forged-signature
# flood, disk full), and a 45-second soak of mixed traffic.
scripts/reliability.sh short
scripts/soak.sh 45
