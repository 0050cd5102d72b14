#!/usr/bin/env bash
# cluster.sh: K petrel nodes on loopback sharing one PostgreSQL schema and
# one NATS subject, optionally behind HAProxy: what the multi-node tests
# (internal/e2e) run against, and a cluster to measure by hand.
#
#   scripts/cluster.sh start [options]   start everything, wait until the
#                                        nodes hear each other on the bus
#   scripts/cluster.sh status            one line per process; exit 1 if
#                                        one is down
#   scripts/cluster.sh stop              stop everything start started
#   scripts/cluster.sh kill NAME         SIGKILL a node (n1...), nats or
#                                        haproxy; pg: an immediate shutdown
#                                        (a crash, recovered at restart)
#   scripts/cluster.sh restart NAME      stop NAME if it runs, start it
#                                        again on its port
#
# Options (start; --state, --timeout and --bin for the others):
#   --state DIR         where pids, ports, logs and cluster.env go
#                       (default /tmp/petrel-cluster-$UID)
#   --nodes K           petrel nodes, 1 to 128 (default 3)
#   --bin PATH          the petrel binary (default bin/petrel, built if
#                       missing)
#   --postgres URL      the database (default the machine's,
#                       postgres://postgres@127.0.0.1:5432/test); "private"
#                       starts a PostgreSQL of its own (initdb in a temp
#                       dir, on a free port, as the postgres user when run
#                       as root) that kill/restart may stop
#   --schema NAME       the PostgreSQL schema (default: a fresh one,
#                       petrel_cluster_<random>, dropped by stop)
#   --nats URL          the bus (default nats://127.0.0.1:4222); "private"
#                       starts a nats-server of its own on a free port
#   --subject S         the NATS subject (default petrel.cluster.<schema>)
#   --haproxy           HAProxy in front, from deploy/haproxy.cfg (bind
#                       lines and server list rewritten for loopback)
#   --config FILE       a petrel config file for every node; PETREL_*
#                       variables in the environment of start apply to
#                       every node too (and again at restart)
#   --ttl SECONDS       stop everything after this long, whatever happens
#                       to the caller (default 3600; 0: never)
#   --timeout SECONDS   how long one process may take to come up
#                       (default 60)
#
# The state dir's cluster.env lists what started, one key=value a line:
# nodes, n<i>_port, n<i>_pid, n<i>_url, haproxy_url, haproxy_stats_url,
# postgres_url, schema, nats_url, subject. Logs are <name>.log there.
# Private servers get free loopback ports; the machine's shared servers
# (5432, 4222) are never stopped. Processes are found again by the pids
# in the state dir (checked against /proc/PID/cmdline), never by name.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
self="$root/scripts/cluster.sh"

die() { printf 'cluster.sh: %s\n' "$*" >&2; exit 1; }
log() { printf 'cluster.sh: %s\n' "$*" >&2; }

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2; }

cmd=${1:-}
[ -n "$cmd" ] || usage
shift
name=""
case "$cmd" in
kill | restart)
	[ $# -ge 1 ] || die "$cmd: which process? (n1..nK, nats, pg, haproxy)"
	name=$1
	shift
	;;
start | stop | status) ;;
-h | --help | help) usage ;;
*) die "unknown command $cmd (start, stop, status, kill, restart)" ;;
esac

state=${TMPDIR:-/tmp}/petrel-cluster-$(id -u)
nodes=3
bin=""
pg="postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
nats="nats://127.0.0.1:4222"
schema=""
subject=""
haproxy=0
config=""
ttl=3600
timeout=60
while [ $# -gt 0 ]; do
	case "$1" in
	--state) state=$2; shift 2 ;;
	--nodes) nodes=$2; shift 2 ;;
	--bin) bin=$2; shift 2 ;;
	--postgres) pg=$2; shift 2 ;;
	--schema) schema=$2; shift 2 ;;
	--nats) nats=$2; shift 2 ;;
	--subject) subject=$2; shift 2 ;;
	--haproxy) haproxy=1; shift ;;
	--config) config=$2; shift 2 ;;
	--ttl) ttl=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	*) die "unknown option $1" ;;
	esac
