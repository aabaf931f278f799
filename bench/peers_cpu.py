"""nearkit's CPU path against its Python kd-tree peers, like for like (issue 21's workloads),
in one process on the same numpy arrays at the same precision, every core on every side.

Workloads (float32 by default, float64 with --f64; sizes times --scale):
1. Top-100 closest pairs of A (1,000,000 points) and B (400,000), integer coordinates uniform
   in [0, 2^20) (numpy default_rng(2026) for A, (2027) for B), then converted to the working
   float type (exactly). nearkit: ``nearkit.closest_pairs(a, b, k=100, device="cpu")``. Peers:
   every A's nearest B (their query with k=1), then the 100 smallest by (distance, a index)
   (an argpartition and a lexsort, timed as part of the peer).
2. Every A's nearest B, the same A and B. nearkit: ``PointIndex(b, device="cpu").nearest(a)``
   and ``.query(a, k=1)`` (both timed: the same answers, different searches). Peers: k=1.
3. kNN, k = 8: 2^20 queries uniform in the data's bounding box (default_rng(11)) over
   (a) 20,000 points uniform in [0, 1000)^3 (default_rng(7)) and (b) the first 19,851
   vertices of --mesh (bunny00.off, read by ``nearkit.read_mesh`` in the working precision).
   (The Rust bench ``cargo bench --bench cpu_peers`` takes its mesh set by ``Mesh::cut_to``,
   the 19,851 vertices lowest along the longest axis, and its own generator: the sets differ.)

Peers (missing ones are reported and skipped):
- pykdtree: ``KDTree(data).query(q, k)``; keeps float32 in float32; threads by OpenMP
  (OMP_NUM_THREADS, else every core).
- scipy: ``cKDTree(data).query(q, k, workers=-1)``; it always computes in float64 (a float32
  array is converted inside the timed call), so at f32 its rows are marked "f64*": not like for
  like in precision.
- pynanoflann (a compiled wrapper of nanoflann): ``KDTree(n_neighbors=k).fit(data)`` then
  ``.kneighbors(q, k, n_jobs=threads)`` (its multithreaded query; n_jobs must be a positive
  count, so every core is ``os.cpu_count()``); float32 stays float32.

Each side builds its index from the arrays inside the timing ("index + query"). Times are
medians of --runs runs after a warm-up; the ratio is the peer's time over nearkit's ("nearkit's
speed-up"). Answers are checked against nearkit's: ids equal, and where not, whether the two
picks tie (the same distance as returned, or recomputed in float64 from the coordinates);
distances equal as returned (scipy's are float64, so at f32 they differ by rounding).

    python3 -m venv /work/peers/venv && /work/peers/venv/bin/pip install -r bench/requirements-cpu-peers.txt
    /work/peers/venv/bin/pip install --no-deps /tmp/peerwheel/nearkit-*.whl   # see the requirements file
    /work/peers/venv/bin/python bench/peers_cpu.py [--runs 5] [--f64] [--threads N]
        [--mesh ../shared/data/bunny00.off] [--scale 0.01]

--threads N sets OMP_NUM_THREADS and RAYON_NUM_THREADS before anything is imported and passes
N as nearkit's and scipy's workers and nanoflann's n_jobs; without it every side uses every core.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MESH = os.path.join(HERE, "..", "..", "shared", "data", "bunny00.off")
NAME_WIDTH = 56


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5, help="timed runs after a warm-up (median reported)")
    ap.add_argument("--f64", action="store_true", help="float64 on every side (default float32)")
    ap.add_argument("--threads", type=int, default=None,
                    help="threads for every side (OMP_NUM_THREADS, RAYON_NUM_THREADS, workers, n_jobs)")
    ap.add_argument("--mesh", default=DEFAULT_MESH, help="bunny00.off (default: shared/data beside the repo)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every size by this (0.01: a quick check)")
    ap.add_argument("--skip", default="", help="comma-separated workloads to skip: pairs,nearest,knn")
    return ap.parse_args()


ARGS = parse_args() if __name__ == "__main__" else None
if ARGS is not None and ARGS.threads is not None:
    # Before numpy, scipy, pykdtree (OpenMP) and nearkit (rayon) start their thread pools.
    os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)
    os.environ["RAYON_NUM_THREADS"] = str(ARGS.threads)

import importlib.metadata  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import nearkit  # noqa: E402

K_PAIRS = 100
K_KNN = 8


def median_time(f, runs):
    """The median of `runs` timed calls of f after a warm-up, and the last call's result."""
    out = f()  # warm-up (first-touch allocations, thread pools, caches)
    times = []
    for _ in range(runs):
        out = None  # let the previous result go before the next call
        t = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def version(pkg):
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return None


