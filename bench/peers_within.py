"""nearkit's radius queries against their Python peers, in one process on the same arrays.

1. Self-join (every pair of points within r): --count points (1,000,000) uniform in the unit
   cube (numpy default_rng(2031)), and as many "clustered" ones (nearkit's own generator,
   `gen points --distribution clustered`, redone in numpy with default_rng(2032): 32 gaussian
   clusters of sigma 1/1000, centres uniform in [0.05, 0.95]^3, each point's cluster drawn
   uniformly). Each set gets its own r, found by bisection with nearkit's count_within on a
   20,000-point sample of the set (counted in the whole set) so that a point has on average
   --neighbours (30) other points within r.
     - float64: nearkit pairs_within(r, sort=False) and query_pairs(r, output_type='ndarray')
       against scipy's cKDTree(data).query_pairs(r, output_type='ndarray') (scipy is
       float64 only, and single-threaded here).
     - float32: nearkit pairs_within(r, sort=False), and within(data, r, sort=False) (every
       point's neighbours, itself included: each pair twice, which is what Open3D returns)
       against Open3D's core.nns.NearestNeighborSearch fixed_radius_index +
       fixed_radius_search(data, r, sort=False) on CPU Float32 tensors.
   Agreement: the pairs are compared with scipy's (and Open3D's) as sets; pairs found by one
   side only are reported with how many lie within a relative 1e-9 of r^2 (1e-6 for float32),
   where the two sides' rounding may legitimately differ. Reported, not asserted.
2. within, mesh vertices: the 37,706 vertices of bunny00.off, 2^--queries-log2 (2^20) queries
   uniform in their bounding box (default_rng(7)), r = 1% of the box's diagonal.
     - float64: nearkit within(q, r) and query_ball_point(q, r, workers=-1) against scipy's
       cKDTree.query_ball_point(q, r, workers=-1), both returning lists (scipy's users get
       lists, so their building is timed on both sides); and return_length=True on both
       (counts only, no lists).
     - float32: nearkit within(q, r) (rows by distance) and within(q, r, sort=False) against
       Open3D's fixed_radius_search(q, r, sort=True / False).
3. --device cuda (or auto): the nearkit calls of 1 and 2 are timed again on the GPU, end to
   end from numpy arrays to numpy arrays; the peers stay on the CPU. The device each index
   ran on (PointIndex.device) is printed.

Times are medians of --runs runs after a warm-up; "index + query" includes building the
index (or tree) from the numpy arrays, "query" does not. Speed-ups are the peer's time over
nearkit's for the call named. A missing peer is reported and skipped.

    pip install scipy open3d && pip install crates/nearkit-py
    python bench/peers_within.py [--count 1000000] [--runs 3] [--device cpu|cuda|auto]
"""

import argparse
import importlib.metadata
import math
import os
import platform
import statistics
import time

import numpy as np

import nearkit

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MESH = os.path.join(HERE, "..", "..", "shared", "data", "bunny00.off")
NAME_WIDTH = 64


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


def short(device_description):
    """'cpu' or 'cuda:0' from an index's device description (e.g. 'cpu (16 threads)')."""
    return device_description.split()[0]


# ---------------------------------------------------------------------------- Open3D


def open3d_nns():
    """open3d.core.nns.NearestNeighborSearch, or None (with a message) when it is missing."""
    try:
        import open3d as o3d
    except ImportError:
        print("  open3d: not installed (pip install open3d), skipped")
        return None
    except Exception as e:  # a broken install (missing system libraries, ...)
        print(f"  open3d: fails to import ({type(e).__name__}: {e}), skipped")
        return None
    nns = getattr(getattr(o3d, "core", None), "nns", None)
    cls = getattr(nns, "NearestNeighborSearch", None)
    if cls is None or not hasattr(cls, "fixed_radius_search") or not hasattr(cls, "fixed_radius_index"):
        print(f"  open3d {o3d.__version__}: no core.nns.NearestNeighborSearch.fixed_radius_search, skipped")
        return None
    return o3d