done
[[ $nodes =~ ^[0-9]+$ ]] && [ "$nodes" -ge 1 ] && [ "$nodes" -le 128 ] || die "--nodes: 1 to 128"
[[ $ttl =~ ^[0-9]+$ ]] || die "--ttl: seconds"
[[ $timeout =~ ^[0-9]+$ ]] && [ "$timeout" -ge 1 ] || die "--timeout: seconds"
[ -z "$schema" ] || [[ $schema =~ ^[A-Za-z_][A-Za-z0-9_]{0,62}$ ]] || die "--schema: letters, digits and _"

mkdir -p "$state"
state=$(cd "$state" && pwd)
env_file="$state/cluster.env"

# One invocation at a time per state dir. Every process started below
# closes fd 9 (9>&-), so that none of them holds the lock.
exec 9>"$state/lock"
flock -w "$((timeout + 30))" 9 || die "$state is locked by another cluster.sh"

# --- state -----------------------------------------------------------------

# get KEY: the value recorded in cluster.env, or "".
get() {
	[ -f "$env_file" ] || return 0
	sed -n "s/^$1=//p" "$env_file" | tail -n1
}

# node_count: the number of nodes recorded (0 before start recorded it).
node_count() {
	local n
	n=$(get nodes)
	echo "${n:-0}"
}

# put KEY VALUE: record (or replace) a value in cluster.env.
put() {
	(
		flock 8
		tmp=$env_file.$BASHPID
		touch "$env_file"
		grep -v "^$1=" "$env_file" >"$tmp" || true
		printf '%s=%s\n' "$1" "$2" >>"$tmp"
		mv "$tmp" "$env_file"
	) 8>"$state/env.lock"
}

# alive PID EXE: PID runs and is EXE (its cmdline starts with it), so a
# recycled pid is never taken for ours.
alive() {
	local pid=$1 exe=$2 cmdline
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
	cmdline=$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline") || return 1
	case "$cmdline" in *"$exe"*) return 0 ;; esac
	return 1
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# new_port KEY: record under KEY a loopback port nothing listens on,
# below the ephemeral range (so no outgoing connection holds it), and not
# recorded before.
new_port() {
	local p
	for _ in $(seq 200); do
		p=$((20000 + RANDOM % 12000))
		grep -q "_port=$p\$" "$env_file" 2>/dev/null && continue
		if ! port_open "$p" && { ! command -v ss >/dev/null || [ -z "$(ss -Hltn "sport = :$p")" ]; }; then
			put "$1" "$p"
			return
		fi
	done
	die "no free port found"
}

# wait_up NAME PID CHECK...: wait until CHECK succeeds, failing early if
# the process (just started: its pid cannot have been recycled, but it
# may not have exec'd yet) exits.
wait_up() {
	local what=$1 pid=$2
	shift 2
	local deadline=$((SECONDS + timeout))
	until "$@" 2>/dev/null; do
		if ! kill -0 "$pid" 2>/dev/null; then
			tail -n 20 "$state/$what.log" >&2 || true
			die "$what exited while starting (log: $state/$what.log)"
		fi
		[ $SECONDS -lt $deadline ] || die "$what not up after ${timeout}s (log: $state/$what.log)"
		sleep 0.1
	done
}

# http_get PORT PATH: print the body of GET http://127.0.0.1:PORT/PATH;
# fail unless it answers 200 within 3 seconds. (HTTP/1.0: no chunks; bash
# alone, so that no HTTP client need be installed.)
http_get() {
	timeout 3 bash -c '
		exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" "$2" >&3
		IFS= read -r status <&3 || exit 1
		case "$status" in "HTTP/1."?" 200"*) ;; *) exit 1 ;; esac
		while IFS= read -r line <&3 && [ -n "${line%$'"'"'\r'"'"'}" ]; do :; done
		cat <&3
	' http_get "$1" "$2" 2>/dev/null
}

http_ok() { http_get "$1" "$2" >/dev/null; }

