"""The nearkit Python package against its Python peers, in one process on the same arrays.

1. kNN, k = 8: 2^20 queries uniform in the data's box, 19,851 float32 points (uniform in a
   cube, and the first 19,851 vertices of bunny00.off): nearkit vs pykdtree (float32) and
   scipy's cKDTree (float64 only, so against nearkit in float64 too), every core.
2. Self kNN, k = 8: 1M points uniform in a cube, each point's 8 nearest among them (itself
   included, as scipy counts it): nearkit vs pykdtree (float32) and scipy (float64).
3. Closest point: 1M queries uniform in 1.5x the bunny's box, bunny00.off (75,408
   triangles): nearkit vs fcpw, Open3D's RaycastingScene.compute_closest_points and trimesh
   (which is slow: timed on a subset and scaled, as the output says).
4. Binding overhead: query(k=8) of 1,000 points, less the library's own kNN call on the same
   (already converted) points.

Times are medians of --runs runs after a warm-up; "index + query" includes building the
index from the arrays, "query" does not. A missing peer is reported and skipped.

    pip install -r crates/nearkit-py/requirements-peers.txt && pip install crates/nearkit-py
    python bench/python_peers.py [--mesh ../shared/data/bunny00.off] [--runs 5]
"""

import argparse
import importlib.metadata
import os
import platform
import statistics
import time

import numpy as np

import nearkit

HERE = os.path.dirname(os.path.abspath(__file__))
DEVICE = "cpu"  # --device: where nearkit runs (the peers are CPU libraries)
DEFAULT_MESH = os.path.join(HERE, "..", "..", "shared", "data", "bunny00.off")


def median_time(f, runs):
    f()  # warm-up (first-touch allocations, thread pools, caches)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def version(pkg):
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return None


def agreement(name, d, ref):
    """How far a peer's distances are from nearkit's exact ones (reported, not asserted)."""
    err = np.asarray(d, dtype=np.float64) - np.asarray(ref, dtype=np.float64)
    worse = int((err > 1e-6 * np.maximum(np.abs(ref), 1e-12)).sum())
    print(f"    {name}: largest difference from nearkit's distances {np.abs(err).max():.2g} "
          f"on {len(err):,} queries; {worse} larger than the exact minimum")


def row(name, seconds, base=None, note=""):
    ratio = f"{seconds / base:6.2f}x nearkit's time" if base else ""
    print(f"  {name:<48} {seconds * 1e3:10.1f} ms  {ratio} {note}")


def knn(data32, label, n_queries, runs, rng):
    lo, hi = data32.min(0), data32.max(0)
    q32 = rng.uniform(lo, hi, (n_queries, 3)).astype(np.float32)
    data64, q64 = data32.astype(np.float64), q32.astype(np.float64)
    print(f"\nkNN k=8, {n_queries:,} queries x {len(data32):,} points ({label})")
    results = {}

    index32 = nearkit.PointIndex(data32, device=DEVICE)
    results["nearkit f32 query"] = median_time(lambda: index32.query(q32, k=8), runs)
    results["nearkit f32 index + query"] = median_time(
        lambda: nearkit.PointIndex(data32, device=DEVICE).query(q32, k=8), runs
    )
    index64 = nearkit.PointIndex(data64, device=DEVICE)
    results["nearkit f64 query"] = median_time(lambda: index64.query(q64, k=8), runs)
    results["nearkit f64 index + query"] = median_time(
        lambda: nearkit.PointIndex(data64, device=DEVICE).query(q64, k=8), runs
    )
    base32, base64 = results["nearkit f32 index + query"], results["nearkit f64 index + query"]
    for k, v in results.items():
        row(k, v)
    d_ref, i_ref = index64.query(q64[:2000], k=8)
    d_ref32, _ = index32.query(q32[:2000], k=8)

    try:
        from pykdtree.kdtree import KDTree

        t = median_time(lambda: KDTree(data32).query(q32, k=8), runs)
        tree = KDTree(data32)
        tq = median_time(lambda: tree.query(q32, k=8), runs)
        row("pykdtree f32 index + query", t, base32)
        row("pykdtree f32 query", tq, results["nearkit f32 query"])
        d, _ = tree.query(q32[:2000], k=8)
        agreement("pykdtree (f32)", d, d_ref32)
    except ImportError:
        print("  pykdtree: not installed")

    try:
        from scipy.spatial import cKDTree

        t = median_time(lambda: cKDTree(data64).query(q64, k=8, workers=-1), runs)
        tree = cKDTree(data64)
        tq = median_time(lambda: tree.query(q64, k=8, workers=-1), runs)
        row("scipy cKDTree f64 index + query", t, base32, "(vs nearkit f32)")
        row("scipy cKDTree f64 index + query", t, base64, "(vs nearkit f64, like for like)")
        row("scipy cKDTree f64 query", tq, results["nearkit f64 query"], "(vs nearkit f64)")
        d, i = tree.query(q64[:2000], k=8)
        agreement("scipy (f64)", d, d_ref)
    except ImportError:
        print("  scipy: not installed")


