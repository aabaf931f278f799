"""CPU and GPU give the same bits. Skipped without a usable CUDA GPU (fails instead with
NEARKIT_REQUIRE_CUDA=1)."""

import subprocess
import sys

import numpy as np
import pytest
from conftest import brute_knn, make_points, require_gpu
from test_mesh import uv_sphere

import nearkit


@pytest.fixture(autouse=True)
def gpu():
    require_gpu()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["uniform", "clustered", "duplicates", "surface"])
def test_point_queries_are_bitwise_equal(rng, dtype, kind):
    data = make_points(kind, 50_000, rng, dtype)
    q = make_points(kind, 200_000, rng, dtype)
    cpu, gpu = nearkit.PointIndex(data, device="cpu"), nearkit.PointIndex(data, device="cuda")
    assert gpu.device.startswith("cuda")
    for k in [1, 8, [2, 16]]:
        for bound in [np.inf, 0.3]:
            dc, ic = cpu.query(q, k=k, distance_upper_bound=bound)
            dg, ig = gpu.query(q, k=k, distance_upper_bound=bound)
            np.testing.assert_array_equal(ig, ic)
            np.testing.assert_array_equal(dg, dc)
    for bound in [None, 0.05]:
        for a, b in zip(cpu.nearest(q, max_distance=bound), gpu.nearest(q, max_distance=bound)):
            np.testing.assert_array_equal(a, b)
    for a, b in zip(cpu.knn_graph(8), gpu.knn_graph(8)):
        np.testing.assert_array_equal(a, b)
    for mode in ["nearest-per-a", "all-pairs"]:
        for a, b in zip(cpu.closest_pairs(q, k=500, mode=mode), gpu.closest_pairs(q, k=500, mode=mode)):
            np.testing.assert_array_equal(a, b)


# Radii giving a few to a few hundred neighbours a query; the duplicates' grid puts points at
# exactly 1 (an inclusive boundary both devices must draw alike), and a smaller set of them
# keeps that to hundreds (every grid point holds n / 216 points).
RADIUS = {"uniform": 0.5, "clustered": 0.05, "duplicates": 1.0, "surface": 0.1}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["uniform", "clustered", "duplicates", "surface"])
def test_radius_queries_are_bitwise_equal(rng, dtype, kind):
    data = make_points(kind, 10_000 if kind == "duplicates" else 50_000, rng, dtype)
    # Half the queries on data points (fresh clusters would lie far from the data's).
    q = np.concatenate([make_points(kind, 10_000, rng, dtype), data[rng.integers(0, len(data), 10_000)]])
    cpu, gpu = nearkit.PointIndex(data, device="cpu"), nearkit.PointIndex(data, device="cuda")
    r = RADIUS[kind]
    for sort in [True, False]:  # unsorted rows are in the index's order, the same on both
        for distances in [True, False]:
            both = [i.within(q, r, sort=sort, distances=distances) for i in (cpu, gpu)]
            both += [i.pairs_within(r, sort=sort, distances=distances) for i in (cpu, gpu)]
            for a, b in [*zip(both[0], both[1]), *zip(both[2], both[3])]:
                np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(cpu.count_within(q, r), gpu.count_within(q, r))
    np.testing.assert_array_equal(
        cpu.query_pairs(r, output_type="ndarray"), gpu.query_pairs(r, output_type="ndarray")
    )
    small = q[:2000]
    for a, b in zip(cpu.query_ball_point(small, r), gpu.query_ball_point(small, r)):
        assert a == b
    np.testing.assert_array_equal(
        cpu.sparse_distance_matrix(q, r, output_type="ndarray"), gpu.sparse_distance_matrix(q, r, output_type="ndarray")
    )
    with pytest.raises(ValueError, match="max_results"):
        gpu.within(q, r, max_results=int(cpu.count_within(q, r).sum()) - 1)