def table_header():
    print(f"  {'call':<{NAME_WIDTH}} {'timed':<13} {'prec':<4} {'seconds':>9}   "
          f"nearkit's speed-up (peer's time / nearkit's)")


def row(name, prec, seconds, bases=()):
    """One line of a table; name ends with ', index + query' or ', query' (what is timed);
    bases: (nearkit call, its seconds) pairs to compare a peer with."""
    name, timed = name.rsplit(", ", 1)
    ratio = ", ".join(f"{seconds / b:.2f}x vs {label}" for label, b in bases if b)
    print(f"  {name:<{NAME_WIDTH}} {timed:<13} {prec:<4} {seconds:9.3f}   {ratio}")


# ---------------------------------------------------------------------------- peers


class Peer:
    """A peer's kNN from numpy to numpy, building its index inside the call: knn(data, q, k)
    gives (d, i) of shape (m, k), distances in the peer's own precision (prec)."""

    def __init__(self, name, prec, knn):
        self.name, self.prec, self.knn = name, prec, knn


def peers(dtype, threads):
    """The installed peers, each with a message for the missing ones."""
    out = []
    f32 = dtype == np.float32
    try:
        from pykdtree.kdtree import KDTree as PyKDTree

        def pykdtree_knn(data, q, k):
            d, i = PyKDTree(data).query(q, k=k)
            return d.reshape(len(q), k), i.reshape(len(q), k)

        out.append(Peer(f"pykdtree {version('pykdtree')}", "f32" if f32 else "f64", pykdtree_knn))
    except ImportError:
        print("  pykdtree: not installed (pip install pykdtree), skipped")
    try:
        from scipy.spatial import cKDTree

        workers = -1 if threads is None else threads

        def scipy_knn(data, q, k):
            d, i = cKDTree(data).query(q, k=k, workers=workers)
            return d.reshape(len(q), k), i.reshape(len(q), k)

        # cKDTree converts float32 input to float64: marked f64* (not the working precision).
        out.append(Peer(f"scipy {version('scipy')} cKDTree", "f64*" if f32 else "f64", scipy_knn))
    except ImportError:
        print("  scipy: not installed (pip install scipy), skipped")
    try:
        import pynanoflann

        jobs = threads or os.cpu_count()

        def nanoflann_knn(data, q, k):
            tree = pynanoflann.KDTree(n_neighbors=k)
            tree.fit(data)
            d, i = tree.kneighbors(q, n_neighbors=k, n_jobs=jobs)
            return d.reshape(len(q), k), i.reshape(len(q), k)

        out.append(Peer(f"pynanoflann {version('pynanoflann')}", "f32" if f32 else "f64", nanoflann_knn))
    except ImportError:
        print("  pynanoflann: not installed (pip install pynanoflann), skipped")
    return out


def top_k(d, k):
    """The k smallest of d (each A's nearest distance) by (distance, a): (a, d[a])."""
    k = min(k, len(d))
    kth = np.partition(d, k - 1)[k - 1]
    cand = np.flatnonzero(d <= kth)
    order = cand[np.lexsort((cand, d[cand]))][:k]
    return order, d[order]


# ---------------------------------------------------------------------------- agreement


def exact_distances(data, q, ids):
    """Distances recomputed in float64 from the coordinates (float32 ones are exact in float64)."""
    diff = data.astype(np.float64)[ids] - q.astype(np.float64)[:, None, :]
    return np.sqrt((diff * diff).sum(-1))


