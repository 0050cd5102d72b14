#!/usr/bin/env bash
# million.sh: many subscribed connections on one box, spread over K petrel
# nodes sharing the machine's PostgreSQL (127.0.0.1:5432) and NATS
# (127.0.0.1:4222), and events published on one node reaching every
# subscription exactly once (issue 14).
#
#   scripts/million.sh --nodes K --conns N [options]
#
# Options:
#   --events E     events published on node 1 after the hold, one after
#                  the other (default 1, at most 64)
#   --hold S       seconds the connections stay idle before the events
#                  (default 5). The relays' idle memory is read at its
#                  end; a node's release loop returns the connect burst's
#                  garbage two quiet checks (runtime.memory_release_interval,
#                  5 s) after its last connection, so a memory figure
#                  wants --hold 30 or more (docs/BENCHMARKS.md)
#   --timeout S    bound on the bench run (default 600); the cluster's
#                  watchdog stops everything 120 s after it regardless
#   --per-ip P     connections per source address 127.0.0.2, ... (default
#                  100, below the nodes' max_connections_per_ip of 128,
#                  which holds across the nodes)
#   --bin PATH     the petrel binary (default: built into the state dir)
#   --out DIR      keep the bench's JSON and the nodes' logs there
#   --min-avail MB stop the run (it fails) when the machine's MemAvailable
#                  falls below MB (default 3000): a run too big for the box
#                  ends before the kernel's OOM killer picks a victim
#
# Each node holds at most 19,000 connections (the open-file limit is
# 20,000 a process), so K must be at least N/19000. The clients are
# `petrel bench conns` worker processes (15,000 connections each), every
# connection bound to its own source address group in 127.0.0.0/8 and
# sent to node (i mod K). Every delivery is counted per subscription and
# per event: a missing or duplicated one makes the run fail.
#
# Prints the bench's figures, then as its last line:
#   million: <N> conns on <K> nodes, delivered <D>/<E>, relay <X> KiB/conn
# Exit status: 0 when every delivery arrived exactly once, 1 otherwise
# (2: bad usage). Everything started is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local

die() { printf 'million.sh: %s\n' "$*" >&2; exit 2; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2; }

nodes="" conns="" events=1 hold=5 timeout=600 per_ip=100 bin="" out="" min_avail=3000
while [ $# -gt 0 ]; do
	case "$1" in
	--nodes) nodes=$2; shift 2 ;;
	--conns) conns=$2; shift 2 ;;
	--events) events=$2; shift 2 ;;
	--hold) hold=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	--per-ip) per_ip=$2; shift 2 ;;
	--bin) bin=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--min-avail) min_avail=$2; shift 2 ;;
	-h | --help) usage ;;
	*) die "unknown option $1" ;;
	esac
done
for v in nodes conns events hold timeout per_ip min_avail; do
	[[ ${!v} =~ ^[0-9]+$ ]] && [ "${!v}" -ge 1 ] || die "--${v/_/-}: a positive integer"
done
per_node=$(((conns + nodes - 1) / nodes))
[ "$per_node" -le 19000 ] || die "$conns connections on $nodes nodes is $per_node a node: at most 19000 (open-file limit 20000); use --nodes $(((conns + 18999) / 19000)) or more"
[ "$per_ip" -le 128 ] || die "--per-ip: at most 128 (the nodes' max_connections_per_ip)"

