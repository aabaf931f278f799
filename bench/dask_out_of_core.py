"""nearkit.dask over data larger than a worker's memory: many .npy files read lazily, the
partition plan (cells), a LocalCluster whose workers each have a memory limit below the data's
size. Checks the answer against single-machine nearkit (which holds all the data here, on the
client) and prints each worker's peak memory.

    .venv/bin/python bench/dask_out_of_core.py --data 100000000 --files 50 --memory-limit 1GiB
"""

import argparse
import os
import resource
import tempfile
import time

import numpy as np


def _peak_rss():
    """This process's peak resident memory, bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=int, default=100_000_000)
    ap.add_argument("--queries", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=50)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory-limit", default="1GiB")
    ap.add_argument("--cells", type=int, default=16)
    ap.add_argument("--dir", default=None, help="where the .npy files go (default: a temporary folder)")
    args = ap.parse_args()

    import dask
    import dask.array as da
    from dask.utils import format_bytes, parse_bytes
    from distributed import Client, LocalCluster

    import nearkit
    import nearkit.dask as nkd

    folder = args.dir or tempfile.mkdtemp(prefix="nearkit-ooc-")
    os.makedirs(folder, exist_ok=True)
    per = -(-args.data // args.files)
    paths = []
    t = time.perf_counter()
    for f in range(args.files):
        n = min(per, args.data - f * per)
        path = os.path.join(folder, f"part-{f:04d}.npy")
        if not os.path.exists(path):
            np.save(path, np.random.default_rng([7, f]).random((n, 3), dtype=np.float32))
        paths.append(path)
    print(f"{args.data:,} float32 points in {args.files} files ({format_bytes(12 * args.data)}), written in "
          f"{time.perf_counter() - t:.1f} s; {args.queries:,} queries")
    queries = np.random.default_rng(8).random((args.queries, 3), dtype=np.float32)

    limit = parse_bytes(args.memory_limit)
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, memory_limit=limit, dashboard_address=None) as cluster, Client(cluster) as client:
        X = nkd.read_points(paths)
        Q = da.from_array(queries, chunks=(250_000, 3))
        d, i, st = nkd.nearest(Q, X, strategy="partition", cells=args.cells, return_stats=True)
        t = time.perf_counter()
        d, i, st = dask.compute(d, i, st)
        t = time.perf_counter() - t
        peaks = client.run(_peak_rss)
    print(f"nearkit.dask, {args.workers} workers x 1 thread, memory limit {format_bytes(limit)} each "
          f"(the data: {12 * args.data / limit:.1f}x one worker's limit), {args.cells} cells: {t:.1f} s")
    print("peak resident memory per worker: " + ", ".join(format_bytes(v) for v in peaks.values()))
    print(f"re-runs: {st['rerun_queries']:,} of {st['queries']:,} queries")

    whole = np.concatenate([np.load(p) for p in paths])
    t = time.perf_counter()
    d1, i1 = nearkit.PointIndex(whole).nearest(queries)
    print(f"single machine (all the data in one process): {time.perf_counter() - t:.1f} s; "
          f"bitwise equal: {np.array_equal(d, d1) and np.array_equal(i, i1)}")


if __name__ == "__main__":
    main()
