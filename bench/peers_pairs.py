#!/usr/bin/env python3
"""Times peers on seed A's closest-pairs workload, on the same files, in the same run as nearkit.

Each peer computes every A's nearest B (what a kd-tree offers), then the k closest of those,
ordered by (distance, a). Their answers are checked against nearkit's. Usage:

    python3 bench/peers_pairs.py --nearkit target/release/nearkit [--device cpu|cuda] [--runs 3]

Peers: scipy cKDTree (all cores), pykdtree (OpenMP, all cores), and cupy-knn (an LBVH on CuPy)
on the GPU if it is installed; compare its time with nearkit's resident one.
Missing peers are reported and skipped. Peers get float32 arrays, as nearkit computes (scipy
converts to float64 inside its call); before session 15 they were given float64. For one
process on both sides, see bench/peers_cpu.py (CPU) and `cargo bench --bench cpu_peers`.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def median_time(fn, runs):
    times = []
    out = None
    for _ in range(runs):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2], out


def top_k(dist, idx, k):
    a = np.arange(len(dist))
    order = np.lexsort((a, dist))[:k]
    return [(int(i), int(idx[i]), float(dist[i])) for i in order]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nearkit", default="target/release/nearkit")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--a-count", type=int, default=1_000_000)
    ap.add_argument("--b-count", type=int, default=400_000)
    ap.add_argument("--workloads", default="uniform-int,clustered")
    args = ap.parse_args()

    rows = []
    tmp = tempfile.mkdtemp(prefix="nearkit-peers-")
    for dist in args.workloads.split(","):
        fa, fb = os.path.join(tmp, f"a-{dist}.npy"), os.path.join(tmp, f"b-{dist}.npy")
        for path, n, seed in ((fa, args.a_count, 2026), (fb, args.b_count, 2027)):
            subprocess.run([args.nearkit, "gen", "points", "--count", str(n), "--distribution", dist,
                            "--range", "1048576", "--seed", str(seed), "--out", path], check=True)
        # float32, as nearkit computes (its default precision): like for like. scipy's cKDTree
        # converts to float64 inside its call (it has no float32 path), so its row is f64.
        A, B = np.load(fa).astype(np.float32), np.load(fb).astype(np.float32)

        # nearkit on the same files: the command a user runs (file loading excluded from its time).
        out_csv = os.path.join(tmp, f"nearkit-{dist}.csv")
        t = time.perf_counter()
        subprocess.run([args.nearkit, "pairs", "--a", fa, "--b", fb, "-k", str(args.k), "--device", args.device,
                        "--out", out_csv, "--quiet"], check=True)
        whole = time.perf_counter() - t
        ours = np.loadtxt(out_csv, delimiter=",", skiprows=1, ndmin=2)
        ours_ab = [(int(r[1]), int(r[2])) for r in ours]
        bench = subprocess.run([args.nearkit, "bench", "pairs", "--device", args.device, "--runs", str(max(args.runs, 5)),
                                "--workloads", dist, "--a-count", str(args.a_count), "--b-count", str(args.b_count),
                                "-k", str(args.k), "--quiet", "--no-check"], check=True, capture_output=True, text=True).stdout
        line = [l for l in bench.splitlines() if l.startswith(dist)][0]
        nk_ms = parse_ms(line)
        rows.append((dist, f"nearkit ({args.device}) top-{args.k}", nk_ms, "same", f"whole command incl. loading: {whole*1e3:.0f} ms"))
        resident = parse_resident_ms(line)
        if resident is not None:
            rows.append((dist, "nearkit (cuda, resident)", resident, "same", "data already on the GPU"))

        def check(res):
            got = [(a, b) for a, b, _ in res]
            return "same" if got == ours_ab else f"DIFFERENT (first at rank {next(i for i,(x,y) in enumerate(zip(got, ours_ab)) if x != y) + 1})"

        try:
            from scipy.spatial import cKDTree
            def run_scipy():
                d, i = cKDTree(B).query(A, k=1, workers=-1)
                return top_k(d, i, args.k)
            t, res = median_time(run_scipy, args.runs)
            rows.append((dist, "scipy cKDTree (all cores)", t * 1e3, check(res), "computes in float64"))
        except ImportError:
            rows.append((dist, "scipy cKDTree", None, "not installed", ""))
        try:
            from pykdtree.kdtree import KDTree
            def run_pykdtree():
                d, i = KDTree(B).query(A, k=1)
                return top_k(d, i, args.k)
            t, res = median_time(run_pykdtree, args.runs)
            rows.append((dist, "pykdtree (OpenMP)", t * 1e3, check(res), "float32"))
        except ImportError:
            rows.append((dist, "pykdtree", None, "not installed", ""))
        try:
            import cupy as cp
            from cupy_knn_compat import lbvh_index

            LBVHIndex = lbvh_index()

            Ad, Bd = cp.asarray(A, dtype=cp.float32), cp.asarray(B, dtype=cp.float32)
            index = LBVHIndex(leaf_size=32)
            index.prepare_knn_default(1)  # kernel compilation, outside the timing

            def run_cupy_knn():
                # Data already on the GPU; build + every A's nearest + top k, all on the device.
                index.build(Bd)
                idx, d2, _ = index.query_knn(Ad)
                d2 = d2[:, 0]
                order = cp.lexsort(cp.stack([cp.arange(d2.shape[0]), d2]))[: args.k]
                cp.cuda.get_current_stream().synchronize()
                o = order.get()
                return [(int(a), int(b), 0.0) for a, b in zip(o, idx[order, 0].get())]

            run_cupy_knn()  # warm-up
            t, res = median_time(run_cupy_knn, max(args.runs, 5))
            rows.append((dist, "cupy-knn LBVH (GPU, resident)", t * 1e3, check(res), "compare with nearkit resident"))
        except ImportError:
            rows.append((dist, "cupy-knn", None, "not installed", ""))

    print()
    base = "resident on the GPU" if args.device.startswith("cuda") else "end to end"
    print(f"peers on the same files, same run ({os.cpu_count()} CPUs); nearkit times from `nearkit bench pairs` (medians);")
    print(f"'vs nearkit' divides by nearkit's {base} time")
    print(f"{'workload':<14} {'tool':<30} {'time':>11} {'vs nearkit':>11}  {'answer':<10} note")
    ours = {r[0]: r[2] for r in rows if r[1].startswith("nearkit")}
    for dist, tool, ms, answer, note in rows:
        t = f"{ms:.1f} ms" if ms is not None else "-"
        ratio = f"{ms / ours[dist]:.1f}x" if ms is not None and ours.get(dist) else "-"
        print(f"{dist:<14} {tool:<30} {t:>11} {ratio:>11}  {answer:<10} {note}")


def parse_resident_ms(line):
    """The 'resident' column of a `nearkit bench pairs` row (None on the CPU, where it is '-')."""
    parts = line.split()
    ms = [i for i, p in enumerate(parts) if p == "ms"]
    return float(parts[ms[0] - 1]) if len(ms) == 2 else None


def parse_ms(line):
    """The 'end to end' column of a `nearkit bench pairs` table row."""
    parts = line.split()
    # ... resident(ms or '-') end-to-end 'ms' seedA same
    vals = [i for i, p in enumerate(parts) if p == "ms"]
    e2e_idx = vals[-1] - 1
    return float(parts[e2e_idx])


if __name__ == "__main__":
    sys.exit(main())
