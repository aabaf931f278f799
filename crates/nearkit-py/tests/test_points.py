"""PointIndex and closest_pairs against scipy's cKDTree and numpy brute forces."""

import numpy as np
import pytest
from conftest import DISTRIBUTIONS, brute_knn, make_points, squared_distances
from scipy.spatial import cKDTree

import nearkit

DTYPES = [np.float32, np.float64]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", DISTRIBUTIONS)
@pytest.mark.parametrize("k", [1, 8, [1, 3, 8]])
def test_query_is_the_brute_force_answer(rng, dtype, kind, k):
    data = make_points(kind, 1500, rng, dtype)
    q = np.concatenate([make_points(kind, 300, rng, dtype), data[:50]])  # some queries on data points
    d, i = nearkit.PointIndex(data, device="cpu").query(q, k=k)
    ranks = [k] if isinstance(k, int) and k == 1 else (list(range(1, k + 1)) if isinstance(k, int) else k)
    bd, bi = brute_knn(q, data, max(ranks))
    cols = [r - 1 for r in ranks]
    bd, bi = bd[:, cols], bi[:, cols]
    if k == 1:
        bd, bi = bd[:, 0], bi[:, 0]
    assert d.dtype == dtype and i.dtype == np.int64
    # The library's arithmetic is the brute force's: the same bits, the same ids (ties to
    # the smaller id).
    np.testing.assert_array_equal(i, bi)
    np.testing.assert_array_equal(d, bd)


@pytest.mark.parametrize("kind", DISTRIBUTIONS)
def test_query_matches_ckdtree(rng, kind):
    data = make_points(kind, 3000, rng)
    q = make_points(kind, 500, rng)
    d, i = nearkit.PointIndex(data, device="cpu").query(q, k=8)
    sd, si = cKDTree(data).query(q, k=9)  # the 9th tells whether the 8th is tied
    np.testing.assert_allclose(d, sd[:, :8], rtol=1e-12, atol=1e-12)
    # Ids agree wherever the distance is not tied (scipy breaks ties its own way).
    untied = np.ones_like(sd, dtype=bool)
    untied[:, 1:] &= sd[:, 1:] != sd[:, :-1]
    untied[:, :-1] &= sd[:, :-1] != sd[:, 1:]
    untied = untied[:, :8]
    np.testing.assert_array_equal(i[untied], si[:, :8][untied])


def test_shapes_follow_ckdtree(rng):
    data = rng.random((200, 3))
    index, tree = nearkit.PointIndex(data, device="cpu"), cKDTree(data)
    for x in [rng.random(3), rng.random((7, 3)), rng.random((2, 4, 3)), np.empty((0, 3))]:
        for k in [1, 2, [1], [2, 5]]:
            d, i = index.query(x, k=k)
            sd, si = tree.query(x, k=k)
            assert np.shape(d) == np.shape(sd) and np.shape(i) == np.shape(si), (x.shape, k)
            np.testing.assert_allclose(d, sd)
            np.testing.assert_array_equal(i, si)
    d, i = index.query(rng.random(3))
    assert np.ndim(d) == 0 and np.ndim(i) == 0
    assert type(d) is float and type(i) is int  # as cKDTree gives


def test_missing_neighbours_are_inf_and_n(rng):
    data = rng.random((5, 3))
    index = nearkit.PointIndex(data, device="cpu")
    d, i = index.query(rng.random((4, 3)), k=8)  # k > n
    sd, si = cKDTree(data).query(rng.random((4, 3)), k=8)
    assert np.isinf(d[:, 5:]).all() and (i[:, 5:] == 5).all()
    assert np.isinf(sd[:, 5:]).all() and (si[:, 5:] == 5).all()
    d, i = index.query([[100.0, 100, 100]], k=2, distance_upper_bound=1.0)
    np.testing.assert_array_equal(d, [[np.inf, np.inf]])
    np.testing.assert_array_equal(i, [[5, 5]])


@pytest.mark.parametrize("dtype", DTYPES)
def test_distance_upper_bound(rng, dtype):
    data = make_points("uniform", 2000, rng, dtype)
    q = make_points("uniform", 400, rng, dtype)
    bound = 1.3
    d, i = nearkit.PointIndex(data, device="cpu").query(q, k=[1, 4, 6], distance_upper_bound=bound)
    bd, bi = brute_knn(q, data, 6, bound=bound)
    np.testing.assert_array_equal(i, bi[:, [0, 3, 5]])
    np.testing.assert_array_equal(d, bd[:, [0, 3, 5]])
    assert (i == len(data)).any() and (i < len(data)).any()
    if dtype == np.float64:
        sd, si = cKDTree(data).query(q, k=[1, 4, 6], distance_upper_bound=bound)
        np.testing.assert_array_equal(i, si)