def test_auto_runs_small_calls_on_the_cpu_with_the_same_answer(rng):
    data = rng.random((20_000, 3)).astype(np.float32)
    auto = nearkit.PointIndex(data, device="auto")
    assert auto.device.startswith("cuda")
    small = rng.random((100, 3)).astype(np.float32)  # below AUTO_CPU_BELOW: the CPU twin
    large = rng.random((nearkit.AUTO_CPU_BELOW * 3, 3)).astype(np.float32)
    for q in [small, large]:
        d, i = auto.query(q, k=4)
        bd, bi = brute_knn(q[:200], data, 4)
        np.testing.assert_array_equal(i[:200], bi)
        np.testing.assert_array_equal(d[:200], bd)
    cpu = nearkit.PointIndex(data, device="cpu")
    for q in [small, large]:
        for a, b in zip(auto.within(q, 0.05), cpu.within(q, 0.05)):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_closest_points_are_bitwise_equal(rng, dtype):
    v, f = uv_sphere(64, 128, 2.0)
    v = v.astype(dtype)
    q = rng.uniform(-4, 4, (300_000, 3)).astype(dtype)
    cpu, gpu = nearkit.MeshIndex(v, f, device="cpu"), nearkit.MeshIndex(v, f, device="cuda")
    for a, b in zip(cpu.closest_point(q), gpu.closest_point(q)):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(cpu.closest_point(q, max_distance=0.5), gpu.closest_point(q, max_distance=0.5)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(cpu.signed_distance(q), gpu.signed_distance(q))


def test_collider_switches_devices_between_ticks(rng):
    h = rng.uniform(-0.5, 0.5, (101, 101))
    world = nearkit.World()
    world.set_heightfield(h)
    n = 4000
    centers = np.column_stack([rng.uniform(1, 99, (n, 2)), rng.uniform(-0.3, 1.0, n)])
    ids = world.add_bodies(centers, radii=rng.uniform(0.2, 0.8, (n, 3)), orientations=rng.normal(size=(n, 4)))
    collider = nearkit.Collider(device="cuda")
    reference = nearkit.Collider(device="cpu")
    for tick in range(6):
        collider.device = "cuda" if tick % 2 == 0 else "cpu"
        np.testing.assert_array_equal(collider.contacts(world), reference.contacts(world))
        centers[:, :2] += rng.normal(0, 0.1, (n, 2))
        world.set_poses(ids, centers)
    starts = np.column_stack([rng.uniform(5, 95, (1000, 2)), np.full(1000, 5.0)])
    ends = starts - [0, 0, 10]
    g = nearkit.Collider(device="cuda").sweeps(world, starts, ends, radii=0.3)
    c = reference.sweeps(world, starts, ends, radii=0.3)
    for a, b in zip(g, c):
        np.testing.assert_array_equal(a, b)


def test_instances_meet_bodies_and_rays_the_same_on_both_devices(rng):
    world = nearkit.World()
    world.set_heightfield(rng.uniform(-0.5, 0.5, (61, 61)))
    # A 2 x 2 x 2 box about its origin, placed 300 times (some pairs on the same spot).
    v = np.array([[x, y, z] for z in (-1, 1) for y in (-1, 1) for x in (-1, 1)], dtype=float)
    quads = [[0, 1, 3, 2], [4, 6, 7, 5], [0, 4, 5, 1], [2, 3, 7, 6], [0, 2, 6, 4], [1, 5, 7, 3]]
    faces = [[q[0], q[1], q[2]] for q in quads] + [[q[0], q[2], q[3]] for q in quads]
    box = world.add_shape(v, faces)
    positions = np.column_stack([rng.uniform(2, 58, (300, 2)), rng.uniform(0, 2, 300)]).round()
    positions[1::10] = positions[::10]
    ids = world.add_instances(box, positions, rng.normal(size=(300, 4)), layers=np.where(np.arange(300) % 4 == 0, 2, 1))
    n = 3000
    centers = np.column_stack([rng.uniform(1, 59, (n, 2)), rng.uniform(-0.3, 2.0, n)])
    world.add_bodies(centers, radii=rng.uniform(0.2, 0.8, (n, 3)), orientations=rng.normal(size=(n, 4)))
    gpu, cpu = nearkit.Collider(device="cuda"), nearkit.Collider(device="cpu")
    origins = np.column_stack([rng.uniform(0, 60, (20000, 2)), rng.uniform(0, 6, 20000)])
    directions = rng.normal(size=(20000, 3))
    masks = np.where(np.arange(20000) % 3 == 0, 2, 0xFFFFFFFF)
    for step in range(2):
        np.testing.assert_array_equal(gpu.contacts(world), cpu.contacts(world))
        for limit in (1, 3):
            g = gpu.ray_casts(world, origins, directions, masks=masks, limit=limit)
            c = cpu.ray_casts(world, origins, directions, masks=masks, limit=limit)
            assert (c.kind == nearkit.CONTACT_INSTANCE).sum() > 1000
            for a, b in zip(g, c):
                np.testing.assert_array_equal(a, b)
        world.set_instances(ids[:50], positions[:50] + [0.5, 0, 0])


def _libraries():
    """The GPU array libraries installed here: (name, from numpy, to numpy)."""
    libs = []
    try:
        import cupy

        libs.append(("cupy", cupy.asarray, cupy.asnumpy))
    except ImportError:
        pass
    try:
        import torch

        if torch.cuda.is_available():
            libs.append(("torch", lambda a: torch.as_tensor(a, device="cuda"), lambda t: t.cpu().numpy()))
    except ImportError:
        pass
    return libs


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["uniform", "clustered", "duplicates"])
def test_cuda_arrays_are_read_and_answered_in_place(rng, dtype, kind):
    libs = _libraries()
    if not libs:
        pytest.skip("neither CuPy nor PyTorch with CUDA is installed")
    data = make_points(kind, 20_000, rng, dtype)
    q = make_points(kind, 50_000, rng, dtype)
    host = nearkit.PointIndex(data, device="cpu")
    for name, to_dev, to_np in libs:
        # Data and queries on the GPU, row-major and as a transposed (column-major) view.
        for index in [nearkit.PointIndex(to_dev(data)), nearkit.PointIndex(to_dev(data.T.copy()).T)]:
            assert index.device.startswith("cuda") and index.n == len(data)
            for k in [1, 8, [2, 5], 40]:
                for bound in [np.inf, 0.5]:
                    dc, ic = host.query(q, k=k, distance_upper_bound=bound)
                    dg, ig = index.query(to_dev(q), k=k, distance_upper_bound=bound)
                    assert type(dg).__module__.split(".")[0] == name, f"{name}: results in its library"
                    np.testing.assert_array_equal(to_np(ig), ic, err_msg=f"{name} k={k} bound={bound}")
                    np.testing.assert_array_equal(to_np(dg), dc, err_msg=f"{name} k={k} bound={bound}")
            dn, inn = index.nearest(to_dev(q[:1000]))
            np.testing.assert_array_equal(to_np(inn), host.nearest(q[:1000])[1])
            gd, gi = index.knn_graph(6)
            hd, hi = host.knn_graph(6)
            np.testing.assert_array_equal(to_np(gi), hi)
            np.testing.assert_array_equal(to_np(gd), hd)
            # Queries the radius search reads through host memory: numpy results.
            w = index.count_within(to_dev(q[:100]), 0.5)
            np.testing.assert_array_equal(np.asarray(w), host.count_within(q[:100], 0.5))
        # Host data, GPU queries; a NaN on the GPU is named.
        gpu_index = nearkit.PointIndex(data, device="cuda")
        np.testing.assert_array_equal(to_np(gpu_index.query(to_dev(q), k=3)[1]), host.query(q, k=3)[1])
        bad = q.copy()
        bad[123, 2] = np.nan
        with pytest.raises(ValueError, match="point 123"):
            gpu_index.query(to_dev(bad), k=3)


