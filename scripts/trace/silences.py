#!/usr/bin/env python3
# trace/silences.py PARSED [MIN_MS]: the stretches of a runtime trace in
# which no goroutine changed state for MIN_MS (default 4) or more, counted
# from the first state change of a ladder sender (runStep.func1): a whole
# process gone silent (a late timer, a stalled system call), which
# schedlat.py and longruns.py do not show. PARSED is `go tool trace
# -d=parsed trace.out`, the trace from `petrel bench ... --trace FILE`
# (docs/BENCHMARKS.md, issue 19).
import sys
from traceparse import transitions
minms = float(sys.argv[2]) if len(sys.argv) > 2 else 4.0
start = None
prev = None
gaps = []
for t, g, a, b, frames in transitions(sys.argv[1]):
    if start is None and any('runStep.func1' in f for f in frames):
        start = t
    if start is not None and prev is not None and t - prev >= minms * 1e6:
        gaps.append(((prev - start) / 1e9, (t - prev) / 1e6))
    prev = t
if not gaps:
    print(f"no silence of {minms} ms or more")
    sys.exit()
d = sorted(x for _, x in gaps)
span = (prev - start) / 1e9
print(f"silences >= {minms} ms: {len(d)} in {span:.1f} s; median {d[len(d)//2]:.2f} ms, max {d[-1]:.2f} ms")
for at, x in gaps[:30]:
    print(f"  at {at:8.3f} s  {x:6.2f} ms")
