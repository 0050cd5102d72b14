#!/usr/bin/env bash
# Fuzz every target of the module, one after another, one worker each.
#
# Usage: scripts/fuzz.sh [TARGET-REGEX]
#   FUZZTIME   budget per target, a duration or a count (default 20s;
#              "1000000x" runs a million executions, however long)
#   PARALLEL   workers per target (default 1)
#   MINIMIZE   budget to minimize each new interesting input (default 2s;
#              Go's default, 60s, spent a 30s budget minimizing one input
#              of FuzzLoad's 20 KB seed: 8 executions in all)
#   PKGS       packages to search for targets (default ./...)
#
# A target FAILs when the fuzzer reports a failing input (it writes it
# under the package's testdata/fuzz/<target>/: commit it with the fix) or
# exits for any other reason. A bare "context deadline exceeded" at the
# end of a duration budget, with no failing input, is Go 1.26's fuzz
# coordinator losing a race with its own deadline (internal/fuzz/fuzz.go:
# woken by the -fuzztime context's end, it reports that context's error
# unless the workers' child context is already cancelled too, which the
# context package does a moment later; a starved worker or a slow input
# widens the window): the target's corpus is replayed with `go test -run`,
# and if that passes the target is counted as FLAKED, not failed. A count
# budget ("Nx") has no deadline to race.
#
# Prints one line per target and a summary; exits 1 if any target failed.
set -uo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local

FUZZTIME=${FUZZTIME:-20s}
PARALLEL=${PARALLEL:-1}
MINIMIZE=${MINIMIZE:-2s}
PKGS=${PKGS:-./...}
match=${1:-.}

passed=0 flaked=0 failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

while read -r dir pkg; do
	targets=$(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u)
	for t in $targets; do
		[[ $t =~ $match ]] || continue
		start=$SECONDS
		go test "$pkg" -run '^$' -fuzz "^$t\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$MINIMIZE" -parallel "$PARALLEL" >"$log" 2>&1
		rc=$?
		took=$((SECONDS - start))
		execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
		if [ $rc -eq 0 ]; then
			passed=$((passed + 1))
			echo "PASS   $pkg $t (${execs:-0} execs, ${took}s)"
		elif ! grep -q 'Failing input written' "$log" && grep -Eq '^[[:space:]]+context deadline exceeded$' "$log" &&
			go test "$pkg" -run "^$t\$" -count=1 >/dev/null 2>&1; then
			flaked=$((flaked + 1))
			echo "FLAKED $pkg $t (${execs:-0} execs, ${took}s): context deadline exceeded, no failing input, corpus replay passed (Go fuzz coordinator deadline race)"
		else
			failed=$((failed + 1))
			echo "FAIL   $pkg $t (${took}s):"
			grep -v '^fuzz: elapsed' "$log" | tail -40 | sed 's/^/    /'
		fi
	done
done < <(go list -f '{{.Dir}} {{.ImportPath}}' $PKGS)

echo "fuzz: $passed passed, $flaked flaked, $failed failed (FUZZTIME=$FUZZTIME)"
[ $failed -eq 0 ]
