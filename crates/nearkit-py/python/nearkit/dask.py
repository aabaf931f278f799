"""nearkit on Dask: exact joins over point sets larger than one machine.

Every function takes Dask arrays of shape (n, 3) (or Dask DataFrames with ``x``, ``y``, ``z``
columns, or anything :func:`numpy.asarray` takes) and returns Dask collections partitioned as
the queries, computed by nearkit's engine (CPU or GPU) inside each task:

- :func:`knn`, :func:`nearest`: each query's k nearest data points.
- :func:`closest_pairs`: the k closest pairs of two sets.
- :func:`within`: every data point within r of each query, as rows.
- :func:`closest_point`, :func:`signed_distance`: a triangle mesh (replicated to every worker)
  against partitioned queries.
- :func:`read_points`: many ``.npy`` or Parquet files as one lazy Dask array.

The answers are single-machine nearkit's, bit for bit (ties to the smaller row).

How it works: space is cut into cells by a k-d split of a sample of the data, and the data are
moved into their cells (the one shuffle; no task ever holds more than a cell). Each query goes
to the cell it lies in and is answered there; its k-th distance then bounds where a nearer
point could be, and a query whose bound reaches into other cells' bounding boxes is re-run
against just those cells, the candidates merged in single-machine order. Radius queries go
straight to every cell within r. :func:`plan_cells` shows the partition, and ``return_stats=True`` what the re-runs moved.

Install with ``pip install "nearkit[dask]"`` (the core package does not need Dask). On a
cluster, each worker runs nearkit with its own device choice; pass ``device="cuda"`` for GPU
workers. On a host with several GPUs, :func:`nearest` is fastest from one worker that sees
them all (``gpu_cluster(g, gpus_per_worker=g)``): with the broadcast plan it cuts the data
across its GPUs in one :class:`nearkit.ShardedIndex` (peer copies, no host passes) and
answers every query chunk on all of them at once. The other joins run one worker per GPU
(:func:`gpu_cluster` makes such a cluster; so does ``dask_cuda.LocalCUDACluster``), or go
round the GPUs of a worker that sees several.

>>> import numpy as np, dask.array as da, nearkit, nearkit.dask as nkd
>>> rng = np.random.default_rng(0)
>>> data = da.from_array(rng.random((20_000, 3)), chunks=5_000)
>>> queries = da.from_array(rng.random((1_000, 3)), chunks=250)
>>> d, i = nkd.knn(data, queries, k=4)
>>> d.shape, i.chunks[0]
((1000, 4), (250, 250, 250, 250))
>>> d1, i1 = nearkit.PointIndex(data.compute()).query(queries.compute(), k=4)
>>> bool((d.compute() == d1).all() and (i.compute() == i1).all())
True
"""

from __future__ import annotations

import collections
import logging
import math
import os
import threading
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

try:
    import dask
    import dask.array as da
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError("nearkit.dask needs Dask: pip install 'nearkit[dask]' (or dask[array] distributed)") from e

from . import _arrays, _native
from ._mesh import ClosestPoints, MeshIndex
from ._points import Pairs, PointIndex
from ._sharded import ShardedIndex

__all__ = [
    "BROADCAST_POINTS",
    "BROADCAST_POINTS_GPU",
    "clear_cache",
    "CellPlan",
    "Within",
    "closest_pairs",
    "closest_point",
    "gpu_cluster",
    "knn",
    "nearest",
    "plan_cells",
    "read_points",
    "signed_distance",
    "within",
]

# Cells hold at most this many data points unless asked otherwise (about 0.2 GB in float32
# with its index); fewer, larger cells mean fewer queries near a cell's edge.
DEFAULT_CELL_POINTS = 16_000_000
# Up to this many data points, "auto" sends the data to every worker instead of partitioning.
BROADCAST_POINTS = 16_000_000
# The same on GPU workers (``device="cuda"``): a GPU indexes and answers so fast that the
# partition plan's passes over every row on the host cost more than sending the data to each
# worker (100M x 100M on one H100: 1.6 s broadcast against 4.4 s partitioned).
BROADCAST_POINTS_GPU = 128_000_000
# Points sampled per cell to place the k-d splits; the split only affects speed, never answers.
SAMPLE_PER_CELL = 4_000


# ---------------------------------------------------------------------------------------------
# Inputs


def _as_points(x: Any, name: str) -> da.Array:
    """x as a Dask array of (n, 3) rows, whole rows per chunk, dtype float32/float64/int."""
    if hasattr(x, "to_dask_array") and hasattr(x, "columns"):  # a Dask DataFrame
        cols = [c for c in ("x", "y", "z") if c in x.columns]
        if len(cols) != 3:
            raise ValueError(f"{name} is a DataFrame without x, y and z columns (it has {list(x.columns)})")
        x = x[cols].to_dask_array(lengths=True)
    elif not isinstance(x, da.Array):
        a = np.asarray(x)
        x = da.from_array(a, chunks=(max(1, min(len(a), 1 << 20)) if a.ndim else 1,) + a.shape[1:])
    if x.ndim != 2 or x.shape[1] != 3:
        raise ValueError(f"{name} has shape {x.shape}; it must be (n, 3)")
    if any(math.isnan(c) for c in x.chunks[0]):
        x = x.compute_chunk_sizes()
    if x.dtype.kind not in "fiu":
        raise TypeError(f"{name} must be an array of numbers, got dtype {x.dtype}")
    if len(x.chunks[1]) != 1:
        x = x.rechunk({1: 3})
    return x


def _as_data(x: Any) -> da.Array:
    """The data set as :func:`_as_points` gives it; empty is an error, as for PointIndex."""
    x = _as_points(x, "data")
    if x.shape[0] == 0:
        raise ValueError("point set data is empty: give at least one point")
    return x


def _working_dtype(*arrays: da.Array) -> np.dtype:
    """The precision single-machine nearkit would compute in: float32 stays, float64 and
    integers (exact up to 2^53) are float64."""
    kinds = [np.float32 if a.dtype == np.float32 else np.float64 for a in arrays]
    return np.dtype(np.result_type(*kinds))


def _offsets(chunks: Sequence[int]) -> List[int]:
    out, s = [], 0
    for c in chunks:
        out.append(s)
        s += int(c)
    return out


def _check_block(block: np.ndarray, name: str, offset: int, dtype: np.dtype) -> np.ndarray:
    """The block in the working precision; a ValueError worded as nearkit's own, with the
    global row, if a coordinate is not finite."""
    b = _arrays.float_array(block, name, dtype)
    if b.size and not np.isfinite(b).all():
        row, axis = (int(v[0]) for v in np.nonzero(~np.isfinite(b)))
        what = "NaN" if np.isnan(b[row, axis]) else ("inf" if b[row, axis] > 0 else "-inf")
        raise ValueError(
            f"point set {name}, point {offset + row}: coordinate {'xyz'[axis]} is {what} (coordinates must be finite numbers)"
        )
    return b


# ---------------------------------------------------------------------------------------------
# Magnitudes: the power of two single-machine nearkit would scale by (geometry/scale.rs), so
# that every cell computes in the same frame and gives the same bits.

_WINDOW = {np.dtype(np.float32): (-38, 61), np.dtype(np.float64): (-457, 509)}


def _exponent(v: float) -> int:
    return math.frexp(v)[1] - 1


def _scale_exponent(dtype: np.dtype, max_abs: float, min_nonzero: float, name: str) -> int:
    if max_abs == 0:
        return 0
    lo, hi = _WINDOW[dtype]
    min_e, max_e = _exponent(min_nonzero), _exponent(max_abs)
    s_lo, s_hi = lo - min_e, hi - 1 - max_e
    if s_lo > s_hi:
        raise ValueError(
            f"{name}: nonzero coordinates range in magnitude from {min_nonzero:.3e} to {max_abs:.3e}, a ratio of "
            f"2^{max_e - min_e}; {dtype.name} compares distances exactly only within a ratio of 2^{hi - 1 - lo}"
            + (": compute in float64" if dtype == np.float32 else "")
        )
    if s_lo > 0:
        return s_lo
    if s_hi < 0:
        return s_hi - (s_hi - s_lo) // 2
    return 0


