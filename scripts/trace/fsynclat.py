#!/usr/bin/env python3
# trace/fsynclat.py PATH N INTERVAL_S MODE: the latency of write+fdatasync on
# this disk, the WAL's pattern at low rates (one small write, one sync, every
# INTERVAL_S). MODE append: O_APPEND writes (the file grows); keepsize:
# pwrite after a 64 MiB fallocate(FALLOC_FL_KEEP_SIZE) (the file grows into
# reserved blocks, as pebble's new WAL); prealloc: pwrite into a 64 MiB file
# written beforehand (no size change, as a recycled WAL or a petrel WAL
# spare). The file is removed after. Used for issue 19 (docs/BENCHMARKS.md).
import ctypes, os, time, sys
path, n, interval, mode = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
fd = os.open(path, os.O_RDWR | os.O_CREAT | (os.O_APPEND if mode == 'append' else 0), 0o644)
if mode == 'prealloc':
    os.write(fd, b'\0' * (64 << 20)); os.fsync(fd)
elif mode == 'keepsize':
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.fallocate(fd, 1, ctypes.c_long(0), ctypes.c_long(64 << 20)) != 0:  # FALLOC_FL_KEEP_SIZE
        sys.exit(f"fallocate: {os.strerror(ctypes.get_errno())}")
    os.fsync(fd)
buf = b'x' * 600
lat = []; off = 0
for i in range(n):
    t0 = time.perf_counter()
    if mode in ('prealloc', 'keepsize'):
        os.pwrite(fd, buf, off); off += len(buf)
    else:
        os.write(fd, buf)
    os.fdatasync(fd)
    lat.append(time.perf_counter() - t0)
    d = interval - (time.perf_counter() - t0)
    if d > 0: time.sleep(d)
os.close(fd); os.unlink(path)
lat.sort()
q = lambda p: lat[min(len(lat)-1, int(p * len(lat)))] * 1e3
print(f"{mode} n={n} every {interval*1e3:.0f}ms: p50={q(.5):.2f}ms p90={q(.9):.2f}ms p99={q(.99):.2f}ms max={lat[-1]*1e3:.2f}ms over10ms={sum(1 for x in lat if x > 0.010)} over15ms={sum(1 for x in lat if x > 0.015)}")
