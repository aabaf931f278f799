"""nearkit's CPU nearest search by batch size, against scipy's cKDTree in the same process, on
the same float64 arrays (scipy computes only in float64), one thread each: how the cost per
query grows as a batch of queries gets sparser than the data. Also kNN (k = 8) of 2^20
queries over 19,851 points, every core on both sides, index built inside the timing.

    .venv/bin/python bench/cpu_batches.py [--data 2000000] [--runs 5]
"""

import argparse
import time

import numpy as np
from scipy.spatial import cKDTree

import nearkit


def median(f, runs):
    f()
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return sorted(ts)[len(ts) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=int, default=2_000_000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    data = rng.random((args.data, 3))
    index, tree = nearkit.PointIndex(data, device="cpu"), cKDTree(data)
    print(f"nearest, {args.data:,} points uniform in the unit cube, float64, 1 thread each, median of {args.runs}")
    print("| queries | nearkit ns/query | scipy cKDTree ns/query | scipy / nearkit |")
    print("|---|---|---|---|")
    for m in [1_000, 8_000, 64_000, 500_000, args.data]:
        q = rng.random((m, 3))
        a = median(lambda: index.nearest(q, workers=1), args.runs)
        b = median(lambda: tree.query(q, k=1, workers=1), args.runs)
        assert np.array_equal(index.nearest(q)[1], tree.query(q, k=1)[1]), "different answers"
        print(f"| {m:,} | {a / m * 1e9:.0f} | {b / m * 1e9:.0f} | {b / a:.2f}x |")
    pts, q = rng.random((19_851, 3)), rng.random((1 << 20, 3))
    a = median(lambda: nearkit.PointIndex(pts, device="cpu").query(q, k=8), args.runs)
    b = median(lambda: cKDTree(pts).query(q, k=8, workers=-1), max(1, args.runs // 2))
    print(f"kNN k = 8, 2^20 x 19,851 uniform, float64, every core, index + query: nearkit {a * 1e3:.0f} ms, "
          f"scipy cKDTree {b * 1e3:.0f} ms ({b / a:.2f}x)")


if __name__ == "__main__":
    main()