def test_threads_sharing_a_gpu_all_finish(rng):
    # Many threads at once on one GPU (a Dask worker's tasks): index builds, queries and pairs
    # interleave; every call finishes with the answer it gives alone. A GPU call held inside
    # rayon's pool while another waited there for the same GPU once deadlocked.
    from concurrent.futures import ThreadPoolExecutor

    data = rng.random((300_000, 3)).astype(np.float32)
    q = rng.random((400_000, 3)).astype(np.float32)
    ix = nearkit.PointIndex(data, device="cuda")
    want_nn = ix.nearest(q)
    want_knn = ix.query(q, k=4)
    want_pairs = ix.closest_pairs(q, k=100)

    def job(j):
        kind = j % 4
        if kind == 0:
            return "nn", ix.nearest(q)
        if kind == 1:
            return "knn", ix.query(q, k=4, workers=2)
        if kind == 2:
            return "pairs", ix.closest_pairs(q, k=100)
        return "nn", nearkit.PointIndex(data, device="cuda").nearest(q, workers=3)

    with ThreadPoolExecutor(16) as pool:
        for what, got in [f.result(timeout=300) for f in [pool.submit(job, j) for j in range(48)]]:
            want = {"nn": want_nn, "knn": want_knn, "pairs": want_pairs}[what]
            for a, b in zip(got, want):
                np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["uniform", "clustered", "duplicates", "surface"])