def test_array_layouts_and_dtypes_give_the_same_answer(rng):
    data = rng.uniform(-50, 50, (1000, 3))
    q = rng.uniform(-50, 50, (300, 3))
    index = nearkit.PointIndex(data, device="cpu")
    d, i = index.query(q, k=4)
    wide = np.zeros((300, 5))
    wide[:, 1:4] = q
    for view in [
        np.asfortranarray(q),
        wide[:, 1:4],  # strided rows
        np.repeat(q, 2, axis=0)[::2],  # every other row
        q.astype(">f8"),  # big-endian
        q.tolist(),
    ]:
        dv, iv = index.query(view, k=4)
        np.testing.assert_array_equal(iv, i)
        np.testing.assert_array_equal(dv, d)
    dr, ir = index.query(q[::-1], k=4)  # negative strides
    np.testing.assert_array_equal(ir, i[::-1])
    np.testing.assert_array_equal(dr, d[::-1])
    for layout in [np.asfortranarray(data), np.repeat(data, 2, axis=0)[::2]]:
        dv, iv = nearkit.PointIndex(layout, device="cpu").query(q, k=4)
        np.testing.assert_array_equal(iv, i)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_many_queries_in_any_layout_match_scipy(rng, dtype):
    # Enough queries for the candidate grid, which reads C-ordered rows and Fortran-ordered
    # columns in place and other layouts after a copy: the same answers from each.
    data = rng.uniform(-50, 50, (2000, 3)).astype(dtype)
    q = rng.uniform(-60, 60, (50_000, 3)).astype(dtype)
    index = nearkit.PointIndex(data, device="cpu")
    d, i = index.query(q, k=8)
    for view in [np.asfortranarray(q), np.repeat(q, 2, axis=0)[::2]]:
        dv, iv = index.query(view, k=8)
        np.testing.assert_array_equal(iv, i)
        np.testing.assert_array_equal(dv, d)
    if dtype == np.float64:
        sd, si = cKDTree(data).query(q, k=8)
        np.testing.assert_array_equal(i, si)
        np.testing.assert_array_equal(d, sd)
    bad = np.asfortranarray(q)
    bad[40_000, 2] = np.nan
    with pytest.raises(ValueError, match="point 40000: coordinate z"):
        index.query(bad, k=8)


def test_integers_become_float64_and_queries_take_the_index_dtype(rng):
    ints = rng.integers(-1000, 1000, (500, 3))
    index = nearkit.PointIndex(ints, device="cpu")
    assert index.dtype == np.float64 and index.data.dtype == np.float64
    d, i = index.query(ints[:10].astype(np.int32))
    np.testing.assert_array_equal(d, 0)
    f32 = nearkit.PointIndex(ints.astype(np.float32), device="cpu")
    q = rng.uniform(-1000, 1000, (50, 3))  # float64 queries are rounded to float32
    d32, i32 = f32.query(q, k=3)
    dr, ir = f32.query(q.astype(np.float32), k=3)
    assert d32.dtype == np.float32
    np.testing.assert_array_equal(i32, ir)
    np.testing.assert_array_equal(d32, dr)
    with pytest.raises(ValueError, match="2\\^53"):
        nearkit.PointIndex(np.array([[2**60, 0, 0]]))


def test_workers(rng):
    data, q = rng.random((3000, 3)), rng.random((2000, 3))
    index = nearkit.PointIndex(data, device="cpu")
    d, i = index.query(q, k=5, workers=-1)
    # More workers than cores (as many as 2^32) run on as many threads as there are cores.
    for w in [1, 2, None, 1000, 2**32]:
        dw, iw = index.query(q, k=5, workers=w)
        np.testing.assert_array_equal(iw, i)
        np.testing.assert_array_equal(dw, d)
    for bad in [0, -2, 1.5, True]:
        with pytest.raises(ValueError, match="workers"):
            index.query(q, workers=bad)