# ---------------------------------------------------------------------------------------------
# The cell plan: k-d splits from a sample, the data moved into cells.


class CellPlan(NamedTuple):
    """How the data were partitioned: ``counts[c]`` points in cell ``c``, whose bounding box is
    ``boxes[c]`` ((2, 3): min and max corner; NaN for an empty cell)."""

    counts: np.ndarray
    boxes: np.ndarray


def _magnitudes(b: np.ndarray) -> Tuple[float, float]:
    """(largest |coordinate|, smallest nonzero |coordinate|; inf if none) of finite rows, on
    the bits: |x| orders as its bits without the sign, and bits - 1 sends 0 to the top."""
    if b.size == 0:
        return 0.0, math.inf
    ui = np.uint32 if b.dtype == np.float32 else np.uint64
    bits = b.reshape(-1).view(ui) & ui(np.iinfo(ui).max >> 1)
    hi = bits.max()
    lo = (bits - ui(1)).min() + ui(1)
    as_float = lambda v: float(np.array([v], ui).view(b.dtype)[0])  # noqa: E731
    return as_float(hi), (as_float(lo) if lo != 0 else math.inf)


def _box(pts: np.ndarray) -> np.ndarray:
    """(2, 3) float64: the rows' min and max corner (NaN if none). Reduces 16 rows at a time,
    which numpy vectorises far better than a reduction over axis 0 of (n, 3)."""
    if len(pts) == 0:
        return np.full((2, 3), np.nan)
    n16 = len(pts) // 16 * 16
    parts = [pts[n16:]] if n16 < len(pts) else []
    if n16:
        wide = pts[:n16].reshape(-1, 48)
        parts += [wide.min(axis=0).reshape(16, 3), wide.max(axis=0).reshape(16, 3)]
    allp = np.concatenate(parts)
    return np.stack([allp.min(axis=0), allp.max(axis=0)]).astype(np.float64)


def _chunk_summary(block: np.ndarray, offset: int, name: str, dtype: np.dtype, sample: int, seed: int):
    """A chunk's checks, magnitudes and sample."""
    b = _check_block(block, name, offset, dtype)
    max_abs, min_nz = _magnitudes(b)
    if sample >= len(b):
        s = b
    else:
        s = b[np.sort(np.random.default_rng([seed, offset]).choice(len(b), sample, replace=False))]
    return max_abs, min_nz, np.asarray(s, np.float64)


