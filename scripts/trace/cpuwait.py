#!/usr/bin/env python3
# trace/cpuwait.py TIMEHIST [MIN_MS] [CPU]: what held the relay's CPU. TIMEHIST
# is `perf sched timehist -i sched.data` of a `perf sched record -a -k mono`
# taken while a relay pinned to CPU (default 0) ran a ladder step. Prints the
# CPU's run time by task, the relay's scheduling delays (runnable, not
# running: "sch delay"; the relay is comm "petrel" on that CPU) and, for each
# delay of MIN_MS (default 3) or more, the tasks that ran on the CPU
# meanwhile. Other processes of the machine show here, the guest's own
# stalls do not (issue 19, docs/BENCHMARKS.md, thirty-second sitting).
import collections, sys
from schedparse import held, slices

mind = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
cpu = int(sys.argv[3]) if len(sys.argv) > 3 else 0
c0 = [s for s in slices(sys.argv[1]) if s.cpu == cpu]
if not c0:
    sys.exit(f"no slices on cpu {cpu}")
span = (c0[-1].end - c0[0].start) / 1e9
occ = collections.Counter()
for s in c0:
    occ[s.task] += s.run_ms
print(f"cpu {cpu}: {span:.2f} s; run time by task (ms, % of the span):")
for n, r in occ.most_common(15):
    print(f"  {n:30s} {r:9.1f} {r / span / 10:6.2f}%")
rel = [s for s in c0 if s.task.startswith('petrel')]
d = sorted(s.delay_ms for s in rel)
if not d:
    sys.exit("no relay slices")
q = lambda p: d[min(len(d) - 1, int(len(d) * p))]
print(f"relay slices {len(rel)}; delay p50 {q(.5):.3f} p99 {q(.99):.3f} p99.9 {q(.999):.3f} max {d[-1]:.3f} ms")
print("delays >= 1/2/3/5/10/20 ms:", [sum(x >= b for x in d) for b in (1, 2, 3, 5, 10, 20)])
starts = [s.start for s in c0]
print(f"\nrelay delays >= {mind} ms, and what ran on cpu {cpu} meanwhile (ms):")
for s in rel:
    if s.delay_ms < mind:
        continue
    h = held(c0, starts, s.start - int(s.delay_ms * 1e6), s.start, lambda o: f"{o.task}[{o.tid}]")
    top = ", ".join(f"{k} {v:.1f}" for k, v in h.most_common(5))
    print(f"  {s.start / 1e9:.4f} tid {s.tid} waited {s.delay_ms:.2f}: {top}")
