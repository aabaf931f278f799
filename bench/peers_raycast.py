"""nearkit's ray casts against Open3D's RaycastingScene (Embree), in one process, on the same
rays and mesh (issue 26's ray target, mesh only).

Workload: --mesh (bunny00.off) scaled so its longest side is 50 m and moved to start at the
origin (as ``nearkit collide --scene mesh:… --mesh-size 50`` scales it); --rays rays
(default 1,000,000; numpy default_rng(26)): origins uniform in the mesh's box widened by 10 m
on every side, directions uniform on the sphere, no distance limit. Each side's first hit.

Sides (every core on each; --threads N sets RAYON_NUM_THREADS and OMP/TBB's before import):
- nearkit: ``World.set_mesh`` once, then ``Collider(device="cpu").ray_casts(world, o, d)``
  (float64 throughout: the collision world is f64 only), the tree built by the first call; the
  timed calls reuse it, as a server casting every tick would.
- Open3D: ``RaycastingScene.add_triangles`` once (its BVH is built lazily by the first cast),
  then ``cast_rays`` on an (n, 6) float32 tensor. Open3D is float32 only: not like for like in
  precision; nearkit computes in f64, which costs it, so the comparison favours Open3D.

Reported: medians of --runs timed calls after a warm-up, rays per second, and the agreement:
the share of rays where both hit the same triangle or both miss; where they differ, whether
the distances agree to 1e-4 relative (an edge or a vertex, where f32 and f64 pick different
neighbours).

    /work/peers/venv/bin/pip install open3d   # and the nearkit wheel
    /work/peers/venv/bin/python bench/peers_raycast.py [--runs 5] [--rays 1000000] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mesh", default=os.path.join(os.path.dirname(__file__), "../../shared/data/bunny00.off"))
    ap.add_argument("--rays", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int)
    args = ap.parse_args()
    if args.threads:
        for v in ("RAYON_NUM_THREADS", "OMP_NUM_THREADS", "TBB_NUM_THREADS"):
            os.environ[v] = str(args.threads)
    import numpy as np

    import nearkit

    vertices, faces = nearkit.read_mesh(args.mesh, dtype="float64")
    lo, hi = vertices.min(0), vertices.max(0)
    vertices = (vertices - lo) * (50.0 / (hi - lo).max())
    lo, hi = vertices.min(0) - 10.0, vertices.max(0) + 10.0
    rng = np.random.default_rng(26)
    origins = lo + (hi - lo) * rng.random((args.rays, 3))
    directions = rng.normal(size=(args.rays, 3))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)

    def timed(f):
        f()
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            out = f()
            times.append(time.perf_counter() - t0)
        return float(np.median(times)), out

    world = nearkit.World()
    world.set_mesh(vertices, faces)
    collider = nearkit.Collider(device="cpu")
    t_nk, hits = timed(lambda: collider.ray_casts(world, origins, directions))
    nk_tri = np.full(args.rays, -1, dtype=np.int64)
    nk_t = np.full(args.rays, np.inf)
    has = hits.offsets[1:] > hits.offsets[:-1]
    nk_tri[has] = hits.id
    nk_t[has] = hits.distance
    print(f"nearkit (f64, {collider.describe()}): {t_nk * 1e3:.1f} ms, "
          f"{args.rays / t_nk / 1e6:.2f} M rays/s, {has.sum():,} hits", flush=True)

    try:
        import open3d as o3d
    except ImportError:
        print("open3d: not installed (pip install open3d); skipped")
        return
    scene = o3d.t.geometry.RaycastingScene()
    scene.add_triangles(
        o3d.core.Tensor(vertices.astype(np.float32)), o3d.core.Tensor(faces.astype(np.uint32))
    )
    rays = o3d.core.Tensor(np.hstack([origins, directions]).astype(np.float32))
    t_o3d, ans = timed(lambda: scene.cast_rays(rays))
    o_t = ans["t_hit"].numpy().astype(np.float64)
    o_tri = ans["primitive_ids"].numpy().astype(np.int64)
    o_tri[~np.isfinite(o_t)] = -1
    print(f"open3d {o3d.__version__} (f32, Embree): {t_o3d * 1e3:.1f} ms, {args.rays / t_o3d / 1e6:.2f} M rays/s, "
          f"{np.isfinite(o_t).sum():,} hits", flush=True)
    same = nk_tri == o_tri
    differ = ~same
    close = differ & np.isfinite(o_t) & np.isfinite(nk_t) & (np.abs(o_t - nk_t) <= 1e-4 * np.maximum(1.0, nk_t))
    print(f"agreement: {same.mean():.6f} same triangle or both miss; of the {differ.sum():,} others, "
          f"{close.sum():,} at the same distance (1e-4 relative)")
    print(f"nearkit's speed-up over Open3D: {t_o3d / t_nk:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