def _splits(summaries, depth: int, dtype: np.dtype, name: str):
    """(axes, values, scale exponent): the k-d splits in heap order, from the samples."""
    max_abs = max([s[0] for s in summaries], default=0.0)
    min_nz = min([s[1] for s in summaries], default=math.inf)
    exp = _scale_exponent(dtype, max_abs, min_nz, name)
    sample = np.concatenate([s[2] for s in summaries]) if summaries else np.empty((0, 3))
    sample = np.ldexp(sample, exp) if exp else sample
    axes = np.zeros(max(1, (1 << depth) - 1), np.int64)
    values = np.zeros(len(axes), np.float64)
    nodes = [(0, sample)]
    for _ in range(depth):
        nxt = []
        for node, s in nodes:
            if len(s):
                ax = int(np.argmax(s.max(axis=0) - s.min(axis=0)))
                v = float(np.partition(s[:, ax], len(s) // 2)[len(s) // 2])
            else:
                ax, v = 0, 0.0
            axes[node], values[node] = ax, v
            left = s[:, ax] < v
            nxt += [(2 * node + 1, s[left]), (2 * node + 2, s[~left])]
        nodes = nxt
    return axes, values, exp


def _scatter(block, offset, name, dtype, splits, depth: int, cells: int, with_points_ids: bool):
    """A chunk cut by cell: per cell, its rows (scaled) and their global (or chunk) row ids."""
    axes, values, exp = splits
    # The data's chunks were checked by their summaries; queries are checked here.
    b = _arrays.float_array(block, name, dtype) if with_points_ids else _check_block(block, name, offset, dtype)
    if exp:
        b = np.ldexp(b, exp).astype(dtype, copy=False)
    # Rows down the k-d splits (right where the coordinate is >= the split), stably sorted by
    # cell: one parallel pass in nearkit's native code.
    ids, bounds, pts = _native.sort_by_cells(b, np.array(axes, np.int64), np.array(values, np.float64), depth)
    if with_points_ids:
        ids += offset
    return tuple((pts[bounds[c] : bounds[c + 1]], ids[bounds[c] : bounds[c + 1]]) for c in range(cells))


def _gather_cell(*pieces):
    """A cell's points and global ids (ascending: pieces come in chunk order)."""
    pts = np.concatenate([p for p, _ in pieces]) if pieces else np.empty((0, 3))
    ids = np.concatenate([i for _, i in pieces]) if pieces else np.empty(0, np.int64)
    return pts, ids.astype(np.int64, copy=False)


def _cell_size(cell) -> int:
    return len(cell[1])


def _cell_box(cell) -> np.ndarray:
    return _box(cell[0])


class _Cells:
    """The delayed pieces of a plan: per cell its (points, ids), its box, and the splits."""

    def __init__(self, data: da.Array, dtype: np.dtype, name: str, cells: Optional[int], device: str = "cpu", seed: int = 0):
        n = data.shape[0]
        self.count = _cell_count(n, cells, device)
        self.depth = self.count.bit_length() - 1
        self.n = n
        self.dtype = dtype
        blocks = data.to_delayed().ravel()
        offs = _offsets(data.chunks[0])
        want = SAMPLE_PER_CELL * self.count
        summaries = [
            dask.delayed(_chunk_summary, pure=True)(b, o, name, dtype, -(-int(c) * want // max(n, 1)), seed)
            for b, o, c in zip(blocks, offs, data.chunks[0])
        ]
        self.splits = dask.delayed(_splits, pure=True)(summaries, self.depth, dtype, name)
        pieces = [
            dask.delayed(_scatter, pure=True, nout=self.count)(b, o, name, dtype, self.splits, self.depth, self.count, True)
            for b, o in zip(blocks, offs)
        ]
        self.cells = [dask.delayed(_gather_cell, pure=True)(*[p[c] for p in pieces]) for c in range(self.count)]
        self.boxes = [dask.delayed(_cell_box, pure=True)(cell) for cell in self.cells]

    def scatter_queries(self, queries: da.Array, name: str):
        """Per query chunk: its rows cut by cell (rows within the chunk)."""
        blocks = queries.to_delayed().ravel()
        offs = _offsets(queries.chunks[0])
        return [
            dask.delayed(_scatter, pure=True, nout=self.count)(b, o, name, self.dtype, self.splits, self.depth, self.count, False)
            for b, o in zip(blocks, offs)
        ]


def _default_parallelism(device: str = "cpu") -> int:
    """Threads of the current distributed client's workers (on a GPU: its workers, one GPU
    each, whose every call uses all of their GPU), else 1 (the local schedulers run one nearkit
    call on every core anyway)."""
    try:
        from distributed import get_client

        workers = get_client().scheduler_info(n_workers=-1).get("workers", {}).values()
        if str(device).startswith("cuda"):
            return max(1, len(workers))
        return max(1, sum(w.get("nthreads", 1) for w in workers))
    except (ImportError, ValueError, TypeError):
        return 1


def plan_cells(data: Any, cells: Optional[int] = None, device: str = "cpu") -> CellPlan:
    """The partition :func:`knn` and the others would use for ``data`` (computed now)."""
    x = _as_data(data)
    plan = _Cells(x, _working_dtype(x), "data", cells, device)
    sizes = [dask.delayed(_cell_size, pure=True)(cell) for cell in plan.cells]
    sizes, boxes, splits = dask.compute(sizes, plan.boxes, plan.splits)
    exp = splits[2]
    b = np.array(boxes)
    return CellPlan(np.array(sizes, np.int64), np.ldexp(b, -exp) if exp else b)


# ---------------------------------------------------------------------------------------------
# A cluster of this host's GPUs


def gpu_cluster(
    gpus: Optional[int] = None,
    *,
    gpus_per_worker: int = 1,
    threads_per_worker: Optional[int] = None,
    **worker_options: Any,
):
    """A Dask cluster of this host's GPUs: worker processes that each see only their own GPUs
    (``CUDA_VISIBLE_DEVICES``), so that ``device="cuda"`` joins use every GPU.

    ``gpus``: how many (default: all this process can see; the first ones are taken).
    ``gpus_per_worker``: 1 (default) gives one worker per GPU; more gives workers that each
    drive several GPUs (a worker spreads its cells or query chunks over the GPUs it sees, and
    what one task hands the next stays in its process instead of crossing between workers).
    ``threads_per_worker``: task threads per worker, and the threads of nearkit's host-side
    work in it (default: this host's cores shared evenly among the workers). Other keywords go
    to each worker's ``distributed.Nanny`` (``memory_limit``, say). Needs ``distributed``; use
    it as ``with gpu_cluster() as cluster, distributed.Client(cluster) as client: ...``.
    Counting the GPUs opens none of them: this process makes no CUDA context."""
    from distributed import Nanny, Scheduler, SpecCluster

    from . import cuda_device_count

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [v.strip() for v in visible.split(",") if v.strip()]
        ids = ids[: cuda_device_count()]
    else:
        ids = [str(i) for i in range(cuda_device_count())]
    if gpus is not None:
        if isinstance(gpus, bool) or not isinstance(gpus, (int, np.integer)) or gpus < 1:
            raise ValueError(f"gpus must be a positive int, got {gpus!r}")
        if gpus > len(ids):
            raise ValueError(f"{gpus} GPUs asked for, but this process sees {len(ids)}")
        ids = ids[:gpus]
    if not ids:
        raise RuntimeError("no CUDA GPU is visible to this process (no NVIDIA driver, or CUDA_VISIBLE_DEVICES is empty)")
    per = _int_at_least(gpus_per_worker, 1, "gpus_per_worker")
    if len(ids) % per:
        raise ValueError(f"{len(ids)} GPUs do not make workers of {per} GPUs each")
    groups = [ids[i : i + per] for i in range(0, len(ids), per)]
    threads = threads_per_worker or max(1, (os.cpu_count() or 1) // len(groups))
    workers = {}
    for g in groups:
        # nearkit's own threads in the worker (rayon's pool) match its share of the cores.
        env = {"CUDA_VISIBLE_DEVICES": ",".join(g), "RAYON_NUM_THREADS": str(threads)}
        workers["gpu-" + "-".join(g)] = {"cls": Nanny, "options": {"nthreads": threads, "env": env, **worker_options}}
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": None}}
    return SpecCluster(workers=workers, scheduler=scheduler, silence_logs=logging.WARNING)


# ---------------------------------------------------------------------------------------------
# Per-process index cache: the broadcast data's index, built once per worker process and kept
# for the tasks after it (and for later calls on the same data).

_CACHE: "collections.OrderedDict[Any, Any]" = collections.OrderedDict()
_CACHE_LOCK = threading.Lock()
_BUILDING: dict = {}
# Indexes kept per process: at most this many, of at most this many points in all.
_CACHE_MAX = 8
_CACHE_MAX_POINTS = 64_000_000


def _keep(key, ix) -> None:
    with _CACHE_LOCK:
        _CACHE[key] = ix
        while len(_CACHE) > _CACHE_MAX or (len(_CACHE) > 1 and sum(len(v) for v in _CACHE.values()) > _CACHE_MAX_POINTS):
            _CACHE.popitem(last=False)


def _shared_index(key: str, pts: np.ndarray, device: str):
    """The broadcast data's index, built once per process however many tasks ask at once."""
    return _shared(key, lambda: PointIndex(pts, device=device))


def _shared(key: str, build):
    """What `build()` makes, kept under `key` and made once per process however many tasks
    ask at once."""
    with _CACHE_LOCK:
        ix = _CACHE.get(key)
        if ix is not None:
            _CACHE.move_to_end(key)
            return ix
        lock = _BUILDING.setdefault(key, threading.Lock())
    with lock:
        with _CACHE_LOCK:
            ix = _CACHE.get(key)
        if ix is None:
            ix = build()
            _keep(key, ix)
    with _CACHE_LOCK:
        _BUILDING.pop(key, None)
    return ix


_EXPONENTS: dict = {}


def _data_exponent(key: str, data: np.ndarray, dtype: np.dtype) -> int:
    """The broadcast data's scale exponent, found once per process."""
    with _CACHE_LOCK:
        exp = _EXPONENTS.get(key)
    if exp is None:
        exp = _scale_exponent(dtype, *_magnitudes(data), "data")
        with _CACHE_LOCK:
            _EXPONENTS[key] = exp
            while len(_EXPONENTS) > 64:
                _EXPONENTS.pop(next(iter(_EXPONENTS)))
    return exp


def clear_cache() -> None:
    """Drops the indexes this process keeps between tasks (on a cluster:
    ``client.run(nearkit.dask.clear_cache)``)."""
    with _CACHE_LOCK:
        _CACHE.clear()
        _MESHES.clear()
        _EXPONENTS.clear()


def _threads(workers: Optional[int], device: str = "cpu") -> int:
    """Threads for one nearkit call in a task: as asked; else, on the CPU, the Dask worker's
    own thread count (so that worker processes sharing a machine do not oversubscribe it);
    else (a GPU's host-side work, or no worker) every core."""
    if workers is not None:
        return workers
    if device != "cpu":
        return -1
    try:
        from distributed import get_worker

        return max(1, int(get_worker().state.nthreads))
    except (ImportError, ValueError, AttributeError):
        return -1


_GPUS: Optional[int] = None


def _on_gpu(device: str, part: int) -> str:
    """The device of a task's part of the work (a cell, a query chunk): with ``"cuda"`` in a
    worker that sees several GPUs, parts go round them (any GPU gives the same bits), so one
    worker drives every GPU of its host; otherwise the device as given."""
    global _GPUS
    if device not in ("cuda", "gpu"):
        return device
    if _GPUS is None:
        from . import cuda_device_count

        _GPUS = cuda_device_count()
    return f"cuda:{part % _GPUS}" if _GPUS > 1 else device


# ---------------------------------------------------------------------------------------------
# kNN: first pass in the query's own cell, re-runs where the k-th distance reaches.


def _d2(q: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Squared distances as nearkit computes them: dx*dx + dy*dy + dz*dz, in that order, in
    the arrays' precision (q: (m, 3) against p: (m, k, 3))."""
    d = q[:, None, :] - p
    with np.errstate(over="ignore", invalid="ignore"):
        return d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1] + d[..., 2] * d[..., 2]


def _box_distance(q: np.ndarray, box: np.ndarray) -> np.ndarray:
    """Distance from each query to a box, in the queries' precision, without squares (no
    overflow); rounding is covered by `_reaches`' margin."""
    t = q.dtype.type
    g = [np.maximum(np.maximum(t(box[0, a]) - q[:, a], q[:, a] - t(box[1, a])), t(0)) for a in range(3)]
    return np.hypot(np.hypot(g[0], g[1]), g[2])


def _reaches(q: np.ndarray, box: np.ndarray, limit: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Which queries could have a point of the box at a distance <= limit as nearkit rounds
    it: a generous margin for rounding (extra re-runs cost time, never answers)."""
    if np.isnan(box).any():
        return np.zeros(len(q), bool)
    eps = float(np.finfo(dtype).eps)
    return _box_distance(q, box).astype(np.float64) * (1 - 16 * eps) <= limit


def _concat_queries(pieces):
    """(points, source chunk, row in chunk) of the pieces of queries sent to a cell."""
    pts = [p for p, _ in pieces]
    src = [np.full(len(r), i, np.int64) for i, (_, r) in enumerate(pieces)]
    rows = [r for _, r in pieces]
    if not pts:
        return np.empty((0, 3)), np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(pts), np.concatenate(src), np.concatenate(rows)


def _cell_knn(ix, pts, ids, q, k, bound, n, workers, want_d2, device="cpu"):
    """(d, global ids, d2 or None) of each query's k nearest in one cell; (inf, n) missing."""
    m = len(q)
    if m == 0 or len(pts) == 0:
        d = np.full((m, k), np.inf, pts.dtype if len(pts) else q.dtype)
        return d, np.full((m, k), n, np.int64), (d.copy() if want_d2 else None)
    if k == 1:  # the nearest-neighbour search of closest pairs: the same answer, faster
        d, li = ix.nearest(q, max_distance=bound, workers=_threads(workers, device))
    else:
        d, li = ix.query(q, k=k, distance_upper_bound=math.inf if bound is None else bound, workers=_threads(workers, device))
    d, li = d.reshape(m, k), li.reshape(m, k)
    d2 = None
    if want_d2:
        missing = li >= len(pts)
        d2 = _d2(q, pts[np.where(missing, 0, li)])
        d2[missing] = np.inf
    # Cell rows to global rows, in place (a missing neighbour, row len(pts), becomes n).
    gid = np.take(np.append(ids, n), li, out=li, mode="clip")
    return d, gid, d2


def _scaled_bound(bound: float, splits) -> float:
    return float(np.ldexp(np.float64(bound), splits[2])) if splits[2] else bound


def _near_other_cells(q: np.ndarray, limit: np.ndarray, splits, c: int, cells: int) -> np.ndarray:
    """The queries of cell c (ascending) that could have a point of another cell within their
    limit: those nearer than it to one of the split planes on c's path, beyond one of which
    every other cell lies. A few passes over the queries, where a test against each other
    cell's box was one per cell; the same margin for rounding as `_reaches`."""
    axes, values, _ = splits
    depth = cells.bit_length() - 1
    gap = np.full(len(q), np.inf)
    node = 0
    for level in range(depth):
        a, v = int(axes[node]), float(values[node])
        np.minimum(gap, np.abs(q[:, a].astype(np.float64) - v), out=gap)
        node = 2 * node + 1 + ((c >> (depth - 1 - level)) & 1)
    eps = float(np.finfo(q.dtype).eps)
    return np.flatnonzero(gap * (1 - 16 * eps) <= limit)


def _knn_home(cell, boxes, splits, c, k, bound, n, device, workers, want_d2, *qpieces):
    """The first pass of cell c: its queries against its points, and which queries must be
    re-run in which other cells. Returns (home result, *per-cell re-run queries)."""
    pts, ids = cell
    q, src, rows = _concat_queries(qpieces)
    q = q.astype(pts.dtype if len(pts) else q.dtype, copy=False)
    device = _on_gpu(device, c)
    ix = PointIndex(pts, device=device) if len(pts) and len(q) else None
    d, gid, _ = _cell_knn(ix, pts, ids, q, k, bound, n, workers, False, device)
    limit = d[:, -1].astype(np.float64) if k else np.full(len(q), np.inf)
    if bound is not None:
        limit = np.minimum(limit, bound)
    sends = []
    rerun = np.zeros(len(q), bool)
    near = _near_other_cells(q, limit, splits, c, len(boxes))
    q_near, limit_near = q[near], limit[near]
    for c2, box in enumerate(boxes):
        if c2 == c:
            sends.append((q[:0], np.empty(0, np.int64), np.empty(0)))
            continue
        sel = near[_reaches(q_near, box, limit_near, q.dtype)]
        rerun[sel] = True
        sends.append((q[sel], sel, limit[sel]))
    d2 = None
    if want_d2 or rerun.any():
        # Squared distances break ties of equal distance in the merge (and rank closest pairs).
        need = np.ones(len(q), bool) if want_d2 else rerun
        d2 = np.full(d.shape, np.inf, d.dtype)
        sel = np.flatnonzero(need)
        miss = gid[sel] >= n
        local = np.searchsorted(ids, np.where(miss, ids[0] if len(ids) else 0, gid[sel]))
        d2[sel] = _d2(q[sel], pts[local] if len(pts) else np.zeros((len(sel), k, 3), q.dtype))
        d2[sel] = np.where(miss, np.inf, d2[sel])
    home = (d, gid, d2, src, rows)
    return (home,) + tuple(sends)


def _knn_rerun(cell, c, k, bound, n, device, workers, *pieces):
    """Re-runs in one cell of queries from other cells: per source cell, (d, ids, d2). Each
    source's queries search only the cell's points inside the box their bounds reach (a slab
    along the shared boundary, usually), indexed for the purpose: no cell's whole index is
    kept or rebuilt, and the k nearest of that subset include every point of the cell within
    a query's bound, which are all the merge can take."""
    pts, ids = cell
    device = _on_gpu(device, c)
    out = []
    for q, _, limit in pieces:
        q = q.astype(pts.dtype if len(pts) else q.dtype, copy=False)
        sub, sub_ids = pts[:0], ids[:0]
        if len(q) and len(pts):
            eps = float(np.finfo(pts.dtype).eps)
            reach = limit * (1 + 16 * eps) + float(np.finfo(pts.dtype).tiny)
            lo = (q.astype(np.float64) - reach[:, None]).min(axis=0)
            hi = (q.astype(np.float64) + reach[:, None]).max(axis=0)
            if np.isfinite(reach).all():
                inside = _native.rows_in_box(pts, lo.tolist(), hi.tolist())
                sub, sub_ids = pts[inside], ids[inside]
            else:
                sub, sub_ids = pts, ids
        ix = PointIndex(sub, device=device) if len(q) and len(sub) else None
        out.append(_cell_knn(ix, sub, sub_ids, q, k, bound, n, workers, True, device))
    return tuple(out)


def _knn_merge(home, sends, *back):
    """The home result with the re-runs' candidates merged in (ascending (d2, id)); only the
    re-run queries' rows are touched."""
    d, gid, d2, src, rows = home
    k = d.shape[1] if d.ndim == 2 else 0
    parts = [(send[1], r) for send, r in zip(sends, back) if len(send[1])]
    if parts:
        touched = np.unique(np.concatenate([sel for sel, _ in parts]))
        # Candidates of each touched query: its home row, then each re-run's row.
        at = [np.repeat(np.arange(len(touched)), k)] + [np.repeat(np.searchsorted(touched, sel), k) for sel, _ in parts]
        qi = np.concatenate(at)
        cd = np.concatenate([d[touched].ravel()] + [r[0].ravel() for _, r in parts])
        cg = np.concatenate([gid[touched].ravel()] + [r[1].ravel() for _, r in parts])
        c2 = np.concatenate([d2[touched].ravel()] + [r[2].ravel() for _, r in parts])
        order = np.lexsort((cg, c2, qi))
        qi, cd, cg, c2 = qi[order], cd[order], cg[order], c2[order]
        rank = np.arange(len(qi)) - np.searchsorted(qi, qi, side="left")
        top = rank < k
        d, gid = d.copy(), gid.copy()
        d2 = d2.copy()
        rows_at = touched[qi[top]]
        d[rows_at, rank[top]] = cd[top]
        gid[rows_at, rank[top]] = cg[top]
        d2[rows_at, rank[top]] = c2[top]
    return d, gid, d2, src, rows


def _split_by_chunk(merged, chunks: int):
    d, gid, d2, src, rows = merged
    if len(src) and (np.diff(src) < 0).any():
        order = np.argsort(src, kind="stable")
        d, gid, src, rows = d[order], gid[order], src[order], rows[order]
        d2 = None if d2 is None else d2[order]
    # The queries came in source-chunk order (`_concat_queries`): each chunk's rows are a slice.
    bounds = np.searchsorted(src, np.arange(chunks + 1))
    return tuple(
        (d[s:e], gid[s:e], None if d2 is None else d2[s:e], rows[s:e]) for s, e in zip(bounds[:-1], bounds[1:])
    )


def _assemble(m: int, k: int, dtype, exp: int, want_d2: bool, *pieces):
    d = np.empty((m, k), dtype)
    gid = np.empty((m, k), np.int64)
    d2 = np.empty((m, k), dtype) if want_d2 else None
    for pd, pg, p2, rows in pieces:
        d[rows], gid[rows] = pd, pg
        if want_d2:
            d2[rows] = p2
    if exp:
        d = np.ldexp(d, -exp).astype(dtype, copy=False)
    return d, gid, d2


def _knn_graph(data, queries, k, bound, device, workers, cells, want_d2, dtype, strategy="partition"):
    n = data.shape[0]
    if _use_broadcast(strategy, n, cells, device):
        whole, key = _broadcast_data(data, dtype, device)
        outs = [
            dask.delayed(_broadcast_knn, pure=True, nout=3)(whole, key, b, o, j, k, bound, device, workers, want_d2, dtype)
            for j, (b, o) in enumerate(zip(queries.to_delayed().ravel(), _offsets(queries.chunks[0])))
        ]
        return None, outs, dask.delayed(_broadcast_stats, pure=True)(queries.shape[0], n, np.dtype(dtype).itemsize)
    plan = _Cells(data, dtype, "data", cells, device)
    qpieces = plan.scatter_queries(queries, "queries")
    P = plan.count
    # Cells hold the data scaled as one machine would scale them (see _splits): so is the bound.
    if bound is not None:
        bound = dask.delayed(_scaled_bound, pure=True)(bound, plan.splits)
    homes = []
    for c in range(P):
        homes.append(
            dask.delayed(_knn_home, pure=True, nout=P + 1)(
                plan.cells[c], plan.boxes, plan.splits, c, k, bound, n, device, workers, want_d2, *[qp[c] for qp in qpieces]
            )
        )
    reruns = [
        dask.delayed(_knn_rerun, pure=True, nout=P)(plan.cells[c], c, k, bound, n, device, workers, *[h[1 + c] for h in homes])
        for c in range(P)
    ]
    Q = len(qpieces)
    splits = []
    for c in range(P):
        sends = dask.delayed(tuple, pure=True)([homes[c][1 + c2] for c2 in range(P)])
        merged = dask.delayed(_knn_merge, pure=True)(homes[c][0], sends, *[reruns[c2][c] for c2 in range(P)])
        splits.append(dask.delayed(_split_by_chunk, pure=True, nout=Q)(merged, Q))
    exp = plan.splits[2]
    outs = [
        dask.delayed(_assemble, pure=True, nout=3)(int(m), k, dtype, exp, want_d2, *[s[i] for s in splits])
        for i, m in enumerate(queries.chunks[0])
    ]
    stats = dask.delayed(_rerun_stats, pure=True)([h[1:] for h in homes], queries.shape[0], k, np.dtype(dtype).itemsize)
    return plan, outs, stats


def _whole(dtype: np.dtype, *blocks) -> np.ndarray:
    """The data in one array, to be sent to every worker. Not checked here: its rows are the
    global rows, so the index's own error names the right one."""
    parts = [_arrays.float_array(b, "data", dtype) for b in blocks]
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.empty((0, 3), dtype)


def _checked(call, block, name, offset, dtype):
    """call(), or on a ValueError the check that names the global row, if that is the cause."""
    try:
        return call()
    except ValueError:
        _check_block(block, name, offset, dtype)
        raise


def _broadcast_knn(data, key, block, offset, part, k, bound, device, workers, want_d2, dtype):
    """One query chunk against the whole data's index (built once per process and GPU)."""
    q = _arrays.float_array(block, "queries", dtype)
    n = len(data)
    device = _on_gpu(device, part)
    ix = _shared_index(key + device, data, device)  # raises single-machine nearkit's error on no data
    if len(q) == 0:
        return np.empty((0, k), dtype), np.empty((0, k), np.int64), (np.empty((0, k), dtype) if want_d2 else None)
    w = _threads(workers, device)
    if k == 1:
        d, li = _checked(lambda: ix.nearest(q, max_distance=bound, workers=w), block, "queries", offset, dtype)
    else:
        r = math.inf if bound is None else bound
        d, li = _checked(lambda: ix.query(q, k=k, distance_upper_bound=r, workers=w), block, "queries", offset, dtype)
    d, li = d.reshape(len(q), k), li.reshape(len(q), k)
    d2 = None
    if want_d2:
        missing = li >= n
        # In the index's frame (scaled as it scales), where squared distances are exact.
        exp = _data_exponent(key, data, dtype)
        qs, ps = (np.ldexp(q, exp).astype(dtype), np.ldexp(data, exp).astype(dtype)) if exp else (q, data)
        d2 = _d2(qs, ps[np.where(missing, 0, li)])
        d2[missing] = np.inf
    return d, li.astype(np.int64, copy=False), d2


def _broadcast_nearest_gpus(blocks, key, bound, dtype, offsets, *qblocks):
    """A group of query chunks' nearest data points on every GPU this worker sees at once, in
    one call: the data (its chunks, never joined on the host) cut across the GPUs by a
    `ShardedIndex`, built once per process. Data that a sharded index cannot take
    (coordinates that need scaling) go to one GPU's `PointIndex`, as before; the answers are
    the same bits either way. Returns each chunk's distances, and each chunk's ids."""
    qs = [_arrays.float_array(b, "queries", dtype) for b in qblocks]

    def build():
        try:
            return ShardedIndex(list(blocks), devices="all")
        except ValueError:
            # A bad row raises again below, named as one machine names it; data far from 1
            # are indexed by PointIndex, which scales them.
            return PointIndex(_whole(dtype, *blocks), device="cuda")

    ix = _shared(key + "-gpus", build)
    sizes = [len(q) for q in qs]
    try:
        if isinstance(ix, ShardedIndex):
            d, li = ix.nearest(qs, max_distance=bound)
        else:
            d, li = ix.nearest(_whole(dtype, *qs), max_distance=bound)
    except ValueError:
        for b, o in zip(qblocks, offsets):
            _check_block(b, "queries", o, dtype)
        raise
    cuts = np.cumsum([0] + sizes)
    li = li.astype(np.int64, copy=False)
    return [d[s:e] for s, e in zip(cuts[:-1], cuts[1:])], [li[s:e] for s, e in zip(cuts[:-1], cuts[1:])]


def _sharded_nearest(data: da.Array, queries: da.Array, bound, dtype):
    """`nearest` on GPU workers: each worker cuts the data (its chunks as they are) across
    every GPU it sees and answers its share of the query chunks in one call. The graph is
    lean (one task per share, one per output chunk), as Dask's per-task cost would otherwise
    be a good part of a GPU join's time."""
    import operator

    from dask.highlevelgraph import HighLevelGraph

    blocks = dask.delayed(_blocks, pure=True)(dtype, *data.to_delayed().ravel())
    key = "nearkit-broadcast-" + dask.base.tokenize(data.name, str(dtype), "gpus")
    qb, offs = queries.to_delayed().ravel(), _offsets(queries.chunks[0])
    shares = [g for g in _groups(len(qb), _default_parallelism("cuda")) if g]
    tasks = [
        dask.delayed(_broadcast_nearest_gpus, pure=True)(blocks, key, bound, dtype, [offs[j] for j in g], *[qb[j] for j in g])
        for g in shares
    ]
    token = dask.base.tokenize(key, queries.name, bound)
    arrays = []
    for which, name, dt in [(0, "nearkit-nearest-d-", dtype), (1, "nearkit-nearest-i-", np.int64)]:
        layer = {
            (name + token, j): (operator.getitem, (operator.getitem, t.key, which), pos)
            for t, g in zip(tasks, shares)
            for pos, j in enumerate(g)
        }
        graph = HighLevelGraph.from_collections(name + token, layer, dependencies=tasks)
        arrays.append(da.Array(graph, name + token, chunks=(queries.chunks[0],), dtype=dt))
    return arrays[0], arrays[1]


def _groups(count: int, parts: int) -> List[range]:
    """`count` chunks in `parts` contiguous groups (as even as can be)."""
    parts = max(1, min(parts, count))
    return [range(count * g // parts, count * (g + 1) // parts) for g in range(parts)]


def _blocks(dtype: np.dtype, *blocks) -> List[np.ndarray]:
    """The data's chunks as float arrays, to be sent to every worker as they are."""
    return [_arrays.float_array(b, "data", dtype) for b in blocks]


def _broadcast_stats(nq, n, itemsize):
    return {"queries": nq, "rerun_queries": 0, "rerun_bytes": 0, "strategy": "broadcast", "broadcast_bytes": n * 3 * itemsize}


def _broadcast_data(data: da.Array, dtype: np.dtype, device: str):
    blocks = data.to_delayed().ravel()
    whole = dask.delayed(_whole, pure=True)(dtype, *blocks)
    key = "nearkit-broadcast-" + dask.base.tokenize(data.name, str(dtype), device)
    return whole, key


def _use_broadcast(strategy: str, n: int, cells: Optional[int], device: str = "cpu") -> bool:
    if strategy not in ("auto", "broadcast", "partition"):
        raise ValueError(f"unknown strategy {strategy!r}: use 'auto', 'broadcast' or 'partition'")
    if strategy == "auto":
        return cells is None and n <= (BROADCAST_POINTS_GPU if str(device).startswith("cuda") else BROADCAST_POINTS)
    if strategy == "partition" and _cell_count(n, cells, device) == 1:
        return True  # one cell holds everything: the broadcast plan, with nothing to cut
    return strategy == "broadcast"


def _cell_count(n: int, cells: Optional[int], device: str = "cpu") -> int:
    if cells is None:
        cells = max(_default_parallelism(device), -(-n // DEFAULT_CELL_POINTS))
    if not isinstance(cells, (int, np.integer)) or isinstance(cells, bool) or cells < 1:
        raise ValueError(f"cells must be a positive int, got {cells!r}")
    return 1 << max(0, int(cells - 1).bit_length())


def _rerun_stats(sends, nq, k, itemsize):
    """What the re-runs moved: queries sent to a second (third...) cell, and the bytes of
    those queries and of the candidates they sent back."""
    count = sum(len(send[1]) for per in sends for send in per)
    return {
        "queries": nq,
        "rerun_queries": count,
        "rerun_bytes": count * (3 * itemsize + k * (2 * itemsize + 8)),
    }


def _stack(outs, m_chunks, k, dtype, which, squeeze):
    arrays = []
    for o, m in zip(outs, m_chunks):
        dt = np.int64 if which == 1 else dtype
        a = da.from_delayed(o[which], shape=(int(m), k), dtype=dt)
        arrays.append(a[:, 0] if squeeze else a)
    if not arrays:
        return da.empty((0,) if squeeze else (0, k), dtype=np.int64 if which == 1 else dtype)
    return da.concatenate(arrays, axis=0)


def knn(
    data: Any,
    queries: Any,
    k: int = 8,
    *,
    distance_upper_bound: float = math.inf,
    device: str = "auto",
    workers: Optional[int] = None,
    cells: Optional[int] = None,
    strategy: str = "auto",
    return_stats: bool = False,
) -> Tuple[da.Array, ...]:
    """Each query's k nearest data points, exact: ``(d, i)``, Dask arrays of shape (m, k)
    chunked as ``queries``; as ``nearkit.PointIndex(data).query(queries, k)`` with ``k`` an int
    > 1 (missing neighbours: ``inf`` and ``n``), bit for bit.

    Parameters
    ----------
    data, queries : Dask arrays (n, 3) and (m, 3), Dask DataFrames with x, y, z, or arrays
        Queries are converted to the data's precision (float32 stays float32).
    k : int
    distance_upper_bound : float
        Only neighbours at most this far.
    device : str
        Each task's nearkit device (``"auto"``, ``"cpu"``, ``"cuda"``).
    workers : int, optional
        Threads per nearkit call; default: the Dask worker's thread count.
    cells : int, optional
        Cells to cut space into (rounded up to a power of two); default: the cluster's
        threads, or more so that no cell holds over 16M points.
    strategy : str
        ``"partition"``: cut space into cells, move the data into them and each query to its
        cell (any size of data). ``"broadcast"``: send the whole data to every worker, which
        indexes it once and answers its own query chunks in place (no shuffle; the data must
        fit in a worker). ``"auto"`` (default): broadcast up to ``BROADCAST_POINTS`` data
        points (``BROADCAST_POINTS_GPU`` with ``device="cuda"``) unless ``cells`` is given.
    return_stats : bool
        Also return a ``dask.delayed`` dict of what moved: ``queries``, ``rerun_queries``
        and ``rerun_bytes`` (partition), ``broadcast_bytes`` (broadcast, per worker);
        compute it with the arrays: ``dask.compute(d, i, stats)``.
    """
    k = _int_at_least(k, 1, "k")
    x = _as_data(data)
    q = _as_points(queries, "queries")
    dtype = _working_dtype(x)
    bound = _arrays.radius(distance_upper_bound, "distance_upper_bound", dtype)
    _, outs, stats = _knn_graph(x, q, k, bound, device, workers, cells, False, dtype, strategy)
    d = _stack(outs, q.chunks[0], k, dtype, 0, False)
    i = _stack(outs, q.chunks[0], k, dtype, 1, False)
    return (d, i, stats) if return_stats else (d, i)


def _int_at_least(v: Any, lo: int, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    return int(v)


def nearest(
    a: Any,
    b: Any,
    *,
    max_distance: Optional[float] = None,
    device: str = "auto",
    workers: Optional[int] = None,
    cells: Optional[int] = None,
    strategy: str = "auto",
    return_stats: bool = False,
) -> Tuple[da.Array, ...]:
    """Each point of ``a``'s nearest point of ``b``: ``(d, i)``, 1-D Dask arrays chunked as
    ``a`` (``inf`` and ``len(b)`` where none lies within ``max_distance``). Computed in
    float64 if either set is float64 (as :func:`nearkit.closest_pairs`); equal, bit for bit,
    to ``nearkit.PointIndex(b).nearest(a)`` in that precision. ``device``, ``workers``,
    ``cells``, ``strategy`` and ``return_stats`` are as for :func:`knn`."""
    x = _as_points(b, "b")
    if x.shape[0] == 0:
        raise ValueError("point set b is empty: give at least one point")
    q = _as_points(a, "a")
    dtype = _working_dtype(x, q)
    bound = _arrays.radius(max_distance, "max_distance", dtype)
    if device in ("cuda", "gpu") and _use_broadcast(strategy, x.shape[0], cells, device):
        d, i = _sharded_nearest(x, q, bound, dtype)
        stats = dask.delayed(_broadcast_stats, pure=True)(q.shape[0], x.shape[0], np.dtype(dtype).itemsize)
        return (d, i, stats) if return_stats else (d, i)
    _, outs, stats = _knn_graph(x, q, 1, bound, device, workers, cells, False, dtype, strategy)
    d = _stack(outs, q.chunks[0], 1, dtype, 0, True)
    i = _stack(outs, q.chunks[0], 1, dtype, 1, True)
    return (d, i, stats) if return_stats else (d, i)


# ---------------------------------------------------------------------------------------------
# Closest pairs: each query chunk's best k, reduced in a tree.


def _chunk_pairs(out, offset: int, k: int):
    d, gid, d2 = out
    m, kk = d.shape
    a = np.repeat(np.arange(offset, offset + m, dtype=np.int64), kk)
    d, gid, d2 = d.ravel(), gid.ravel(), d2.ravel()
    ok = np.isfinite(d2)
    a, d, gid, d2 = a[ok], d[ok], gid[ok], d2[ok]
    return _top_pairs([(a, gid, d, d2)], k)


def _top_pairs(parts, k: int):
    a = np.concatenate([p[0] for p in parts])
    b = np.concatenate([p[1] for p in parts])
    d = np.concatenate([p[2] for p in parts])
    d2 = np.concatenate([p[3] for p in parts])
    if len(a) > k:
        # Everything at or below the k-th squared distance, then exact order (d2, a, b).
        cut = np.partition(d2, k - 1)[k - 1]
        sel = d2 <= cut
        a, b, d, d2 = a[sel], b[sel], d[sel], d2[sel]
    order = np.lexsort((b, a, d2))[:k]
    return a[order], b[order], d[order], d2[order]


def _reduce_pairs(k, *parts):
    return _top_pairs(list(parts), k)


def closest_pairs(
    a: Any,
    b: Any,
    k: int = 100,
    mode: str = "nearest-per-a",
    *,
    max_distance: Optional[float] = None,
    device: str = "auto",
    workers: Optional[int] = None,
    cells: Optional[int] = None,
    strategy: str = "auto",
    split_every: int = 8,
) -> Pairs:
    """The k closest pairs of ``a`` and ``b``, as :func:`nearkit.closest_pairs`, bit for bit:
    a :class:`nearkit.Pairs` of Dask arrays (``a``, ``b`` rows and ``distance``), ascending
    (ties: smaller a, then smaller b). ``mode="nearest-per-a"`` pairs each a with its nearest
    b; ``"all-pairs"`` takes the k closest pairs overall. ``device``, ``workers``, ``cells``
    and ``strategy`` are as for :func:`knn`."""
    k = _int_at_least(k, 1, "k")
    if mode not in ("nearest-per-a", "all-pairs"):
        raise ValueError(f"unknown pair mode {mode!r}: use 'nearest-per-a' or 'all-pairs'")
    x = _as_points(b, "b")
    q = _as_points(a, "a")
    if x.shape[0] == 0 or q.shape[0] == 0:
        raise ValueError("point set " + ("b" if x.shape[0] == 0 else "a") + " is empty")
    dtype = _working_dtype(x, q)
    bound = _arrays.radius(max_distance, "max_distance", dtype)
    per = 1 if mode == "nearest-per-a" else min(k, x.shape[0])
    _, outs, _ = _knn_graph(x, q, per, bound, device, workers, cells, True, dtype, strategy)
    level = [dask.delayed(_chunk_pairs, pure=True)(o, off, k) for o, off in zip(outs, _offsets(q.chunks[0]))]
    while len(level) > 1:
        level = [dask.delayed(_reduce_pairs, pure=True)(k, *level[j : j + split_every]) for j in range(0, len(level), split_every)]
    top = level[0]
    count = min(k, q.shape[0] * per) if bound is None else math.nan
    shape = (count,)
    return Pairs(
        da.from_delayed(top[0], shape=shape, dtype=np.int64),
        da.from_delayed(top[1], shape=shape, dtype=np.int64),
        da.from_delayed(top[2], shape=shape, dtype=dtype),
    )


# ---------------------------------------------------------------------------------------------
# Radius queries: every cell within r, rows merged in (d2, id) order.


class Within(NamedTuple):
    """Rows of neighbours as Dask arrays: ``counts`` (int64, chunked as the queries) and the
    rows' ``ids`` and ``distances`` concatenated in query order, each chunk holding the rows of
    the matching query chunk (chunk sizes known after computing ``counts``). Rows are ascending
    by (distance, id), as :meth:`nearkit.PointIndex.within`."""

    counts: da.Array
    ids: da.Array
    distances: da.Array


def _route_within(qpieces_block, boxes, r, dtype):
    """A query chunk's pieces (already cut by home cell) sent to every cell within r."""
    pts = np.concatenate([p for p, _ in qpieces_block])
    rows = np.concatenate([r_ for _, r_ in qpieces_block])
    out = []
    for box in boxes:
        sel = np.flatnonzero(_reaches(pts, box, np.full(len(pts), r), dtype))
        out.append((pts[sel], rows[sel]))
    return tuple(out)


def _within_cell(cell, c, r, n, device, workers, *pieces):
    """Each piece's rows within r in this cell: (counts, ids, distances, d2)."""
    pts, ids = cell
    out = []
    q = np.concatenate([p for p, _ in pieces]) if pieces else np.empty((0, 3))
    if len(q) == 0 or len(pts) == 0:
        return tuple((np.zeros(len(p), np.int64), np.empty(0, np.int64), np.empty(0, pts.dtype), np.empty(0, pts.dtype)) for p, _ in pieces)
    q = q.astype(pts.dtype, copy=False)
    device = _on_gpu(device, c)
    ix = PointIndex(pts, device=device)
    w = ix.within(q, r, sort=True, workers=_threads(workers, device))
    counts = np.diff(w.offsets)
    rowq = np.repeat(np.arange(len(q)), counts)
    d2 = _d2(q[rowq], pts[w.ids][:, None, :])[:, 0] if len(w.ids) else np.empty(0, pts.dtype)
    gid = ids[w.ids]
    s = 0
    for p, _ in pieces:
        lo, hi = w.offsets[s], w.offsets[s + len(p)]
        out.append((counts[s : s + len(p)], gid[lo:hi], w.distances[lo:hi], d2[lo:hi]))
        s += len(p)
    return tuple(out)


def _within_assemble(m, exp, dtype, routed, *results):
    """A query chunk's rows from every cell, merged in (d2, id) order."""
    rows_all, ids_all, d_all, d2_all = [], [], [], []
    for (_, rows), (counts, gid, d, d2) in zip(routed, results):
        rows_all.append(np.repeat(rows, counts))
        ids_all.append(gid)
        d_all.append(d)
        d2_all.append(d2)
    rows = np.concatenate(rows_all) if rows_all else np.empty(0, np.int64)
    gid = np.concatenate(ids_all) if ids_all else np.empty(0, np.int64)
    d = np.concatenate(d_all) if d_all else np.empty(0, dtype)
    d2 = np.concatenate(d2_all) if d2_all else np.empty(0, dtype)
    order = np.lexsort((gid, d2, rows))
    counts = np.bincount(rows, minlength=m).astype(np.int64)
    d = d[order].astype(dtype, copy=False)
    if exp:
        d = np.ldexp(d, -exp).astype(dtype, copy=False)
    return counts, gid[order], d


def within(
    data: Any,
    queries: Any,
    r: float,
    *,
    device: str = "auto",
    workers: Optional[int] = None,
    cells: Optional[int] = None,
    strategy: str = "auto",
) -> Within:
    """Every data point within ``r`` (inclusive) of each query, as :class:`Within` rows of
    Dask arrays; bit for bit ``nearkit.PointIndex(data).within(queries, r)`` (sorted rows).
    ``device``, ``workers``, ``cells`` and ``strategy`` are as for :func:`knn`."""
    x = _as_data(data)
    q = _as_points(queries, "queries")
    dtype = _working_dtype(x)
    radius = _arrays.search_radius(r, "r", dtype)
    if _use_broadcast(strategy, x.shape[0], cells, device):
        whole, key = _broadcast_data(x, dtype, device)
        outs = [
            dask.delayed(_broadcast_within, pure=True, nout=3)(whole, key, b, o, j, radius, device, workers, dtype)
            for j, (b, o) in enumerate(zip(q.to_delayed().ravel(), _offsets(q.chunks[0])))
        ]
        return _within_arrays(outs, q, dtype)
    plan = _Cells(x, dtype, "data", cells, device)
    P = plan.count
    qpieces = plan.scatter_queries(q, "queries")
    exp = plan.splits[2]
    r_scaled = dask.delayed(lambda e: float(np.ldexp(np.float64(radius), e)) if e else radius, pure=True)(exp)
    routed = [
        dask.delayed(_route_within, pure=True, nout=P)([qp[c] for c in range(P)], plan.boxes, r_scaled, dtype)
        for qp in qpieces
    ]
    cell_out = [
        dask.delayed(_within_cell, pure=True, nout=len(routed))(plan.cells[c], c, r_scaled, x.shape[0], device, workers, *[rt[c] for rt in routed])
        for c in range(P)
    ]
    outs = []
    for i, m in enumerate(q.chunks[0]):
        outs.append(
            dask.delayed(_within_assemble, pure=True, nout=3)(
                int(m), exp, dtype, [routed[i][c] for c in range(P)], *[cell_out[c][i] for c in range(P)]
            )
        )
    return _within_arrays(outs, q, dtype)


def _broadcast_within(data, key, block, offset, part, r, device, workers, dtype):
    q = _arrays.float_array(block, "queries", dtype)
    device = _on_gpu(device, part)
    ix = _shared_index(key + device, data, device)
    if len(q) == 0:
        return np.zeros(0, np.int64), np.empty(0, np.int64), np.empty(0, dtype)
    w = _checked(lambda: ix.within(q, r, workers=_threads(workers, device)), block, "queries", offset, dtype)
    return np.diff(w.offsets), w.ids, w.distances


def _within_arrays(outs, q, dtype) -> Within:
    counts = da.concatenate([da.from_delayed(o[0], shape=(int(m),), dtype=np.int64) for o, m in zip(outs, q.chunks[0])]) if outs else da.zeros(0, np.int64)
    ids = da.concatenate([da.from_delayed(o[1], shape=(math.nan,), dtype=np.int64) for o in outs]) if outs else da.zeros(0, np.int64)
    dist = da.concatenate([da.from_delayed(o[2], shape=(math.nan,), dtype=dtype) for o in outs]) if outs else da.zeros(0, dtype)
    return Within(counts, ids, dist)


# ---------------------------------------------------------------------------------------------
# Meshes: replicated to every worker (one index per process), queries partitioned.

_MESHES: "collections.OrderedDict[str, MeshIndex]" = collections.OrderedDict()


def _mesh_index(token: str, vertices, faces, device) -> MeshIndex:
    with _CACHE_LOCK:
        ix = _MESHES.get(token)
    if ix is None:
        ix = MeshIndex(vertices, faces, device=device)
        with _CACHE_LOCK:
            _MESHES[token] = ix
            while len(_MESHES) > 4:
                _MESHES.popitem(last=False)
    return ix


def _mesh_block(block, part, offset, token, vertices, faces, device, workers, max_distance, what):
    device = _on_gpu(device, part)
    ix = _mesh_index(token + device, vertices, faces, device)
    # A bad query is named by its row in all the queries, not in its chunk.
    if what == "signed":
        call = lambda: ix.signed_distance(block, max_distance=max_distance, workers=_threads(workers, device))  # noqa: E731
        return _checked(call, block, "queries", offset, ix.dtype)
    call = lambda: tuple(ix.closest_point(block, max_distance=max_distance, workers=_threads(workers, device)))  # noqa: E731
    return _checked(call, block, "queries", offset, ix.dtype)


def _mesh_graph(vertices, faces, queries, device, workers, max_distance, what):
    v, _ = _arrays.points(vertices, "vertices")
    f = _arrays.faces(faces)
    token = dask.base.tokenize(v, f, device)
    vd, fd = dask.delayed(v, name="nearkit-mesh-vertices-" + token), dask.delayed(f, name="nearkit-mesh-faces-" + token)
    q = _as_points(queries, "queries")
    blocks = q.to_delayed().ravel()
    starts = _offsets(q.chunks[0])
    outs = [
        dask.delayed(_mesh_block, pure=True, nout=4 if what == "closest" else None)(
            b, j, starts[j], token, vd, fd, device, workers, max_distance, what
        )
        for j, b in enumerate(blocks)
    ]
    return v.dtype, q, outs


def closest_point(
    vertices: Any,
    faces: Any,
    queries: Any,
    *,
    max_distance: Optional[float] = None,
    device: str = "auto",
    workers: Optional[int] = None,
) -> ClosestPoints:
    """Each query's closest point on the mesh, as :meth:`nearkit.MeshIndex.closest_point`
    (bit for bit): a :class:`nearkit.ClosestPoints` of Dask arrays chunked as ``queries``.
    The mesh goes to each worker once and is indexed once per worker process."""
    dtype, q, outs = _mesh_graph(vertices, faces, queries, device, workers, max_distance, "closest")
    parts = [[], [], [], []]
    for o, m in zip(outs, q.chunks[0]):
        m = int(m)
        parts[0].append(da.from_delayed(o[0], shape=(m,), dtype=dtype))
        parts[1].append(da.from_delayed(o[1], shape=(m, 3), dtype=dtype))
        parts[2].append(da.from_delayed(o[2], shape=(m,), dtype=np.int64))
        parts[3].append(da.from_delayed(o[3], shape=(m, 3), dtype=dtype))
    return ClosestPoints(*[da.concatenate(p) for p in parts])


def signed_distance(
    vertices: Any,
    faces: Any,
    queries: Any,
    *,
    max_distance: Optional[float] = None,
    device: str = "auto",
    workers: Optional[int] = None,
) -> da.Array:
    """Each query's signed distance to a closed mesh, as :meth:`nearkit.MeshIndex.signed_distance`:
    a Dask array chunked as ``queries``."""
    dtype, q, outs = _mesh_graph(vertices, faces, queries, device, workers, max_distance, "signed")
    arrays = [da.from_delayed(o, shape=(int(m),), dtype=dtype) for o, m in zip(outs, q.chunks[0])]
    return da.concatenate(arrays)


# ---------------------------------------------------------------------------------------------
# Reading many files lazily.


def _npy_shape(path: str):
    m = np.load(path, mmap_mode="r")  # reads the header only
    return m.shape, m.dtype


def _load_npy(path: str, dtype: np.dtype) -> np.ndarray:
    return np.load(path).astype(dtype, copy=False)


def read_points(paths: Any, columns: Sequence[str] = ("x", "y", "z")) -> da.Array:
    """Many point files as one lazy (n, 3) Dask array, one chunk per file (in the order given,
    or sorted if a glob pattern): ``.npy`` files of (n, 3) rows, or Parquet files (or a Parquet
    folder) whose ``columns`` hold x, y and z. Nothing is read until computed."""
    import glob

    asked = paths
    if isinstance(paths, (str, os.PathLike)):
        p = os.fspath(paths)
        if os.path.isdir(p) or p.endswith(".parquet") or p.endswith(".pq"):
            return _read_parquet(p, columns)
        paths = sorted(glob.glob(p)) if any(ch in p for ch in "*?[") else [p]
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise FileNotFoundError(f"no files match {asked!r}")
    if all(p.endswith((".parquet", ".pq")) for p in paths):
        return _read_parquet(paths, columns)
    shapes, dtypes = [], []
    for p in paths:
        if not p.endswith(".npy"):
            raise ValueError(f"{p}: read_points reads .npy and Parquet files (use nearkit.read_points for one file of another format)")
        if not os.path.exists(p):
            raise FileNotFoundError(2, "No such file or directory", p)
        shape, dtype = _npy_shape(p)
        if len(shape) != 2 or shape[1] != 3:
            raise ValueError(f"{p} holds an array of shape {shape}; it must be (n, 3)")
        shapes.append(shape)
        dtypes.append(dtype)
    dtype = np.result_type(*dtypes)
    # One task per file, under a name that depends only on the files: the same key always
    # means the same task, however many graphs use it.
    name = "nearkit-read-points-" + dask.base.tokenize(paths, [os.path.getmtime(p) for p in paths], shapes)
    dsk = {(name, j, 0): (_load_npy, p, dtype) for j, p in enumerate(paths)}
    from dask.highlevelgraph import HighLevelGraph

    graph = HighLevelGraph.from_collections(name, dsk, dependencies=())
    return da.Array(graph, name, chunks=(tuple(sh[0] for sh in shapes), (3,)), dtype=dtype)


def _read_parquet(paths, columns):
    import dask.dataframe as dd

    df = dd.read_parquet(paths, columns=list(columns))
    return df[list(columns)].to_dask_array(lengths=True)