def compare(name, d, i, d_ref, i_ref, data, q):
    """A peer's (d, i) of shape (m, k) against nearkit's: ids rank by rank, ties, distances."""
    i = i.astype(np.int64)
    d64, ref64 = d.astype(np.float64), d_ref.astype(np.float64)
    differ = i != i_ref
    n_diff = int(differ.sum())
    same_d = int((d64 == ref64).sum())
    rel = np.abs(d64 - ref64) / np.maximum(np.abs(ref64), 1e-300)
    msg = (f"    {name}: ids equal at {i.size - n_diff:,} of {i.size:,} (query, rank); distances equal "
           f"as returned at {same_d:,}, largest relative difference {rel.max():.2g}")
    if n_diff:
        rows = np.flatnonzero(differ.any(1))
        e = exact_distances(data, q[rows], i[rows])
        e_ref = exact_distances(data, q[rows], i_ref[rows])
        dr = differ[rows]
        tie_returned = dr & (d64[rows] == ref64[rows])
        tie_exact = dr & (e == e_ref)
        ties = int((tie_returned | tie_exact).sum())
        farther = int((dr & (e > e_ref)).sum())
        nearer = int((dr & (e < e_ref)).sum())
        msg += (f"; of the {n_diff:,} differing ids {ties:,} tie (equal distance as returned or in f64), "
                f"the peer's is farther in f64 at {farther:,}, nearer at {nearer:,}")
    print(msg)


def compare_pairs(name, a, b, d, ref):
    """A peer's top-k (a, its nearest b, distance) against nearkit's Pairs."""
    same = (len(a) == len(ref.a) and np.array_equal(a, ref.a) and np.array_equal(b.astype(np.int64), ref.b))
    d64, ref64 = d.astype(np.float64), ref.distance.astype(np.float64)
    same_d = len(d64) == len(ref64) and np.array_equal(d64, ref64)
    if same and same_d:
        print(f"    {name}: the same {len(a)} pairs (a, b) and distances as nearkit")
        return
    n = min(len(d64), len(ref64))
    rel = np.abs(d64[:n] - ref64[:n]) / np.maximum(np.abs(ref64[:n]), 1e-300)
    common = len(set(zip(a.tolist(), b.tolist())) & set(zip(ref.a.tolist(), ref.b.tolist())))
    print(f"    {name}: pairs (a, b) {'the same, in the same order' if same else f'{common} of {len(ref.a)} in common'}; "
          f"distances rank by rank {'equal' if same_d else f'largest relative difference {rel.max():.2g}'}")


# ---------------------------------------------------------------------------- workloads


def pairs_and_nearest(n_a, n_b, dtype, prec, runs, workers, plist, skip):
    a = np.random.default_rng(2026).integers(0, 1 << 20, (n_a, 3)).astype(dtype)
    b = np.random.default_rng(2027).integers(0, 1 << 20, (n_b, 3)).astype(dtype)
    w = -1 if workers is None else workers
    if "pairs" not in skip:
        print(f"\n1. top-{K_PAIRS} closest pairs, A {n_a:,} x B {n_b:,} integer points in [0, 2^20), {prec}")
        table_header()
        t_nk, ref = median_time(
            lambda: nearkit.closest_pairs(a, b, k=K_PAIRS, device="cpu", workers=w), runs)
        row(f"nearkit closest_pairs(a, b, k={K_PAIRS}), index + query", prec, t_nk)
        results = []
        for p in plist:
            def run(p=p):
                d, i = p.knn(b, a, 1)
                sel, ds = top_k(d[:, 0], K_PAIRS)
                return sel, i[sel, 0], ds

            t, out = median_time(run, runs)
            row(f"{p.name} query(k=1) + top {K_PAIRS}, index + query", p.prec, t, [("closest_pairs", t_nk)])
            results.append((p, out))
        for p, (sel, bi, ds) in results:
            compare_pairs(f"{p.name} ({p.prec})", sel, bi, ds, ref)
        del ref, results
    if "nearest" not in skip:
        print(f"\n2. every A's nearest B, A {n_a:,} x B {n_b:,} integer points in [0, 2^20), {prec}")
        table_header()
        t_near, (d_ref, i_ref) = median_time(
            lambda: nearkit.PointIndex(b, device="cpu").nearest(a, workers=w), runs)
        row("nearkit PointIndex(b).nearest(a), index + query", prec, t_near)
        t_q, (d_q, i_q) = median_time(
            lambda: nearkit.PointIndex(b, device="cpu").query(a, k=1, workers=w), runs)
        row("nearkit PointIndex(b).query(a, k=1), index + query", prec, t_q)
        same = np.array_equal(i_q, i_ref) and np.array_equal(d_q, d_ref)
        print(f"    nearkit query(k=1) and nearest: {'the same' if same else 'NOT the same'} ids and distances")
        del d_q, i_q
        results = []
        for p in plist:
            t, out = median_time(lambda p=p: p.knn(b, a, 1), runs)
            row(f"{p.name} query(k=1), index + query", p.prec, t, [("nearest", t_near), ("query(k=1)", t_q)])
            results.append((p, out))
        for p, (d, i) in results:
            compare(f"{p.name} ({p.prec})", d, i, d_ref[:, None], i_ref[:, None], b, a)


