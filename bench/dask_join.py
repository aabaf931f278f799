"""nearkit.dask against a direct nearkit call on the same cores: exact nearest (k = 1) or kNN
joins of uniform random points, float32 by default.

The direct call builds a PointIndex of the data and queries it with every thread the cluster
has; the Dask join starts from the same arrays held in the cluster's workers (persisted) and
leaves its results there (persisted), so both sides count index building and the query, and
neither counts moving inputs in or results out. Both answers are compared bit for bit.

    .venv/bin/python bench/dask_join.py --data 10000000 --queries 10000000 --k 1 --workers 2
    .venv/bin/python bench/dask_join.py --scaling 1,2,4 --data 4000000 --queries 4000000

With --scaling, each worker count runs as its own LocalCluster (one thread per worker, cells =
workers) and the table shows wall time and the sum of task times (the cost): on a machine with
fewer cores than workers, the wall time says nothing but the cost shows what partitioning adds.
"""

import argparse
import os
import time

import numpy as np


def _cpu_seconds():
    """CPU time (user + system) of this worker process so far, every thread included."""
    import psutil

    t = psutil.Process().cpu_times()
    return t.user + t.system


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=int, default=10_000_000)
    ap.add_argument("--queries", type=int, default=10_000_000)
    ap.add_argument("--k", type=int, default=1, help="1: nearest (1-D results); >1: kNN")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--workers", type=int, default=2, help="worker processes (one thread each)")
    ap.add_argument("--chunk", type=int, default=1_000_000, help="rows per input chunk")
    ap.add_argument("--cells", type=int, default=None)
    ap.add_argument("--strategy", default="partition", choices=["auto", "broadcast", "partition"])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scaling", default=None, help="comma-separated worker counts")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dims", type=int, default=3, choices=[2, 3],
                    help="2: points drawn in the plane (z = 0), as bench/peers_sedona.py draws them for Sedona's 2-D join")
    args = ap.parse_args()

    import dask
    import dask.array as da
    from distributed import Client, LocalCluster, wait

    import nearkit
    import nearkit.dask as nkd

    rng = np.random.default_rng(args.seed)
    def draw(n):
        p = rng.random((n, args.dims))
        return (p if args.dims == 3 else np.c_[p, np.zeros(n)]).astype(args.dtype)

    data = draw(args.data)
    queries = draw(args.queries)
    print(f"nearkit {nearkit.__version__ if hasattr(nearkit, '__version__') else ''} dask {dask.__version__}; "
          f"{args.queries:,} queries x {args.data:,} points{' (z = 0)' if args.dims == 2 else ''}, k = {args.k}, {args.dtype}, "
          f"{os.cpu_count()} cores, device {args.device}")

    def direct(threads):
        best = None
        for _ in range(args.repeat):
            c0 = _cpu_seconds()
            t = time.perf_counter()
            index = nearkit.PointIndex(data, device=args.device)
            if args.k == 1:
                r = index.nearest(queries, workers=threads)
            else:
                r = index.query(queries, k=args.k, workers=threads)
            t = time.perf_counter() - t
            if best is None or t < best[0]:
                best = (t, _cpu_seconds() - c0)
        return best, r

    def on_cluster(workers, cells):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, Client(cluster) as client:
            X = da.from_array(data, chunks=(args.chunk, 3)).persist()
            Q = da.from_array(queries, chunks=(args.chunk, 3)).persist()
            wait([X, Q])
            from dask.core import flatten

            inputs = set(flatten(X.__dask_keys__())) | set(flatten(Q.__dask_keys__()))
            best, cost, stats = None, None, None
            for rep in range(args.repeat):
                # Nothing carried over: no results of the last round in memory, no index kept.
                if rep:
                    del d, i, st
                    for _ in range(200):
                        held = {k for ks in client.has_what().values() for k in ks}
                        if held <= inputs:
                            break
                        time.sleep(0.05)
                client.run(nkd.clear_cache)
                if args.k == 1:
                    d, i, st = nkd.nearest(Q, X, device=args.device, cells=cells, strategy=args.strategy, return_stats=True)
                else:
                    d, i, st = nkd.knn(X, Q, k=args.k, device=args.device, cells=cells, strategy=args.strategy, return_stats=True)
                cpu0 = client.run(_cpu_seconds)
                t = time.perf_counter()
                d, i, st = client.persist([d, i, st])
                wait([d, i, st])
                t = time.perf_counter() - t
                cpu1 = client.run(_cpu_seconds)
                c = sum(cpu1[w] - cpu0[w] for w in cpu1)
                if best is None or t < best:
                    best, cost = t, c
                stats = st.compute()
            res = (d.compute(), i.compute())
            # Dask's own cost on this cluster: a graph of the same chunks that does no work.
            floor = None
            for _ in range(args.repeat):
                e = Q.map_blocks(lambda b: b[:, :1], dtype=Q.dtype, chunks=(Q.chunks[0], (1,)))
                t = time.perf_counter()
                e = client.persist(e)
                wait(e)
                t = time.perf_counter() - t
                floor = t if floor is None else min(floor, t)
                del e
            stats["dask_floor_s"] = floor
            return best, cost, stats, res

    if args.scaling:
        (t1, c1), r1 = direct(1)
        print(f"direct, 1 thread: {t1:.3f} s, CPU {c1:.3f} s")
        print("| workers | cells | wall (s) | CPU time (s) | CPU / direct | rerun queries | exact |")
        print("|---|---|---|---|---|---|---|")
        for w in [int(x) for x in args.scaling.split(",")]:
            t, c, st, res = on_cluster(w, w)
            ok = all(np.array_equal(a, b) for a, b in zip(res, r1))
            print(f"| {w} | {w} | {t:.3f} | {c:.3f} | {c / c1:.2f} | {st['rerun_queries']:,} ({100 * st['rerun_queries'] / st['queries']:.2f}%) | {ok} |")
        return

    # On a GPU the direct call's host-side work uses every core, as nearkit.dask's GPU tasks do.
    threads = args.workers if args.device == "cpu" else -1
    (td, cd), rd = direct(threads)
    print(f"direct nearkit call, {'all' if threads == -1 else threads} threads: {td:.3f} s (best of {args.repeat}), CPU {cd:.3f} s")
    t, c, st, res = on_cluster(args.workers, args.cells)
    ok = all(np.array_equal(a, b) for a, b in zip(res, rd))
    in_bytes = data.nbytes + queries.nbytes
    print(f"nearkit.dask, LocalCluster of {args.workers} workers x 1 thread: {t:.3f} s (best of {args.repeat}); "
          f"{t / td:.2f}x the direct call; CPU {c:.3f} s ({c / cd:.2f}x); bitwise equal: {ok}; "
          f"Dask's floor (a graph of the same query chunks doing nothing) {st['dask_floor_s'] * 1e3:.1f} ms")
    print(f"strategy {args.strategy}; re-runs: {st['rerun_queries']:,} of {st['queries']:,} queries ({100 * st['rerun_queries'] / st['queries']:.2f}%), "
          f"{st['rerun_bytes'] / 1e6:.1f} MB moved = {100 * st['rerun_bytes'] / in_bytes:.2f}% of the input ({in_bytes / 1e6:.0f} MB)")


if __name__ == "__main__":
    main()
