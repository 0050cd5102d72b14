#!/usr/bin/env bash
# soak.sh: a long run of mixed traffic against one petrel serve, checking
# that nothing drifts. Publishers (petrel bench parallel), subscribers with
# slow readers among them (bench fanout --slow-subs), connections coming
# and going (bench conns), stored queries (bench req) and negentropy
# sessions (petrel sync, over a bounded window: the events of the last
# NEG_WINDOW, so that a NEG session never meets the relay's
# 1,000,000-event refusal however large the store grows) run side by
# side, each in a loop, for DURATION seconds. /stats is sampled every
# INTERVAL seconds (RSS, heap, goroutines, open files, out-queue bytes,
# connections, subscriptions, NEG sessions, and the store's size: events,
# bytes on disk, its filter of stored ids) into samples.csv.
#
# The store grows during the run (every publisher writes new events), and
# some of the relay's memory follows its size by design (the filter of
# stored ids, search statistics, pebble's table indexes and filters). So
# the memory verdict does not compare the end with the start; it
# separates that share from drift explicitly:
#   baseline  the relay after a warm-up round of the same traffic (so the
#             caches it fills on purpose are full), once idle;
#   final     the same relay once idle after the run;
#   fresh     a new petrel serve on the same data directory (the store as
#             the run left it), after a warm-up of REWARM seconds of the
#             same traffic but the publishers (fanout's few events still
#             add to the store), once idle.
# fresh - baseline is the share that follows the store's size (printed);
# final - fresh is drift (what an hour of traffic left behind that a
# restart on the same store would not hold). Each idle figure is taken
# after the relay has collected (settle asks through pprof, heap?gc=1)
# and its release loop has had a few intervals. Memory is judged in
# three parts, each with the slack its own mechanism explains:
#   heap_live_bytes  the live heap: within TOLERANCE (5%) of the larger
#             of baseline and fresh, plus LIVE_MIB (8), what a long run
#             legitimately keeps more than a short one (capacities grown
#             to the peak's connections). Each reference lacks one share
#             the final relay holds by design: the baseline the store's
#             growth, the fresh relay the publishers' traffic (its
#             warm-up leaves them out; its live heap came out 4-6 MB
#             below the final's in three 45-s runs);
#   heap_free_bytes  free heap still resident: under the release loop's
#             floor (runtime.go: SLACK_MIB, 16 MiB, or a quarter of the
#             live heap, whichever is larger; plus TOLERANCE);
#   other_rss_bytes  RSS less the resident heap (the store's C memory,
#             thread stacks, the runtime's own): within TOLERANCE of the
#             larger of baseline and fresh plus STORE_MIB (16), the store's bounded C memory as
#             this script configures it (an 8 MiB block cache and two
#             4 MiB memtables). The fresh relay's cache and memtable hold
#             what a short warm-up without publishers put there, the
#             final one's what the run did, and a memtable's pages are
#             resident as far as it has been written since its flush.
# RSS and heap_resident_bytes are sums of those and are reported, not
# judged again. (The judgement was once final RSS and heap within 5% of
# fresh plus 16 MiB: a CI run failed it on RSS 2 MB over while the heap
# was within its own bound, the heap at its release floor and the store's
# cache and memtable 5.7 MB fuller; and uncollected garbage, up to as much
# as the live heap, counted as drift.) Goroutines and open files other than the store's own within TOLERANCE of the
# baseline plus SLACK_COUNT (2); out-queues, connections and NEG sessions
# at 0; the relay alive, with no error in its log.
#
# Each failed load-client iteration is classified from what the client
# printed, and only relay failures fail the soak:
#   refused  the relay said no explicitly (OK false, CLOSED, NEG-ERR,
#            rate-limited:, blocked:, slow subscriptions closed); that is
#            the designed answer to overload, not a failure;
#   busy     the client gave up waiting (its scenario timeout, dial or
#            read timeouts) on a busy machine, while the relay went on
#            answering /stats (sampled every INTERVAL; a relay that stops
#            answering fails the soak);
#   relay    anything else, in particular an event with no OK and no
#            timeout, a delivery missing without its subscription being
#            CLOSED, a duplicate, a connection dropped without a Close.
# Every loop must also pass at least one iteration, and refused + busy
# iterations must stay under half of each loop's (otherwise the load did
# not really run). Exit status 0 on pass, 1 on failure.
#
# Usage: scripts/soak.sh [DURATION_SECONDS]      (default 3600)
# Environment: INTERVAL (5), TOLERANCE (0.05), SLACK_MIB (16), LIVE_MIB (8),
#   STORE_MIB (16), SLACK_COUNT (2),
#   WARMUP (DURATION/10, at least 15), REWARM (WARMUP, at most 120),
#   NEG_WINDOW (2m), OUT (bench-results/soak-<date>).
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
DURATION=${1:-3600}
INTERVAL=${INTERVAL:-5}
TOLERANCE=${TOLERANCE:-0.05}
SLACK_MIB=${SLACK_MIB:-16}
LIVE_MIB=${LIVE_MIB:-8}
STORE_MIB=${STORE_MIB:-16}
SLACK_COUNT=${SLACK_COUNT:-2}
WARMUP=${WARMUP:-$(( DURATION / 10 > 15 ? DURATION / 10 : 15 ))}
OUT=${OUT:-bench-results/soak-$(date -u +%Y%m%dT%H%M%SZ)}
REWARM=${REWARM:-$(( WARMUP < 120 ? WARMUP : 120 ))}
NEG_WINDOW=${NEG_WINDOW:-2m}
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
# what grows after is drift or the store's size, not a cache filling.
export PETREL_RUNTIME_MEMORY_RELEASE_INTERVAL=1s PETREL_STORE_CACHE_BYTES=$((8 << 20)) \
	PETREL_STORE_BODY_CACHE_BYTES=$((1 << 20)) PETREL_STORE_ID_FILTER_BYTES=$((64 << 10)) \
	PETREL_STORE_MEMTABLE_BYTES=$((4 << 20))
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
start_relay() { # start_relay LOG: petrel serve on $WORK/data; sets SERVE_PID, URL, HTTP, PPROF
	# pprof, so that settle can have the relay collect (heap?gc=1).
	PPROF_PORT=$(free_port)
	PPROF=http://127.0.0.1:$PPROF_PORT
	PETREL_LOG_LEVEL=warn PETREL_SERVER_PPROF_LISTEN=127.0.0.1:$PPROF_PORT \
		"$P" serve --data "$WORK/data" --listen 127.0.0.1:0 2>"$OUT/$1" &
	SERVE_PID=$!
	URL=
	for _ in $(seq 600); do
		URL=$(grep -o 'url=ws://[0-9.:]*' "$OUT/$1" | head -1 | cut -d= -f2 || true)
		[ -n "$URL" ] && break
		# at warn level the listening line is not logged: ask the kernel
		PORT=$(ss -Hltnp 2>/dev/null | grep "pid=$SERVE_PID," | awk '{print $4}' | sed 's/.*://' | grep -vx "$PPROF_PORT" | head -1 || true)
		[ -n "$PORT" ] && URL=ws://127.0.0.1:$PORT && break
		kill -0 "$SERVE_PID" 2>/dev/null || break
		sleep 0.1
	done
	[ -n "$URL" ] || { echo "soak: petrel serve did not start" >&2; cat "$OUT/$1" >&2; exit 1; }
	HTTP=http://${URL#ws://}
}
stop_relay() { # stop_relay: SIGTERM, which must end it cleanly
	local st=0
	kill -TERM "$SERVE_PID"
	wait "$SERVE_PID" || st=$?
	SERVE_PID=
	[ "$st" -eq 0 ] || { echo "soak: petrel serve exited with status $st on SIGTERM" | tee -a "$OUT/summary.txt"; STOP_FAIL=1; }
}
STOP_FAIL=0
start_relay serve.log
echo "soak: relay $URL (pid $SERVE_PID), warm-up ${WARMUP}s, run ${DURATION}s, fresh warm-up ${REWARM}s, samples every ${INTERVAL}s in $OUT" >&2

