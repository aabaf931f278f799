"""Radius queries (within, count_within, pairs_within and scipy's query_ball_point,
query_pairs, sparse_distance_matrix) against numpy brute forces in the index's own precision,
and against scipy's cKDTree away from exact-boundary cases."""

import numpy as np
import pytest
from conftest import DISTRIBUTIONS, make_points, squared_distances
from scipy.spatial import cKDTree

import nearkit

DTYPES = [np.float32, np.float64]

# Radii per distribution: none, a few neighbours, many; the duplicates' integer grid puts
# points at exactly 1 and 2 (inclusive boundaries).
RADII = {
    "uniform": [0.0, 0.7, 2.5],
    "clustered": [0.0, 0.05, 0.4],
    "duplicates": [0.0, 1.0, 2.0],
    "surface": [0.0, 0.3, 1.5],
}


def brute_rows(d2, r):
    """Each row's (ids, distances) within r, ascending by (distance, id): squared distances
    compared with r * r, both in d2's precision, as the library does."""
    t = d2.dtype.type
    with np.errstate(over="ignore"):  # float32 r * r may overflow to inf: every point
        r2 = t(r) * t(r)
    rows = []
    for row in d2:
        ids = np.flatnonzero(row <= r2)
        ids = ids[np.lexsort((ids, row[ids]))]
        rows.append((ids, np.sqrt(row[ids])))
    return rows


def brute_within(q, data, r):
    return brute_rows(squared_distances(q, data), r)


def assert_rows(w, rows, dtype):
    """A Within equals the brute force's rows, bit for bit."""
    assert w.offsets.dtype == np.int64 and w.ids.dtype == np.int64 and w.distances.dtype == dtype
    assert len(w.offsets) == len(rows) + 1 and w.offsets[0] == 0
    np.testing.assert_array_equal(w.counts(), [len(ids) for ids, _ in rows])
    ids = np.concatenate([ids for ids, _ in rows]) if rows else np.empty(0)
    dist = np.concatenate([d for _, d in rows]) if rows else np.empty(0)
    np.testing.assert_array_equal(w.ids, ids)
    np.testing.assert_array_equal(w.distances, dist.astype(dtype))


def assert_same_rows_any_order(w, rows):
    """A Within of unsorted rows holds each row's neighbours, with their distances."""
    np.testing.assert_array_equal(w.counts(), [len(ids) for ids, _ in rows])
    for k, (ids, dist) in enumerate(rows):
        got_ids, got_d = w.row(k)
        order = np.argsort(got_ids)
        back = np.argsort(ids)
        np.testing.assert_array_equal(got_ids[order], ids[back])
        np.testing.assert_array_equal(got_d[order], dist[back])


def assert_ids_alone(query, *args):
    """`query(*args, distances=False)` gives the same rows as with distances, sorted or not,
    and no distances."""
    for sort in (True, False):
        full, ids_only = query(*args, sort=sort), query(*args, sort=sort, distances=False)
        np.testing.assert_array_equal(ids_only.offsets, full.offsets)
        np.testing.assert_array_equal(ids_only.ids, full.ids)
        assert ids_only.distances.shape == (0,) and ids_only.distances.dtype == full.distances.dtype


def untied(d2, r2, rtol=1e-9):
    """Where a squared distance is not within rtol of r2: there scipy (whose arithmetic
    differs in the last bits) must agree."""
    return np.abs(d2 - r2) > rtol * max(r2, 1e-300)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", DISTRIBUTIONS)
def test_within_is_the_brute_force_answer(rng, dtype, kind):
    data = make_points(kind, 1500, rng, dtype)
    q = np.concatenate([make_points(kind, 300, rng, dtype), data[:50]])  # some queries on data points
    index = nearkit.PointIndex(data, device="cpu")
    for r in RADII[kind]:
        rows = brute_within(q, data, r)
        assert_rows(index.within(q, r), rows, dtype)
        assert_same_rows_any_order(index.within(q, r, sort=False), rows)
        assert_ids_alone(index.within, q, r)
        counts = index.count_within(q, r)
        assert counts.dtype == np.int64
        np.testing.assert_array_equal(counts, [len(ids) for ids, _ in rows])
        # The last 50 queries are data points: each finds itself, at 0.
        assert all(0 in d[:1] for _, d in rows[-50:])


