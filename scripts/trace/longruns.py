#!/usr/bin/env python3
# trace/longruns.py PARSED [MIN_MS] [CLASS...]: the running stretches of
# goroutines longer than MIN_MS (default 5) in a runtime trace, with the
# goroutine's class (as schedlat.py names them) and the innermost frames
# where the stretch ended (preempted: where it was still running; blocked:
# what it waited on). PARSED is `go tool trace -d=parsed trace.out`. Finds
# the code that holds a processor without yielding (issue 19).
import collections, sys
from traceparse import transitions, classify, label
minms = float(sys.argv[2]) if len(sys.argv) > 2 else 5.0
only = set(sys.argv[3:])
start = {}
runs = []
for t, g, a, b, frames in transitions(sys.argv[1]):
    classify(g, frames)
    if b == 'Running':
        start[g] = t
    elif a == 'Running' and g in start:
        s = start.pop(g)
        d = (t - s) / 1e6
        if d >= minms:
            runs.append((d, g, b, frames[:6]))
byend = collections.Counter()
for d, g, b, frames in sorted(runs, reverse=True):
    c = label.get(g, 'other')
    if only and c not in only:
        continue
    key = (c, b, frames[0] if frames else '?')
    byend[key] += 1
print(f"running stretches >= {minms} ms: {len(runs)}")
for (c, b, f), n in byend.most_common(25):
    print(f"{n:5d}  {c:10s} ->{b:9s} {f[:150]}")