stats() { curl -sf -m 10 "$HTTP/stats"; }
# open_files counts every descriptor; other_files leaves out the store's
# own files (their number follows the store's size, by design).
# goroutines leaves out the message handlers waiting for work (at most
# 64, kept by design: internal/server/handlers.go).
COLS='rss_bytes,heap_resident_bytes,heap_live_bytes,heap_free_bytes,other_rss_bytes,goroutines,open_files,other_files,out_queue_bytes,connections_active,subscriptions_active,neg_sessions_active,events_accepted,store_events,db_size_bytes,id_filter_bytes'
sample() { # sample PHASE: one CSV row (none, and a count, if /stats did not answer)
	local store_files
	store_files=$(ls -l "/proc/$SERVE_PID/fd" 2>/dev/null | grep -c -- "-> $WORK/data/" || true)
	stats | jq -r --arg phase "$1" --argjson sf "${store_files:-0}" '[(now|floor), $phase, .process.rss_bytes, .process.heap_resident_bytes, .process.heap_live_bytes,
		(.process.heap_resident_bytes - .process.heap_live_bytes), (.process.rss_bytes - .process.heap_resident_bytes), (.process.goroutines - (.process.handler_goroutines_idle // 0)), .process.open_files, (.process.open_files - $sf), .out_queue_bytes, .connections_active, .subscriptions_active,
		.neg_sessions_active, .events_accepted, .store_events, .db_size_bytes, .id_filter_bytes] | @csv' ||
		echo "$1" >>"$WORK/stats-unanswered"
}
echo "unix,phase,$COLS" >"$OUT/samples.csv"

# classify FILE: why a load-client iteration failed (see the header):
# relay, busy or refused. Relay failures are looked for first, so that an
# iteration with a drop and a timeout counts as a relay failure.
classify() {
	local f=$1.reasons
	# the failure lines of a bench table, or the error a tool printed
	grep -E '^(failure [0-9]+|FAIL|petrel |Error)' "$1" >"$f" || tail -n 5 "$1" >"$f"
	if grep -Eq 'unexpected OKs|duplicate|unparseable|fewer events than the store holds|returned twice|0 subscriptions CLOSED by the relay\)|answered OK true with a prefix|did not receive the liveness event|panic' "$f"; then
		echo relay
	elif grep -q 'got no OK' "$f" && ! grep -Eq 'timeout after|stopped sending' "$f"; then
		echo relay # an event neither acknowledged nor refused, with no timeout to explain it
	elif grep -Eqi 'timeout|deadline exceeded|timed out|connection reset|broken pipe|stopped sending' "$f"; then
		echo busy
	elif grep -Eq 'refused|CLOSED|rate-limited:|blocked:|NEG-ERR|restricted:|at capacity' "$f"; then
		echo refused
	else
		echo relay
	fi
}

# loop NAME CMD...: run CMD until $END, counting passes and each class of
# failure.
loop() {
	local name=$1
	shift
	local pass=0 refused=0 busy=0 relay=0 i=0 it=$WORK/iteration-$name class
	while [ "$(date +%s)" -lt "$END" ]; do
		i=$((i + 1))
		if "$@" "$i" >"$it" 2>&1; then
			pass=$((pass + 1))
			cat "$it" >>"$OUT/$name.log"
		else
			class=$(classify "$it")
			case $class in
			refused) refused=$((refused + 1)) ;;
			busy) busy=$((busy + 1)) ;;
			*)
				relay=$((relay + 1))
				# what failed, for the summary (CI shows only its tail)
				sed -n "1,3s/^/  $PHASE $name iteration $i: /p" "$it.reasons" >>"$WORK/relay-failures" ;;
			esac
			{ cat "$it"; echo "--- $name iteration $i failed: $class"; } >>"$OUT/$name.log"
		fi
	done
	echo "$name $pass $refused $busy $relay" >>"$WORK/counts"
}
B() { "$P" bench -q --url "$URL" "$@"; }
SEED=$((RANDOM * 1000))
publishers() { B parallel --conns 4 --window 16 --events 2000 --authors 50 --seed $((SEED + $1)); }
fanout() { B fanout --subs 40 --slow-subs 4 --events 300 --seed $((SEED + 100000 + $1)); }
# 64 connections a source address (127.0.0.2-127.0.0.5): the relay
# releases a closed connection's per-IP slot when it has handled the
# close, which on a busy machine can come after the next iteration's
# first connections; one iteration's leftovers and the next's together
# then stay within the relay's cap of 128 an address. (At 100 an address
# a CI run had an iteration's upgrades closed unanswered, the cap's
# refusal, counted as a relay failure.)
churn() { B conns --conns 200 --per-ip 64 --hold 2s; }
queries() { B req --fill -1 --requests 30 --limit 300; }
# NEG over a bounded window (the newest events), into a mirror that keeps
# what it has, so each session moves only what is new.
neg() { "$P" sync "$URL" --data "$WORK/mirror" --batch 2000 --since "$NEG_WINDOW" -q >/dev/null && sleep 1; }

