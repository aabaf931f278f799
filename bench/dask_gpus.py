"""nearkit.dask on several GPUs of one host: the same joins on 1, 2, 4... GPUs (one Dask worker
per GPU, `nearkit.dask.gpu_cluster`), strong scaling against one GPU, every answer compared bit
for bit with the one-GPU answer and with a direct nearkit call on one GPU.

    python3 bench/dask_gpus.py --gpus 1,2,4 --work nearest:10M knn8:10M pairs:10M nearest:100M

Workloads are `what:size` (`nearest`, `knn8` (any k), `pairs` (the 100 closest pairs, each A
with its nearest B)) over `size` × `size` float32 points uniform in the unit cube. The inputs
are made by Dask inside the workers from a fixed seed (the same values for every GPU count) and
persisted before the timing; the results are persisted in the workers (as a caller keeping
them in the cluster would), then gathered for the check. Each worker has the host's cores
shared out evenly (`--threads`), so one GPU gets what a one-GPU machine of the same family
would have. The direct call (`--direct`) runs in a process of its own on GPU 0, from numpy
arrays to numpy arrays.
"""

import argparse
import collections
import contextlib
import hashlib
import json
import math
import os
import subprocess
import sys
import time

import numpy as np


def parse_size(s):
    s = s.strip().upper()
    mult = {"K": 10**3, "M": 10**6, "G": 10**9}.get(s[-1], 1)
    return int(float(s[:-1] if s[-1] in "KMG" else s) * mult)


def parse_work(w):
    what, size = w.split(":")
    return what, parse_size(size)


def inputs(n, seed, chunks):
    """The data and queries as Dask arrays (float32, uniform in the unit cube), the same values
    wherever they are computed."""
    import dask.array as da

    rng = da.random.default_rng(seed)
    data = rng.random((n, 3), dtype=np.float32, chunks=(chunks, 3))
    queries = da.random.default_rng(seed + 1).random((n, 3), dtype=np.float32, chunks=(chunks, 3))
    return data, queries


def digest(*arrays):
    h = hashlib.blake2b(digest_size=16)
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str((a.dtype, a.shape)).encode())
        h.update(memoryview(a).cast("B"))
    return h.hexdigest()


def graph(nkd, what, data, queries, strategy, cells, device):
    if what == "nearest":
        return list(nkd.nearest(queries, data, device=device, strategy=strategy, cells=cells))
    if what.startswith("knn"):
        k = int(what[3:] or 8)
        return list(nkd.knn(data, queries, k=k, device=device, strategy=strategy, cells=cells))
    if what == "pairs":
        return list(nkd.closest_pairs(queries, data, k=100, device=device, strategy=strategy, cells=cells))
    raise SystemExit(f"unknown workload {what!r}")


def direct(what, n, seed, chunks, repeat, device):
    """The same query as one nearkit call on GPU 0 from numpy arrays (run in its own process)."""
    import dask

    import nearkit

    data, queries = inputs(n, seed, chunks)
    with dask.config.set(scheduler="threads"):
        data, queries = dask.compute(data, queries)
    best = None
    for _ in range(repeat):
        t = time.perf_counter()
        index = nearkit.PointIndex(data, device=device)
        if what == "nearest":
            out = index.nearest(queries)
        elif what.startswith("knn"):
            out = index.query(queries, k=int(what[3:] or 8))
        else:
            p = nearkit.closest_pairs(queries, data, k=100, device=device)
            out = (p.a, p.b, p.distance)
        t = time.perf_counter() - t
        best = t if best is None else min(best, t)
        del index
    return {"seconds": best, "digest": digest(*out), "device": nearkit.device_info(device)[0]}