def knn(num, label, data, n_queries, prec, runs, workers, plist):
    lo, hi = data.astype(np.float64).min(0), data.astype(np.float64).max(0)
    q = np.random.default_rng(11).uniform(lo, hi, (n_queries, 3)).astype(data.dtype)
    w = -1 if workers is None else workers
    print(f"\n{num}. kNN k={K_KNN}, {n_queries:,} queries uniform in the box of {len(data):,} points ({label}), {prec}")
    table_header()
    t_nk, (d_ref, i_ref) = median_time(
        lambda: nearkit.PointIndex(data, device="cpu").query(q, k=K_KNN, workers=w), runs)
    row(f"nearkit PointIndex(data).query(q, k={K_KNN}), index + query", prec, t_nk)
    results = []
    for p in plist:
        t, out = median_time(lambda p=p: p.knn(data, q, K_KNN), runs)
        row(f"{p.name} query(k={K_KNN}), index + query", p.prec, t, [("query", t_nk)])
        results.append((p, out))
    for p, (d, i) in results:
        compare(f"{p.name} ({p.prec})", d, i, d_ref, i_ref, data, q)


def main():
    a = ARGS
    dtype = np.float64 if a.f64 else np.float32
    prec = "f64" if a.f64 else "f32"
    skip = set(a.skip.split(","))

    def size(n):
        return max(K_PAIRS, int(round(n * a.scale)))

    print(time.strftime("%Y-%m-%d %H:%M"), platform.platform(), platform.processor() or platform.machine(),
          f"{os.cpu_count()} cores", f"Python {platform.python_version()}")
    print("versions:", ", ".join(
        f"{p} {version(p)}" for p in ["nearkit", "numpy", "scipy", "pykdtree", "pynanoflann"] if version(p)))
    print("threads:", "every core" if a.threads is None else a.threads,
          f"(OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, "
          f"RAYON_NUM_THREADS={os.environ.get('RAYON_NUM_THREADS', 'unset')})")
    print("nearkit:", nearkit.device_info("cpu")[0])
    print(f"{prec}; medians of {a.runs} runs after a warm-up; every side builds its index inside the timing"
          + ("; f64*: scipy computes in float64 from the float32 arrays" if not a.f64 else ""))
    plist = peers(dtype, a.threads)

    if not ({"pairs", "nearest"} <= skip):
        pairs_and_nearest(size(1_000_000), size(400_000), dtype, prec, a.runs, a.threads, plist, skip)
    if "knn" not in skip:
        n_q = size(1 << 20)
        uniform = np.random.default_rng(7).uniform(0.0, 1000.0, (size(20_000), 3)).astype(dtype)
        knn("3a", "uniform in [0, 1000)^3", uniform, n_q, prec, a.runs, a.threads, plist)
        del uniform
        try:
            v, _ = nearkit.read_mesh(a.mesh, dtype=dtype)
        except (OSError, ValueError) as e:
            print(f"\n3b. no mesh workload: {e}")
        else:
            n = size(19_851)
            knn("3b", f"first {n:,} vertices of {os.path.basename(a.mesh)}", np.ascontiguousarray(v[:n]),
                n_q, prec, a.runs, a.threads, plist)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