run_load() { # run_load SECONDS PHASE: the mixed traffic, sampled
	END=$(( $(date +%s) + $1 ))
	PHASE=$2
	: >"$WORK/counts"
	LOOPS=()
	# The fresh relay's warm-up leaves the publishers out, so that its
	# store stays near the one the run left (fanout still adds a little).
	[ "$2" = rewarm ] || { loop publishers publishers & LOOPS+=($!); }
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
		s=$(stats | jq -r '"\(.connections_active) \(.out_queue_bytes) \(.neg_sessions_active)"' || true)
		[ "$s" = "0 0 0" ] && break
		sleep 0.5
	done
	# A collection first, so that heap_live_bytes is what is live (not
	# what the collector has yet to find dead, up to GOGC's 100% more),
	# then a few memory-release intervals for the release loop to return
	# the free heap above its floor.
	curl -sf -m 30 -o /dev/null "$PPROF/debug/pprof/heap?gc=1" || echo "soak: the relay did not collect on asking (pprof)" >&2
	sleep 5
	for _ in 1 2 3; do sample "$1" >>"$OUT/samples.csv"; sleep 1; done
	grep "\"$1\"" "$OUT/samples.csv" | tail -n 1
}

# The store starts with some events, so that the first queries and syncs
# have something to read.
B parallel --conns 2 --events 2000 --seed "$SEED" >/dev/null
run_load "$WARMUP" warmup
BASE=$(settle baseline)
run_load "$DURATION" load
FINAL=$(settle final)
# the limits the load tripped (a refusal the client cannot always name:
# a connection over the per-IP cap is closed unanswered)
TRIPPED=$(stats | jq -c '.limits_tripped // {} | with_entries(select(.value > 0))' || echo '(no answer)')
ALIVE=1
kill -0 "$SERVE_PID" 2>/dev/null || ALIVE=0
grep 'level=ERROR\|panic' "$OUT/serve.log" >"$WORK/errors" || true
# The same store, a new process: what memory the store's size accounts for.
stop_relay
start_relay serve-fresh.log
run_load "$REWARM" rewarm
FRESH=$(settle fresh)
grep 'level=ERROR\|panic' "$OUT/serve-fresh.log" >>"$WORK/errors" || true

