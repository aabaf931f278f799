"""MeshIndex against a numpy brute force over every triangle, and signed distances."""

import numpy as np
import pytest

import nearkit


def closest_on_triangles(p, a, b, c):
    """Ericson's closest point of p on each triangle (a, b, c: (F, 3)), in float64."""
    ab, ac, ap = b - a, c - a, p - a
    d1, d2 = (ab * ap).sum(1), (ac * ap).sum(1)
    bp = p - b
    d3, d4 = (ab * bp).sum(1), (ac * bp).sum(1)
    cp = p - c
    d5, d6 = (ab * cp).sum(1), (ac * cp).sum(1)
    va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2
    with np.errstate(divide="ignore", invalid="ignore"):
        out = a + ab * (vb / (va + vb + vc))[:, None] + ac * (vc / (va + vb + vc))[:, None]
        # Regions, checked in Ericson's order (later masks only where earlier ones failed).
        done = np.zeros(len(a), bool)

        def take(mask, value):
            nonlocal out, done
            m = mask & ~done
            out = np.where(m[:, None], value, out)
            done |= m

        take((d1 <= 0) & (d2 <= 0), a)
        take((d3 >= 0) & (d4 <= d3), b)
        take((vc <= 0) & (d1 >= 0) & (d3 <= 0), a + ab * (d1 / (d1 - d3))[:, None])
        take((d6 >= 0) & (d5 <= d6), c)
        take((vb <= 0) & (d2 >= 0) & (d6 <= 0), a + ac * (d2 / (d2 - d6))[:, None])
        w = (d4 - d3) / ((d4 - d3) + (d5 - d6))
        take((va <= 0) & ((d4 - d3) >= 0) & ((d5 - d6) >= 0), b + (c - b) * w[:, None])
    # Degenerate triangles: the nearest of the three edges.
    bad = ~np.isfinite(out).all(1)
    if bad.any():
        best = None
        for s, e in [(a, b), (b, c), (c, a)]:
            d = e - s
            t = np.clip(((p - s) * d).sum(1) / np.maximum((d * d).sum(1), 1e-300), 0, 1)
            q = s + d * t[:, None]
            if best is None:
                best = q
            else:
                best = np.where(
                    (((q - p) ** 2).sum(1) < ((best - p) ** 2).sum(1))[:, None], q, best
                )
        out = np.where(bad[:, None], best, out)
    return out


def brute_closest(queries, v, f):
    a, b, c = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
    dist, tri, pts = [], [], []
    for p in queries:
        cp = closest_on_triangles(p, a, b, c)
        d = np.sqrt(((cp - p) ** 2).sum(1))
        t = int(np.argmin(d))
        dist.append(d[t])
        tri.append(t)
        pts.append(cp[t])
    return np.array(dist), np.array(tri), np.array(pts), a, b, c


def uv_sphere(rings=24, segments=48, radius=1.0):
    """A closed, outward-oriented sphere (as the library's Mesh::uv_sphere)."""
    v = [[0, 0, radius]]
    for r in range(1, rings):
        th = np.pi * r / rings
        for s in range(segments):
            ph = 2 * np.pi * s / segments
            v.append([radius * np.sin(th) * np.cos(ph), radius * np.sin(th) * np.sin(ph), radius * np.cos(th)])
    v.append([0, 0, -radius])
    south = len(v) - 1

    def at(r, s):
        return 1 + (r - 1) * segments + s % segments

    f = []
    for s in range(segments):
        f.append([0, at(1, s), at(1, s + 1)])
        f.append([south, at(rings - 1, s + 1), at(rings - 1, s)])
    for r in range(1, rings - 1):
        for s in range(segments):
            f.append([at(r, s), at(r + 1, s), at(r + 1, s + 1)])
            f.append([at(r, s), at(r + 1, s + 1), at(r, s + 1)])
    return np.array(v, dtype=np.float64), np.array(f)


def random_soup(rng, n_tri=400):
    """Random triangles, some slivers and some degenerate (a repeated corner, a segment)."""
    v = rng.uniform(-5, 5, (3 * n_tri, 3))
    f = np.arange(3 * n_tri).reshape(n_tri, 3)
    f[:10, 2] = f[:10, 1]  # repeated index: a segment
    v[3 * 10 : 3 * 20 : 3] = v[3 * 10 + 1 : 3 * 20 : 3]  # two equal corners
    v[3 * 20 + 2 : 3 * 30 : 3] = 0.5 * (v[3 * 20 : 3 * 30 : 3] + v[3 * 20 + 1 : 3 * 30 : 3])  # collinear
    return v, f