def self_knn(n, runs, rng):
    """Every point's 8 nearest among the points themselves (itself first, as scipy counts it):
    the query of a kNN graph, point-cloud normals and the like, on data as large as the
    queries (nearkit's block search, not its grid)."""
    x64 = rng.random((n, 3))
    x32 = x64.astype(np.float32)
    print(f"\nself kNN k=8, {n:,} points uniform in a cube (the points are the queries)")
    t32 = median_time(lambda: nearkit.PointIndex(x32, device=DEVICE).query(x32, k=8), runs)
    t64 = median_time(lambda: nearkit.PointIndex(x64, device=DEVICE).query(x64, k=8), runs)
    row("nearkit f32 index + query", t32)
    row("nearkit f64 index + query", t64)
    d_ref, i_ref = nearkit.PointIndex(x64, device=DEVICE).query(x64[:2000], k=8)
    d_ref32, _ = nearkit.PointIndex(x32, device=DEVICE).query(x32[:2000], k=8)
    try:
        from pykdtree.kdtree import KDTree

        row("pykdtree f32 index + query", median_time(lambda: KDTree(x32).query(x32, k=8), runs), t32)
        d, _ = KDTree(x32).query(x32[:2000], k=8)
        agreement("pykdtree (f32)", d, d_ref32)
    except ImportError:
        print("  pykdtree: not installed")
    try:
        from scipy.spatial import cKDTree

        t = median_time(lambda: cKDTree(x64).query(x64, k=8, workers=-1), runs)
        row("scipy cKDTree f64 index + query", t, t64, "(vs nearkit f64, like for like)")
        d, i = cKDTree(x64).query(x64[:2000], k=8)
        agreement("scipy (f64)", d, d_ref)
        print(f"    scipy (f64): ids equal at {int((i == i_ref).sum()):,} of {i.size:,} (query, rank)")
    except ImportError:
        print("  scipy: not installed")


