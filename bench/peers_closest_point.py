"""Peer for `nearkit bench closest-point`: fcpw (CPU, vectorized SAH BVH) on the same workload.

Queries are uniform in 1.5x the mesh's bounding box (the same distribution as nearkit's bench,
drawn with numpy's generator). Times the index build plus the queries, as nearkit's "end to
end" does. Usage: python bench/peers_closest_point.py MESH.off [--queries N] [--runs R]
Install: pip install fcpw numpy
"""
import argparse
import time

import numpy as np


def read_off(path):
    words = [w for line in open(path) for w in line.split("#")[0].split()]
    assert words[0] == "OFF", "not an OFF file"
    nv, nf = int(words[1]), int(words[2])
    v = np.array(words[4 : 4 + 3 * nv], dtype=np.float64).reshape(nv, 3)
    faces, i = [], 4 + 3 * nv
    for _ in range(nf):
        k = int(words[i])
        idx = [int(x) for x in words[i + 1 : i + 1 + k]]
        faces.extend([idx[0], idx[j], idx[j + 1]] for j in range(1, k - 1))
        i += 1 + k
    return v, np.array(faces, dtype=np.int32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mesh")
    ap.add_argument("--queries", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    import fcpw

    v, f = read_off(a.mesh)
    lo, hi = v.min(0), v.max(0)
    c, h = (lo + hi) / 2, (hi - lo) * 0.75
    q = np.random.default_rng(17).uniform(c - h, c + h, size=(a.queries, 3)).astype(np.float32)
    q = np.asfortranarray(q)
    r2 = np.full(a.queries, np.inf, dtype=np.float32)
    # fcpw 1.0.4 (PyPI, late 2026) takes a list of bounding spheres; earlier 1.x took the
    # arrays. Building the list is input marshalling, done once and not timed.
    spheres = None
    if hasattr(fcpw, "bounding_sphere_3D_list"):
        spheres = fcpw.bounding_sphere_3D_list()
        qc = np.ascontiguousarray(q)
        for i in range(a.queries):
            spheres.append(fcpw.bounding_sphere_3D(qc[i], np.inf))
    times = []
    for _ in range(a.runs + 1):
        t0 = time.perf_counter()
        scene = fcpw.scene_3D()
        scene.set_object_count(1)
        scene.set_object_vertices(np.asfortranarray(v.astype(np.float32)), 0)
        scene.set_object_triangles(np.asfortranarray(f), 0)
        scene.build(fcpw.aggregate_type.bvh_surface_area, True)
        hits = fcpw.interaction_3D_list()
        if spheres is not None:
            scene.find_closest_points(spheres, hits)
        else:
            scene.find_closest_points(q, r2, hits)
        times.append(time.perf_counter() - t0)
    d = np.array([hits[i].d for i in range(min(len(hits), 1000))])
    print(f"fcpw (CPU, vectorized SAH BVH): {len(f)} triangles, {a.queries:,} queries, "
          f"median of {a.runs} runs: {1e3 * np.median(times[1:]):.1f} ms end to end "
          f"(first distances {d[:3]})")


if __name__ == "__main__":
    main()
