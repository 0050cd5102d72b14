#!/usr/bin/env bash
# bench-cli.sh: whole-process timings of petrel's client commands (issue
# 15), each beside `petrel version`, with hyperfine: minimum and median
# of many runs, start-up included. The relay (petrel serve) runs pinned to
# CPU 0, the measured commands to CPU 1. Each case's minor page faults
# (median of 21 more runs: perf's page-faults, else GNU time's %R) go beside the times: on a
# machine where a fault costs ~12 µs they are most of start-up, and they
# do not depend on how busy the machine is (docs/BENCHMARKS.md, issue 15).
# Results go to $OUT (default ./bench-results/cli-<date>): hyperfine's
# JSON per case and round, the fault counts (NAME.faults) and table.md.
#
# Each case is timed in ROUNDS rounds (default 5), each round followed by
# as many runs of `petrel version`; a case's "− version" column is taken
# against those runs, timed beside it, so that a slow spell of a noisy
# machine during one case does not skew every other case's difference
# (the version row is its own runs).
#
# READBACK=1 times the binaries as an installed one is after a reboot: their
# pages are dropped from the page cache after the build, so that the first
# runs read them back (as linked, the page cache holds them as the linker
# wrote them, in 2 MiB folios that the kernel maps with one PMD each, and
# start-up can be a millisecond faster: docs/BENCHMARKS.md, twenty-first
# sitting; twice as fast on the twenty-sixth sitting's guest, whose DAMON
# pageout evicts a file unused for a minute, so that its next run reads it
# back in small folios: `version` drifted by 7 ms within one run as linked
# and stayed within 3 ms read back). Where the figures must compare across
# runs, use READBACK=1.
#
# Usage: scripts/bench-cli.sh          Environment: RUNS (default 300), READBACK.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
PETREL_SETUP_SERVICES=0 scripts/setup.sh >/dev/null
command -v hyperfine >/dev/null || apt-get install -y hyperfine >/dev/null
[ -x /usr/bin/time ] || apt-get install -y time >/dev/null
FAULTS=time
perf stat -e page-faults true >/dev/null 2>&1 && FAULTS=perf
RUNS=${RUNS:-300}
OUT=${OUT:-bench-results/cli-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
P=$WORK/petrel
go build -o "$P" ./cmd/petrel
go build -o "$WORK/startupfloor" ./scripts/startupfloor
if [ "${READBACK:-}" = 1 ]; then
	sync "$P" "$WORK/startupfloor"
	for b in "$P" "$WORK/startupfloor"; do dd if="$b" iflag=nocache count=0 status=none; done
fi
export PETREL_CONFIG=

echo "fixtures: 100,000 events by 1,000 authors" >&2
go run ./scripts/genevents -n 100000 -authors 1000 >"$WORK/100k.jsonl"
"$P" import -q --data "$WORK/store100k" "$WORK/100k.jsonl" >/dev/null
tail -n 10000 "$WORK/100k.jsonl" >"$WORK/10k.jsonl"
"$P" import -q --data "$WORK/relay" "$WORK/10k.jsonl" >/dev/null

serve() { # serve DATA PORT: petrel serve on CPU 0, waits until it answers
	PETREL_RELAY_MAX_LIMIT=10000 taskset -c 0 "$P" serve --data "$1" --listen "127.0.0.1:$2" >>"$OUT/serve.log" 2>&1 &
	PIDS+=($!)
	for _ in $(seq 300); do
		curl -s -o /dev/null "http://127.0.0.1:$2/" && [ -S "$1/petrel.sock" ] && return
		sleep 0.02
	done
	echo "serve $1 did not start" >&2
	exit 1
}
serve "$WORK/relay" 17801
RELAY=ws://127.0.0.1:17801

S=$("$P" key generate)
PK=$("$P" key public "$S")
S2=$("$P" key generate)
PK2=$("$P" key public "$S2")
NPUB=$("$P" encode npub "$PK")
ID=$(sed -n 50000p "$WORK/100k.jsonl" | sed 's/^{"id":"\([0-9a-f]*\)".*/\1/')
NEVENT=$("$P" encode nevent "$ID" --relay "$RELAY" --author "$PK" --kind 1)
PAYLOAD=$("$P" encrypt --sec "$S" -p "$PK2" "a message of typical length for a direct message")
RUMOR='{"kind":14,"content":"a message of typical length for a direct message","tags":[["p","'$PK2'"]]}'
WRAP=$("$P" gift wrap --sec "$S" -p "$PK2" "$RUMOR")
EVENT=$(head -1 "$WORK/100k.jsonl")
FEED=()
for i in $(seq 0 49); do FEED+=(-a "$(sed -n "$((i + 1))p" "$WORK/100k.jsonl" | sed 's/.*"pubkey":"\([0-9a-f]*\)".*/\1/')"); done

ROUNDS=${ROUNDS:-5}

# hf NAME RUNS JSON CMD: hyperfine (on CPU 1) of CMD, RUNS runs.
hf() {
	taskset -c 1 hyperfine -N --warmup 10 --runs "$2" --export-json "$3" --command-name "$1" "$4" >>"$OUT/$1.txt" 2>&1 ||
		{ cat "$OUT/$1.txt" >&2; exit 1; }
}

# case NAME RUNS ARGS...: "petrel ARGS" in ROUNDS rounds, each followed by
# as many runs of "petrel version" (not for the version case itself).
case_() {
	local name=$1 runs=$2
	shift 2
	local cmd=$P
	for a in "$@"; do cmd+=" $(printf '%q' "$a")"; done
	local per=$(((runs + ROUNDS - 1) / ROUNDS)) r
	: >"$OUT/$name.txt"
	for r in $(seq "$ROUNDS"); do
		hf "$name" "$per" "$OUT/$name.r$r.json" "$cmd"
		[ "$name" = version ] || hf "$name" "$per" "$OUT/$name.v$r.json" "$P version"
	done
	# Page faults of 21 more runs (the median goes in the table): unlike
	# times, they do not depend on how busy the machine is. perf counts
	# the faults taken (traps); GNU time's %R, the fallback, also counts
	# the pages internal/startup maps ahead, which are not traps.
	for _ in $(seq 21); do
		if [ "$FAULTS" = perf ]; then
			taskset -c 1 perf stat -x, -e page-faults -o "$OUT/$name.fault1" "$P" "$@" >/dev/null 2>&1 || true
			sed -n 's/^\([0-9]*\),.*page-faults.*/\1/p' "$OUT/$name.fault1" >>"$OUT/$name.faults"
		else
			taskset -c 1 /usr/bin/time -f %R -o "$OUT/$name.fault1" "$P" "$@" >/dev/null 2>&1 || true
			cat "$OUT/$name.fault1" >>"$OUT/$name.faults"
		fi
	done
	rm -f "$OUT/$name.fault1"
}
case_ version "$RUNS" version
P=$WORK/startupfloor case_ startup-floor "$RUNS" version
case_ key-generate "$RUNS" key generate
case_ encode-npub "$RUNS" encode npub "$PK"
case_ decode-npub "$RUNS" decode "$NPUB"
case_ decode-nevent "$RUNS" decode "$NEVENT"
case_ sign-event "$RUNS" event --sec "$S" -c "hello from the benchmark"
case_ nip44-encrypt "$RUNS" encrypt --sec "$S" -p "$PK2" "a message of typical length for a direct message"
case_ nip44-decrypt "$RUNS" decrypt --sec "$S2" -p "$PK" "$PAYLOAD"
case_ gift-wrap "$RUNS" gift wrap --sec "$S" -p "$PK2" "$RUMOR"
case_ gift-unwrap "$RUNS" gift unwrap --sec "$S2" "$WRAP"
case_ verify "$RUNS" verify "$EVENT"
case_ publish "$RUNS" event --sec "$S" -c "published by the benchmark" "$RELAY"
case_ req-500-relay 100 req -l 500 "$RELAY"
case_ req-10000-relay 30 req -l 10000 "$RELAY"
case_ store-id-100k "$RUNS" req --store "$WORK/store100k" -i "$ID"
case_ store-feed-500-100k 100 req --store "$WORK/store100k" "${FEED[@]}" -l 500
serve "$WORK/store100k" 17802
case_ served-store-id-100k "$RUNS" req --store "$WORK/store100k" -i "$ID"
case_ served-store-feed-500-100k 100 req --store "$WORK/store100k" "${FEED[@]}" -l 500

FAULTS=$FAULTS python3 - "$OUT" <<'PY' | tee "$OUT/table.md"
import json, os, sys
out = sys.argv[1]
rows = []
for name in ["version", "startup-floor", "key-generate", "encode-npub", "decode-npub", "decode-nevent", "sign-event",
             "nip44-encrypt", "nip44-decrypt", "gift-wrap", "gift-unwrap", "verify", "publish",
             "req-500-relay", "req-10000-relay", "store-id-100k", "store-feed-500-100k",
             "served-store-id-100k", "served-store-feed-500-100k"]:
    times, beside = [], []
    for f in sorted(os.listdir(out)):
        if f.startswith(name + ".r") and f.endswith(".json"):
            times += json.load(open(os.path.join(out, f)))["results"][0]["times"]
        if f.startswith(name + ".v") and f.endswith(".json"):
            beside += json.load(open(os.path.join(out, f)))["results"][0]["times"]
    times.sort()
    base = min(beside or times)
    faults = sorted(int(l.split()[-1]) for l in open(os.path.join(out, name + ".faults")) if l.strip())
    rows.append((name, times[0] * 1e3, times[len(times) // 2] * 1e3, base * 1e3, len(times), faults[len(faults) // 2]))
basef = rows[0][5]
print(f"| case | min ms | median ms | min − version ms (version beside it, min) | runs | {'page faults (perf)' if os.environ.get('FAULTS') == 'perf' else 'minor faults (%R)'}, median of 21 | − version |")
print("|---|---|---|---|---|---|---|")
for name, mn, med, base, n, f in rows:
    print(f"| {name} | {mn:.2f} | {med:.2f} | {mn - base:+.2f} ({base:.2f}) | {n} | {f} | {f - basef:+d} |")
PY