@pytest.mark.parametrize("kind", DISTRIBUTIONS)
def test_query_ball_point_matches_ckdtree(rng, kind):
    data = make_points(kind, 2000, rng)
    q = make_points(kind, 400, rng)
    index, tree = nearkit.PointIndex(data, device="cpu"), cKDTree(data)
    d2 = squared_distances(q, data)
    for r in RADII[kind]:
        got = index.query_ball_point(q, r)
        want = tree.query_ball_point(q, r, return_sorted=True)
        brute = brute_rows(d2, r)
        assert got.dtype == object and got.shape == (len(q),)
        for k in range(len(q)):
            assert isinstance(got[k], list) and all(type(i) is int for i in got[k])
            assert got[k] == sorted(brute[k][0].tolist())  # return_sorted=None: ascending ids
            if r > 0:  # scipy's arithmetic may differ in the last bits: compare off the boundary
                clear = untied(d2[k], r * r)
                assert [i for i in got[k] if clear[i]] == [i for i in want[k] if clear[i]]
            else:
                assert got[k] == want[k]
        unsorted = index.query_ball_point(q, r, return_sorted=False)
        assert all(sorted(a) == b for a, b in zip(unsorted, got))
        lengths = index.query_ball_point(q, r, return_length=True)
        assert lengths.dtype == np.int64
        np.testing.assert_array_equal(lengths, [len(g) for g in got])


@pytest.mark.parametrize("dtype", DTYPES)
def test_query_ball_point_shapes_follow_ckdtree(rng, dtype):
    data = rng.random((200, 3)).astype(dtype)
    index, tree = nearkit.PointIndex(data, device="cpu"), cKDTree(data.astype(np.float64))
    r = 0.3
    for x in [rng.random(3), rng.random((7, 3)), rng.random((2, 4, 3)), np.empty((0, 3)), np.empty((2, 0, 3))]:
        x = x.astype(dtype)
        got, want = index.query_ball_point(x, r), tree.query_ball_point(x.astype(np.float64), r)
        n, sn = index.query_ball_point(x, r, return_length=True), tree.query_ball_point(x, r, return_length=True)
        assert np.shape(got) == np.shape(want) and np.shape(n) == np.shape(sn), x.shape
        assert type(got) is type(want)
        assert n.dtype == np.int64
        if x.ndim > 1:
            assert got.dtype == object
    one = index.query_ball_point(data[0], r)
    assert isinstance(one, list) and 0 in one and one == sorted(one)
    n = index.query_ball_point(data[0], r, return_length=True)
    assert np.ndim(n) == 0 and isinstance(n, np.integer) and n == len(one)
    c = index.count_within(data[0], r)
    assert np.ndim(c) == 0 and c == len(one)
    w = index.within(data[0], r)  # one point: one row
    assert len(w.offsets) == 2 and sorted(w.ids.tolist()) == one


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_queries(rng, dtype):
    index = nearkit.PointIndex(rng.random((50, 3)).astype(dtype), device="cpu")
    w = index.within(np.empty((0, 3)), 1.0)
    np.testing.assert_array_equal(w.offsets, [0])
    assert w.offsets.dtype == np.int64 and w.ids.shape == (0,) and w.distances.dtype == dtype
    assert index.count_within(np.empty((0, 3)), 1.0).shape == (0,)
    assert index.query_ball_point(np.empty((0, 3)), 1.0).shape == (0,)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", DISTRIBUTIONS)
def test_pairs_within_and_query_pairs_are_the_brute_force_answer(rng, dtype, kind):
    data = make_points(kind, 1200, rng, dtype)
    index = nearkit.PointIndex(data, device="cpu")
    d2 = squared_distances(data, data)
    d2[np.tril_indices(len(data))] = np.inf  # each pair once: j > i
    for r in RADII[kind]:
        rows = brute_rows(d2, r)
        assert_rows(index.pairs_within(r), rows, dtype)
        assert_same_rows_any_order(index.pairs_within(r, sort=False), rows)
        assert_ids_alone(index.pairs_within, r)
        want = {(i, int(j)) for i, (ids, _) in enumerate(rows) for j in ids}
        got = index.query_pairs(r)
        assert isinstance(got, set) and got == want
        assert all(type(i) is int and type(j) is int for i, j in got)
        arr = index.query_pairs(r, output_type="ndarray")
        assert arr.dtype == np.int64 and arr.shape == (len(want), 2)
        # Ascending by i; within a row, the index's order.
        assert sorted(map(tuple, arr.tolist())) == sorted(want)
        assert (np.diff(arr[:, 0]) >= 0).all()


