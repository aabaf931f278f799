"""Every query's nearest data point on 1, 2, 4… GPUs of one host: `nearkit.ShardedIndex` from
numpy arrays to numpy arrays (index build included), against `nearkit.PointIndex` on one GPU,
every answer compared bit for bit.

    python3 bench/sharded_gpus.py --gpus 1,2,4 --n 100M --repeat 3

Data and queries: `n` float32 (or float64) points each, uniform in the unit cube (or
`--clustered`), from a fixed seed, each one C-ordered (n, 3) numpy array. Each figure is the
best of `--repeat` whole calls (build, then query), each phase's best shown too. The transfer
floor is measured in the same run on GPU 0 (pinned memory both ways) for the bytes one call
moves (data and queries up, distances and ids down); with g GPUs each bus carries 1/g of them.
"""

import argparse
import hashlib
import json
import time

import numpy as np

import nearkit


def parse_size(s):
    s = s.strip().upper()
    mult = {"K": 10**3, "M": 10**6, "G": 10**9}.get(s[-1], 1)
    return int(float(s[:-1] if s[-1] in "KMG" else s) * mult)


def digest(*arrays):
    h = hashlib.blake2b(digest_size=16)
    for a in arrays:
        h.update(str((a.dtype, a.shape)).encode())
        h.update(memoryview(np.ascontiguousarray(a)).cast("B"))
    return h.hexdigest()


def points(n, seed, dtype, clustered):
    rng = np.random.default_rng(seed)
    if not clustered:
        return rng.random((n, 3), dtype=np.float32 if dtype == "float32" else np.float64)
    centres = rng.random((64, 3))
    p = centres[rng.integers(0, 64, n)] + rng.normal(scale=0.01, size=(n, 3))
    return p.astype(dtype)


def timed(build, query, repeat):
    best = {"build": np.inf, "query": np.inf, "total": np.inf}
    out = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        index = build()
        t1 = time.perf_counter()
        out = query(index)
        t2 = time.perf_counter()
        del index
        for k, v in (("build", t1 - t0), ("query", t2 - t1), ("total", t2 - t0)):
            best[k] = min(best[k], v)
    return best, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", default="1,2,4", help="GPU counts, comma-separated")
    ap.add_argument("--n", default="100M", help="data points, and as many queries")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--clustered", action="store_true", help="64 tight clusters instead of uniform")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--profile", action="store_true", help="print each call's phase times (the GPUs wait between phases)")
    args = ap.parse_args()

    if args.profile:
        nearkit.configure_cuda(profile=True)
    n = parse_size(args.n)
    visible = nearkit.cuda_device_count()
    counts = [g for g in map(int, args.gpus.split(",")) if g <= visible]
    t = time.perf_counter()
    data = points(n, args.seed, args.dtype, args.clustered)
    queries = points(n, args.seed + 1, args.dtype, args.clustered)
    print(f"{n:,} x {n:,} {args.dtype} {'clustered' if args.clustered else 'uniform'}; {visible} GPUs "
          f"({nearkit.device_info('cuda')[0]}); inputs made in {time.perf_counter() - t:.1f} s", flush=True)

    # Contexts and kernels loaded before any timing.
    small = data[:100_000]
    nearkit.PointIndex(small, device="cuda").nearest(small)
    for g in counts:
        nearkit.ShardedIndex(small, devices=list(range(g))).nearest(small)

    size = data.dtype.itemsize
    up, down = 2 * n * 3 * size, n * (size + 8)
    floor = nearkit._native.bus_floor("cuda:0", 256 << 20)
    rate_up, rate_down = (256 << 20) / floor["pinned_up"], (256 << 20) / floor["pinned_down"]
    bus = up / rate_up + down / rate_down
    print(f"pinned bus, GPU 0: {rate_up / 1e9:.1f} GB/s up, {rate_down / 1e9:.1f} GB/s down; one call moves "
          f"{up / 1e9:.2f} GB up, {down / 1e9:.2f} GB down: floor {bus * 1e3:.1f} ms on one bus", flush=True)

    results = {"n": n, "dtype": args.dtype, "clustered": args.clustered, "bus_floor_s": bus, "runs": []}
    best, out = timed(lambda: nearkit.PointIndex(data, device="cuda"), lambda ix: ix.nearest(queries), args.repeat)
    want = digest(*out)
    del out
    base = best["total"]
    print(f"PointIndex, one GPU:   build {best['build']:.3f} s, query {best['query']:.3f} s, "
          f"total {base:.3f} s", flush=True)
    results["runs"].append({"what": "PointIndex", "gpus": 1, **best, "digest": want})

    one = None
    for g in counts:
        devices = list(range(g))
        best, out = timed(lambda: nearkit.ShardedIndex(data, devices=devices), lambda ix: ix.nearest(queries),
                          args.repeat)
        got = digest(*out)
        del out
        one = one or best["total"]
        print(f"ShardedIndex, {g} GPU(s): build {best['build']:.3f} s, query {best['query']:.3f} s, total "
              f"{best['total']:.3f} s; {one / best['total']:.2f}x its one-GPU time, {base / best['total']:.2f}x "
              f"PointIndex's; floor/{g} = {bus / g * 1e3:.1f} ms; {'bitwise equal' if got == want else 'DIFFERENT'}",
              flush=True)
        results["runs"].append({"what": "ShardedIndex", "gpus": g, **best, "digest": got, "equal": got == want})
        if got != want:
            raise SystemExit("the sharded answer differs from the one-GPU answer")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
