#!/usr/bin/env bash
# bench-compare.sh OLD_REV [NEW_REV]: the in-process benchmarks of `make
# bench` (nostr, relay, store/pebble) for two revisions, run alternately
# (one pass of each, COUNT times) so that a noisy machine weighs on both
# alike, then compared with benchstat. NEW_REV defaults to the working
# tree. Output: $OUT/{old,new}.txt and $OUT/benchstat.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
OLD=${1:?usage: bench-compare.sh OLD_REV [NEW_REV]}
NEW=${2:-}
COUNT=${COUNT:-5}
BENCH=${BENCH:-.}
PKGS=${PKGS:-"./internal/nostr/ ./internal/relay/ ./internal/store/pebble/"}
OUT=${OUT:-bench-results/compare-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/old" >/dev/null 2>&1 || true; git worktree remove --force "$tmp/new" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git worktree add -q --detach "$tmp/old" "$OLD"
newdir=.
if [ -n "$NEW" ]; then
	git worktree add -q --detach "$tmp/new" "$NEW"
	newdir=$tmp/new
fi
: >"$OUT/old.txt"
: >"$OUT/new.txt"
for i in $(seq "$COUNT"); do
	for side in old new; do
		dir=$tmp/old
		[ "$side" = new ] && dir=$newdir
		echo "pass $i/$COUNT: $side" >&2
		# shellcheck disable=SC2086
		(cd "$dir" && go test -run '^$' -bench "$BENCH" -benchmem -count 1 $PKGS) >>"$OUT/$side.txt"
	done
done
bs=$(command -v benchstat || echo "$(go env GOPATH)/bin/benchstat")
[ -x "$bs" ] || GOFLAGS=-mod=mod go install golang.org/x/perf/cmd/benchstat@latest
"$bs" "$OUT/old.txt" "$OUT/new.txt" | tee "$OUT/benchstat.txt"
