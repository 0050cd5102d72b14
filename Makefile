# The two commands: `make run` and `make test`.
# `make run ARGS="--listen 127.0.0.1:7448 --config petrel.toml"` passes
# ARGS to `petrel serve`.
export GOTOOLCHAIN := local
ARGS ?=

.PHONY: run test build bench vet fmt fuzz

run:
	./scripts/run.sh $(ARGS)

test:
	./scripts/test.sh

build:
	go build -o bin/petrel ./cmd/petrel

# In-process benchmarks of the hot paths (the regression gate); compare
# runs with benchstat.
bench:
	go test -run='^$$' -bench=. -benchmem -count=5 ./internal/nostr/ ./internal/relay/ ./internal/store/pebble/ | tee bench.txt

# Every fuzz target for FUZZTIME (default 20s) each; see docs/RELIABILITY.md.
fuzz:
	./scripts/fuzz.sh

vet:
	go vet ./...
	test -z "$$(gofmt -l .)"

fmt:
	gofmt -w .
