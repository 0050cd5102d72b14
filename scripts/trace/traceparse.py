# traceparse.py: the goroutine state transitions of a runtime trace, as
# printed by `go tool trace -d=parsed trace.out`, with the stack of each
# (shared by schedlat.py and syscalls.py).
import re


def transitions(path, with_m=False):
    """Yield (t_ns, goid, from_state, to_state, frames) for every goroutine
    state transition; frames are the stack's function lines, innermost first.
    With with_m, (..., frames, m): m is the M (on Linux the thread id) that
    recorded the transition."""
    pend = None
    stk = []
    with open(path) as f:
        for line in f:
            if line.startswith('\t'):
                if pend is not None:
                    stk.append(line)
                continue
            if line.rstrip().endswith('Stack='):
                continue
            if pend is not None:
                yield _item(pend, stk, with_m)
                pend, stk = None, []
            if 'StateTransition' not in line or 'GoID=' not in line:
                continue
            m = re.search(r' Time=(\d+)', line)
            g = re.search(r'GoID=(\d+)', line)
            ab = re.search(r'GoID=\d+ (\w+)->(\w+)', line)
            if not (m and g and ab):
                continue
            pend = (int(m.group(1)), int(g.group(1))) + ab.groups()
            if with_m:
                mm = re.match(r'M=(-?\d+)', line)
                pend = pend + (int(mm.group(1)) if mm else -1,)
    if pend is not None:
        yield _item(pend, stk, with_m)


def _item(pend, stk, with_m):
    frames = [l.strip() for l in stk if ' @ 0x' in l]
    if with_m:
        return pend[:4] + (frames, pend[4])
    return pend + (frames,)


# The goroutine classes of petrel's request path and background work,
# by the frames of a goroutine's stacks (schedlat.py, longruns.py).
rules = [('flush', ['(*DB).flush', '(*DB).compact', 'runCompaction', 'compact.(*Iter)', 'RawColumnWriter', 'arenaskl.(*flushIterator)']),
         ('gc', ['gcBgMarkWorker', 'bgsweep', 'bgscavenge']),
         ('writer', ['pebble.(*writer).run']),
         ('verifier', ['relay.(*ingest).run']),
         ('dispatcher', ['relay.(*dispatcher).run']),
         ('wal', ['LogWriter).flushLoop']),
         ('nbio', ['lesismal/nbio']),
         ('sampler', ['server.(*Server).sample', 'Metrics']),
         ]
label = {}
def classify(g, frames):
    if g in label and label[g] != 'other': return
    for name, keys in rules:
        for fr in frames:
            if any(k in fr for k in keys):
                label[g] = name; return
    label.setdefault(g, 'other')
