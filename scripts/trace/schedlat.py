#!/usr/bin/env python3
# trace/schedlat.py PARSED: scheduling latency (runnable -> running) of petrel's
# request-path goroutines in a runtime trace, attributed to the goroutine class
# that held the processor longest meanwhile (pebble flush/compaction, the
# writer, nbio, GC...). PARSED is `go tool trace -d=parsed trace.out`; the trace
# comes from server.pprof_listen's /debug/pprof/trace over a ladder run
# (scripts/trace/ladder.sh with TRACE=seconds). See docs/BENCHMARKS.md, issue 19.
import bisect, collections, sys
from traceparse import transitions, classify, label
events = []  # (t, g, a, b)
for t, g, a, b, frames in transitions(sys.argv[1]):
    classify(g, frames)
    events.append((t, g, a, b))
runnable = {}; runstart = {}; ran = collections.defaultdict(float)  # ran[g] within windows
lat = collections.defaultdict(list)  # (victim label, blocker label) -> latencies
busy = collections.defaultdict(float)
cur = None
pipeline = {'writer', 'verifier', 'dispatcher', 'nbio', 'wal'}
# running intervals
intervals = []
for t, g, a, b in events:
    if b == 'Runnable': runnable[g] = t
    if b == 'Running': runstart[g] = t
    if a == 'Running' and g in runstart:
        s = runstart.pop(g); intervals.append((s, t, g)); busy[label.get(g, 'other')] += (t - s) / 1e9
    if b == 'Running' and g in runnable:
        rs = runnable.pop(g)
        lat_ns = t - rs
        lat[(g, rs, t)] = lat_ns
intervals.sort()
starts = [i[0] for i in intervals]
res = collections.defaultdict(list)
for (g, rs, t), d in lat.items():
    vl = label.get(g, 'other')
    if vl not in pipeline: continue
    # who ran in [rs, t]
    i = bisect.bisect_left(starts, rs) - 1
    held = collections.defaultdict(int)
    i = max(i, 0)
    while i < len(intervals) and intervals[i][0] < t:
        s, e, h = intervals[i]
        ov = min(e, t) - max(s, rs)
        if ov > 0: held[label.get(h, 'other')] += ov
        i += 1
    blk = max(held, key=held.get) if held else 'idle/os'
    res[blk].append(d / 1e6)
print("processor time by goroutine class (s):", {k: round(v, 2) for k, v in sorted(busy.items(), key=lambda x: -x[1])})
print(f"{'held the P meanwhile':22s} {'waits':>7s} {'p50 ms':>7s} {'p99 ms':>7s} {'max ms':>7s} {'>5ms':>6s} {'>10ms':>6s}")
for k, v in sorted(res.items(), key=lambda x: -len(x[1])):
    v.sort(); n = len(v)
    print(f"{k:22s} {n:7d} {v[n//2]:7.3f} {v[min(n-1,int(n*.99))]:7.2f} {v[-1]:7.2f} {sum(1 for x in v if x > 5):6d} {sum(1 for x in v if x > 10):6d}")