def closest_point(mesh_path, n_queries, runs, rng, trimesh_subset):
    v64, f = nearkit.read_mesh(mesh_path)
    v32 = v64.astype(np.float32)
    lo, hi = v64.min(0), v64.max(0)
    c, h = (lo + hi) / 2, (hi - lo) * 0.75
    q64 = rng.uniform(c - h, c + h, (n_queries, 3))
    q32 = q64.astype(np.float32)
    print(f"\nclosest point, {n_queries:,} queries x {len(f):,} triangles ({os.path.basename(mesh_path)})")
    m32 = nearkit.MeshIndex(v32, f, device=DEVICE)
    t32q = median_time(lambda: m32.closest_point(q32), runs)
    t32 = median_time(lambda: nearkit.MeshIndex(v32, f, device=DEVICE).closest_point(q32), runs)
    m64 = nearkit.MeshIndex(v64, f, device=DEVICE)
    t64 = median_time(lambda: nearkit.MeshIndex(v64, f, device=DEVICE).closest_point(q64), runs)
    row("nearkit f32 query", t32q)
    row("nearkit f32 index + query", t32)
    row("nearkit f64 index + query", t64)
    ref = m64.closest_point(q64[:2000]).distance
    ref32 = m32.closest_point(q32[:2000]).distance

    try:
        import fcpw

        f32i = np.asfortranarray(f.astype(np.int32))
        vF = np.asfortranarray(v32)
        qF = np.asfortranarray(q32)
        r2 = np.full(n_queries, np.inf, dtype=np.float32)

        def run_fcpw():
            scene = fcpw.scene_3D()
            scene.set_object_count(1)
            scene.set_object_vertices(vF, 0)
            scene.set_object_triangles(f32i, 0)
            scene.build(fcpw.aggregate_type.bvh_surface_area, True)
            hits = fcpw.interaction_3D_list()
            scene.find_closest_points(qF, r2, hits)
            return hits

        row("fcpw f32 index + query", median_time(run_fcpw, runs), t32)
        hits = run_fcpw()
        d = np.array([hits[i].d for i in range(2000)])
        agreement("fcpw (f32)", d, ref32)
    except ImportError:
        print("  fcpw: not installed")

    try:
        import open3d as o3d

        def run_open3d():
            scene = o3d.t.geometry.RaycastingScene()
            scene.add_triangles(o3d.core.Tensor(v32), o3d.core.Tensor(f.astype(np.uint32)))
            return scene.compute_closest_points(o3d.core.Tensor(q32))

        row("Open3D RaycastingScene f32 index + query", median_time(run_open3d, max(1, runs // 2)), t32)
        pts = run_open3d()["points"].numpy()[:2000]
        d = np.linalg.norm(pts - q32[:2000], axis=1)
        agreement("Open3D (f32)", d, ref32)
    except ImportError:
        print("  open3d: not installed")

    try:
        import trimesh

        mesh = trimesh.Trimesh(v64, f, process=False)
        sub = q64[:trimesh_subset]

        def run_trimesh():
            # A fresh mesh each run, so its spatial index is built and timed as ours is.
            m = trimesh.Trimesh(v64, f, process=False)
            return trimesh.proximity.closest_point(m, sub)

        t = median_time(run_trimesh, 1) * n_queries / len(sub)
        row("trimesh f64 index + query", t, t64,
            f"(timed on {len(sub):,} queries, scaled x{n_queries / len(sub):.0f}; vs nearkit f64)")
        _, d, _ = trimesh.proximity.closest_point(mesh, q64[: min(2000, len(sub))])
        agreement("trimesh (f64)", d, ref[: len(d)])
    except ImportError:
        print("  trimesh: not installed")


def overhead(data32, runs, rng):
    q = rng.uniform(data32.min(0), data32.max(0), (1000, 3)).astype(np.float32)
    index = nearkit.PointIndex(data32, device=DEVICE)
    reps = max(300, 100 * runs)
    # Pairs of calls, one after the other, so that both see the same machine: the Python
    # call, then the library's own call timed inside Rust.
    index.query(q, k=8)
    python_call, library = [], []
    for _ in range(reps):
        t = time.perf_counter()
        index.query(q, k=8)
        python_call.append(time.perf_counter() - t)
        library.append(index._native._library_knn_seconds(q, 8, 1)[0])
    diff = statistics.median(np.subtract(python_call, library))
    one = rng.random((1, 3)).astype(np.float32)
    single = median_time(lambda: index.query(one, k=8), reps)
    print(f"\nbinding overhead: query(k=8) of 1,000 points x {len(data32):,} ({reps} pairs of calls)")
    print(f"  Python call {statistics.median(python_call) * 1e6:8.1f} us, the library's own call "
          f"{statistics.median(library) * 1e6:8.1f} us (medians); overhead, the median of the "
          f"pairs' differences: {diff * 1e6:.1f} us")
    print(f"  a whole call of 1 query: {single * 1e6:.1f} us")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mesh", default=DEFAULT_MESH, help="bunny00.off (default: shared/data beside the repo)")
    ap.add_argument("--queries-log2", type=int, default=20)
    ap.add_argument("--cp-queries", type=int, default=1_000_000)
    ap.add_argument("--trimesh-subset", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--device", default="cpu", help="nearkit's device: cpu, cuda, auto (end to end from numpy)")
    ap.add_argument("--self-knn-points", type=int, default=1_000_000)
    ap.add_argument("--skip", default="", help="comma-separated sections to skip: knn,selfknn,cp,overhead")
    a = ap.parse_args()
    global DEVICE
    DEVICE = a.device
    skip = set(a.skip.split(","))

    print(time.strftime("%Y-%m-%d %H:%M"), platform.platform(), f"{os.cpu_count()} cores")
    print("versions:", ", ".join(
        f"{p} {version(p)}" for p in ["nearkit", "numpy", "scipy", "pykdtree", "fcpw", "open3d", "trimesh", "rtree"]
        if version(p)))
    print("nearkit:", nearkit.device_info(DEVICE)[0])
    rng = np.random.default_rng(2026)
    bunny_v, _ = nearkit.read_mesh(a.mesh, dtype=np.float32)
    uniform = rng.random((19_851, 3)).astype(np.float32)
    if "knn" not in skip:
        knn(uniform, "uniform in a cube", 1 << a.queries_log2, a.runs, rng)
        knn(np.ascontiguousarray(bunny_v[:19_851]), "first 19,851 vertices of " + os.path.basename(a.mesh),
            1 << a.queries_log2, a.runs, rng)
    if "selfknn" not in skip:
        self_knn(a.self_knn_points, a.runs, rng)
    if "cp" not in skip:
        closest_point(a.mesh, a.cp_queries, a.runs, rng, a.trimesh_subset)
    if "overhead" not in skip:
        overhead(uniform, a.runs, rng)


if __name__ == "__main__":
    main()