def open3d_radius(o3d, data32, q32, r, sort):
    """Open3D's fixed-radius search on the CPU, from numpy to numpy: (splits, indices, sq. distances).
    Its result tuple is (indices, squared distances, splits) in 0.17 to 0.20, though its
    docstring says (indices, splits, distances): the splits are told apart by their length."""
    cpu = o3d.core.Device("CPU:0")
    nns = o3d.core.nns.NearestNeighborSearch(o3d.core.Tensor(data32, device=cpu))
    if not nns.fixed_radius_index(r):
        raise RuntimeError("Open3D's fixed_radius_index failed")
    q = data32 if q32 is None else q32
    try:
        out = nns.fixed_radius_search(o3d.core.Tensor(q, device=cpu), r, sort=sort)
    except TypeError:  # an Open3D without the sort argument
        out = nns.fixed_radius_search(o3d.core.Tensor(q, device=cpu), r)
    a, b, c = (t.numpy() for t in out)
    if np.issubdtype(c.dtype, np.floating):  # (indices, splits, distances)
        a, b, c = a, c, b
    idx, d2, splits = a, b, c
    assert len(splits) == len(q) + 1 and splits[-1] == len(idx), "unexpected Open3D result layout"
    return splits, idx, d2


# ---------------------------------------------------------------------------- agreement


def pair_keys(offsets, ids, n):
    """i * n + j for the rows' pairs (row i, id j)."""
    i = np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))
    return i * n + ids.astype(np.int64)


def compare_pairs(name, keys, ref_keys, data, r, rel):
    """Pairs (as keys i * n + j, i < j) of a peer against nearkit's: how many are on one side
    only, and how many of those lie within a relative `rel` of r^2 (distances in float64)."""
    n = len(data)
    only = np.setxor1d(keys, ref_keys, assume_unique=True)
    if len(only) == 0:
        print(f"    {name}: the same {len(ref_keys):,} pairs as nearkit")
        return
    i, j = only // n, only % n
    x = data.astype(np.float64)
    d2 = ((x[i] - x[j]) ** 2).sum(1)
    border = int((np.abs(d2 - r * r) <= rel * r * r).sum())
    in_peer = int(np.isin(only, keys, assume_unique=True).sum())
    print(f"    {name}: {len(keys):,} pairs, nearkit {len(ref_keys):,} (difference {len(keys) - len(ref_keys):+,}); "
          f"{in_peer:,} only in the peer, {len(only) - in_peer:,} only in nearkit, "
          f"{border:,} of these {len(only):,} within a relative {rel:g} of r^2")


def border_entries(index, x, r, rel):
    """How many (query, point) entries lie within a relative `rel` of r^2, by nearkit's counts."""
    hi = index.count_within(x, r * math.sqrt(1 + rel)).sum()
    lo = index.count_within(x, r * math.sqrt(1 - rel)).sum()
    return int(hi - lo)


def compare_counts(name, counts, ref_counts, index, x, r, rel):
    diff = int(np.count_nonzero(counts != ref_counts))
    total, ref_total = int(np.sum(counts)), int(np.sum(ref_counts))
    if diff == 0:
        print(f"    {name}: the same count for every query as nearkit ({ref_total:,} neighbours in all)")
        return
    print(f"    {name}: {total:,} neighbours, nearkit {ref_total:,} (difference {total - ref_total:+,}); "
          f"{diff:,} queries' counts differ; {border_entries(index, x, r, rel):,} entries lie within a "
          f"relative {rel:g} of r^2")


# ---------------------------------------------------------------------------- workloads


def clustered(n, rng):
    """nearkit's 'clustered' distribution in the unit cube (generate.rs), redone in numpy."""
    centres = 0.05 + 0.9 * rng.random((32, 3))
    return centres[rng.integers(0, len(centres), n)] + rng.normal(0.0, 1e-3, (n, 3))


def calibrate(data, neighbours, rng, sample=20_000):
    """r at which a point of `data` has on average `neighbours` others within r, by bisection
    on nearkit's count_within of a sample of the points (counted in the whole set)."""
    index = nearkit.PointIndex(data, device="cpu")
    s = data[rng.choice(len(data), min(sample, len(data)), replace=False)]

    def mean_others(r):
        return float(index.count_within(s, r).mean()) - 1.0

    volume = float(np.prod(data.max(0) - data.min(0)))
    r = ((neighbours + 1) * volume / (len(data) * 4 / 3 * math.pi)) ** (1 / 3)  # uniform, no borders
    lo, hi = r, r
    while mean_others(lo) > neighbours:
        lo /= 2
    while mean_others(hi) < neighbours:
        hi *= 2
    for _ in range(60):
        r = math.sqrt(lo * hi)
        m = mean_others(r)
        if abs(m - neighbours) < 0.01 or hi / lo < 1 + 1e-12:
            break
        lo, hi = (r, hi) if m < neighbours else (lo, r)
    return r, mean_others(r)


