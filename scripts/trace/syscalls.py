#!/usr/bin/env python3
# trace/syscalls.py PARSED: duration of every syscall (and cgo call) in a runtime
# trace, by calling function: count, total, p50, p99, max. PARSED as for
# schedlat.py.
import collections, sys
from traceparse import transitions
insys = {}; durs = collections.defaultdict(list); t0 = None
for t, g, a, b, frames in transitions(sys.argv[1]):
    t0 = t0 or t
    if b == 'Syscall':
        fr = [l.split(' @')[0] for l in frames]
        fr = [x for x in fr if not x.startswith(('syscall.', 'internal/runtime', 'runtime.'))][:2]
        insys[g] = (t, ' < '.join(fr))
    elif a == 'Syscall' and g in insys:
        s, name = insys.pop(g); durs[name].append(((t - s)/1e6, (s-t0)/1e9))
for name, d in sorted(durs.items(), key=lambda x: -sum(y[0] for y in x[1]))[:15]:
    ds = sorted(x[0] for x in d)
    print(f"{len(ds):6d} total {sum(ds):8.1f}ms p50 {ds[len(ds)//2]:6.3f} p99 {ds[int(len(ds)*.99)]:7.2f} max {ds[-1]:7.2f}ms  {name[:120]}")