def test_more_queries_than_a_block(rng):
    # Past nearkit's CPU block (Ctrl-C is checked between blocks), answers are unchanged.
    data = rng.random((300, 3)).astype(np.float32)
    q = rng.random((nearkit._native.CPU_CHUNK + 1000, 3)).astype(np.float32)
    d, i = nearkit.PointIndex(data, device="cpu").query(q, k=2)
    tail_d, tail_i = brute_knn(q[-3000:], data, 2)
    np.testing.assert_array_equal(i[-3000:], tail_i)
    np.testing.assert_array_equal(d[-3000:], tail_d)
    head_d, head_i = brute_knn(q[:3000], data, 2)
    np.testing.assert_array_equal(i[:3000], head_i)
    # A bad row in a later block is named by its place among all the rows.
    q[nearkit._native.CPU_CHUNK + 5, 1] = np.nan
    with pytest.raises(ValueError, match=f"point {nearkit._native.CPU_CHUNK + 5}: coordinate y"):
        nearkit.PointIndex(data, device="cpu").query(q, k=2)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: nearkit.PointIndex(np.empty((0, 3))), "empty"),
        (lambda: nearkit.PointIndex(np.zeros((5, 2))), "shape \\(5, 2\\)"),
        (lambda: nearkit.PointIndex(np.zeros(3)), "shape \\(3,\\)"),
        (lambda: nearkit.PointIndex([[0, 0, 0], [1, np.nan, 0]]), "point 1: coordinate y is NaN"),
        (lambda: nearkit.PointIndex([[0, 0, np.inf]]), "point 0: coordinate z is inf"),
        (lambda: nearkit.PointIndex([[0, 0, 0]]).query([[0, 0, 0]], k=0), "k must be at least 1"),
        (lambda: nearkit.PointIndex([[0, 0, 0]]).query([[0, 0, 0]], k=[0, 1]), "1-based"),
        (lambda: nearkit.PointIndex([[0, 0, 0]]).query([[np.nan, 0, 0]]), "queries, point 0"),
        (lambda: nearkit.PointIndex([[0, 0, 0]]).query([[0, 0]]), "it must be \\(N, 3\\)"),
        (lambda: nearkit.PointIndex([[0, 0, 0]]).query([[0, 0, 0]], eps=0.1), "eps must be 0"),
        (lambda: nearkit.PointIndex([[0, 0, 0]]).query([[0, 0, 0]], p=1), "p must be 2"),
        (lambda: nearkit.PointIndex([[0, 0, 0]]).query([[0, 0, 0]], distance_upper_bound=-1), ">= 0"),
        (lambda: nearkit.PointIndex([[0, 0, 0]]).nearest([[0, 0, 0]], max_distance=np.nan), ">= 0"),
        (lambda: nearkit.PointIndex([[0, 0, 0]], device="tpu"), "unknown device 'tpu'"),
        (lambda: nearkit.PointIndex([[0, 0, 0]]).knn_graph(k=0), "k must be at least 1"),
        (lambda: nearkit.closest_pairs([[0, 0, 0]], [[1, 1, 1]], k=0), "k must be at least 1"),
        (lambda: nearkit.closest_pairs([[0, 0, 0]], [[1, 1, 1]], mode="best"), "unknown pair mode"),
        (lambda: nearkit.closest_pairs(np.empty((0, 3)), [[1, 1, 1]]), "point set A is empty"),
    ],
)
def test_bad_input_is_a_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_wrong_types_are_type_errors():
    with pytest.raises(TypeError, match="numbers"):
        nearkit.PointIndex(np.array([["a", "b", "c"]]))
    with pytest.raises(TypeError):
        nearkit.PointIndex(np.zeros((2, 3), dtype=bool))


@pytest.mark.parametrize("dtype", DTYPES)
def test_nearest_is_query_k1(rng, dtype):
    data, q = make_points("clustered", 2000, rng, dtype), make_points("clustered", 500, rng, dtype)
    index = nearkit.PointIndex(data, device="cpu")
    d, i = index.nearest(q)
    qd, qi = index.query(q)
    np.testing.assert_array_equal(i, qi)
    np.testing.assert_array_equal(d, qd)
    d, i = index.nearest(q, max_distance=0.2)
    bd, bi = brute_knn(q, data, 1, bound=0.2)
    np.testing.assert_array_equal(i, bi[:, 0])
    np.testing.assert_array_equal(d, bd[:, 0])


@pytest.mark.parametrize("kind", ["uniform", "duplicates"])
def test_knn_graph_leaves_each_point_out(rng, kind):
    data = make_points(kind, 800, rng, np.float32)
    d, i = nearkit.PointIndex(data, device="cpu").knn_graph(k=6)
    bd, bi = brute_knn(data, data, 6, exclude_self=True)
    np.testing.assert_array_equal(i, bi)
    np.testing.assert_array_equal(d, bd)
    assert (i != np.arange(len(data))[:, None]).all()


