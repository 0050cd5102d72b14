#!/usr/bin/env bash
# bench-bars.sh: measure petrel against the performance bar of
# docs/BENCHMARKS.md on this machine. The relay runs pinned to CPU 0 and
# the load client to CPU 1 (taskset), each scenario on a fresh store, so the
# two do not share a core. Results (the full text of every run) go to
# $OUT (default ./bench-results/<date>); the summary lines go to stdout.
#
# Usage: scripts/bench-bars.sh [bar...]   bars: verify ingest fanout query
#        memory overload startup (default: all)
# Environment: PETREL_BENCH_CONNS (memory bar, default 19000).
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
# libsecp256k1: without it the relay verifies on the pure-Go fallback,
# 3-4x slower, and every CPU figure would be off.
PETREL_SETUP_SERVICES=0 scripts/setup.sh
OUT=${OUT:-bench-results/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
BIN=$OUT/petrel
go build -o "$BIN" ./cmd/petrel
PORT=${PORT:-7870}
URL=ws://127.0.0.1:$PORT
DATA=$(mktemp -d)
trap 'stop; rm -rf "$DATA"' EXIT

stop() { if [ -n "${RPID:-}" ]; then kill "$RPID" 2>/dev/null || true; wait "$RPID" 2>/dev/null || true; RPID=; fi; }

# start [env...]: a fresh relay on CPU 0.
start() {
	stop
	rm -rf "$DATA"/*
	env "$@" taskset -c 0 "$BIN" serve --listen 127.0.0.1:$PORT --data "$DATA/store" >"$OUT/serve.log" 2>&1 &
	RPID=$!
	for _ in $(seq 200); do
		if curl -s -o /dev/null "http://127.0.0.1:$PORT/stats"; then
			grep -q 'verifier=libsecp256k1' "$OUT/serve.log" || { echo "relay is not verifying with libsecp256k1 (see $OUT/serve.log)" >&2; exit 1; }
			return
		fi
		sleep 0.02
	done
	echo "relay did not start" >&2; exit 1
}

# run name args...: the load client on CPU 1.
run() {
	local name=$1; shift
	taskset -c 1 "$BIN" bench "$@" --url "$URL" --pid "$RPID" -q >"$OUT/$name.txt" 2>&1 || true
	printf '%-28s %s\n' "$name" "$(head -n1 "$OUT/$name.txt")"
	grep -E '^(relay|relay memory|deliveries|latency (ok|eose|delivery)|knee|capacity|step) ' "$OUT/$name.txt" | sed 's/^/    /' || true
}

bars=${*:-verify ingest fanout query memory overload startup}
for bar in $bars; do
	case $bar in
	verify)
		go test -run '^$' -bench 'BenchmarkVerify/libsecp256k1$|BenchmarkParseAndID/typical' -benchtime 2000x -count 6 ./internal/nostr/ >"$OUT/verify.txt"
		grep -E '^Benchmark' "$OUT/verify.txt" | sed 's/^/    /'
		;;
	ingest)
		start; run ingest-1conn ingest --events 20000
		start; run parallel-8conns parallel --conns 8 --events 40000
		start PETREL_STORE_DISABLE_SEARCH=true; run parallel-8conns-nosearch parallel --conns 8 --events 40000
		;;
	fanout)
		start; run fanout-100x2000 fanout --subs 100 --events 2000
		start; run fanout-1000x200 fanout --subs 1000 --events 200
		;;
	query)
		start; run req-1000 req --fill 10000 --limit 1000 --requests 200
		start; run feed-100k feed --fill 100000 --requests 200
		start; run search-100k search --fill 100000 --requests 100
		;;
	memory)
		start; run conns conns --conns "${PETREL_BENCH_CONNS:-19000}" --hold 20s
		;;
	overload)
		start; run ladder ladder --rates 1000,1500,2000,2500,3000,3500,4000,5000,6000,8000,10000,12000 --hold 5s --conns 8
		;;
	startup)
		stop # the previous bar's relay holds the data directory
		for i in 1 2 3 4 5; do
			rm -rf "$DATA"/*
			t0=$(date +%s%N)
			taskset -c 0 "$BIN" serve --listen 127.0.0.1:$PORT --data "$DATA/store" >"$OUT/serve.log" 2>&1 &
			RPID=$!
			until curl -s -o /dev/null "http://127.0.0.1:$PORT/stats"; do :; done
			t1=$(date +%s%N)
			sleep 2
			rss=$(awk '/VmRSS/{print $2}' /proc/$RPID/status)
			echo "startup run $i: listening after $(( (t1-t0)/1000000 )) ms (fork+exec+open+listen, polled), idle RSS ${rss} kB" | tee -a "$OUT/startup.txt"
			stop
		done
		;;
	*) echo "unknown bar $bar" >&2; exit 2 ;;
	esac
done
echo "results in $OUT"
