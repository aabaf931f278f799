#!/usr/bin/env python3
"""Times CPU kd-tree peers on seed C's kNN workload (mesh vertices as data, queries uniform in
their bounding box, k = 8), to put beside `nearkit bench knn` run on the same machine.

    python3 bench/peers_knn.py --data ../shared/data/bunny00.off --log2 20 23 [--cut-to 19851] [--nearkit target/release/nearkit]

--cut-to keeps the mesh's N vertices lowest along its longest axis, as `nearkit bench knn
--cut-to N` does (Mesh::cut_to), so both run on the same points.

Peers: scipy cKDTree (workers=-1) and pykdtree (OpenMP), each timed building its tree and
answering all queries; with --gpu, cupy-knn (an LBVH on CuPy) with data and queries already on
the GPU (compare with nearkit's resident time), timed building its index and answering. With --nearkit, 2^16 of the queries also go through `nearkit knn` and
the ids must equal scipy's (distances to 1e-6 relative: scipy works in f64, nearkit in f32).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def read_off(path):
    words = open(path).read().split()
    assert words[0] == "OFF", path
    n = int(words[1])
    return np.array(words[4:4 + 3 * n], dtype=np.float64).reshape(n, 3).astype(np.float32)


def cupy_knn_peer(k):
    """("cupy-knn LBVH (GPU, resident)", fn) or None when cupy-knn cannot run."""
    try:
        import cupy as cp
        from cupy_knn_compat import lbvh_index

        LBVHIndex = lbvh_index()
    except ImportError as e:
        print(f"cupy-knn not usable: {e}")
        return None
    index = LBVHIndex(leaf_size=32)
    index.prepare_knn_default(k)  # kernel compilation, outside the timing
    cache = {}

    def run(d, q):
        # Upload once per array (resident), then time build + query on the device.
        key = (id(d), id(q))
        if key not in cache:
            cache.clear()
            cache[key] = (cp.asarray(d), cp.asarray(q))
        dd, qd = cache[key]
        index.build(dd)
        idx, d2, _ = index.query_knn(qd)
        cp.cuda.get_current_stream().synchronize()
        return idx, d2

    return ("cupy-knn LBVH (GPU, resident)", run)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--log2", type=int, nargs=2, default=[20, 23])
    ap.add_argument("-k", type=int, default=8)
    ap.add_argument("--nearkit")
    ap.add_argument("--cut-to", type=int)
    ap.add_argument("--gpu", action="store_true", help="also time cupy-knn (needs cupy and cupy-knn)")
    args = ap.parse_args()
    data = read_off(args.data)
    if args.cut_to:
        ext = data.max(0) - data.min(0)
        axis = int(np.flatnonzero(ext == ext.max())[-1])  # Rust's max_by keeps the last maximum
        keep = np.sort(np.lexsort((np.arange(len(data)), data[:, axis]))[: args.cut_to])
        data = data[keep]
    lo, hi = data.min(0), data.max(0)
    rng = np.random.default_rng(1)
    peers = []
    try:
        from scipy.spatial import cKDTree
        peers.append(("scipy cKDTree", lambda d, q: cKDTree(d).query(q, k=args.k, workers=-1)))
    except ImportError:
        print("scipy not installed: skipped")
    try:
        from pykdtree.kdtree import KDTree
        peers.append(("pykdtree", lambda d, q: KDTree(d).query(q, k=args.k)))
    except ImportError:
        print("pykdtree not installed: skipped")
    if args.gpu:
        gpu_peer = cupy_knn_peer(args.k)
        if gpu_peer:
            peers.append(gpu_peer)
    print(f"{len(data)} data points, k = {args.k}, {os.cpu_count()} cores; median of 3 runs")
    for log2 in range(args.log2[0], args.log2[1] + 1):
        q = (lo + rng.random((1 << log2, 3), dtype=np.float32) * (hi - lo)).astype(np.float32)
        row = [f"2^{log2}"]
        for name, fn in peers:
            times = []
            for _ in range(3):
                t = time.perf_counter()
                fn(data, q)
                times.append(time.perf_counter() - t)
            row.append(f"{name} {sorted(times)[1] * 1e3:.1f} ms")
        print("  ".join(row), flush=True)
    if args.nearkit and peers:
        q = q[: 1 << 16]
        with tempfile.TemporaryDirectory() as tmp:
            np.save(f"{tmp}/q.npy", q)
            np.save(f"{tmp}/data.npy", data)
            subprocess.run([args.nearkit, "knn", "--data", f"{tmp}/data.npy", "--queries", f"{tmp}/q.npy", "-k", str(args.k),
                            "--out", f"{tmp}/out.npz", "--quiet"], check=True)
            got = np.load(f"{tmp}/out.npz")
            from scipy.spatial import cKDTree
            d, i = cKDTree(data.astype(np.float64)).query(q.astype(np.float64), k=args.k)
            same = (got["ids"] == i).mean()
            print(f"nearkit vs scipy on 2^16 queries: {same * 100:.4f}% of ids equal, "
                  f"max relative distance difference {np.max(np.abs(got['distances'] - d) / np.maximum(d, 1e-30)):.2e}")


if __name__ == "__main__":
    sys.exit(main())