def brute_pairs(a, b, k, mode, bound=None):
    d2 = squared_distances(a, b)
    if bound is not None:
        d2 = np.where(d2 <= d2.dtype.type(bound) ** 2, d2, np.inf)
    if mode == "nearest-per-a":
        bi = np.argmin(d2, axis=1)  # first minimum: the smaller id
        cand = [(d2[ai, bi[ai]], ai, bi[ai]) for ai in range(len(a))]
    else:
        cand = [(d2[x, y], x, y) for x in range(len(a)) for y in range(len(b))]
    cand = sorted(c for c in cand if np.isfinite(c[0]))[:k]
    return (
        np.array([c[1] for c in cand], dtype=np.int64),
        np.array([c[2] for c in cand], dtype=np.int64),
        np.sqrt(np.array([c[0] for c in cand], dtype=d2.dtype)),
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["nearest-per-a", "all-pairs"])
@pytest.mark.parametrize("kind", DISTRIBUTIONS)
def test_closest_pairs_is_the_brute_force_answer(rng, dtype, mode, kind):
    a, b = make_points(kind, 300, rng, dtype), make_points(kind, 250, rng, dtype)
    for k, bound in [(20, None), (1000, None), (50, 0.5)]:
        pa, pb, pd = nearkit.closest_pairs(a, b, k=k, mode=mode, max_distance=bound, device="cpu")
        ba, bb, bd = brute_pairs(a, b, k, mode, bound)
        np.testing.assert_array_equal(pa, ba)
        np.testing.assert_array_equal(pb, bb)
        np.testing.assert_array_equal(pd, bd)
        assert pd.dtype == dtype
    p = nearkit.PointIndex(b, device="cpu").closest_pairs(a, k=10, mode=mode)
    ba, bb, bd = brute_pairs(a, b, 10, mode)
    np.testing.assert_array_equal(p.a, ba)
    np.testing.assert_array_equal(p.b, bb)


def test_closest_pairs_computes_in_the_wider_dtype(rng):
    a, b = rng.random((100, 3)), rng.random((100, 3)).astype(np.float32)
    p = nearkit.closest_pairs(a, b, k=5)
    assert p.distance.dtype == np.float64
    ba, bb, bd = brute_pairs(a, b.astype(np.float64), 5, "nearest-per-a")
    np.testing.assert_array_equal(p.a, ba)
    np.testing.assert_array_equal(p.distance, bd)


def test_properties(rng):
    data = rng.random((10, 3)).astype(np.float32)
    index = nearkit.PointIndex(data, device="cpu")
    assert index.n == len(index) == 10 and index.m == 3
    assert index.dtype == np.float32
    np.testing.assert_array_equal(index.data, data)
    assert index.device.startswith("cpu")
    assert "PointIndex(n=10" in repr(index)


def test_an_explicit_gpu_that_is_not_there_is_a_runtime_error():
    if nearkit.cuda_available():
        pytest.skip("a GPU is usable here")
    with pytest.raises(RuntimeError, match="CUDA was asked for but is not usable"):
        nearkit.PointIndex([[0.0, 0, 0]], device="cuda")
    with pytest.raises(RuntimeError, match="CUDA"):
        nearkit.device_info("cuda:1")
    description, note = nearkit.device_info("auto")
    assert description.startswith("cpu") and "CUDA" in note


def test_sharded_index_needs_gpus():
    """Without CUDA the sharded index says so; bad devices are refused before any GPU use."""
    data = np.zeros((10, 3), np.float32)
    with pytest.raises(ValueError, match="devices"):
        nearkit.ShardedIndex(data, devices="some")
    with pytest.raises(ValueError, match="devices"):
        nearkit.ShardedIndex(data, devices=[-1])
    if not nearkit.cuda_available():
        with pytest.raises(RuntimeError):
            nearkit.ShardedIndex(data)
        with pytest.raises(RuntimeError):
            nearkit.ShardedIndex(data, devices=[0])


def test_sharded_index_takes_unaligned_rows():
    """Arrays that came over the wire (Dask's frames) may start at any byte: they are handed
    on aligned (a copy), not refused."""
    from nearkit._sharded import _pieces

    buf = bytearray(12 * 100 + 1)
    a = np.frombuffer(buf, dtype=np.float32, count=300, offset=1).reshape(100, 3)
    assert not a.flags.aligned
    (p,) = _pieces([a], "data")
    assert p.flags.aligned and p.flags.c_contiguous and np.array_equal(p, a)