@pytest.mark.parametrize("surface", ["soup", "sphere"])
def test_closest_point_is_the_brute_force_minimum(rng, surface):
    v, f = random_soup(rng) if surface == "soup" else uv_sphere(12, 24, 3.0)
    q = rng.uniform(-7, 7, (300, 3))
    q[:20] = v[f[:20, 0]]  # queries on vertices
    cp = nearkit.MeshIndex(v, f, device="cpu").closest_point(q)
    bd, bt, bp, a, b, c = brute_closest(q, v, f)
    np.testing.assert_allclose(cp.distance, bd, rtol=1e-9, atol=1e-9)
    # Same triangle wherever the runner-up is not (nearly) as close.
    d_found = np.sqrt(((cp.point - q) ** 2).sum(1))
    np.testing.assert_allclose(d_found, cp.distance, rtol=1e-9, atol=1e-9)
    clear = np.abs(cp.distance - bd) < 1e-12
    assert (cp.triangle[clear] == bt[clear]).mean() > 0.9
    # The point is on its triangle, and the barycentric coordinates name it.
    t = cp.triangle
    u, w_, x = cp.barycentric.T
    np.testing.assert_allclose(u[:, None] * a[t] + w_[:, None] * b[t] + x[:, None] * c[t], cp.point, atol=1e-9)
    np.testing.assert_allclose(cp.barycentric.sum(1), 1, atol=1e-9)
    assert (cp.barycentric >= -1e-12).all()


def test_float32_mesh(rng):
    v, f = uv_sphere(12, 24, 3.0)
    q = rng.uniform(-5, 5, (500, 3))
    cp64 = nearkit.MeshIndex(v, f, device="cpu").closest_point(q)
    cp32 = nearkit.MeshIndex(v.astype(np.float32), f, device="cpu").closest_point(q)
    assert cp32.distance.dtype == np.float32 and cp32.point.dtype == np.float32
    np.testing.assert_allclose(cp32.distance, cp64.distance, atol=1e-5)


def test_max_distance_and_shapes(rng):
    v, f = uv_sphere(8, 16)
    index = nearkit.MeshIndex(v, f, device="cpu")
    cp = index.closest_point([[0, 0, 5.0], [0, 0, 1.2]], max_distance=1.0)
    assert np.isinf(cp.distance[0]) and cp.triangle[0] == len(f)
    assert np.isnan(cp.point[0]).all() and np.isnan(cp.barycentric[0]).all()
    assert cp.triangle[1] < len(f) and abs(cp.distance[1] - 0.2) < 1e-9
    one = index.closest_point([0, 0, 3.0])
    assert one.distance.shape == () and one.point.shape == (3,) and one.barycentric.shape == (3,)
    grid = index.closest_point(rng.random((4, 5, 3)))
    assert grid.distance.shape == (4, 5) and grid.point.shape == (4, 5, 3)
    assert index.signed_distance(rng.random((4, 5, 3))).shape == (4, 5)
    assert index.closest_point(np.empty((0, 3))).point.shape == (0, 3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_signed_distance_on_a_sphere(rng, dtype):
    v, f = uv_sphere(32, 64, 2.0)
    index = nearkit.MeshIndex(v.astype(dtype), f, device="cpu")
    dirs = rng.normal(size=(2000, 3))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    r = np.concatenate([rng.uniform(0.0, 1.8, 1000), rng.uniform(2.2, 6.0, 1000)])
    sd = index.signed_distance(dirs * r[:, None])
    assert sd.dtype == dtype
    assert (sd[:1000] < 0).all() and (sd[1000:] > 0).all()
    # Within the tessellation's error of the true sphere.
    np.testing.assert_allclose(np.abs(sd), np.abs(r - 2.0), atol=0.02)
    d = index.closest_point(dirs * r[:, None]).distance
    np.testing.assert_array_equal(np.abs(sd), d)


def test_signed_distance_needs_a_closed_mesh():
    open_square = nearkit.MeshIndex([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]], [[0, 1, 2], [0, 2, 3]])
    with pytest.raises(ValueError, match="closed|edge|boundary"):
        open_square.signed_distance([[0.5, 0.5, 1.0]])


@pytest.mark.parametrize(
    "faces, error, message",
    [
        ([[0, 1, 5]], ValueError, "vertex 5"),
        ([[0, 1, -1]], ValueError, "0-based"),
        ([[0, 1]], ValueError, "\\(F, 3\\)"),
        (np.zeros((0, 3), int), ValueError, "no triangles"),
        ([[0.0, 1.0, 2.0]], TypeError, "integers"),
    ],
)
def test_bad_faces(faces, error, message):
    with pytest.raises(error, match=message):
        nearkit.MeshIndex([[0, 0, 0], [1, 0, 0], [0, 1, 0]], faces)


def test_bad_vertices_and_queries():
    with pytest.raises(ValueError, match="point 1: coordinate x is NaN"):
        nearkit.MeshIndex([[0, 0, 0], [np.nan, 0, 0], [0, 1, 0]], [[0, 1, 2]])
    index = nearkit.MeshIndex([[0, 0, 0], [1, 0, 0], [0, 1, 0]], [[0, 1, 2]])
    with pytest.raises(ValueError, match="queries, point 0"):
        index.closest_point([[np.inf, 0, 0]])
    with pytest.raises(ValueError, match="max_distance"):
        index.closest_point([[0, 0, 0]], max_distance=-1)


def test_bad_vertices_are_named_vertices():
    v = np.array([[0, 0, 0], [1, np.nan, 0], [0, 1, 0]], np.float64)
    with pytest.raises(ValueError, match="vertices, point 1: coordinate y is NaN"):
        nearkit.MeshIndex(v, [[0, 1, 2]], device="cpu")
