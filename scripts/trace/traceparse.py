# traceparse.py: the goroutine state transitions of a runtime trace, as
# printed by `go tool trace -d=parsed trace.out`, with the stack of each
# (shared by schedlat.py and syscalls.py).
import re


def transitions(path):
    """Yield (t_ns, goid, from_state, to_state, frames) for every goroutine
    state transition; frames are the stack's function lines, innermost first."""
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
                yield pend + ([l.strip() for l in stk if ' @ 0x' in l],)
                pend, stk = None, []
            if 'StateTransition' not in line or 'GoID=' not in line:
                continue
            m = re.search(r' Time=(\d+)', line)
            g = re.search(r'GoID=(\d+)', line)
            ab = re.search(r'GoID=\d+ (\w+)->(\w+)', line)
            if not (m and g and ab):
                continue
            pend = (int(m.group(1)), int(g.group(1))) + ab.groups()
    if pend is not None:
        yield pend + ([l.strip() for l in stk if ' @ 0x' in l],)
