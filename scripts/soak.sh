#!/usr/bin/env bash
# soak.sh: a long run of mixed traffic against one petrel serve, checking
# that nothing drifts. Publishers (petrel bench parallel), subscribers with
# slow readers among them (bench fanout --slow-subs), connections coming
# and going (bench conns), stored queries (bench req) and negentropy
# sessions (petrel sync) run side by side, each in a loop, for DURATION
# seconds. /stats is sampled every INTERVAL seconds (RSS, heap, goroutines,
# open files, out-queue bytes, connections, subscriptions, NEG sessions)
# into samples.csv.
#
# The baseline is taken after a warm-up round of the same traffic (so the
# caches the store fills on purpose are already full) once the relay is
# idle again; the final figures once it is idle after the run. It passes
# when every load client iteration passed its own exact counts, the
# out-queues are empty and no connection is left, and RSS, heap,
# goroutines and open files (other than the store's own, which follow its
# size) are back within TOLERANCE (5%) of the
# baseline, with an absolute slack on top: SLACK_MIB (16) of memory, the
# free heap below which the relay's release loop does not collect on
# purpose (runtime.go's releaseMin: an idle relay may keep up to that much
# garbage and free heap, depending on where the last collection fell),
# and SLACK_COUNT (2) goroutines and files, so that a 30-goroutine idle
# relay does not fail on one timer. Exit status 0 on pass, 1 on drift or
# failures.
#
# Usage: scripts/soak.sh [DURATION_SECONDS]      (default 3600)
# Environment: INTERVAL (5), TOLERANCE (0.05), SLACK_MIB (16), SLACK_COUNT (2),
#   WARMUP (DURATION/10, at least 15), OUT (bench-results/soak-<date>).
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
DURATION=${1:-3600}
INTERVAL=${INTERVAL:-5}
TOLERANCE=${TOLERANCE:-0.05}
SLACK_MIB=${SLACK_MIB:-16}
SLACK_COUNT=${SLACK_COUNT:-2}
WARMUP=${WARMUP:-$(( DURATION / 10 > 15 ? DURATION / 10 : 15 ))}
OUT=${OUT:-bench-results/soak-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
command -v jq >/dev/null || PETREL_SETUP_SERVICES=0 scripts/setup.sh >/dev/null
command -v jq >/dev/null || apt-get install -y -qq jq >/dev/null

WORK=$(mktemp -d)
SERVE_PID=
LOOPS=()
cleanup() {
	for p in "${LOOPS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${LOOPS[@]}"; do wait "$p" 2>/dev/null || true; done
	if [ -n "$SERVE_PID" ]; then kill "$SERVE_PID" 2>/dev/null || true; wait "$SERVE_PID" 2>/dev/null || true; fi
	rm -rf "$WORK"
}
trap cleanup EXIT
P=$WORK/petrel
go build -o "$P" ./cmd/petrel
export PETREL_CONFIG=

# The relay: memory returned every second so the idle figures settle
# quickly; the store's bounded memory (block cache, body cache, filter of
# stored ids, memtables) made small, so that the warm-up fills it and
# what grows after is drift, not a cache filling.
export PETREL_RUNTIME_MEMORY_RELEASE_INTERVAL=1s PETREL_STORE_CACHE_BYTES=$((8 << 20)) \
	PETREL_STORE_BODY_CACHE_BYTES=$((1 << 20)) PETREL_STORE_ID_FILTER_BYTES=$((64 << 10)) \
	PETREL_STORE_MEMTABLE_BYTES=$((4 << 20))
PETREL_LOG_LEVEL=warn "$P" serve --data "$WORK/data" --listen 127.0.0.1:0 2>"$OUT/serve.log" &
SERVE_PID=$!
URL=
for _ in $(seq 600); do
	URL=$(grep -o 'url=ws://[0-9.:]*' "$OUT/serve.log" | head -1 | cut -d= -f2 || true)
	[ -n "$URL" ] && break
	# at warn level the listening line is not logged: ask the kernel
	PORT=$(ss -Hltnp 2>/dev/null | grep "pid=$SERVE_PID," | awk '{print $4}' | sed 's/.*://' | head -1 || true)
	[ -n "$PORT" ] && URL=ws://127.0.0.1:$PORT && break
	sleep 0.1
done
[ -n "$URL" ] || { echo "soak: petrel serve did not start" >&2; cat "$OUT/serve.log" >&2; exit 1; }
HTTP=http://${URL#ws://}
echo "soak: relay $URL (pid $SERVE_PID), warm-up ${WARMUP}s, run ${DURATION}s, samples every ${INTERVAL}s in $OUT" >&2

stats() { curl -sf "$HTTP/stats"; }
# open_files counts every descriptor; other_files leaves out the store's
# own files (their number follows the store's size, by design).
COLS='rss_bytes,heap_resident_bytes,heap_live_bytes,goroutines,open_files,other_files,out_queue_bytes,connections_active,subscriptions_active,neg_sessions_active,events_accepted'
sample() { # sample PHASE: one CSV row
	local store_files
	store_files=$(ls -l "/proc/$SERVE_PID/fd" 2>/dev/null | grep -c -- "-> $WORK/data/" || true)
	stats | jq -r --arg phase "$1" --argjson sf "${store_files:-0}" '[(now|floor), $phase, .process.rss_bytes, .process.heap_resident_bytes, .process.heap_live_bytes,
		.process.goroutines, .process.open_files, (.process.open_files - $sf), .out_queue_bytes, .connections_active, .subscriptions_active,
		.neg_sessions_active, .events_accepted] | @csv'
}
echo "unix,phase,$COLS" >"$OUT/samples.csv"