def print_phases(records):
    """Per kind of task: how many, their summed compute and transfer time, and the span from
    the first one's start to the last one's end."""
    phases = collections.defaultdict(lambda: [0, 0.0, 0.0, math.inf, 0.0])
    for r in records:
        key = r["key"][0] if isinstance(r["key"], tuple) else r["key"]
        name = str(key).rsplit("-", 1)[0]
        p = phases[name]
        for s in r["startstops"]:
            if s["action"] == "compute":
                p[0] += 1
                p[1] += s["stop"] - s["start"]
            elif s["action"] == "transfer":
                p[2] += s["stop"] - s["start"]
            p[3], p[4] = min(p[3], s["start"]), max(p[4], s["stop"])
    t0 = min((p[3] for p in phases.values()), default=0.0)
    print("    task                       count   compute s  transfer s   from s     to s")
    for name, (c, comp, tr, a, b) in sorted(phases.items(), key=lambda x: x[1][3]):
        if c:
            print(f"    {name[:26]:26s} {c:6d} {comp:10.3f} {tr:10.3f} {a - t0:8.3f} {b - t0:8.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", default="1,2,4", help="GPU counts to run, comma-separated")
    ap.add_argument("--work", nargs="+", default=["nearest:10M", "knn8:10M", "pairs:10M", "nearest:100M"])
    ap.add_argument("--chunks", type=int, default=16, help="input chunks per array (the same for every GPU count)")
    ap.add_argument("--strategy", default="auto", choices=["auto", "broadcast", "partition"])
    ap.add_argument("--cells", type=int, default=None, help="cells of the partition plan (default: nearkit.dask's)")
    ap.add_argument("--threads", type=int, default=None, help="threads per worker (default: cores / largest GPU count)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--direct", action="store_true", help="also time a direct nearkit call on one GPU")
    ap.add_argument("--json", help="write every figure here")
    ap.add_argument("--layout", default="per-gpu", choices=["per-gpu", "one-worker"],
                    help="one worker per GPU, or one worker driving every GPU (with their share of the cores)")
    ap.add_argument("--profile", action="store_true", help="time each kind of task in the last round")
    ap.add_argument("--cuda-profile", action="store_true",
                    help="workers print each GPU phase's time to stderr (the GPUs wait between phases)")
    ap.add_argument("--timeout", type=float, default=120, help="seconds a join may take before its stacks are shown")
    ap.add_argument("--device", default="cuda", help="cpu: the same runs on CPU workers (a check of this script)")
    ap.add_argument("--direct-only", help=argparse.SUPPRESS)
    args = ap.parse_args()

    works = [parse_work(w) for w in args.work]
    if args.direct_only:
        for w in args.direct_only.split(","):
            what, n = parse_work(w)
            print(json.dumps(direct(what, n, args.seed, -(-n // args.chunks), args.repeat, args.device)), flush=True)
        return

    import dask
    from distributed import Client, LocalCluster, get_task_stream, wait

    import nearkit
    import nearkit.dask as nkd

    counts = [int(g) for g in args.gpus.split(",")]
    visible = nearkit.cuda_device_count() if args.device != "cpu" else max(counts)
    counts = [g for g in counts if g <= visible]
    threads = args.threads or max(1, (os.cpu_count() or 1) // max(counts))
    print(f"dask {dask.__version__}; {visible} GPUs visible, {os.cpu_count()} cores; {threads} threads per worker; "
          f"GPU counts {counts}; layout {args.layout}; strategy {args.strategy}; {args.chunks} chunks per input", flush=True)

    results = {}
    if args.direct:
        # One process of its own, so that this one opens no GPU.
        out = subprocess.run([sys.executable, __file__, "--direct-only", ",".join(f"{w}:{n}" for w, n in works),
                              "--chunks", str(args.chunks), "--repeat", str(args.repeat), "--seed", str(args.seed),
                              "--device", args.device], capture_output=True, text=True)
        if out.returncode:
            print(out.stderr[-3000:])
            raise SystemExit("the direct call failed")
        for (what, n), line in zip(works, out.stdout.strip().splitlines()[-len(works):]):
            r = json.loads(line)
            results[("direct", what, n)] = r
            print(f"direct call, one GPU ({r['device']}): {what} {n:,} x {n:,}: {r['seconds']:.3f} s", flush=True)

    for g in counts:
        t0 = time.perf_counter()
        if args.device == "cpu":
            one = args.layout == "one-worker"
            cluster = LocalCluster(n_workers=1 if one else g, threads_per_worker=threads * (g if one else 1), dashboard_address=None)
        else:
            per = g if args.layout == "one-worker" else 1
            cluster = nkd.gpu_cluster(g, gpus_per_worker=per, threads_per_worker=threads * per)
        with cluster, Client(cluster) as client:
            client.wait_for_workers(len(cluster.workers))
            if args.cuda_profile:
                client.run(nearkit.configure_cuda, profile=True)
            print(f"-- {g} GPU worker(s) up in {time.perf_counter() - t0:.1f} s", flush=True)
            for what, n in works:
                data, queries = inputs(n, args.seed, -(-n // args.chunks))
                data, queries = client.persist([data, queries])
                wait([data, queries])
                best, info = None, None
                for rep in range(args.repeat):
                    client.run(nkd.clear_cache)
                    outs = graph(nkd, what, data, queries, args.strategy, args.cells, args.device)
                    t = time.perf_counter()
                    stream = get_task_stream(client) if args.profile and rep == args.repeat - 1 else contextlib.nullcontext()
                    with stream as ts:
                        outs = client.persist(outs)
                        try:
                            wait(outs, timeout=args.timeout)
                        except TimeoutError:
                            # Where every worker thread is: the stacks of the tasks still running.
                            print(json.dumps(client.call_stack(), indent=1, default=str)[-20000:], flush=True)
                            raise
                    t = time.perf_counter() - t
                    if ts is not None:
                        print_phases(ts.data)
                    best = t if best is None else min(best, t)
                    if rep == args.repeat - 1:
                        host = client.compute(outs, sync=True)
                        info = digest(*host)
                        del host
                    del outs
                results[(g, what, n)] = {"seconds": best, "digest": info}
                one = results.get((counts[0], what, n))
                same = "" if one is None else f"; equal to {counts[0]} GPU: {one['digest'] == info}"
                d = results.get(("direct", what, n))
                same += "" if d is None else f"; equal to the direct call: {d['digest'] == info}"
                print(f"{g} GPU: {what} {n:,} x {n:,}: {best:.3f} s (best of {args.repeat}){same}", flush=True)
                del data, queries

    print()
    print("| workload | " + " | ".join(f"{g} GPU" for g in counts) + " | " + " | ".join(f"{g} GPU speed-up" for g in counts[1:])
          + (" | direct call, 1 GPU" if args.direct else "") + " | bitwise equal |")
    print("|---" * (2 + 2 * len(counts) - 1 + bool(args.direct)) + "|")
    for what, n in works:
        ts = [results[(g, what, n)]["seconds"] for g in counts]
        digests = {results[(g, what, n)]["digest"] for g in counts}
        if args.direct:
            digests.add(results[("direct", what, n)]["digest"])
        row = [f"{what} {n:,}"] + [f"{t:.3f} s" for t in ts] + [f"{ts[0] / t:.2f}x" for t in ts[1:]]
        if args.direct:
            row.append(f"{results[('direct', what, n)]['seconds']:.3f} s")
        row.append(str(len(digests) == 1))
        print("| " + " | ".join(row) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({f"{k[0]}:{k[1]}:{k[2]}": v for k, v in results.items()}, f, indent=1)


if __name__ == "__main__":
    main()