@pytest.mark.parametrize("kind", DISTRIBUTIONS)
def test_query_pairs_matches_ckdtree(rng, kind):
    data = make_points(kind, 1500, rng)
    index, tree = nearkit.PointIndex(data, device="cpu"), cKDTree(data)
    d2 = squared_distances(data, data)
    for r in RADII[kind]:
        got, want = index.query_pairs(r), tree.query_pairs(r)
        if r > 0:
            got = {p for p in got if untied(d2[p], r * r)}
            want = {p for p in want if untied(d2[p], r * r)}
        assert got == want
        arr, sarr = index.query_pairs(r, output_type="ndarray"), tree.query_pairs(r, output_type="ndarray")
        assert arr.dtype == sarr.dtype and arr.shape[1:] == sarr.shape[1:]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", DISTRIBUTIONS)
def test_sparse_distance_matrix_is_the_brute_force_answer(rng, dtype, kind):
    data = make_points(kind, 800, rng, dtype)
    other = np.concatenate([make_points(kind, 600, rng, dtype), data[:20]])
    index = nearkit.PointIndex(data, device="cpu")
    d2 = squared_distances(data, other)
    r = RADII[kind][1]
    rows = brute_rows(d2, r)
    i = np.concatenate([np.full(len(ids), k) for k, (ids, _) in enumerate(rows)])
    j = np.concatenate([np.sort(ids) for ids, _ in rows])
    v = np.sqrt(d2[i, j])
    for o in [other, nearkit.PointIndex(other, device="cpu")]:
        arr = index.sparse_distance_matrix(o, r, output_type="ndarray")
        assert arr.dtype.names == ("i", "j", "v") and arr["v"].dtype == dtype
        np.testing.assert_array_equal(arr["i"], i)  # ascending by (i, j)
        np.testing.assert_array_equal(arr["j"], j)
        np.testing.assert_array_equal(arr["v"], v)
    d = index.sparse_distance_matrix(other, r, output_type="dict")
    assert d == {(int(a), int(b)): float(c) for a, b, c in zip(i, j, v)}
    coo = index.sparse_distance_matrix(other, r, output_type="coo_matrix")
    assert coo.format == "coo" and coo.shape == (len(data), len(other)) and coo.dtype == dtype
    np.testing.assert_array_equal(coo.row, i)
    np.testing.assert_array_equal(coo.col, j)
    np.testing.assert_array_equal(coo.data, v)
    dok = index.sparse_distance_matrix(other, r)
    assert dok.format == "dok" and dok.shape == (len(data), len(other))
    assert dok.nnz == len(i)  # pairs at distance 0 are stored entries, as in scipy
    np.testing.assert_array_equal(dok.toarray(), coo.toarray())


@pytest.mark.parametrize("kind", DISTRIBUTIONS)
def test_sparse_distance_matrix_matches_ckdtree(rng, kind):
    data, other = make_points(kind, 1000, rng), make_points(kind, 700, rng)
    index = nearkit.PointIndex(data, device="cpu")
    a, b = cKDTree(data), cKDTree(other)
    d2 = squared_distances(data, other)
    r = RADII[kind][1]
    for output_type in ["dok_matrix", "coo_matrix", "dict", "ndarray"]:
        got = index.sparse_distance_matrix(other, r, output_type=output_type)
        want = a.sparse_distance_matrix(b, r, output_type=output_type)
        assert type(got) is type(want)
    got = index.sparse_distance_matrix(other, r, output_type="dict")
    want = a.sparse_distance_matrix(b, r, output_type="dict")
    clear = untied(d2, r * r)
    got = {p: v for p, v in got.items() if clear[p]}
    want = {p: v for p, v in want.items() if clear[p]}
    assert got.keys() == want.keys()
    np.testing.assert_allclose([got[p] for p in got], [want[p] for p in got], rtol=1e-12)


