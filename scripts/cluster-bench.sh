#!/usr/bin/env bash
# cluster-bench.sh: the many-nodes measurements of docs/BENCHMARKS.md
# (issue 13), on loopback, with the machine's PostgreSQL and NATS:
#
#   delivery  three nodes (scripts/cluster.sh); publish on node 1 at
#             RATE events/s, SUBS subscribers on node 3; latency from the
#             publisher's OK to each delivery, every delivery counted
#   ingest    8 publishing connections into one node on PostgreSQL, then
#             into one node on the embedded store, same events; events/s
#             and CPU per event of the relay and of PostgreSQL (every
#             process of the postgres user, from /proc)
#   ladder    the open-loop ladder against one node on PostgreSQL, then
#             against three nodes behind HAProxy
#
# Usage: scripts/cluster-bench.sh [part...]   (default: all three)
# Environment: RATE (1000), EVENTS (delivery: 20000), SUBS (10),
#   INGEST_EVENTS (40000), LADDER ("--start 500 --step 500 --steps 10"),
#   HOLD (5s), OUT (bench-results/cluster-<date>).
# Every run is bounded (bench --timeout, cluster.sh --ttl) and everything
# started is stopped on exit. Results: $OUT/*.json and a summary on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
PETREL_SETUP_SERVICES=1 scripts/setup.sh
OUT=${OUT:-bench-results/cluster-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BIN=$OUT/petrel
go build -o "$BIN" ./cmd/petrel
RATE=${RATE:-1000}
EVENTS=${EVENTS:-20000}
SUBS=${SUBS:-10}
INGEST_EVENTS=${INGEST_EVENTS:-40000}
LADDER=${LADDER:---start 500 --step 500 --steps 10}
HOLD=${HOLD:-5s}
STATE=$(mktemp -d)
PG="postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(delivery ingest ladder)

cluster() { scripts/cluster.sh "$@" --state "$STATE/c" --bin "$BIN"; }
env_get() { sed -n "s/^$1=//p" "$STATE/c/cluster.env" | tail -n1; }
stop_all() {
	cluster stop >/dev/null 2>&1 || true
	if [ -n "${EPID:-}" ]; then kill "$EPID" 2>/dev/null || true; wait "$EPID" 2>/dev/null || true; EPID=; fi
}
trap 'stop_all; rm -rf "$STATE"' EXIT

# pg_ticks: CPU clock ticks used so far by every process of the postgres
# user (the server's backends, WAL writer, checkpointer...).
pg_ticks() {
	local t=0 pid f
	for pid in $(pgrep -u postgres || true); do
		f=$(cat "/proc/$pid/stat" 2>/dev/null) || continue
		f=${f##*) }
		# fields after the comm: state is $1, utime $12, stime $13
		set -- $f
		t=$((t + ${12} + ${13}))
	done
	echo "$t"
}

bench() { "$BIN" bench "$@" --json -q; }

summary() { printf '%s\n' "$*" | tee -a "$OUT/summary.txt"; }

for part in "${parts[@]}"; do
	case "$part" in
	delivery)
		cluster start --nodes 3 --ttl 900 >/dev/null
		n1=$(env_get n1_url) n3=$(env_get n3_url)
		bench fanout --url "$n1" --sub-url "$n3" --rate "$RATE" --events "$EVENTS" --subs "$SUBS" \
			--pid "$(env_get n1_pid)" --timeout 5m >"$OUT/delivery.json" || true
		summary "delivery node1->node3 at $RATE ev/s, $SUBS subs: $(jq -r '
			"accepted \(.ok.accepted)/\(.ok.sent), deliveries \(.deliveries.received)/\(.deliveries.expected) dup \(.deliveries.duplicated), OK->delivery p50 \(.latency.delivery_from_ok.p50_ms) ms p99 \(.latency.delivery_from_ok.p99_ms) ms max \(.latency.delivery_from_ok.max_ms) ms, send->delivery p99 \(.latency.delivery.p99_ms) ms, failures \(.failures|length)"' "$OUT/delivery.json")"
		cluster stop >/dev/null
		;;
	ingest)
		cluster start --nodes 1 --ttl 900 >/dev/null
		t0=$(pg_ticks)
		bench parallel --url "$(env_get n1_url)" --conns 8 --events "$INGEST_EVENTS" \
			--pid "$(env_get n1_pid)" --timeout 5m >"$OUT/ingest-postgres.json" || true
		t1=$(pg_ticks)
		cluster stop >/dev/null
		hz=$(getconf CLK_TCK)
		acc=$(jq '.ok.accepted' "$OUT/ingest-postgres.json")
		pgus=$(awk -v d=$((t1 - t0)) -v hz="$hz" -v n="$acc" 'BEGIN { if (n > 0) printf "%.1f", d / hz * 1e6 / n; else print "-" }')
		summary "ingest postgres, 8 conns: $(jq -r '"\(.rates_per_s.accepted_events|floor) ev/s accepted \(.ok.accepted)/\(.ok.sent), relay \(.relay.cpu_us_per_accepted_event // "-") cpu-us/event"' "$OUT/ingest-postgres.json"), postgres $pgus cpu-us/event"
		data=$(mktemp -d)
		port=$((7900 + RANDOM % 90))
		"$BIN" serve --listen "127.0.0.1:$port" --data "$data/store" >"$OUT/embedded.log" 2>&1 &
		EPID=$!
		for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/stats" && break; sleep 0.1; done
		bench parallel --url "ws://127.0.0.1:$port" --conns 8 --events "$INGEST_EVENTS" \
			--pid "$EPID" --timeout 5m >"$OUT/ingest-embedded.json" || true
		kill "$EPID"; wait "$EPID" 2>/dev/null || true; EPID=
		rm -rf "$data"
		summary "ingest embedded, 8 conns: $(jq -r '"\(.rates_per_s.accepted_events|floor) ev/s accepted \(.ok.accepted)/\(.ok.sent), relay \(.relay.cpu_us_per_accepted_event // "-") cpu-us/event"' "$OUT/ingest-embedded.json")"
		;;
	ladder)
		cluster start --nodes 1 --ttl 900 >/dev/null
		# shellcheck disable=SC2086
		bench ladder --url "$(env_get n1_url)" $LADDER --hold "$HOLD" --pid "$(env_get n1_pid)" \
			--timeout 10m >"$OUT/ladder-1node.json" || true
		cluster stop >/dev/null
		summary "ladder, 1 node on postgres: $(jq -r '"knee \(.ladder.knee.offered_per_s // "none") ev/s, capacity \(.ladder.capacity_per_s|floor) ev/s"' "$OUT/ladder-1node.json")"
		cluster start --nodes 3 --haproxy --ttl 900 >/dev/null
		# shellcheck disable=SC2086
		bench ladder --url "$(env_get haproxy_url)" $LADDER --hold "$HOLD" \
			--timeout 10m >"$OUT/ladder-3nodes.json" || true
		cluster stop >/dev/null
		summary "ladder, 3 nodes behind haproxy: $(jq -r '"knee \(.ladder.knee.offered_per_s // "none") ev/s, capacity \(.ladder.capacity_per_s|floor) ev/s"' "$OUT/ladder-3nodes.json")"
		;;
	*)
		echo "cluster-bench.sh: unknown part $part (delivery, ingest, ladder)" >&2
		exit 2
		;;
	esac
done
echo "results in $OUT" >&2
