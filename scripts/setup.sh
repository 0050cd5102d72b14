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
if ! ldconfig -p 2>/dev/null | grep -q 'libsecp256k1\.so'; then
	log "installing libsecp256k1"
	as_root apt-get update -qq >/dev/null || true
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libsecp256k1-dev >/dev/null
fi

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# PostgreSQL and NATS are for the multi-node backend's tests (not built
# yet: no test uses them today); start them if they are installed but not
# running, so such tests find them on a fresh machine.
if [ "${PETREL_SETUP_SERVICES:-1}" = 1 ]; then
	if ! port_open 5432 && command -v pg_ctlcluster >/dev/null; then
		log "starting PostgreSQL"
		as_root pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || log "could not start PostgreSQL"
	fi
	if ! port_open 4222 && [ -x /usr/sbin/nats-server ]; then
		log "starting NATS"
		as_root start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
			-a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log || log "could not start NATS"
		for _ in $(seq 50); do port_open 4222 && break; sleep 0.1; done
	fi
fi