def test_sparse_distance_matrix_of_an_empty_set(rng):
    index = nearkit.PointIndex(rng.random((10, 3)), device="cpu")
    m = index.sparse_distance_matrix(np.empty((0, 3)), 1.0)
    assert m.shape == (10, 0) and m.nnz == 0
    assert index.sparse_distance_matrix(np.empty((0, 3)), 1.0, output_type="dict") == {}
    assert len(index.sparse_distance_matrix(np.empty((0, 3)), 1.0, output_type="ndarray")) == 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_radius_beyond_the_extent_holds_every_point(rng, dtype):
    data = make_points("uniform", 300, rng, dtype)
    q = make_points("uniform", 20, rng, dtype)
    index = nearkit.PointIndex(data, device="cpu")
    # 100: beyond the extent; 1e30: r * r overflows float32; 1e300 and inf: beyond float32.
    for r in [100.0, 1e30, 1e300, np.inf]:
        w = index.within(q, r)
        np.testing.assert_array_equal(w.counts(), len(data))
        if r == 100.0:
            assert_rows(w, brute_within(q, data, r), dtype)
        np.testing.assert_array_equal(index.count_within(q, r), len(data))
        assert all(g == list(range(len(data))) for g in index.query_ball_point(q, r))
        assert len(index.query_pairs(r)) == len(data) * (len(data) - 1) // 2
        np.testing.assert_array_equal(index.pairs_within(r).counts(), np.arange(len(data))[::-1])


def test_radius_zero_finds_exact_duplicates_only():
    data = np.array([[0, 0, 0], [1, 0, 0], [0, 0, 0], [1e-12, 0, 0]], dtype=np.float64)
    index = nearkit.PointIndex(data, device="cpu")
    assert index.query_ball_point([0, 0, 0], 0.0) == [0, 2]
    assert index.query_pairs(0.0) == {(0, 2)}
    w = index.within([[0.0, 0, 0]], 0)
    assert w.ids.tolist() == [0, 2] and w.distances.tolist() == [0.0, 0.0]


def test_float32_index_rounds_queries_and_radius_to_float32(rng):
    data = make_points("uniform", 1000, rng, np.float32)
    q = make_points("uniform", 200, rng, np.float64)  # float64 queries are rounded to float32
    index = nearkit.PointIndex(data, device="cpu")
    r = 1.1  # not a float32: rounded too
    w = index.within(q, r)
    assert w.distances.dtype == np.float32
    assert_rows(w, brute_within(q.astype(np.float32), data, np.float32(r)), np.float32)


def test_workers_give_the_same_answer(rng):
    data, q = rng.random((3000, 3)), rng.random((2000, 3))
    index = nearkit.PointIndex(data, device="cpu")
    w = index.within(q, 0.1)
    for workers in [1, 2, -1]:
        for a, b in zip(index.within(q, 0.1, workers=workers), w):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(index.count_within(q, 0.1, workers=workers), w.counts())
        for a, b in zip(index.pairs_within(0.05, workers=workers), index.pairs_within(0.05)):
            np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="workers"):
        index.within(q, 0.1, workers=0)


def test_max_results(rng):
    data, q = rng.random((500, 3)), rng.random((300, 3))
    index = nearkit.PointIndex(data, device="cpu")
    total = int(index.count_within(q, 0.2).sum())
    pairs = len(index.query_pairs(0.2))
    assert total > 0 and pairs > 0
    np.testing.assert_array_equal(index.within(q, 0.2, max_results=total).counts(), index.count_within(q, 0.2))
    with pytest.raises(ValueError, match="max_results"):
        index.within(q, 0.2, max_results=total - 1)
    assert index.pairs_within(0.2, max_results=pairs).offsets[-1] == pairs
    with pytest.raises(ValueError, match="max_results"):
        index.pairs_within(0.2, max_results=pairs - 1)
    for bad in [-1, 1.5, True]:
        with pytest.raises(ValueError, match="max_results"):
            index.within(q, 0.2, max_results=bad)


def test_more_queries_than_a_block(rng):
    # Past nearkit's CPU block (Ctrl-C is checked between blocks) the rows are joined, and the
    # limit on the result counts every block.
    data = rng.random((300, 3)).astype(np.float32)
    q = rng.random((nearkit._native.CPU_CHUNK + 1000, 3)).astype(np.float32)
    index = nearkit.PointIndex(data, device="cpu")
    r = 0.05
    w = index.within(q, r)
    counts = index.count_within(q, r)
    np.testing.assert_array_equal(w.counts(), counts)
    assert w.offsets[-1] == len(w.ids) == counts.sum()
    for part in [slice(0, 2000), slice(len(q) - 3000, len(q))]:
        rows = brute_within(q[part], data, r)
        start, end = w.offsets[part.start], w.offsets[part.stop]
        sub = nearkit.Within(w.offsets[part.start : part.stop + 1] - start, w.ids[start:end], w.distances[start:end])
        assert_rows(sub, rows, np.float32)
    total = int(counts.sum())
    assert counts[: nearkit._native.CPU_CHUNK].sum() < total  # the last block adds some
    index.within(q, r, max_results=total)
    with pytest.raises(ValueError, match="max_results"):
        index.within(q, r, max_results=total - 1)


