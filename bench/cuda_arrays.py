"""nearkit's Python package on the GPU, from numpy arrays and from CuPy / PyTorch arrays already
on the GPU: kNN (k = 8) of 2^20 queries over a point set, the index built inside the timing
(as `nearkit bench knn` times its resident and end-to-end figures, which this script's rows
are to be read beside), results checked against the CPU.

    python3 bench/cuda_arrays.py --data pts.npy [--runs 7] [--log2 20] [--k 8]

Also: the time of the first GPU call in a fresh process is measured by running one in a
subprocess (--first-call), with the kernel cache folder given by NEARKIT_CACHE_DIR.
"""

import argparse
import statistics
import subprocess
import sys
import time

import numpy as np

import nearkit


def median_ms(f, runs, sync=lambda: None):
    f()
    sync()
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        f()
        sync()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3


FIRST_CALL = """
import time
t0 = time.perf_counter()
import numpy as np, nearkit
t1 = time.perf_counter()
ix = nearkit.PointIndex(np.random.default_rng(0).random((20000, 3), dtype=np.float32), device="cuda")
d, i = ix.query(np.random.default_rng(1).random((100000, 3), dtype=np.float32), k=8)
t2 = time.perf_counter()
d, i = ix.query(np.random.default_rng(2).random((100000, 3), dtype=np.float32), k=8)
t3 = time.perf_counter()
print(f"import {1e3 * (t1 - t0):.0f} ms, first GPU call (context, kernels, index, kNN) {1e3 * (t2 - t1):.0f} ms, "
      f"second call {1e3 * (t3 - t2):.1f} ms; {ix.device}")
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help=".npy of (n, 3) points (default: 19,851 uniform points)")
    ap.add_argument("--log2", type=int, default=20)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--first-call", action="store_true", help="time the first GPU call of a fresh process")
    args = ap.parse_args()
    if args.first_call:
        out = subprocess.run([sys.executable, "-c", FIRST_CALL], capture_output=True, text=True)
        print(out.stdout.strip() or out.stderr.strip())
        return
    rng = np.random.default_rng(7)
    data = np.load(args.data).astype(np.float32) if args.data else rng.random((19_851, 3), dtype=np.float32)
    lo, hi = data.min(0), data.max(0)
    q = (lo + (hi - lo) * rng.random((1 << args.log2, 3))).astype(np.float32)
    k = args.k
    print(f"kNN k = {k}, {len(q):,} queries × {len(data):,} points, f32, index built in each timing; "
          f"{nearkit.device_info('cuda')[0]}; kernels in the package: {len(nearkit.kernel_images())}")
    ref_d, ref_i = nearkit.PointIndex(data, device="cpu").query(q, k=k)

    def numpy_call():
        return nearkit.PointIndex(data, device="cuda").query(q, k=k)

    d, i = numpy_call()
    assert np.array_equal(i, ref_i) and np.array_equal(d, ref_d), "numpy: differs from the CPU"
    kept = nearkit.PointIndex(data, device="cuda")
    print(f"  from numpy, results in numpy:       {median_ms(numpy_call, args.runs):8.2f} ms"
          f"   (query only, index kept: {median_ms(lambda: kept.query(q, k=k), args.runs):.2f} ms)")

    try:
        import cupy

        dd, dq = cupy.asarray(data), cupy.asarray(q)
        sync = cupy.cuda.Device().synchronize

        def cupy_call():
            return nearkit.PointIndex(dd, device="cuda").query(dq, k=k)

        d, i = cupy_call()
        assert np.array_equal(cupy.asnumpy(i), ref_i) and np.array_equal(cupy.asnumpy(d), ref_d), "cupy differs"
        index = nearkit.PointIndex(dd)
        print(f"  from CuPy, results in CuPy:         {median_ms(cupy_call, args.runs, sync):8.2f} ms"
              f"   (query only, index kept: {median_ms(lambda: index.query(dq, k=k), args.runs, sync):.2f} ms)")
    except ImportError:
        print("  CuPy: not installed")
    try:
        import torch

        td, tq = torch.as_tensor(data, device="cuda"), torch.as_tensor(q, device="cuda")

        def torch_call():
            return nearkit.PointIndex(td, device="cuda").query(tq, k=k)

        d, i = torch_call()
        assert np.array_equal(i.cpu().numpy(), ref_i) and np.array_equal(d.cpu().numpy(), ref_d), "torch differs"
        print(f"  from PyTorch, results in PyTorch:   {median_ms(torch_call, args.runs, torch.cuda.synchronize):8.2f} ms")
    except ImportError:
        print("  PyTorch: not installed")


if __name__ == "__main__":
    main()