def self_join(label, data64, r, runs, devices):
    data32 = data64.astype(np.float32)
    n = len(data64)
    print(f"\nself-join, {n:,} points ({label}), r = {r:.6g}")
    table_header()
    nk = {}  # (call, device) -> seconds
    ds, pairs = [], {}  # pairs: the first device's rows
    for dev in devices:
        idx64 = nearkit.PointIndex(data64, device=dev)
        idx32 = nearkit.PointIndex(data32, device=dev)
        d = short(idx64.device)
        ds.append(d)
        print(f"  nearkit device: {idx64.device}")
        calls = [
            ("pairs_within f64", "f64", "nearkit {} pairs_within(r, sort=False), index + query",
             lambda: nearkit.PointIndex(data64, device=dev).pairs_within(r, sort=False)),
            ("pairs_within f64 query", "f64", "nearkit {} pairs_within(r, sort=False), query",
             lambda: idx64.pairs_within(r, sort=False)),
            ("query_pairs f64", "f64", "nearkit {} query_pairs(r, output_type='ndarray'), index + query",
             lambda: nearkit.PointIndex(data64, device=dev).query_pairs(r, output_type="ndarray")),
            ("pairs_within f32", "f32", "nearkit {} pairs_within(r, sort=False), index + query",
             lambda: nearkit.PointIndex(data32, device=dev).pairs_within(r, sort=False)),
            ("pairs_within f32 query", "f32", "nearkit {} pairs_within(r, sort=False), query",
             lambda: idx32.pairs_within(r, sort=False)),
            ("within(data) f32", "f32", "nearkit {} within(data, r, sort=False), index + query",
             lambda: nearkit.PointIndex(data32, device=dev).within(data32, r, sort=False)),
        ]
        for key, prec, name, f in calls:
            nk[key, d], out = median_time(f, runs)
            row(name.format(d), prec, nk[key, d])
            if key in ("pairs_within f64", "pairs_within f32"):
                if d == ds[0]:
                    pairs[key] = out.offsets, out.ids
                else:  # unsorted rows are in the index's order, the same on every device
                    same = all(np.array_equal(x, y) for x, y in zip((out.offsets, out.ids), pairs[key]))
                    print(f"    {key} on {d}: {'the same rows' if same else 'NOT the same rows'} as on {ds[0]}")
            del out
        del idx64, idx32
    keys64 = pair_keys(*pairs.pop("pairs_within f64"), n)
    keys32 = pair_keys(*pairs.pop("pairs_within f32"), n)
    print(f"  pairs within r: {len(keys64):,} (f64), {len(keys32):,} (f32); "
          f"{2 * len(keys64) / n:.2f} others per point")
    checks = []

    try:
        from scipy.spatial import cKDTree

        t, out = median_time(lambda: cKDTree(data64).query_pairs(r, output_type="ndarray"), runs)
        row("scipy cKDTree(data).query_pairs(r, output_type='ndarray'), index + query", "f64", t,
            [(f"pairs_within ({d})", nk["pairs_within f64", d]) for d in ds]
            + [(f"query_pairs ({d})", nk["query_pairs f64", d]) for d in ds])
        tree = cKDTree(data64)
        tq, _ = median_time(lambda: tree.query_pairs(r, output_type="ndarray"), runs)
        row("scipy tree.query_pairs(r, output_type='ndarray'), query", "f64", tq,
            [(f"pairs_within query ({d})", nk["pairs_within f64 query", d]) for d in ds])
        del tree
        out = out.astype(np.int64)
        lo, hi = out.min(1), out.max(1)
        checks.append(("scipy (f64)", np.sort(lo * n + hi), keys64, data64, 1e-9))
        del out, lo, hi
    except ImportError:
        print("  scipy: not installed, skipped")

    o3d = open3d_nns()
    if o3d is not None:
        t, (splits, idx, _) = median_time(lambda: open3d_radius(o3d, data32, None, r, sort=False), runs)
        row(f"Open3D {o3d.__version__} fixed_radius_index + _search(sort=False), index + query", "f32", t,
            [(f"within(data) ({d})", nk["within(data) f32", d]) for d in ds]
            + [(f"pairs_within ({d})", nk["pairs_within f32", d]) for d in ds])
        i = np.repeat(np.arange(n, dtype=np.int64), np.diff(splits))
        selfs = int((i == idx).sum())
        upper = i < idx
        keys = i[upper] * n + idx[upper]
        print(f"    Open3D lists {len(idx):,} neighbours: {selfs:,} points themselves, "
              f"{int(upper.sum()):,} with j > i and {len(idx) - selfs - int(upper.sum()):,} with j < i "
              f"(each pair twice)")
        checks.append(("Open3D (f32)", np.sort(keys), keys32, data32, 1e-6))
        del splits, idx, i, upper, keys
    for name, keys, ref, data, rel in checks:
        compare_pairs(name, keys, ref, data, r, rel)


