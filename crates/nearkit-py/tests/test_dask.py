"""nearkit.dask against single-machine nearkit (bit for bit) and a numpy brute force, on a
LocalCluster of worker processes: every distribution, both precisions, unequal and empty
partitions, cells with no data, extreme magnitudes, DataFrame and file inputs, bad input."""

import numpy as np
import pytest
from conftest import DISTRIBUTIONS, brute_knn, gpu_available, make_points

pytest.importorskip("dask")
pytest.importorskip("distributed")
import dask  # noqa: E402
import dask.array as da  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402

import nearkit  # noqa: E402
import nearkit.dask as nkd  # noqa: E402

DTYPES = [np.float32, np.float64]


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster) as c:
            yield c


def chunked(a, chunks):
    """A Dask array of `a` cut into row chunks of the given sizes (zeros allowed)."""
    assert sum(chunks) == len(a)
    return da.from_array(a, chunks=(tuple(chunks), 3))


def uneven(n, rng):
    """Row chunk sizes summing to n: very unequal, with empty chunks."""
    cuts = np.sort(rng.integers(0, n + 1, 5))
    sizes = np.diff(np.concatenate([[0], cuts, [n]]))
    return [0] + [int(s) for s in sizes] + [0]


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)


@pytest.mark.parametrize("kind", DISTRIBUTIONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_knn_equals_single_machine(client, kind, dtype):
    rng = np.random.default_rng([7, DISTRIBUTIONS.index(kind), np.dtype(dtype).itemsize])
    data = make_points(kind, 3000, rng, dtype)
    queries = make_points(kind, 800, rng, dtype)
    index = nearkit.PointIndex(data)
    for k, cells in [(1, 4), (6, 3), (6, 8), (40, 16)]:
        q = chunked(queries, uneven(len(queries), rng))
        d, i = nkd.knn(chunked(data, uneven(len(data), rng)), q, k=k, cells=cells)
        nonempty = tuple(c for c in q.chunks[0] if c)  # Dask drops empty chunks when concatenating
        assert d.chunks[0] == nonempty and i.chunks[0] == nonempty
        d, i = dask.compute(d, i)
        d1, i1 = index.query(queries, k=list(range(1, k + 1)))
        assert same(d, d1) and same(i, i1), (kind, dtype, k, cells)


def test_knn_against_brute_force(client):
    rng = np.random.default_rng(11)
    for dtype in DTYPES:
        data = make_points("duplicates", 600, rng, dtype)  # many exact ties
        queries = make_points("duplicates", 200, rng, dtype)
        d, i = dask.compute(*nkd.knn(chunked(data, [100] * 6), chunked(queries, [50] * 4), k=7, cells=8))
        bd, bi = brute_knn(queries, data, 7)
        assert same(i, bi) and same(d, bd.astype(dtype))


def test_distance_bound_and_missing(client):
    rng = np.random.default_rng(12)
    data = make_points("clustered", 2000, rng, np.float32)
    queries = make_points("uniform", 500, rng, np.float32) * 10  # many far from every cluster
    d, i = dask.compute(*nkd.knn(data, queries, k=5, distance_upper_bound=30.0, cells=4))
    d1, i1 = nearkit.PointIndex(data).query(queries, k=[1, 2, 3, 4, 5], distance_upper_bound=30.0)
    assert same(d, d1) and same(i, i1)
    assert np.isinf(d).any() and (i == len(data)).any()
    # More neighbours asked than there are points.
    d, i = dask.compute(*nkd.knn(data[:3], queries[:10], k=5, cells=2))
    d1, i1 = nearkit.PointIndex(data[:3]).query(queries[:10], k=[1, 2, 3, 4, 5])
    assert same(d, d1) and same(i, i1)


@pytest.mark.parametrize("dtypes", [(np.float32, np.float32), (np.float64, np.float32), (np.float32, np.int64)])
def test_nearest_mixed_precisions(client, dtypes):
    rng = np.random.default_rng(13)
    a = (rng.random((1500, 3)) * 100).astype(dtypes[0])
    b = (rng.random((2500, 3)) * 100).astype(dtypes[1])
    d, i = dask.compute(*nkd.nearest(chunked(a, uneven(len(a), rng)), chunked(b, uneven(len(b), rng)), cells=4))
    wd = np.result_type(np.float32 if a.dtype == np.float32 else np.float64, np.float32 if b.dtype == np.float32 else np.float64)
    d1, i1 = nearkit.PointIndex(b.astype(wd)).nearest(a.astype(wd))
    assert same(d, d1) and same(i, i1)
    d, i = dask.compute(*nkd.nearest(a, b, max_distance=1.0, cells=2))
    d1, i1 = nearkit.PointIndex(b.astype(wd)).nearest(a.astype(wd), max_distance=1.0)
    assert same(d, d1) and same(i, i1)


def test_empty_data_is_an_error_in_every_plan(client):
    q = np.zeros((5, 3))
    for strategy in ["partition", "broadcast"]:
        for call in [
            lambda: nkd.knn(np.empty((0, 3)), q, k=2, strategy=strategy, cells=4),
            lambda: nkd.nearest(q, np.empty((0, 3)), strategy=strategy, cells=4),
            lambda: nkd.within(np.empty((0, 3)), q, r=1.0, strategy=strategy, cells=4),
        ]:
            with pytest.raises(ValueError, match="empty"):
                dask.compute(call())
    with pytest.raises(ValueError, match="empty"):
        nkd.plan_cells(np.empty((0, 3)))


def test_cells_without_data_and_single_points(client):
    # Three distinct points, many duplicates: most of 16 cells hold nothing.
    rng = np.random.default_rng(14)
    base = np.array([[0, 0, 0], [1, 1, 1], [5, 5, 5]], np.float64)
    data = base[rng.integers(0, 3, 400)]
    queries = rng.uniform(-2, 7, (300, 3))
    d, i = dask.compute(*nkd.knn(chunked(data, uneven(400, rng)), queries, k=4, cells=16))
    d1, i1 = nearkit.PointIndex(data).query(queries, k=[1, 2, 3, 4])
    assert same(d, d1) and same(i, i1)
    plan = nkd.plan_cells(data, cells=16)
    assert plan.counts.sum() == 400 and (plan.counts == 0).any()
    # One data point.
    d, i = dask.compute(*nkd.knn(data[:1], queries, k=2, cells=4))
    d1, i1 = nearkit.PointIndex(data[:1]).query(queries, k=[1, 2])
    assert same(d, d1) and same(i, i1)


@pytest.mark.parametrize("dtype,exp", [(np.float32, 70), (np.float32, -60), (np.float64, 600)])
def test_extreme_magnitudes(client, dtype, exp):
    rng = np.random.default_rng(15)
    data = np.ldexp(make_points("uniform", 1000, rng, np.float64), exp).astype(dtype)
    queries = np.ldexp(make_points("uniform", 300, rng, np.float64), exp).astype(dtype)
    d, i = dask.compute(*nkd.knn(chunked(data, [250] * 4), queries, k=3, cells=4))
    d1, i1 = nearkit.PointIndex(data).query(queries, k=[1, 2, 3])
    assert same(d, d1) and same(i, i1)
    p = dask.compute(*nkd.closest_pairs(queries, data, k=20, cells=4))
    p1 = nearkit.closest_pairs(queries, data, k=20)
    assert all(same(x, y) for x, y in zip(p, p1))
    # A bound is scaled with the cells' data.
    bound = float(np.ldexp(0.3, exp))
    d, i = dask.compute(*nkd.knn(chunked(data, [250] * 4), queries, k=3, distance_upper_bound=bound, cells=4))
    d1, i1 = nearkit.PointIndex(data).query(queries, k=[1, 2, 3], distance_upper_bound=bound)
    assert same(d, d1) and same(i, i1) and np.isinf(d).any() and np.isfinite(d).any()
    p = dask.compute(*nkd.closest_pairs(queries, data, k=20, max_distance=bound, cells=4))
    assert all(same(x, y) for x, y in zip(p, nearkit.closest_pairs(queries, data, k=20, max_distance=bound)))


@pytest.mark.parametrize("mode", ["nearest-per-a", "all-pairs"])
@pytest.mark.parametrize("kind", ["uniform", "duplicates"])
def test_closest_pairs(client, mode, kind):
    rng = np.random.default_rng([16, len(mode), len(kind)])
    a = make_points(kind, 2000, rng, np.float32)
    b = make_points(kind, 1500, rng, np.float32)
    for k, bound in [(1, None), (50, None), (3000, None), (200, 0.5)]:
        p = nkd.closest_pairs(chunked(a, uneven(2000, rng)), chunked(b, uneven(1500, rng)), k=k, mode=mode, max_distance=bound, cells=4)
        p = dask.compute(*p)
        p1 = nearkit.closest_pairs(a, b, k=k, mode=mode, max_distance=bound)
        assert all(same(x, y) for x, y in zip(p, p1)), (k, bound)


@pytest.mark.parametrize("kind", DISTRIBUTIONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_within(client, kind, dtype):
    rng = np.random.default_rng([17, DISTRIBUTIONS.index(kind)])
    data = make_points(kind, 2500, rng, dtype)
    queries = make_points(kind, 600, rng, dtype)
    r = {"uniform": 2.0, "clustered": 0.3, "duplicates": 1.0, "surface": 1.0}[kind]
    w = nkd.within(chunked(data, uneven(2500, rng)), chunked(queries, uneven(600, rng)), r, cells=8)
    counts, ids, dist = dask.compute(*w)
    w1 = nearkit.PointIndex(data).within(queries, r)
    assert same(counts, w1.counts()) and same(ids, w1.ids) and same(dist, w1.distances)


def test_mesh_queries(client):
    rng = np.random.default_rng(18)
    v = rng.random((300, 3))
    f = rng.integers(0, 300, (500, 3))
    q = rng.uniform(-0.5, 1.5, (1000, 3))
    cp = dask.compute(*nkd.closest_point(v, f, chunked(q, uneven(1000, rng))))
    cp1 = nearkit.MeshIndex(v, f).closest_point(q)
    assert all(same(x, y) for x, y in zip(cp, cp1))
    tetra_v = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
    tetra_f = [[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]]
    sd = nkd.signed_distance(tetra_v, tetra_f, chunked(q.astype(np.float32), [500, 500])).compute()
    assert same(sd, nearkit.MeshIndex(tetra_v, tetra_f).signed_distance(q.astype(np.float32)))


def test_dataframe_and_files(client, tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    dd = pytest.importorskip("dask.dataframe")
    rng = np.random.default_rng(19)
    data = rng.random((3000, 3))
    queries = rng.random((500, 3))
    df = dd.from_pandas(pd.DataFrame(data, columns=["x", "y", "z"]), npartitions=3)
    d, i = dask.compute(*nkd.knn(df, queries, k=3, cells=2))
    d1, i1 = nearkit.PointIndex(data).query(queries, k=[1, 2, 3])
    assert same(d, d1) and same(i, i1)
    for j in range(3):
        np.save(tmp_path / f"part{j}.npy", data[j * 1000 : (j + 1) * 1000])
    x = nkd.read_points(str(tmp_path / "part*.npy"))
    assert x.chunks[0] == (1000, 1000, 1000)
    assert same(x.compute(), data)
    df.to_parquet(tmp_path / "pq")
    y = nkd.read_points(tmp_path / "pq")
    assert same(y.compute(), data)
    d, i = dask.compute(*nkd.knn(y, queries, k=3, cells=2))
    assert same(d, d1) and same(i, i1)


def test_statistics(client):
    rng = np.random.default_rng(20)
    data = rng.random((20000, 3)).astype(np.float32)
    d, i, st = nkd.knn(data, rng.random((5000, 3)).astype(np.float32), k=4, cells=8, return_stats=True)
    d, i, st = dask.compute(d, i, st)
    assert st["queries"] == 5000 and 0 < st["rerun_queries"] < 5000
    assert st["rerun_bytes"] == st["rerun_queries"] * (12 + 4 * (8 + 8))


def test_local_schedulers_without_a_cluster():
    rng = np.random.default_rng(21)
    data, queries = rng.random((2000, 3)), rng.random((300, 3))
    d1, i1 = nearkit.PointIndex(data).query(queries, k=[1, 2, 3])
    for scheduler in ["threads", "synchronous"]:
        with dask.config.set(scheduler=scheduler):
            d, i = dask.compute(*nkd.knn(chunked(data, [500] * 4), queries, k=3, cells=4))
        assert same(d, d1) and same(i, i1)


def test_bad_input(client):
    rng = np.random.default_rng(22)
    data = rng.random((100, 3))
    with pytest.raises(ValueError, match="must be \\(n, 3\\)"):
        nkd.knn(rng.random((10, 2)), data, k=2)
    with pytest.raises(ValueError, match="k must be"):
        nkd.knn(data, data, k=0)
    with pytest.raises(ValueError, match="cells must be"):
        nkd.knn(data, data, k=2, cells=0)
    with pytest.raises(ValueError, match="pair mode"):
        nkd.closest_pairs(data, data, mode="every")
    bad = data.copy()
    bad[37, 1] = np.nan
    for strategy in ["broadcast", "partition"]:
        # The global row, in either plan; the same words as single-machine nearkit.
        with pytest.raises(ValueError, match="point set data, point 37: coordinate y is NaN"):
            dask.compute(*nkd.knn(chunked(bad, [30, 70]), data, k=2, strategy=strategy))
        with pytest.raises(ValueError, match="point set queries, point 5: coordinate y is NaN"):
            dask.compute(*nkd.knn(data, chunked(bad[32:], [3, 65]), k=2, strategy=strategy))
    with pytest.raises(ValueError, match="r must be"):
        nkd.within(data, data, -1.0)
    with pytest.raises(FileNotFoundError):
        nkd.read_points(["/nonexistent/a.npy"])
    with pytest.raises(FileNotFoundError, match="nonexistent"):
        nkd.read_points("/nonexistent/*.npy")
    # Mesh queries name the row in all the queries too.
    v = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float64)
    f = [[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]]  # closed: signed distances need one
    for call in (nkd.closest_point, nkd.signed_distance):
        with pytest.raises(ValueError, match="point 37: coordinate y is NaN"):
            out = call(v, f, chunked(bad, [30, 70]))
            dask.compute(*out) if isinstance(out, tuple) else out.compute()


@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast_strategy(client, dtype):
    rng = np.random.default_rng(23)
    data = make_points("clustered", 3000, rng, dtype)
    queries = make_points("clustered", 900, rng, dtype)
    X, Q = chunked(data, uneven(3000, rng)), chunked(queries, uneven(900, rng))
    index = nearkit.PointIndex(data)
    d, i, st = dask.compute(*nkd.knn(X, Q, k=5, strategy="broadcast", return_stats=True))
    d1, i1 = index.query(queries, k=[1, 2, 3, 4, 5])
    assert same(d, d1) and same(i, i1) and st["strategy"] == "broadcast"
    d, i = dask.compute(*nkd.nearest(Q, X))  # "auto": broadcast for data this small
    d1, i1 = index.nearest(queries)
    assert same(d, d1) and same(i, i1)
    for mode in ["nearest-per-a", "all-pairs"]:
        p = dask.compute(*nkd.closest_pairs(Q, X, k=300, mode=mode, strategy="broadcast"))
        assert all(same(x, y) for x, y in zip(p, nearkit.closest_pairs(queries, data, k=300, mode=mode)))
    counts, ids, dist = dask.compute(*nkd.within(X, Q, 0.2, strategy="broadcast"))
    w1 = index.within(queries, 0.2)
    assert same(counts, w1.counts()) and same(ids, w1.ids) and same(dist, w1.distances)
    # Far from 1: the pairs' ranking squares distances in the index's scaled frame.
    big = np.ldexp(data.astype(np.float64), 70 if dtype == np.float32 else 600).astype(dtype)
    qbig = np.ldexp(queries.astype(np.float64), 70 if dtype == np.float32 else 600).astype(dtype)
    p = dask.compute(*nkd.closest_pairs(qbig, big, k=50, strategy="broadcast"))
    assert all(same(x, y) for x, y in zip(p, nearkit.closest_pairs(qbig, big, k=50)))
    with pytest.raises(ValueError, match="strategy"):
        nkd.knn(X, Q, k=2, strategy="everywhere")
    client.run(nkd.clear_cache)


@pytest.mark.skipif(not gpu_available(), reason="no usable CUDA GPU")
@pytest.mark.parametrize("strategy", ["broadcast", "partition"])
def test_gpu_workers_match_the_cpu(client, strategy):
    rng = np.random.default_rng(24)
    data = make_points("surface", 50_000, rng, np.float32)
    queries = make_points("uniform", 40_000, rng, np.float32)
    X, Q = chunked(data, [25_000] * 2), chunked(queries, [10_000] * 4)
    d, i = dask.compute(*nkd.knn(X, Q, k=8, device="cuda", strategy=strategy))
    d1, i1 = nearkit.PointIndex(data, device="cpu").query(queries, k=list(range(1, 9)))
    assert same(d, d1) and same(i, i1)
    counts, ids, dist = dask.compute(*nkd.within(X, Q, 0.3, device="cuda", strategy=strategy))
    w1 = nearkit.PointIndex(data, device="cpu").within(queries, 0.3)
    assert same(counts, w1.counts()) and same(ids, w1.ids) and same(dist, w1.distances)
    # nearest on the worker's GPUs at once (a ShardedIndex under the broadcast plan).
    for bound in [None, 0.01]:
        d, i = dask.compute(*nkd.nearest(Q, X, max_distance=bound, device="cuda", strategy=strategy))
        d1, i1 = nearkit.PointIndex(data, device="cpu").nearest(queries, max_distance=bound)
        assert same(d, d1) and same(i, i1)


def test_gpu_cluster_checks_its_arguments():
    if nearkit.cuda_device_count():
        with pytest.raises(ValueError, match="GPUs asked for"):
            nkd.gpu_cluster(nearkit.cuda_device_count() + 1)
    else:
        with pytest.raises(RuntimeError, match="no CUDA GPU"):
            nkd.gpu_cluster()
    with pytest.raises(ValueError, match="gpus must be a positive int"):
        nkd.gpu_cluster(0)


class _CpuShards:
    """A stand-in for ShardedIndex on the CPU (the same answers by contract), so that the
    GPU nearest graph is tested where there is no GPU."""

    calls = 0

    def __init__(self, blocks, devices):
        self.ix = nearkit.PointIndex(np.concatenate(blocks), device="cpu")

    def nearest(self, pieces, max_distance=None):
        type(self).calls += 1
        return self.ix.nearest(np.concatenate(pieces), max_distance=max_distance)


def test_gpu_nearest_graph(monkeypatch):
    """nearest with device="cuda": one sharded call per worker's share of the query chunks,
    each chunk's answers cut back out, empty chunks included (run on the local scheduler, with
    the CPU standing in for the GPUs; a current client's worker count sets the shares)."""
    monkeypatch.setattr(nkd, "ShardedIndex", _CpuShards)
    rng = np.random.default_rng(31)
    data = make_points("clustered", 30_000, rng, np.float32)
    queries = make_points("uniform", 20_000, rng, np.float32)
    X, Q = chunked(data, [10_000, 0, 20_000]), chunked(queries, [7_000, 0, 3_000, 10_000])
    for bound in [None, 0.02]:
        _CpuShards.calls = 0
        with dask.config.set(scheduler="threads"):
            d, i = dask.compute(*nkd.nearest(Q, X, max_distance=bound, device="cuda"))
        d1, i1 = nearkit.PointIndex(data, device="cpu").nearest(queries, max_distance=bound)
        assert same(d, d1) and same(i, i1)
        assert _CpuShards.calls == min(nkd._default_parallelism("cuda"), 4)
    nkd.clear_cache()