state=$(mktemp -d "${TMPDIR:-/tmp}/petrel-million.XXXXXX")
watch_pid=""
cleanup() {
	[ -z "$watch_pid" ] || kill "$watch_pid" 2>/dev/null || true
	[ ! -s "$state/bench_pid" ] || kill -TERM "$(cat "$state/bench_pid")" 2>/dev/null || true
	scripts/cluster.sh stop --state "$state/c" >/dev/null 2>&1 || true
	if [ -n "$out" ]; then mkdir -p "$out" && cp "$state"/c/*.log "$state"/*.json "$out"/ 2>/dev/null || true; fi
	rm -rf "$state"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

if [ -z "$bin" ]; then
	bin=$state/petrel
	go build -o "$bin" ./cmd/petrel
fi

# One PostgreSQL connection per node (the machine's server allows 100),
# and the nodes' idle timeout past the run (no pings during the hold).
t0=$(date +%s%N)
PETREL_STORE_POSTGRES_MAX_CONNS=1 PETREL_RELAY_IDLE_TIMEOUT=$((timeout + 300))s scripts/cluster.sh start --state "$state/c" --nodes "$nodes" --bin "$bin" \
	--ttl "$((timeout + 120))" --timeout 120 >/dev/null
t1=$(date +%s%N)
env_get() { sed -n "s/^$1=//p" "$state/c/cluster.env" | tail -n1; }
urls="" pids=""
for i in $(seq "$nodes"); do
	urls="$urls${urls:+,}$(env_get "n${i}_url")"
	[ "$i" = 1 ] || pids="$pids${pids:+,}$(env_get "n${i}_pid")"
done
echo "million: $nodes nodes up in $(((t1 - t0) / 1000000)) ms"

# The machine's used memory (MemTotal - MemAvailable), before and at its
# peak, sampled every 2 s; below --min-avail the bench is stopped.
avail_mb() { awk '$1 == "MemAvailable:" { print int($2 / 1024) }' /proc/meminfo; }
total_mb=$(awk '$1 == "MemTotal:" { print int($2 / 1024) }' /proc/meminfo)
used0=$((total_mb - $(avail_mb)))
echo "$used0" >"$state/used_peak"
(
	peak=$used0
	while sleep 2; do
		a=$(avail_mb)
		u=$((total_mb - a))
		[ "$u" -le "$peak" ] || { peak=$u; echo "$peak" >"$state/used_peak"; }
		if [ "$a" -lt "$min_avail" ]; then
			echo "million: MemAvailable $a MB < --min-avail $min_avail MB: stopping the bench" >&2
			echo "$a" >"$state/mem_stop"
			# timeout(1) passes the signal to the bench, whose workers
			# end when their stdin closes.
			[ ! -s "$state/bench_pid" ] || kill -TERM "$(cat "$state/bench_pid")" 2>/dev/null || true
			break
		fi
	done
) &
watch_pid=$!

rc=0
pid_args=(--pid "$(env_get n1_pid)")
[ -z "$pids" ] || pid_args+=(--pids "$pids")
timeout --kill-after=30 "$((timeout + 60))" "$bin" bench conns --url "$(env_get n1_url)" --node-urls "$urls" "${pid_args[@]}" \
	--conns "$conns" --live-events "$events" --hold "${hold}s" --per-ip "$per_ip" --timeout "${timeout}s" \
	--json -q >"$state/result.json" &
echo $! >"$state/bench_pid"
wait $! || rc=$?
rm -f "$state/bench_pid"
kill "$watch_pid" 2>/dev/null || true
wait "$watch_pid" 2>/dev/null || true
watch_pid=""
used_peak=$(cat "$state/used_peak")
if [ -s "$state/mem_stop" ]; then
	echo "million: FAIL stopped at MemAvailable $(cat "$state/mem_stop") MB (< --min-avail $min_avail MB)"
	rc=1
fi
echo "million: machine used memory (MemTotal - MemAvailable) $used0 MB before the connections, $used_peak MB at its peak: $(((used_peak - used0) * 1048576 / conns)) bytes/conn all told"

python3 - "$state/result.json" "$conns" "$nodes" "$events" "$rc" <<'EOF'
import json, sys
path, n, k, e, rc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
try:
    r = json.load(open(path))
except Exception as err:
    print(f"million: no result from the bench (exit {rc}): {err}")
    print(f"million: {n} conns on {k} nodes, delivered 0/{n * e}, relay - KiB/conn")
    sys.exit(1)
c = r.get("conns") or {}
kib = lambda v: f"{v / 1024:.2f}" if v else "-"
for f in r.get("failures") or []:
    print("million: FAIL", f)
print(f"million: connections  opened {c.get('opened', 0)}  subscribed {c.get('subscribed', 0)}  held {c.get('held', 0)}  failed {c.get('dial_failed', 0)}  client processes {c.get('processes', 0)}  source addresses {c.get('source_addrs', 0)} ({c.get('source_range', '')})")
print(f"million: connect all  {c.get('connect_s', 0):.1f} s  ({c.get('connect_per_s', 0):.0f} conns/s)")
print(f"million: memory/conn  relay (RSS summed over nodes) {kib(c.get('relays_idle_rss_per_conn_bytes', 0))} KiB (private {kib(c.get('relays_idle_anon_per_conn_bytes', 0))} KiB)  kernel sockstat TCP mem {kib(c.get('kernel_sockstat_mem_per_conn_bytes', 0))} KiB  kernel slab {kib(c.get('kernel_slab_per_conn_bytes', 0))} KiB  client {kib(c.get('client_rss_per_conn_bytes', 0))} KiB (private {kib(c.get('client_anon_per_conn_bytes', 0))} KiB)")
print(f"million: delivery     {e} event(s): first OK to last delivery {c.get('last_delivery_from_ok_s', 0):.3f} s; missing {c.get('liveness_missing', 0)}, duplicated {c.get('liveness_duplicated', 0)}")
d, exp = c.get("liveness_received", 0), c.get("liveness_expected", 0)
ok = exp == n * e and d == exp and c.get("liveness_duplicated", 0) == 0 and not r.get("failures")
print(f"million: {n} conns on {k} nodes, delivered {d}/{n * e}, relay {kib(c.get('relays_idle_rss_per_conn_bytes', 0))} KiB/conn")
sys.exit(0 if ok else 1)
EOF
