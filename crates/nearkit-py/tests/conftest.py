"""Inputs and reference answers shared by the tests: random point sets of several shapes,
and numpy brute forces in the library's own arithmetic."""

import os

import numpy as np
import pytest

import nearkit

DISTRIBUTIONS = ["uniform", "clustered", "duplicates", "surface"]


def make_points(kind, n, rng, dtype=np.float64):
    """n points: uniform in a box, in tight clusters, with many exact duplicates, or on a
    sphere's surface (a 2-D set in 3-D, as scans are)."""
    if kind == "uniform":
        p = rng.uniform(-10, 10, (n, 3))
    elif kind == "clustered":
        centres = rng.uniform(-100, 100, (8, 3))
        p = centres[rng.integers(0, 8, n)] + rng.normal(0, 0.5, (n, 3))
    elif kind == "duplicates":
        base = rng.integers(0, 6, (max(n // 8, 1), 3)).astype(np.float64)
        p = base[rng.integers(0, len(base), n)]
    elif kind == "surface":
        v = rng.normal(size=(n, 3))
        p = 5 * v / np.linalg.norm(v, axis=1, keepdims=True)
    else:
        raise ValueError(kind)
    return p.astype(dtype)


def squared_distances(q, data):
    """(nq, n) squared distances computed as the library does: dx*dx + dy*dy + dz*dz, in
    that order, in the arrays' precision."""
    d = [q[:, None, a] - data[None, :, a] for a in range(3)]
    return d[0] * d[0] + d[1] * d[1] + d[2] * d[2]


def brute_knn(q, data, k, bound=None, exclude_self=False):
    """(distances, ids) of each query's k nearest, ties to the smaller id; (inf, n) missing."""
    d2 = squared_distances(q, data)
    n = len(data)
    if exclude_self:
        np.fill_diagonal(d2, np.inf)
    if bound is not None:
        d2 = np.where(d2 <= d2.dtype.type(bound) * d2.dtype.type(bound), d2, np.inf)
    order = np.argsort(d2, axis=1, kind="stable")[:, :k]
    dk = np.take_along_axis(d2, order, axis=1)
    ids = np.where(np.isinf(dk), n, order)
    dist = np.sqrt(dk)
    if k > n:
        pad = k - n
        dist = np.pad(dist, ((0, 0), (0, pad)), constant_values=np.inf)
        ids = np.pad(ids, ((0, 0), (0, pad)), constant_values=n)
    return dist, ids


def gpu_available():
    return nearkit.cuda_available()


def require_gpu():
    """Skips the test without a usable GPU, or fails it with NEARKIT_REQUIRE_CUDA=1 (as the
    Rust tests do)."""
    if gpu_available():
        return
    if os.environ.get("NEARKIT_REQUIRE_CUDA") == "1":
        pytest.fail("NEARKIT_REQUIRE_CUDA=1, but CUDA is not usable: " + str(_why_not()))
    pytest.skip("no usable CUDA GPU here")


def _why_not():
    try:
        nearkit.device_info("cuda")
    except RuntimeError as e:
        return e
    return None


@pytest.fixture
def rng(request):
    # A fresh seed per run, printed on failure through the test's name and this value.
    seed = int.from_bytes(os.urandom(4), "little")
    request.node.user_properties.append(("seed", seed))
    print(f"seed {seed}")
    return np.random.default_rng(seed)