def test_views_with_odd_strides_are_read_as_their_values():
    # A field of a structured array: its rows are 25 bytes apart, not a multiple of 8.
    rec = np.zeros(3, dtype=[("pad", "u1"), ("p", "<f8", (3,))])
    rec["p"] = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    for dtype in DTYPES:
        index = nearkit.PointIndex(rec["p"].astype(dtype) if dtype == np.float32 else rec["p"], device="cpu")
        d, i = index.query(rec["p"], k=1)
        assert list(i) == [0, 1, 2] and list(d) == [0, 0, 0], (dtype, d, i)
    built = nearkit.PointIndex(rec["p"], device="cpu")
    assert list(built.query([[4, 5, 6.0]], k=1)[1]) == [1]
    rec32 = np.zeros(2, dtype=[("pad", "u1"), ("p", "<f4", (3,))])
    rec32["p"] = [[1, 2, 3], [4, 5, 6]]
    index = nearkit.PointIndex(np.array([[1, 2, 3], [4, 5, 6]], np.float32), device="cpu")
    assert list(index.query(rec32["p"], k=1)[1]) == [0, 1]


def test_float32_refuses_values_it_cannot_hold_and_takes_huge_bounds_as_none():
    index = nearkit.PointIndex(np.array([[0, 0, 0], [1, 1, 1]], np.float32), device="cpu")
    with pytest.raises(ValueError, match="rounds to 0"):
        index.query(np.array([[1e-300, 0, 0]]), k=1)
    with pytest.raises(ValueError, match="cannot hold"):
        index.query(np.array([[1e300, 0, 0]]), k=1)
    d, i = index.query([[0.0, 0, 0]], k=2, distance_upper_bound=1e300)
    assert list(i[0]) == [0, 1]
    assert list(index.nearest([[1.0, 1, 1]], max_distance=1e300)[1]) == [1]


def test_a_result_larger_than_memory_is_a_memory_error():
    index = nearkit.PointIndex(np.random.default_rng(0).random((100, 3)), device="cpu")
    with pytest.raises(MemoryError):
        index.query(np.zeros((1000, 3)), k=10**12)
    with pytest.raises(MemoryError):
        index.knn_graph(k=10**15)


@pytest.mark.parametrize("k", ["a", None, 1.5, [], [0, 1], [[1.0]]])
def test_bad_k_is_a_value_error_naming_k(k):
    index = nearkit.PointIndex(np.random.default_rng(0).random((10, 3)), device="cpu")
    with pytest.raises(ValueError, match="k must be"):
        index.query([[0.0, 0, 0]], k=k)


def test_indexes_pickle_as_their_data():
    import pickle

    rng = np.random.default_rng(58)
    data, q = rng.random((500, 3)), rng.random((50, 3))
    for dtype in (np.float32, np.float64):
        index = nearkit.PointIndex(data.astype(dtype), device="cpu")
        again = pickle.loads(pickle.dumps(index))
        assert again.dtype == index.dtype and len(again) == 500
        for a, b in zip(index.query(q, k=3), again.query(q, k=3)):
            np.testing.assert_array_equal(a, b)
    v = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float64)
    f = np.array([[0, 1, 2], [0, 1, 3]])
    mesh = nearkit.MeshIndex(v, f, device="cpu")
    again = pickle.loads(pickle.dumps(mesh))
    for a, b in zip(mesh.closest_point(q), again.closest_point(q)):
        np.testing.assert_array_equal(a, b)


def test_one_point_k1_gives_a_float_and_an_int_as_ckdtree():
    data = np.random.default_rng(3).random((10, 3))
    for dtype in (np.float32, np.float64):
        d, i = nearkit.PointIndex(data.astype(dtype), device="cpu").query([0.5, 0.5, 0.5])
        d0, i0 = cKDTree(data.astype(dtype)).query([0.5, 0.5, 0.5])
        assert type(d) is float and type(i) is int and i == i0


def test_a_radius_given_as_a_string_is_a_type_error():
    index = nearkit.PointIndex(np.random.default_rng(4).random((20, 3)), device="cpu")
    with pytest.raises(TypeError, match="r must be a number"):
        index.query_ball_point([0.5, 0.5, 0.5], r="0.4")
    with pytest.raises(TypeError, match="distance_upper_bound"):
        index.query([0.5, 0.5, 0.5], distance_upper_bound="1")