# Report and judge.
field() { echo "$1" | cut -d, -f"$2"; }
fail=$STOP_FAIL
printf '%-22s %14s %14s %14s %14s %9s %9s\n' figure baseline peak final fresh store drift | tee -a "$OUT/summary.txt"
# heap_live_bytes's column (the free heap's bound is a share of it)
LIVE_COL=$(( $(echo "$COLS" | tr , '\n' | grep -nx heap_live_bytes | cut -d: -f1) + 2 ))
i=3
for name in ${COLS//,/ }; do
	b=$(field "$BASE" $i)
	f=$(field "$FINAL" $i)
	r=$(field "$FRESH" $i)
	peak=$(awk -F, -v c=$i 'NR > 1 && $2 == "\"load\"" && $c > m { m = $c } END { print m + 0 }' "$OUT/samples.csv")
	pct() { awk -v b="$1" -v f="$2" 'BEGIN { if (b > 0) printf "%+.1f%%", 100 * (f - b) / b; else print "-" }'; }
	store=-
	drift=$(pct "$b" "$f")
	verdict=
	case $name in
	rss_bytes | heap_resident_bytes)
		# sums of the judged parts below
		store=$(pct "$b" "$r")
		drift=$(pct "$r" "$f") ;;
	heap_live_bytes | other_rss_bytes)
		# store: fresh vs baseline; drift: final vs fresh. Judged against
		# the larger of baseline and fresh: each lacks one share the
		# final relay holds legitimately (the baseline, the store's
		# growth; the fresh relay, the publishers' traffic)
		store=$(pct "$b" "$r")
		drift=$(pct "$r" "$f")
		ref=$(( b > r ? b : r ))
		slack=$LIVE_MIB
		[ "$name" = other_rss_bytes ] && slack=$STORE_MIB
		bound=$(awk -v b="$ref" -v t="$TOLERANCE" -v s="$slack" 'BEGIN { printf "%d", b * (1 + t) + s * 1048576 }')
		[ "$f" -le "$bound" ] || { verdict="DRIFT (bound $bound: max(baseline, fresh) + ${TOLERANCE} + ${slack} MiB)"; fail=1; } ;;
	heap_free_bytes)
		# the release loop's floor: it returns free heap of at least
		# releaseMin (16 MiB) and a quarter of the live heap
		live=$(field "$FINAL" "$LIVE_COL")
		bound=$(awk -v l="$live" -v s="$SLACK_MIB" -v t="$TOLERANCE" 'BEGIN { m = s * 1048576; if (l / 4 > m) m = l / 4; printf "%d", m * (1 + t) }')
		[ "$f" -le "$bound" ] || { verdict="NOT RELEASED (bound $bound: max(${SLACK_MIB} MiB, live/4) + ${TOLERANCE})"; fail=1; } ;;
	goroutines | other_files)
		bound=$(awk -v b="$b" -v t="$TOLERANCE" -v s="$SLACK_COUNT" 'BEGIN { printf "%d", b * (1 + t) + s }')
		[ "$f" -le "$bound" ] || { verdict="DRIFT (bound $bound)"; fail=1; } ;;
	out_queue_bytes | connections_active | neg_sessions_active)
		[ "$f" -eq 0 ] || { verdict="NOT IDLE"; fail=1; } ;;
	esac
	printf '%-22s %14s %14s %14s %14s %9s %9s %s\n' "$name" "$b" "$peak" "$f" "$r" "$store" "$drift" "$verdict" | tee -a "$OUT/summary.txt"
	i=$((i + 1))