# loop NAME CMD...: run CMD until $END, counting passes and failures.
loop() {
	local name=$1
	shift
	local pass=0 fail=0 i=0
	while [ "$(date +%s)" -lt "$END" ]; do
		i=$((i + 1))
		if "$@" "$i" >>"$OUT/$name.log" 2>&1; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "--- $name iteration $i failed" >>"$OUT/$name.log"; fi
	done
	echo "$name $pass $fail" >>"$WORK/counts"
}
B() { "$P" bench -q --url "$URL" "$@"; }
SEED=$((RANDOM * 1000))
publishers() { B parallel --conns 4 --window 16 --events 2000 --authors 50 --seed $((SEED + $1)); }
fanout() { B fanout --subs 40 --slow-subs 4 --events 300 --seed $((SEED + 100000 + $1)); }
churn() { B conns --conns 200 --hold 2s; }
queries() { B req --fill -1 --requests 30 --limit 300; }
neg() { "$P" sync "$URL" --data "$WORK/mirror" --batch 2000 >/dev/null && sleep 1; }

run_load() { # run_load SECONDS PHASE: the mixed traffic, sampled
	END=$(( $(date +%s) + $1 ))
	: >"$WORK/counts"
	LOOPS=()
	loop publishers publishers & LOOPS+=($!)
	loop fanout fanout & LOOPS+=($!)
	loop churn churn & LOOPS+=($!)
	loop queries queries & LOOPS+=($!)
	loop neg neg & LOOPS+=($!)
	while [ "$(date +%s)" -lt "$END" ]; do
		sample "$2" >>"$OUT/samples.csv"
		sleep "$INTERVAL"
	done
	for p in "${LOOPS[@]}"; do wait "$p"; done
	LOOPS=()
	cat "$WORK/counts" >>"$OUT/counts-$2.txt"
}

settle() { # settle PHASE: wait for an idle relay, then sample it
	for _ in $(seq 120); do
		s=$(stats | jq -r '"\(.connections_active) \(.out_queue_bytes) \(.neg_sessions_active)"')
		[ "$s" = "0 0 0" ] && break
		sleep 0.5
	done
	sleep 5 # a few memory-release intervals
	for _ in 1 2 3; do sample "$1" >>"$OUT/samples.csv"; sleep 1; done
	tail -n 1 "$OUT/samples.csv"
}

# The store starts with some events, so that the first queries and syncs
# have something to read.
B parallel --conns 2 --events 2000 --seed "$SEED" >/dev/null
run_load "$WARMUP" warmup
BASE=$(settle baseline)
run_load "$DURATION" load
FINAL=$(settle final)

# Report and judge.
field() { echo "$1" | cut -d, -f"$2"; }
fail=0
printf '%-22s %14s %14s %14s %8s\n' figure baseline peak final drift | tee "$OUT/summary.txt"
i=3
for name in ${COLS//,/ }; do
	b=$(field "$BASE" $i)
	f=$(field "$FINAL" $i)
	peak=$(awk -F, -v c=$i 'NR > 1 && $2 == "\"load\"" && $c > m { m = $c } END { print m + 0 }' "$OUT/samples.csv")
	drift=$(awk -v b="$b" -v f="$f" 'BEGIN { if (b > 0) printf "%+.1f%%", 100 * (f - b) / b; else print "-" }')
	verdict=
	case $name in
	rss_bytes | heap_resident_bytes | heap_live_bytes)
		bound=$(awk -v b="$b" -v t="$TOLERANCE" -v s="$SLACK_MIB" 'BEGIN { printf "%d", b * (1 + t) + s * 1048576 }')
		[ "$f" -le "$bound" ] || { verdict="DRIFT (bound $bound)"; fail=1; } ;;
	goroutines | other_files)
		bound=$(awk -v b="$b" -v t="$TOLERANCE" -v s="$SLACK_COUNT" 'BEGIN { printf "%d", b * (1 + t) + s }')
		[ "$f" -le "$bound" ] || { verdict="DRIFT (bound $bound)"; fail=1; } ;;
	out_queue_bytes | connections_active | neg_sessions_active)
		[ "$f" -eq 0 ] || { verdict="NOT IDLE"; fail=1; } ;;
	esac
	printf '%-22s %14s %14s %14s %8s %s\n' "$name" "$b" "$peak" "$f" "$drift" "$verdict" | tee -a "$OUT/summary.txt"
	i=$((i + 1))
done
echo "load client iterations (name passed failed):" | tee -a "$OUT/summary.txt"
for phase in warmup load; do
	while read -r name pass failed; do
		printf '  %-8s %-11s %6d %6d\n' "$phase" "$name" "$pass" "$failed" | tee -a "$OUT/summary.txt"
		[ "$failed" -eq 0 ] || fail=1
		[ "$phase" = warmup ] || [ "$pass" -gt 0 ] || { echo "  $name never completed an iteration" | tee -a "$OUT/summary.txt"; fail=1; }
	done <"$OUT/counts-$phase.txt"
done
if ! kill -0 "$SERVE_PID" 2>/dev/null; then echo "soak: the relay died" | tee -a "$OUT/summary.txt"; fail=1; fi
if grep -q 'level=ERROR\|panic' "$OUT/serve.log"; then echo "soak: errors in the relay's log:" | tee -a "$OUT/summary.txt"; grep 'level=ERROR\|panic' "$OUT/serve.log" | head -5 | tee -a "$OUT/summary.txt"; fail=1; fi
if [ "$fail" -eq 0 ]; then echo "soak: PASS (${DURATION}s)" | tee -a "$OUT/summary.txt"; else echo "soak: FAIL (${DURATION}s); logs in $OUT" | tee -a "$OUT/summary.txt"; fi
exit "$fail"
