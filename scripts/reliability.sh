#!/usr/bin/env bash
# reliability.sh: the reliability battery (issue 16), rerunnable by anyone.
# Each probe runs petrel serve as its own process and attacks it the way a
# hostile client or a bad network would, then prints its counts on a line
# starting "reliability:":
#   - bad inputs: malformed messages, each with the reply it must get
#   - kill -9: SIGKILL with publishers keeping events in flight, restart,
#     exact accounting of every acknowledged id
#   - never-reading subscribers with one publisher: bounded memory,
#     returned once they disconnect
#   - slowloris: request heads a byte at a time, closed at header_timeout
#   - compression bomb: a deflate frame inflating to 256 MiB
#   - bad-signature flood: one connection of forged events beside a
#     legitimate publisher
#   - disk full: the store on a tmpfs filled to the last byte (needs root
#     to mount; skipped, saying so, otherwise), and unwritable data
#     directories at start
# The probes are Go tests in cmd/petrel (reliability_e2e_test.go,
# diskfull_e2e_test.go, slowconsumer_e2e_test.go); docs/RELIABILITY.md
# records a full run.
#
# Usage: scripts/reliability.sh [short|full]    (default full; CI: short)
#   short: about 2 minutes (3 kill cycles, 100 slow subscribers, ...)
#   full:  the recorded run (120 kill cycles, 1,000 never-reading
#          subscribers and 20,000 events, 20,000 forged events, ...)
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
MODE=${1:-full}
case $MODE in short | full) ;; *) echo "usage: $0 [short|full]" >&2; exit 2 ;; esac
TESTS='TestReliability.*|TestDiskFull|TestServeUnwritableDataDir'
[ "$MODE" = full ] && TESTS="$TESTS|TestSlowConsumerMemoryReturned"
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
status=0
RELIABILITY=$MODE go test -count=1 -timeout 3h -v -run "^($TESTS)\$" ./cmd/petrel/ >"$LOG" 2>&1 || status=$?
grep -E '^(reliability:|--- (PASS|FAIL|SKIP)|\s+\S+_test\.go:[0-9]+: (cannot mount|.*skip))' "$LOG" || true
if [ "$status" -ne 0 ]; then
	echo "reliability: FAIL ($MODE); the failing tests' output:" >&2
	for t in $(grep -E -o -- '^--- FAIL: \S+' "$LOG" | cut -d' ' -f3); do
		awk -v t="$t" '$0 == "=== RUN   " t { on = 1 } on && !/^time=/ { print } $0 ~ "^--- FAIL: " t " " { on = 0 }' "$LOG" | tail -60 >&2
	done
	exit 1
fi
echo "reliability: PASS ($MODE)"