done
echo "(store: fresh vs baseline, the share that follows the store's size; drift: final vs fresh for memory, final vs baseline otherwise)" | tee -a "$OUT/summary.txt"
echo "relay limits tripped (warm-up and run): $TRIPPED" | tee -a "$OUT/summary.txt"
echo "load client iterations (phase, name, passed, refused by the relay, busy client, relay failures):" | tee -a "$OUT/summary.txt"
for phase in warmup load rewarm; do
	while read -r name pass refused busy relay; do
		printf '  %-8s %-11s %6d %6d %6d %6d\n' "$phase" "$name" "$pass" "$refused" "$busy" "$relay" | tee -a "$OUT/summary.txt"
		[ "$relay" -eq 0 ] || fail=1
		if [ "$phase" = load ]; then
			[ "$pass" -gt 0 ] || { echo "  $name never completed an iteration" | tee -a "$OUT/summary.txt"; fail=1; }
			[ $(( 2 * (refused + busy) )) -lt $(( pass + refused + busy )) ] ||
				{ echo "  $name: refused + busy iterations are not under half: the load did not really run" | tee -a "$OUT/summary.txt"; fail=1; }
		fi
	done <"$OUT/counts-$phase.txt"
done
if [ -s "$WORK/relay-failures" ]; then echo "relay failures (first lines of each):" | tee -a "$OUT/summary.txt"; head -n 30 "$WORK/relay-failures" | tee -a "$OUT/summary.txt"; fi
if [ -s "$WORK/stats-unanswered" ]; then echo "soak: /stats did not answer $(wc -l <"$WORK/stats-unanswered") times" | tee -a "$OUT/summary.txt"; fail=1; fi
if [ "$ALIVE" -eq 0 ]; then echo "soak: the relay died" | tee -a "$OUT/summary.txt"; fail=1; fi
if [ -s "$WORK/errors" ]; then echo "soak: errors in the relay's log:" | tee -a "$OUT/summary.txt"; head -5 "$WORK/errors" | tee -a "$OUT/summary.txt"; fail=1; fi
if [ "$fail" -eq 0 ]; then echo "soak: PASS (${DURATION}s)" | tee -a "$OUT/summary.txt"; else echo "soak: FAIL (${DURATION}s); logs in $OUT" | tee -a "$OUT/summary.txt"; fi
exit "$fail"