def test_sharded_index_is_bitwise_the_one_gpu_index(rng, dtype, kind):
    data = make_points(kind, 60_000, rng, dtype)
    q = make_points(kind, 100_000, rng, dtype)
    one = nearkit.PointIndex(data, device="cuda")
    # One GPU listed three times runs the whole plan; a host with several runs it across them.
    for devices in [[0], [0, 0, 0], "all"]:
        # Data and queries in uneven pieces, as a Dask array's chunks come.
        index = nearkit.ShardedIndex([data[:7_000], data[7_000:40_000], data[40_000:]], devices=devices)
        assert index.n == len(data) and index.dtype == dtype
        for bound in [None, 0.05]:
            want = one.nearest(q, max_distance=bound)
            got = index.nearest([q[:1], q[1:50_000], q[50_000:]], max_distance=bound)
            for a, b in zip(want, got):
                assert a.dtype == b.dtype
                np.testing.assert_array_equal(a, b)


def test_sharded_index_names_a_bad_row():
    rows = np.random.default_rng(3).random((1000, 3)).astype(np.float32)
    rows[777, 2] = np.nan
    with pytest.raises(ValueError, match="777"):
        nearkit.ShardedIndex([rows[:100], rows[100:]], devices=[0, 0])


def test_queries_in_many_gpu_chunks_match_the_cpu():
    """More queries than a GPU chunk: each chunk is uploaded, searched and written into the
    result in place, and a bad row is named by its place among all the queries. A process of
    its own, as the chunk size is set before the first GPU use."""
    code = """
import numpy as np, nearkit
nearkit.configure_cuda(chunk_points=1000)
rng = np.random.default_rng(5)
data = rng.random((20_000, 3)).astype(np.float32)
q = rng.random((4_321, 3)).astype(np.float32)
g, c = nearkit.PointIndex(data, device="cuda"), nearkit.PointIndex(data, device="cpu")
for k in [1, 8]:
    for bound in [np.inf, 0.02]:
        a, b = g.query(q, k=k, distance_upper_bound=bound), c.query(q, k=k, distance_upper_bound=bound)
        assert all(np.array_equal(x, y) for x, y in zip(a, b)), (k, bound)
assert all(np.array_equal(x, y) for x, y in zip(g.nearest(q), c.nearest(q)))
q[3_000, 1] = np.nan
try:
    g.query(q, k=2)
except ValueError as e:
    assert "3000" in str(e), e
else:
    raise AssertionError("a NaN query was accepted")
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr
