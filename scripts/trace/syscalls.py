#!/usr/bin/env python3
# trace/syscalls.py PARSED: duration of every syscall (and cgo call) in a runtime
# trace, by calling function: count, total, p50, p99, max. PARSED as for
# schedlat.py.
import sys, re, collections
f = open(sys.argv[1])
insys = {}; pend=None; stk=[]; durs = collections.defaultdict(list); t0=None
for line in f:
    if line.startswith('\t'):
        if pend is not None: stk.append(line)
        continue
    if line.rstrip().endswith('Stack='): continue
    if pend is not None:
        fr = [l.strip().split(' @')[0] for l in stk if ' @ 0x' in l]
        fr = [x for x in fr if not x.startswith('syscall.') and not x.startswith('internal/runtime') and not x.startswith('runtime.')][:2]
        insys[pend[0]] = (pend[1], ' < '.join(fr))
        pend=None; stk=[]
    m = re.search(r' Time=(\d+)', line)
    if not m: continue
    t = int(m.group(1)); t0 = t0 or t
    if 'StateTransition' in line and 'GoID=' in line:
        g = int(re.search(r'GoID=(\d+)', line).group(1))
        a, b = re.search(r'GoID=\d+ (\w+)->(\w+)', line).groups()
        if b == 'Syscall': pend = (g, t)
        elif a == 'Syscall' and g in insys:
            s, name = insys.pop(g); durs[name].append(((t - s)/1e6, (s-t0)/1e9))
for name, d in sorted(durs.items(), key=lambda x: -sum(y[0] for y in x[1]))[:15]:
    ds = sorted(x[0] for x in d)
    print(f"{len(ds):6d} total {sum(ds):8.1f}ms p50 {ds[len(ds)//2]:6.3f} p99 {ds[int(len(ds)*.99)]:7.2f} max {ds[-1]:7.2f}ms  {name[:120]}")
