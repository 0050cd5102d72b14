#!/usr/bin/env python3
# trace/cpuheld.py PARSED TIMEHIST [MIN_MS] [CPU]: the goroutines' running
# stretches of MIN_MS (default 5) or more in a runtime trace (PARSED: `go
# tool trace -d=parsed trace.out`), set against what the relay's CPU
# (default 0) actually ran meanwhile (TIMEHIST: see cpuwait.py; both
# clocks are CLOCK_MONOTONIC). THIS-M is the thread the goroutine ran on,
# relay-other the relay's other threads, anything else another process or
# a kernel thread: a stretch Go counts as running while its thread was off
# the CPU (issue 19, docs/BENCHMARKS.md, thirty-second sitting).
import collections, sys
from traceparse import transitions, classify, label
from schedparse import held, slices

minms = float(sys.argv[3]) if len(sys.argv) > 3 else 5.0
cpu = int(sys.argv[4]) if len(sys.argv) > 4 else 0
c0 = [s for s in slices(sys.argv[2]) if s.cpu == cpu]
if not c0:
    sys.exit(f"no slices on cpu {cpu}")
lo, hi = c0[0].start, c0[-1].end
start, runs = {}, []
for t, g, a, b, frames, m in transitions(sys.argv[1], with_m=True):
    classify(g, frames)
    if b == 'Running':
        start[g] = (t, m)
    elif a == 'Running' and g in start:
        s, m0 = start.pop(g)
        if (t - s) / 1e6 >= minms and s >= lo and t <= hi:
            runs.append((s, t, g, m0, b, frames[:1]))
starts = [s.start for s in c0]
tot = collections.Counter()
for s, e, g, m, b, fr in runs:
    h = held(c0, starts, s, e, lambda o: 'THIS-M' if o.tid == m else
             ('relay-other' if o.task.startswith('petrel') else o.task))
    d = (e - s) / 1e6
    h['idle/unrecorded'] = max(0.0, d - sum(h.values()))
    tot.update(h)
    top = ", ".join(f"{k} {v:.1f}" for k, v in h.most_common(4) if v >= 0.05)
    print(f"{(s - lo) / 1e9:8.3f}s {label.get(g, 'other'):10s} {d:6.1f} ms ->{b:8s} M={m}: {top} | {fr[0] if fr else ''}")
print(f"{len(runs)} stretches; total ms:", {k: round(v, 1) for k, v in tot.most_common()})