def test_within_helpers():
    w = nearkit.PointIndex([[0, 0, 0], [1, 0, 0], [3, 0, 0]]).within([[0.9, 0, 0], [9, 9, 9]], 1.0)
    offsets, ids, distances = w
    assert offsets.tolist() == [0, 2, 2] and ids.tolist() == [1, 0]
    np.testing.assert_allclose(distances, [0.1, 0.9])
    assert w.counts().tolist() == [2, 0]
    assert w.row(0)[0].tolist() == [1, 0] and w.row(1)[0].tolist() == []


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda i: i.within([[0, 0, 0]], -1.0), "r must be a number >= 0"),
        (lambda i: i.within([[0, 0, 0]], np.nan), "r must be a number >= 0"),
        (lambda i: i.count_within([[0, 0, 0]], -0.5), "r must be a number >= 0"),
        (lambda i: i.query_ball_point([0, 0, 0], -1.0), "r must be a number >= 0"),
        (lambda i: i.query_ball_point([0, 0, 0], np.nan, return_length=True), "r must be a number >= 0"),
        (lambda i: i.query_ball_point([[0, 0, 0], [1, 1, 1]], [1.0, 2.0]), "a radius per query point"),
        (lambda i: i.query_ball_point([0, 0, 0], 1.0, p=1), "p must be 2"),
        (lambda i: i.query_ball_point([0, 0, 0], 1.0, eps=0.1), "eps must be 0"),
        (lambda i: i.query_ball_point([0, 0], 1.0), "it must be \\(N, 3\\)"),
        (lambda i: i.query_ball_point([[np.nan, 0, 0]], 1.0), "queries, point 0"),
        (lambda i: i.within([[np.inf, 0, 0]], 1.0), "queries, point 0"),
        (lambda i: i.pairs_within(-1.0), "r must be a number >= 0"),
        (lambda i: i.query_pairs(np.nan), "r must be a number >= 0"),
        (lambda i: i.query_pairs(1.0, p=np.inf), "p must be 2"),
        (lambda i: i.query_pairs(1.0, output_type="list"), "unknown output_type"),
        (lambda i: i.sparse_distance_matrix([[0, 0, 0]], -1.0), "max_distance must be a number >= 0"),
        (lambda i: i.sparse_distance_matrix([[0, 0, 0]], 1.0, p=1), "p must be 2"),
        (lambda i: i.sparse_distance_matrix([[0, 0, 0]], 1.0, output_type="csr_matrix"), "unknown output_type"),
        (lambda i: i.sparse_distance_matrix([[0, 0]], 1.0), "it must be \\(N, 3\\)"),
        (lambda i: i.sparse_distance_matrix([[0, 0, np.nan]], 1.0), "point 0: coordinate z is NaN"),
    ],
)
def test_bad_input_is_a_value_error(call, message):
    index = nearkit.PointIndex([[0.0, 0, 0], [1, 0, 0]], device="cpu")
    with pytest.raises(ValueError, match=message):
        call(index)


def test_help_teaches():
    for method, words in [
        (nearkit.PointIndex.within, ["offsets", "inclusive", "max_results", "sort", "Examples"]),
        (nearkit.PointIndex.query_ball_point, ["return_sorted", "return_length", "ascending by index"]),
        (nearkit.PointIndex.query_pairs, ["ndarray", "i < j", "the same on every device"]),
        (nearkit.PointIndex.sparse_distance_matrix, ["dok_matrix", "coo_matrix", "dict", "ndarray"]),
    ]:
        for word in words:
            assert word in method.__doc__, (method.__name__, word)


def test_query_ball_point_leaves_the_garbage_collector_as_it_was(rng):
    # The lists are made with the collector paused; it must come back as the caller left it.
    import gc

    data = rng.random((500, 3))
    index = nearkit.PointIndex(data, device="cpu")
    assert gc.isenabled()
    lists = index.query_ball_point(rng.random((200, 3)), r=0.2)
    assert gc.isenabled() and len(lists) == 200
    gc.disable()
    try:
        index.query_ball_point(rng.random((200, 3)), r=0.2)
        assert not gc.isenabled()
    finally:
        gc.enable()