# stop_pid NAME EXE SIGNAL WAIT: signal the recorded process (its whole
# process group: each was started in a session of its own), wait up to
# WAIT seconds, then SIGKILL it.
stop_pid() {
	local what=$1 exe=$2 sig=$3 wait=$4 pid
	pid=$(get "${what}_pid")
	alive "$pid" "$exe" || return 0
	kill "-$sig" -- "-$pid" 2>/dev/null || kill "-$sig" "$pid" 2>/dev/null || true
	local deadline=$((SECONDS + wait))
	while alive "$pid" "$exe" && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
	if alive "$pid" "$exe"; then
		log "$what did not stop in ${wait}s: SIGKILL"
		kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
		while alive "$pid" "$exe"; do sleep 0.05; done
	fi
}

# --- PostgreSQL (private) ----------------------------------------------------

pg_bin() {
	local d
	if command -v pg_config >/dev/null && [ -x "$(pg_config --bindir)/initdb" ]; then
		pg_config --bindir
		return
	fi
	d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
	[ -n "$d" ] && [ -x "$d/initdb" ] || die "PostgreSQL server binaries (initdb, pg_ctl) not found"
	echo "$d"
}

# as_pg CMD...: run as the postgres user when root (PostgreSQL refuses to
# run as root), as ourselves otherwise.
as_pg() {
	if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

pg_start() {
	local dir port b
	dir=$(get pg_dir)
	port=$(get pg_port)
	b=$(pg_bin)
	if [ -z "$dir" ]; then
		dir=$(mktemp -d "${TMPDIR:-/tmp}/petrel-pg.XXXXXX")
		[ "$(id -u)" != 0 ] || chown postgres: "$dir"
		put pg_dir "$dir"
		new_port pg_port
		port=$(get pg_port)
		as_pg "$b/initdb" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 >"$state/pg.log" 2>&1 ||
			{ tail -n 20 "$state/pg.log" >&2; die "initdb failed"; }
	fi
	# The server's log goes to its own directory (the postgres user cannot
	# write the state dir); pg.log is a link to it.
	ln -sf "$dir/server.log" "$state/pg.log"
	as_pg "$b/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t "$timeout" \
		-o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null 9>&- ||
		{ tail -n 20 "$dir/server.log" >&2; die "PostgreSQL did not start"; }
	put pg_pid "$(head -n1 "$dir/data/postmaster.pid")"
	put postgres_url "postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
}

# pg_stop MODE: fast (a clean shutdown) or immediate (a crash).
pg_stop() {
	local dir
	dir=$(get pg_dir)
	[ -n "$dir" ] && [ -f "$dir/data/postmaster.pid" ] || return 0
	as_pg "$(pg_bin)/pg_ctl" -D "$dir/data" -m "$1" -w -t "$timeout" stop >/dev/null 2>&1 || true
}

# --- NATS (private) ------------------------------------------------------------

nats_exe() {
	if [ -x /usr/sbin/nats-server ]; then echo /usr/sbin/nats-server; else command -v nats-server || die "nats-server not found"; fi
}

nats_start() {
	local port exe
	port=$(get nats_port)
	[ -n "$port" ] || { new_port nats_port; port=$(get nats_port); }
	exe=$(nats_exe)
	setsid "$exe" -a 127.0.0.1 -p "$port" >>"$state/nats.log" 2>&1 </dev/null 9>&- &
	put nats_pid $!
	put nats_exe "$exe"
	put nats_url "nats://127.0.0.1:$port"
	wait_up nats "$(get nats_pid)" port_open "$port"
}

# --- petrel nodes ----------------------------------------------------------------

# node_start I: start node nI on its recorded port (a new one the first
# time), with the PETREL_* environment recorded at start, and wait until
# it answers /stats.
node_start() {
	local i=$1 port pgurl sch natsurl subj bin proxies=""
	port=$(get "n${i}_port")
	[ -n "$port" ] || { new_port "n${i}_port"; port=$(get "n${i}_port"); }
	pgurl=$(get postgres_url)
	sch=$(get schema)
	natsurl=$(get nats_url)
	subj=$(get subject)
	bin=$(get bin)
	[ "$(get haproxy)" != 1 ] || proxies=127.0.0.1
	(
		for v in ${!PETREL_@}; do unset "$v"; done
		# shellcheck source=/dev/null
		. "$state/node.env"
		export PETREL_STORE_BACKEND=postgres PETREL_STORE_POSTGRES_URL="$pgurl" \
			PETREL_STORE_POSTGRES_SCHEMA="$sch" PETREL_CLUSTER_NATS_URL="$natsurl" \
			PETREL_CLUSTER_SUBJECT="$subj" PETREL_CLUSTER_NODE="n$i"
		# Behind HAProxy, believe its X-Forwarded-For (unless told otherwise).
		[ -z "$proxies" ] || export PETREL_SERVER_TRUSTED_PROXIES="${PETREL_SERVER_TRUSTED_PROXIES:-$proxies}"
		exec setsid "$bin" serve --listen "127.0.0.1:$port" >>"$state/n$i.log" 2>&1 </dev/null 9>&-
	) &
	put "n${i}_pid" $!
	put "n${i}_url" "ws://127.0.0.1:$port"
	wait_up "n$i" "$(get "n${i}_pid")" http_ok "$port" /stats
}

# node_meshed PORT K: the node's bus is up and it hears the K-1 others.
node_meshed() {
	local doc
	doc=$(http_get "$1" /stats) || return 1
	[ "$2" = 1 ] && return 0
	grep -q '"connected": true' <<<"$doc" && grep -q "\"origins\": $(($2 - 1))," <<<"$doc"
}

# --- HAProxy ------------------------------------------------------------------------

haproxy_config() {
	local src=$root/deploy/haproxy.cfg port sport servers="" i
	[ -f "$src" ] || die "$src not found"
	port=$(get haproxy_port)
	sport=$(get haproxy_stats_port)
	for i in $(seq "$(node_count)"); do servers="$servers n$i:$(get "n${i}_port")"; done
	{
		# Two descriptors per proxied connection, within our own limit.
		printf 'global\n    maxconn %d\n    log stderr format raw local0 info\n\n' "$((($(ulimit -n) - 100) / 2))"
		awk -v port="$port" -v sport="$sport" -v servers="$servers" '
			/^[a-z]/ { section = $1 " " $2 }
			$1 == "bind" && section == "frontend petrel" { print "    bind 127.0.0.1:" port; bound++; next }
			$1 == "bind" && section == "frontend haproxy_stats" { print "    bind 127.0.0.1:" sport; next }
			$1 == "server" && section ~ /^backend / {
				if (!done) {
					opts = ""
					for (f = 4; f <= NF; f++) opts = opts " " $f
					n = split(servers, s, " ")
					for (j = 1; j <= n; j++) {
						split(s[j], kv, ":")
						print "    server " kv[1] " 127.0.0.1:" kv[2] opts
					}
					done = 1
				}
				next
			}
			{ print }
			END { if (!bound || !done) exit 1 }
		' "$src" || die "$src: no bind line in frontend petrel, or no server line"
	} >"$state/haproxy.cfg"
}

haproxy_start() {
	local exe
	exe=$(command -v haproxy) || die "haproxy not found"
	haproxy_config
	"$exe" -c -q -f "$state/haproxy.cfg" >>"$state/haproxy.log" 2>&1 ||
		{ tail -n 20 "$state/haproxy.log" >&2; die "haproxy rejects $state/haproxy.cfg"; }
	setsid "$exe" -db -f "$state/haproxy.cfg" >>"$state/haproxy.log" 2>&1 </dev/null 9>&- &
	put haproxy_pid $!
	put haproxy_exe "$exe"
	wait_up haproxy "$(get haproxy_pid)" http_ok "$(get haproxy_stats_port)" "/"
}

# --- commands ------------------------------------------------------------------------

running() {
	local i
	for i in $(seq "$(node_count)"); do alive "$(get "n${i}_pid")" "$(get bin)" && return 0; done
	alive "$(get nats_pid)" "$(get nats_exe)" && return 0
	alive "$(get haproxy_pid)" "$(get haproxy_exe)" && return 0
	return 1
}

cmd_stop() {
	local i sch pgurl
	[ -f "$env_file" ] || return 0
	# The watchdog first (unless it is what runs this stop).
	if [ "$(get watchdog_pid)" != "$$" ]; then stop_pid watchdog "$state" TERM 1; fi
	stop_pid haproxy "$(get haproxy_exe)" TERM 5
	for i in $(seq "$(node_count)"); do
		pid=$(get "n${i}_pid")
		alive "$pid" "$(get bin)" && kill -TERM "$pid" 2>/dev/null
	done
	for i in $(seq "$(node_count)"); do stop_pid "n$i" "$(get bin)" TERM 20; done
	stop_pid nats "$(get nats_exe)" TERM 5
	sch=$(get schema_owned)
	pgurl=$(get postgres_url)
	if [ -n "$(get pg_dir)" ]; then
		pg_stop fast
		# Keep the server's log beside the others.
		cp --remove-destination "$(get pg_dir)/server.log" "$state/pg.log" 2>/dev/null || true
		rm -rf "$(get pg_dir)"
	elif [ -n "$sch" ]; then
		psql "$pgurl" -qc "DROP SCHEMA IF EXISTS $sch CASCADE" >/dev/null 2>&1 ||
			log "could not drop schema $sch at $pgurl"
	fi
	rm -f "$env_file" "$state/node.env"
}

cmd_start() {
	local i
	if [ -f "$env_file" ]; then
		running && die "a cluster runs from $state already (cluster.sh stop --state $state)"
		cmd_stop # stale: clean up what is left of it
	fi
	: >"$env_file"
	rm -f "$state"/*.log
	# Whatever makes start fail (die, a failed command, a signal) stops
	# what it started.
	trap 'rc=$?; if [ $rc != 0 ]; then log "start failed: stopping what started"; cmd_stop; fi' EXIT
	trap 'exit 1' INT TERM
	if [ -z "$bin" ]; then
		bin=$root/bin/petrel
		if [ ! -x "$bin" ]; then
			log "building $bin"
			(cd "$root" && GOTOOLCHAIN=local go build -o bin/petrel ./cmd/petrel)
		fi
	fi
	[ -x "$bin" ] || die "petrel binary $bin not found"
	put bin "$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
	put nodes "$nodes"
	put haproxy "$haproxy"
	# The caller's PETREL_* settings, for every node, now and at restart.
	for v in ${!PETREL_@}; do printf 'export %s=%q\n' "$v" "${!v}"; done >"$state/node.env"
	[ -z "$config" ] || printf 'export PETREL_CONFIG=%q\n' "$(cd "$(dirname "$config")" && pwd)/$(basename "$config")" >>"$state/node.env"

	if [ -z "$schema" ]; then
		schema="petrel_cluster_$(od -An -N5 -tx1 /dev/urandom | tr -d ' \n')"
		put schema_owned "$schema"
	fi
	put schema "$schema"
	put subject "${subject:-petrel.cluster.$schema}"

	if [ "$pg" = private ]; then
		pg_start
	else
		put postgres_url "$pg"
	fi
	if [ "$nats" = private ]; then
		nats_start
	else
		put nats_url "$nats"
	fi
	if [ "$ttl" -gt 0 ]; then
		setsid bash -c 'sleep "$1" && [ -d "$3" ] && exec "$2" stop --state "$3"' watchdog "$ttl" "$self" "$state" >/dev/null 2>&1 </dev/null 9>&- &
		put watchdog_pid $!
	fi
	if [ "$haproxy" = 1 ]; then
		new_port haproxy_port
		new_port haproxy_stats_port
	fi
	for i in $(seq "$nodes"); do new_port "n${i}_port"; done
	# The first node applies the migrations; the others then start together.
	node_start 1
	local pids=""
	for i in $(seq 2 "$nodes"); do
		node_start "$i" &
		pids="$pids $!"
	done
	for p in $pids; do wait "$p" || die "a node did not start"; done
	for i in $(seq "$nodes"); do
		local deadline=$((SECONDS + timeout))
		until node_meshed "$(get "n${i}_port")" "$nodes"; do
			[ $SECONDS -lt $deadline ] || die "n$i does not hear the other nodes after ${timeout}s (log: $state/n$i.log)"
			sleep 0.1
		done
	done
	if [ "$haproxy" = 1 ]; then
		haproxy_start
		put haproxy_url "ws://127.0.0.1:$(get haproxy_port)"
		put haproxy_stats_url "http://127.0.0.1:$(get haproxy_stats_port)/"
	fi
	trap - EXIT INT TERM
	cat "$env_file"
}

cmd_status() {
	local bad=0 i line
	[ -f "$env_file" ] || die "no cluster in $state"
	row() {
		local what=$1 pid=$2 exe=$3 port=$4 extra=${5:-}
		if alive "$pid" "$exe"; then line=up; else line=down; bad=1; fi
		printf '%-8s %-5s pid %-8s port %-6s %s\n' "$what" "$line" "$pid" "$port" "$extra"
	}
	for i in $(seq "$(node_count)"); do
		local port doc extra=""
		port=$(get "n${i}_port")
		if doc=$(http_get "$port" /stats); then
			extra=$(grep -oE '"(connections_active|store_unavailable|connected|origins)": [a-z0-9]+' <<<"$doc" | tr -d '"' | tr '\n' ' ')
		fi
		row "n$i" "$(get "n${i}_pid")" "$(get bin)" "$port" "$extra"
	done
	[ -z "$(get nats_pid)" ] || row nats "$(get nats_pid)" "$(get nats_exe)" "$(get nats_port)"
	if [ -n "$(get pg_dir)" ]; then
		if as_pg "$(pg_bin)/pg_ctl" -D "$(get pg_dir)/data" status >/dev/null 2>&1; then line=up; else line=down; bad=1; fi
		printf '%-8s %-5s pid %-8s port %-6s %s\n' pg "$line" "$(head -n1 "$(get pg_dir)/data/postmaster.pid" 2>/dev/null)" "$(get pg_port)" "$(get pg_dir)"
	fi
	[ -z "$(get haproxy_pid)" ] || row haproxy "$(get haproxy_pid)" "$(get haproxy_exe)" "$(get haproxy_port)" "stats $(get haproxy_stats_url)"
	return $bad
}

cmd_kill() {
	local pid
	case "$name" in
	n[0-9]*)
		pid=$(get "${name}_pid")
		[ -n "$pid" ] || die "no node $name"
		alive "$pid" "$(get bin)" || die "$name is not running"
		kill -KILL "$pid"
		while alive "$pid" "$(get bin)"; do sleep 0.05; done
		;;
	nats)
		alive "$(get nats_pid)" "$(get nats_exe)" || die "no private nats-server running"
		kill -KILL "$(get nats_pid)"
		while alive "$(get nats_pid)" "$(get nats_exe)"; do sleep 0.05; done
		;;
	haproxy)
		alive "$(get haproxy_pid)" "$(get haproxy_exe)" || die "haproxy is not running"
		kill -KILL "$(get haproxy_pid)"
		;;
	pg)
		[ -n "$(get pg_dir)" ] || die "no private PostgreSQL (start --postgres private)"
		pg_stop immediate
		;;
	*) die "kill: unknown process $name" ;;
	esac
}

cmd_restart() {
	case "$name" in
	n[0-9]*)
		local i=${name#n}
		[ -n "$(get "${name}_port")" ] || die "no node $name"
		stop_pid "$name" "$(get bin)" TERM 20
		node_start "$i"
		;;
	nats)
		[ -n "$(get nats_port)" ] || die "no private nats-server"
		stop_pid nats "$(get nats_exe)" TERM 5
		nats_start
		;;
	haproxy)
		[ -n "$(get haproxy_port)" ] || die "no haproxy"
		stop_pid haproxy "$(get haproxy_exe)" TERM 5
		haproxy_start
		;;
	pg)
		[ -n "$(get pg_dir)" ] || die "no private PostgreSQL (start --postgres private)"
		pg_stop fast
		pg_start
		;;
	*) die "restart: unknown process $name" ;;
	esac
}

case "$cmd" in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
kill) cmd_kill ;;
restart) cmd_restart ;;
esac
