"""What one GPU call from host arrays costs: PointIndex.nearest (and query(k=1)) on a 10M-point GPU index for
query batches of 1,000 to 10M (median of 7), beside the time to touch fresh output arrays of
the same size.   python3 bench/gpu_call_cost.py"""
import time, numpy as np, nearkit
rng = np.random.default_rng(1)
data = rng.random((10_000_000, 3)).astype(np.float32); q = rng.random((10_000_000, 3)).astype(np.float32)
ix = nearkit.PointIndex(data, device="cuda"); ix.nearest(q[:1000])
def med(f, r=7):
    ts = []
    for _ in range(r):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return sorted(ts)[r // 2] * 1e3
for m in [1_000, 10_000, 100_000, 1_000_000, 4_000_000, 10_000_000]:
    qq = np.ascontiguousarray(q[:m])
    a = med(lambda: ix.nearest(qq))
    b = med(lambda: ix._native.nearest(qq, None, 0))
    c = med(lambda: (np.empty(m, np.float32).fill(0), np.empty(m, np.int64).fill(0)))
    k1 = med(lambda: ix.query(qq, k=1))
    print(f"m {m:>9,}: nearest {a:8.2f} ms  native {b:8.2f} ms  query(k=1) {k1:8.2f} ms  fresh outputs touched {c:6.2f} ms  "
          f"per 1M {a / m * 1e6:7.2f} ms")
