# schedparse.py: the run slices of `perf sched timehist` output (shared by
# cpuwait.py and cpuheld.py). Record with `perf sched record -a -k mono` so
# the times are CLOCK_MONOTONIC, the clock of a Go runtime trace's
# timestamps on Linux (its Sync events print Mono= beside Trace=).
import bisect, collections, re

Slice = collections.namedtuple('Slice', 'start end cpu task tid delay_ms run_ms')
_pat = re.compile(r'^\s*([\d.]+)\s+\[(\d+)\]\s+(.*?)\[(\d+)(?:/\d+)?\]\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)')


def slices(path):
    """The slices, by start time: start and end in ns; delay_ms is the time
    the task waited runnable before this slice, run_ms its length."""
    out = []
    with open(path) as f:
        for line in f:
            m = _pat.match(line)
            if not m:
                continue
            end = int(float(m.group(1)) * 1e9)
            run = float(m.group(7))
            out.append(Slice(end - int(run * 1e6), end, int(m.group(2)), m.group(3).strip(),
                             int(m.group(4)), float(m.group(6)), run))
    out.sort()
    return out


def held(sl, starts, w0, w1, key):
    """The milliseconds each key(slice) ran of [w0, w1) (ns), over slices sl
    of one CPU (by start; starts their start times, for bisect)."""
    out = collections.Counter()
    i = max(0, bisect.bisect_left(starts, w0) - 1)  # one CPU's slices do not overlap
    while i < len(sl) and sl[i].start < w1:
        o = sl[i]
        i += 1
        ov = min(o.end, w1) - max(o.start, w0)
        if ov > 0:
            out[key(o)] += ov / 1e6
    return out
