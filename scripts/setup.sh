#!/usr/bin/env bash
# setup.sh: install what petrel's build and tests need on a fresh Debian
# machine, and start the local services its tests use. Idempotent: it only
# acts on what is missing. Run as root (or with sudo available).
set -euo pipefail

log() { printf 'setup: %s\n' "$*" >&2; }

as_root() {
	if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
		log "need root for: $*"; return 1; fi
}

# libsecp256k1 (schnorrsig) is loaded at run time; the relay falls back to a
# pure-Go verifier without it, 3-4x slower.
if ! ldconfig -p 2>/dev/null | grep 'libsecp256k1\.so' >/dev/null; then # not grep -q: with pipefail, ldconfig's SIGPIPE would read as absent
	log "installing libsecp256k1"
	as_root apt-get update -qq >/dev/null || true
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libsecp256k1-dev >/dev/null
fi

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

apt_install() {
	log "installing $*"
	if [ -z "${apt_updated:-}" ]; then
		as_root apt-get update -qq >/dev/null || true
		apt_updated=1
	fi
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# Python 3 runs the example write-policy plugin's test (examples/plugins).
if ! command -v python3 >/dev/null; then
	apt_install python3
fi

# PostgreSQL (the shared store), NATS (the live bus) and HAProxy (the load
# balancer) are what the multi-node tests run against: real servers, on
# loopback. Install what is missing, start what is stopped.
if [ "${PETREL_SETUP_SERVICES:-1}" = 1 ]; then
	if ! command -v pg_ctlcluster >/dev/null; then
		apt_install postgresql
		fresh_pg=1
	fi
	if [ ! -x /usr/sbin/nats-server ]; then
		apt_install nats-server
	fi
	if ! command -v haproxy >/dev/null; then
		apt_install haproxy
	fi
	# Headless Chromium loads the dashboard in its browser test
	# (internal/server, TestDashboardInBrowser).
	if ! command -v chromium >/dev/null; then
		apt_install chromium
	fi
	pgver="$(ls /etc/postgresql | sort -n | tail -n1)"
	if [ -n "${fresh_pg:-}" ]; then
		# The tests connect as postgres over TCP without a password, as on
		# the development machines: trust loopback connections.
		hba="/etc/postgresql/$pgver/main/pg_hba.conf"
		as_root sh -c "printf 'host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\n' | cat - '$hba' > '$hba.new' && mv '$hba.new' '$hba'"
	fi
	if ! port_open 5432; then
		log "starting PostgreSQL"
		as_root pg_ctlcluster --skip-systemctl-redirect "$pgver" main start || log "could not start PostgreSQL"
		for _ in $(seq 100); do port_open 5432 && break; sleep 0.1; done
	fi
	if [ -n "${fresh_pg:-}" ] || ! psql -h 127.0.0.1 -U postgres -d test -Atc 'select 1' >/dev/null 2>&1; then
		psql -h 127.0.0.1 -U postgres -d postgres -Atc "select 1 from pg_database where datname = 'test'" 2>/dev/null | grep -q 1 ||
			psql -h 127.0.0.1 -U postgres -d postgres -qc 'create database test' || log "could not create database test"
	fi
	if ! port_open 4222; then
		log "starting NATS"
		as_root mkdir -p /var/lib/nats-server
		as_root start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
			-a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log || log "could not start NATS"
		for _ in $(seq 50); do port_open 4222 && break; sleep 0.1; done
	fi
fi