def within_mesh(mesh_path, n_queries, runs, devices):
    v64, _ = nearkit.read_mesh(mesh_path)
    v32 = v64.astype(np.float32)
    lo, hi = v64.min(0), v64.max(0)
    r = 0.01 * float(np.linalg.norm(hi - lo))
    q64 = np.random.default_rng(7).uniform(lo, hi, (n_queries, 3))
    q32 = q64.astype(np.float32)
    print(f"\nwithin, {n_queries:,} queries uniform in the box of the {len(v64):,} vertices of "
          f"{os.path.basename(mesh_path)}, r = {r:.6g} (1% of the diagonal)")
    table_header()
    nk = {}
    ds = []
    for dev in devices:
        idx64 = nearkit.PointIndex(v64, device=dev)
        d = short(idx64.device)
        ds.append(d)
        print(f"  nearkit device: {idx64.device}")
        calls = [
            ("within f64", "f64", "nearkit {} within(q, r), index + query",
             lambda: nearkit.PointIndex(v64, device=dev).within(q64, r)),
            ("within f64 query", "f64", "nearkit {} within(q, r), query",
             lambda: idx64.within(q64, r)),
            ("qbp f64", "f64", "nearkit {} query_ball_point(q, r, workers=-1), index + query",
             lambda: nearkit.PointIndex(v64, device=dev).query_ball_point(q64, r, workers=-1)),
            ("qbp length f64", "f64", "nearkit {} query_ball_point(.., return_length=True), index + query",
             lambda: nearkit.PointIndex(v64, device=dev).query_ball_point(q64, r, workers=-1, return_length=True)),
            ("within f32", "f32", "nearkit {} within(q, r), index + query",
             lambda: nearkit.PointIndex(v32, device=dev).within(q32, r)),
            ("within f32 unsorted", "f32", "nearkit {} within(q, r, sort=False), index + query",
             lambda: nearkit.PointIndex(v32, device=dev).within(q32, r, sort=False)),
        ]
        for key, prec, name, f in calls:
            nk[key, d], out = median_time(f, runs)
            row(name.format(d), prec, nk[key, d])
            if d == ds[0]:
                if key == "qbp f64":
                    lists64 = out
                elif key == "qbp length f64":
                    counts64 = out
                elif key == "within f32":
                    counts32, rows32 = np.diff(out.offsets), out
                elif key == "within f64":
                    rows64 = out
            elif key in ("within f64", "within f32"):
                ref = rows64 if key == "within f64" else rows32
                same = all(np.array_equal(x, y) for x, y in zip(out, ref))
                print(f"    {key} on {d}: {'the same rows' if same else 'NOT the same rows'} as on {ds[0]}")
            del out
        del idx64
    print(f"  neighbours: {int(counts64.sum()):,} (f64), {int(counts32.sum()):,} (f32); "
          f"{np.mean(counts64):.2f} per query, {np.mean(counts64 > 0):.1%} of queries have some")
    del rows64, rows32
    ref64 = nearkit.PointIndex(v64, device="cpu")
    ref32 = nearkit.PointIndex(v32, device="cpu")

    try:
        from scipy.spatial import cKDTree

        t, lists = median_time(lambda: cKDTree(v64).query_ball_point(q64, r, workers=-1), runs)
        row("scipy cKDTree(v).query_ball_point(q, r, workers=-1), index + query", "f64", t,
            [(f"query_ball_point ({d})", nk["qbp f64", d]) for d in ds]
            + [(f"within ({d})", nk["within f64", d]) for d in ds])
        t, counts = median_time(
            lambda: cKDTree(v64).query_ball_point(q64, r, workers=-1, return_length=True), runs)
        row("scipy cKDTree(v).query_ball_point(.., return_length=True), index + query", "f64", t,
            [(f"query_ball_point(.., return_length=True) ({d})", nk["qbp length f64", d]) for d in ds])
        compare_counts("scipy (f64)", counts, counts64, ref64, q64, r, 1e-9)
        m = min(len(q64), 20_000)
        same = sum(a == b for a, b in zip(lists[:m], lists64[:m]))
        print(f"    scipy's lists of the first {m:,} queries: {same:,} the same as nearkit's query_ball_point's")
        del lists
    except ImportError:
        print("  scipy: not installed, skipped")

    o3d = open3d_nns()
    if o3d is not None:
        name = f"Open3D {o3d.__version__} fixed_radius_index + _search(sort={{}}), index + query"
        t, (splits, _, d2) = median_time(lambda: open3d_radius(o3d, v32, q32, r, sort=True), runs)
        row(name.format(True), "f32", t, [(f"within ({d})", nk["within f32", d]) for d in ds])
        t, _ = median_time(lambda: open3d_radius(o3d, v32, q32, r, sort=False), runs)
        row(name.format(False), "f32", t, [(f"within(sort=False) ({d})", nk["within f32 unsorted", d]) for d in ds])
        compare_counts("Open3D (f32)", np.diff(splits), counts32, ref32, q32, r, 1e-6)
        rows_sorted = all(np.all(np.diff(d2[s:e]) >= 0) for s, e in zip(splits[:1000], splits[1:1001]))
        print(f"    Open3D's sort=True rows (first 1,000): {'ascending' if rows_sorted else 'NOT ascending'} "
              f"by squared distance")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=1_000_000, help="points of each self-join")
    ap.add_argument("--neighbours", type=float, default=30, help="mean other points within r in the self-joins")
    ap.add_argument("--mesh", default=DEFAULT_MESH, help="bunny00.off (default: shared/data beside the repo)")
    ap.add_argument("--queries-log2", type=int, default=20)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--device", default="cpu",
                    help="cpu, cuda, auto: nearkit also runs there, end to end from numpy (peers stay on the CPU)")
    ap.add_argument("--skip-clustered", action="store_true")
    ap.add_argument("--skip", default="", help="comma-separated sections to skip: join,within")
    a = ap.parse_args()
    skip = set(a.skip.split(","))

    print(time.strftime("%Y-%m-%d %H:%M"), platform.platform(), platform.processor() or platform.machine(),
          f"{os.cpu_count()} cores")
    print("versions:", ", ".join(
        f"{p} {version(p)}" for p in ["nearkit", "numpy", "scipy", "open3d"] if version(p)))
    devices = ["cpu"]
    if a.device != "cpu":
        desc, note = nearkit.device_info(a.device)
        print(f"nearkit --device {a.device}: {desc}" + (f" ({note})" if note else ""))
        if short(desc) != "cpu":
            devices.append(a.device)
        else:
            print("  (the CPU: nearkit's rows are not repeated)")
    print("nearkit cpu:", nearkit.device_info("cpu")[0])

    if "join" not in skip:
        sets = [("uniform in the unit cube", lambda: np.random.default_rng(2031).random((a.count, 3)))]
        if not a.skip_clustered:
            sets.append(("clustered: 32 gaussians, sigma 0.001",
                         lambda: clustered(a.count, np.random.default_rng(2032))))
        for label, make in sets:
            data = make()
            r, mean = calibrate(data, a.neighbours, np.random.default_rng(5))
            print(f"\n[{label}] r = {r:.6g}: {mean:.3f} other points within r on average "
                  f"(20,000-point sample)")
            self_join(label, data, r, a.runs, devices)
    if "within" not in skip:
        within_mesh(a.mesh, 1 << a.queries_log2, a.runs, devices)


if __name__ == "__main__":
    main()
