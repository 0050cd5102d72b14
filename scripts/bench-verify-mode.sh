#!/usr/bin/env bash
# bench-verify-mode.sh: relay.verify_mode "sync" against "optimistic", side
# by side in one run (docs/BENCHMARKS.md, "Optimistic verification"). The
# relay runs pinned to CPU 0 and the load client to CPU 1, a fresh store
# per scenario, the two modes alternating for $ROUNDS rounds.
#
# For each scenario it prints petrel bench's first line (accepted/s), its
# OK latency line, and the relay's CPU per event measured from
# /proc/<pid>/stat from just before the run until the relay has checked
# every held event (held_pending 0 in /stats), so the checks optimistic
# mode does after the OKs are counted too (petrel bench's own "relay" line
# covers only the timed part).
#
# Usage: scripts/bench-verify-mode.sh   Environment: ROUNDS (default 2),
# EVENTS1 (window-1 ingest, default 1000), EVENTS (default 10000),
# NOSYNC=1 (store.no_sync = true for both modes: commits not synced),
# RELAY_CPUS (taskset list for the relay, default 0; the client stays on
# CPU 1), SCENARIOS (default "ingest-w1 ingest-w64 parallel-8").
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
PETREL_SETUP_SERVICES=0 scripts/setup.sh
OUT=${OUT:-bench-results/verify-mode-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
BIN=$OUT/petrel
go build -o "$BIN" ./cmd/petrel
PORT=${PORT:-7871}
URL=ws://127.0.0.1:$PORT
DATA=$(mktemp -d)
ROUNDS=${ROUNDS:-2}
EVENTS1=${EVENTS1:-1000}
EVENTS=${EVENTS:-10000}
TCK=$(getconf CLK_TCK)
RELAY_CPUS=${RELAY_CPUS:-0}
SCENARIOS=${SCENARIOS:-ingest-w1 ingest-w64 parallel-8}
NOSYNC=$([ "${NOSYNC:-}" = 1 ] && echo true || echo false)
trap 'stop; rm -rf "$DATA"' EXIT

stop() { if [ -n "${RPID:-}" ]; then kill "$RPID" 2>/dev/null || true; wait "$RPID" 2>/dev/null || true; RPID=; fi; }

# start mode: a fresh relay on CPU 0 in verify_mode mode.
start() {
	stop
	rm -rf "$DATA"/*
	PETREL_STORE_NO_SYNC=$NOSYNC PETREL_RELAY_VERIFY_MODE=$1 taskset -c "$RELAY_CPUS" "$BIN" serve --listen 127.0.0.1:$PORT --data "$DATA/store" >"$OUT/serve.log" 2>&1 &
	RPID=$!
	for _ in $(seq 200); do
		if curl -s -o /dev/null "http://127.0.0.1:$PORT/stats"; then
			grep -q 'verifier=libsecp256k1' "$OUT/serve.log" || { echo "relay is not verifying with libsecp256k1" >&2; exit 1; }
			return
		fi
		sleep 0.02
	done
	echo "relay did not start" >&2; exit 1
}

ticks() { awk '{print $14+$15}' "/proc/$RPID/stat"; }
stat() { curl -s "http://127.0.0.1:$PORT/stats" | grep -o "\"$1\": *[0-9]*" | grep -o '[0-9]*$'; }

# run mode name events args...: one scenario on a fresh relay.
run() {
	local mode=$1 name=$2 events=$3; shift 3
	start "$mode"
	local t0; t0=$(ticks)
	taskset -c 1 "$BIN" bench "$@" --events "$events" --url "$URL" --pid "$RPID" -q >"$OUT/$name-$mode.txt" 2>&1 || true
	until [ "$(stat held_pending)" = 0 ]; do sleep 0.01; done
	local t1; t1=$(ticks)
	local acc; acc=$(stat events_accepted)
	printf '%-10s %-12s %s\n' "$mode" "$name" "$(head -n1 "$OUT/$name-$mode.txt")"
	grep -E '^latency ok ' "$OUT/$name-$mode.txt" | sed 's/^/    /' || true
	awk -v t="$((t1 - t0))" -v hz="$TCK" -v n="$acc" -v held="$(stat events_held)" \
		'BEGIN { printf "    relay cpu per stored event (until every held event is checked): %.1f µs (%d stored, %d held)\n", t/hz*1e6/n, n, held }'
}

for round in $(seq "$ROUNDS"); do
	echo "== round $round"
	for mode in sync optimistic; do
		for sc in $SCENARIOS; do
			case $sc in
			ingest-w1) run $mode ingest-w1 "$EVENTS1" ingest --window 1 ;;
			ingest-w64) run $mode ingest-w64 "$EVENTS" ingest --window 64 ;;
			parallel-8) run $mode parallel-8 "$EVENTS" parallel --conns 8 --window 64 ;;
			*) echo "unknown scenario $sc" >&2; exit 2 ;;
			esac
		done
	done
done
stop
echo "results in $OUT"
