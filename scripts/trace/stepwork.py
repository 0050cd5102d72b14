#!/usr/bin/env python3
# trace/stepwork.py OUTDIR: the table of trace/steps.sh: per step, OK p50/p99/max,
# the relay's memtable flushes and compactions (from its debug log; a
# compaction counts in the step its run overlaps, with the milliseconds it
# took) and the programs other processes started during the step (exec.txt).
import datetime, json, re, statistics, sys, time

out = sys.argv[1]


def dur_ms(s):
    v = float(re.match(r'[\d.]+', s).group(0))
    for unit, f in (('µs', 1e-3), ('ms', 1.0), ('s', 1e3)):
        if s.endswith(unit):
            return v * f
    return v


# The steps' and the log's times are wall clock, perf's monotonic: convert
# with the offset now (the clocks' drift over a run is far under a step).
off = time.time() - time.monotonic()
work = []
for line in open(f'{out}/serve.log'):
    m = re.match(r'time=(\S+) .*msg="store: (memtable flushed|compaction)".*took=(\S+)', line)
    if m:
        end = datetime.datetime.fromisoformat(m.group(1).replace('Z', '+00:00')).timestamp()
        took = dur_ms(m.group(3))
        work.append((end - took / 1e3, end, 'F' if m.group(2).startswith('mem') else 'C', took))
execs = []
try:
    for line in open(f'{out}/exec.txt'):
        m = re.match(r'\s*([\d.]+):\s+filename=(\S+)', line)
        if m:
            execs.append((float(m.group(1)) + off, m.group(2).rsplit('/', 1)[-1]))
except FileNotFoundError:
    pass
print(f"{'step':>4} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'µs/ev':>6} {'verdict':9s} flushes compactions compaction-ms  started by others")
p99s, cpus = [], []
for line in open(f'{out}/steps.txt'):
    i, s, e = line.split()
    s, e = float(s), float(e)
    st = json.load(open(f'{out}/step{i}.json'))['ladder']['steps'][0]
    lat = st['ok_latency']
    p99s.append(lat['p99_ms'])
    cpus.append(st.get('relay_cpu_us_per_event', 0))
    fl = sum(1 for a, b, k, _ in work if k == 'F' and s <= b <= e)
    cs = [t for a, b, k, t in work if k == 'C' and a < e and b > s]
    mine = {'petrel', 'taskset', 'perf', 'curl', 'sleep'}
    others = sorted({n for t, n in execs if s <= t <= e and n not in mine and not n.startswith('petrel')})
    print(f"{i:>4} {lat['p50_ms']:7.2f} {lat['p99_ms']:7.2f} {lat['max_ms']:7.1f} {st.get('relay_cpu_us_per_event', 0):6.1f} {st['verdict']:9s} {fl:7d} "
          f"{len(cs):11d} {sum(cs):13.0f}  {' '.join(others)}")
if p99s:
    print(f"{len(p99s)} steps: p99 median {statistics.median(p99s):.2f} ms, mean {statistics.mean(p99s):.2f}, "
          f"over 15 ms in {sum(x > 15 for x in p99s)}; relay µs/ev median {statistics.median(cpus):.1f}")
