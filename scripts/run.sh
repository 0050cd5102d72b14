#!/usr/bin/env bash
# run.sh: build and run the relay with zero config (127.0.0.1:7447, store in
# ./petrel-data). Extra arguments go to `petrel serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
PETREL_SETUP_SERVICES=0 ./scripts/setup.sh
go build -o bin/petrel ./cmd/petrel
exec ./bin/petrel serve "$@"
