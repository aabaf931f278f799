"""PointIndex (scipy.spatial.cKDTree's query conventions), its radius queries, and
closest_pairs."""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Optional, Sequence, Set, Tuple, Union

import numpy as np

from . import _arrays, _cuda, _native


class Pairs(NamedTuple):
    """Closest pairs, ascending by distance (ties: smaller a, then smaller b). ``a[i]`` is a
    row of the query set, ``b[i]`` a row of the indexed set (int64 arrays); ``distance[i]``
    their Euclidean distance, in the working precision. Unpacks as ``a, b, d = pairs``."""

    a: np.ndarray
    b: np.ndarray
    distance: np.ndarray


class Within(NamedTuple):
    """Rows of neighbours in compressed (CSR) form: row ``k`` lists
    ``ids[offsets[k]:offsets[k + 1]]`` (int64 rows of the indexed points, or of ``other``)
    and their Euclidean ``distances`` (the index's dtype; empty when ``distances=False`` was
    asked for). Rows are ascending by (distance, id) unless unsorted rows were asked for. Unpacks as ``offsets, ids, distances = w``;
    ``scipy.sparse.csr_matrix((w.distances, w.ids, w.offsets), shape=(rows, n))`` holds the
    same rows as a sparse matrix."""

    offsets: np.ndarray
    ids: np.ndarray
    distances: np.ndarray

    def counts(self) -> np.ndarray:
        """Each row's length (int64)."""
        return np.diff(self.offsets)

    def row(self, k: int) -> Tuple[np.ndarray, np.ndarray]:
        """Row ``k``: its ids and distances (views)."""
        s, e = self.offsets[k], self.offsets[k + 1]
        return self.ids[s:e], self.distances[s:e]


def _point_index(data: Any, device: str) -> "PointIndex":
    return PointIndex(data, device=device)


class PointIndex:
    """An exact index of 3-D points for nearest-neighbour queries, on the CPU or a GPU.

    A drop-in for ``scipy.spatial.cKDTree`` where the two overlap (``query``,
    ``query_ball_point``, ``query_pairs`` and ``sparse_distance_matrix`` take the same
    arguments and return the same shapes), plus nearkit's own queries: ``nearest``,
    ``knn_graph``, ``closest_pairs``, and radius queries as compressed rows (``within``,
    ``count_within``, ``pairs_within``). Answers are exact, ties go to the smaller id, and the
    CPU and a GPU give the same bits.

    Parameters
    ----------
    data : array_like, shape (n, 3)
        The points. float32 is indexed and queried in float32, float64 in float64 (no upcast);
        integers become float64 (exactly, up to 2^53). Any memory order is accepted. A CuPy
        array or PyTorch tensor on a GPU (anything with ``__cuda_array_interface__``) is
        indexed in place on its GPU, with no copy through host memory.
    device : str
        ``"auto"`` (a GPU if one is usable, else the CPU; calls of fewer than
        ``nearkit.AUTO_CPU_BELOW`` queries then run on the CPU, as a GPU round trip would cost
        more), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.

    Examples
    --------
    >>> import numpy as np, nearkit
    >>> index = nearkit.PointIndex(np.array([[0, 0, 0], [1, 0, 0], [5, 5, 5]], dtype=np.float32))
    >>> d, i = index.query([[0.9, 0.1, 0.0], [4.0, 5.0, 5.0]], k=2)
    >>> i
    array([[1, 0],
           [2, 1]])
    >>> d.dtype
    dtype('float32')
    >>> d, i = index.query([4.0, 5.0, 5.0])   # one point, k=1: scalars, like scipy
    >>> float(d), int(i)
    (1.0, 2)
    """

    def __init__(self, data: Any, *, device: str = "auto") -> None:
        self._asked = device
        if _cuda.is_cuda(data) and device != "cpu":
            rows = _cuda.rows(data, "data")
            if device == "auto":
                device = rows.device
            self._data = rows.array
            self._native = _native.PointIndex.from_cuda(
                rows.address, rows.len, rows.strides, rows.dtype.name, device
            )
        else:
            self._data, _ = _arrays.points(data, "data")
            self._native = _native.PointIndex(self._data, device)

    @property
    def n(self) -> int:
        """The number of indexed points."""
        return self._native.n

    @property
    def m(self) -> int:
        """The dimension of the points: 3 (as scipy's ``cKDTree.m``)."""
        return 3

    @property
    def data(self) -> Any:
        """The indexed points, (n, 3), in the index's dtype (a numpy array, or the CUDA array
        indexed in place)."""
        return self._data

    @property
    def dtype(self) -> np.dtype:
        """float32 or float64: the precision of the index, its queries and its distances."""
        return np.dtype(self._native.dtype)

    @property
    def device(self) -> str:
        """What the index runs on, e.g. ``cpu (16 threads)``."""
        return self._native.device

    def __len__(self) -> int:
        return self.n

    def __repr__(self) -> str:
        return f"PointIndex(n={self.n}, dtype={self.dtype}, device={self.device!r})"

    def __reduce__(self) -> Tuple[Any, ...]:
        # Pickled as its points and the device asked for (as scipy's trees pickle): the
        # index is built again where it is loaded.
        data = _cuda.to_host(self._data) if _cuda.is_cuda(self._data) else self._data
        return (_point_index, (data, self._asked))

    def query(
        self,
        x: Any,
        k: Union[int, Sequence[int]] = 1,
        eps: float = 0,
        p: float = 2,
        distance_upper_bound: float = math.inf,
        workers: Optional[int] = -1,
    ) -> Tuple[Any, Any]:
        """The k nearest indexed points of each query point, as ``cKDTree.query``.

        Parameters
        ----------
        x : array_like, shape (..., 3)
            Query points; converted to the index's dtype. A CuPy array or PyTorch tensor on
            the index's GPU is read in place, and ``d`` and ``i`` come back in its library on
            that GPU.
        k : int or sequence of ints
            How many nearest neighbours (``k=3``: the 1st, 2nd and 3rd), or which ones, as
            1-based ranks (``k=[1, 8]``: the nearest and the 8th nearest).
        eps, p : float
            Accepted for compatibility: nearkit is exact and Euclidean, so only ``eps=0`` and
            ``p=2`` are valid.
        distance_upper_bound : float
            Only neighbours at most this far (in the index's precision, compared as squared
            distances; scipy keeps only those strictly nearer).
        workers : int
            Threads on the CPU: -1 (default) or None for every core.

        Returns
        -------
        d : ndarray of the index's dtype
            Distances, ascending. Shape ``x.shape[:-1] + (k,)``, or ``x.shape[:-1]`` when k is
            the int 1 (then scalars for a single point).
        i : ndarray of int64
            The neighbours' rows in ``data``. A missing neighbour (fewer than k points, or
            none within the bound) has ``d = inf`` and ``i = n``.

        Examples
        --------
        >>> import numpy as np, nearkit
        >>> rng = np.random.default_rng(0)
        >>> index = nearkit.PointIndex(rng.random((1000, 3)))
        >>> d, i = index.query(rng.random((5, 3)), k=[1, 8])   # nearest and 8th nearest
        >>> d.shape, i.shape
        ((5, 2), (5, 2))
        >>> d, i = index.query([[9.0, 9.0, 9.0]], k=2, distance_upper_bound=1.0)
        >>> d, i                               # none within 1: inf and n
        (array([[inf, inf]]), array([[1000, 1000]]))
        """
        _exact_euclidean(eps, p)
        if isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            if k < 1:
                raise ValueError(f"k must be at least 1 (got {k})")
            rows = int(np.prod(np.shape(x)[:-1], dtype=np.int64)) if np.ndim(x) else 1
            _arrays.check_result_size(max(rows, 1), int(k), np.dtype(self.dtype).itemsize + 8, "the neighbour lists")
            ranks = list(range(1, int(k) + 1))
            squeeze = k == 1
        else:
            karr = np.asarray(k)
            ranks = [int(r) for r in karr.ravel()] if np.issubdtype(karr.dtype, np.integer) else []
            if not ranks or any(r < 1 for r in ranks):
                raise ValueError(f"k must be a positive int or a sequence of 1-based ranks, got {k!r}")
            squeeze = False
        bound = _arrays.radius(distance_upper_bound, "distance_upper_bound", self.dtype)
        if _cuda.is_cuda(x):
            return self._query_cuda(x, ranks, bound, squeeze, workers)
        q, lead = _arrays.points(x, "x", self.dtype, one_point=True)
        if q.shape[0] == 0:
            d = np.empty((0, len(ranks)), self.dtype)
            i = np.empty((0, len(ranks)), np.int64)
        else:
            d, i = self._native.query(q, ranks, bound, _arrays.workers(workers))
        if squeeze:
            d, i = d.reshape(lead), i.reshape(lead)
        else:
            d, i = d.reshape(lead + (len(ranks),)), i.reshape(lead + (len(ranks),))
        if d.ndim == 0:
            return d.item(), i.item()  # a float and an int, as cKDTree gives for one point
        return d, i

    def _query_cuda(self, x: Any, ranks: list, bound: Optional[float], squeeze: bool, workers: Any) -> Tuple[Any, Any]:
        """`query` of a CUDA array: read and answered on the GPU when the index is there."""
        if not self.device.startswith("cuda"):
            r = math.inf if bound is None else bound
            d, i = self.query(_cuda.to_host(x), ranks, distance_upper_bound=r, workers=workers)
            if squeeze:
                d, i = d[..., 0], i[..., 0]
            return _cuda.like(d, x), _cuda.like(i, x)
        rows = _cuda.rows(x, "x", self.dtype, one_point=True)
        m, kmax = len(ranks), max(ranks)
        if rows.len == 0:
            d, i = np.empty((0, m), self.dtype), np.empty((0, m), np.int64)
            d, i = _cuda.like(d, rows.array), _cuda.like(i, rows.array)
        else:
            result = self._native.query_cuda(
                rows.address, rows.len, rows.strides, min(kmax, self.n), bound, False
            )
            d, i = _cuda.knn_result(result, rows.array, self.n)
            if ranks != list(range(1, m + 1)) or d.shape[1] < m:
                d, i = _cuda.pad_columns(d, i, kmax, self.n)
                cols = [r - 1 for r in ranks]
                d, i = _cuda.take_columns(d, cols), _cuda.take_columns(i, cols)
        shape = rows.lead if squeeze else rows.lead + (m,)
        return d.reshape(shape), i.reshape(shape)

    def query_ball_point(
        self,
        x: Any,
        r: float,
        p: float = 2.0,
        eps: float = 0,
        workers: Optional[int] = None,
        return_sorted: Optional[bool] = None,
        return_length: bool = False,
    ) -> Any:
        """The indexed points within distance ``r`` of each query point, as
        ``cKDTree.query_ball_point``.

        Parameters
        ----------
        x : array_like, shape (..., 3)
            Query points; converted to the index's dtype.
        r : float
            The radius, inclusive (a point at exactly ``r`` is in), compared as squared
            distances in the index's precision. ``inf`` means every point. Only one radius for
            all points: an array of radii (which scipy broadcasts) is a ValueError.
        p, eps : float
            Accepted for compatibility: only ``p=2`` and ``eps=0`` are valid.
        workers : int
            Threads on the CPU: -1 or None (default) for every core.
        return_sorted : bool or None
            True or None (default): each list ascending by index, which is what scipy gives
            for True, and for None with several points (for a single point scipy leaves the
            list unsorted; sorted is one of its orders). False: the index's own order (cheaper;
            deterministic, the same on every device).
        return_length : bool
            Return only how many points each ball holds (counted without listing them).

        Returns
        -------
        list of int, or ndarray of lists, or int, or ndarray of int64
            For ``x`` of shape (3,): a list of indices (or, with ``return_length``, their
            count). For shape (..., 3): an object array of shape ``x.shape[:-1]`` holding such
            lists (or an int64 array of counts).

        Raises
        ------
        ValueError
            ``r`` negative or NaN (scipy squares a negative ``r`` and returns nothing for NaN).

        Examples
        --------
        >>> import nearkit
        >>> index = nearkit.PointIndex([[0, 0, 0], [1, 0, 0], [3, 0, 0]])
        >>> index.query_ball_point([0.9, 0, 0], r=1.0)
        [0, 1]
        >>> index.query_ball_point([[0.9, 0, 0], [9, 9, 9]], r=1.0)
        array([list([0, 1]), list([])], dtype=object)
        >>> index.query_ball_point([[0.9, 0, 0], [9, 9, 9]], r=1.0, return_length=True)
        array([2, 0])
        """
        _exact_euclidean(eps, p)
        q, lead = _arrays.points(x, "x", self.dtype, one_point=True)
        radius = _arrays.search_radius(r, "r", self.dtype)
        w = _arrays.workers(workers)
        if return_length:
            counts = self._native.count_within(q, radius, w) if len(q) else np.empty(0, np.int64)
            counts = counts.reshape(lead)
            return counts[()] if counts.ndim == 0 else counts
        if len(q) == 0:
            return np.empty(lead, dtype=object)
        order = "id" if return_sorted is None or return_sorted else "index"
        offsets, ids, _ = self._native.within(q, radius, order, None, w, distances=False)
        lists = _native.row_lists(offsets, ids).reshape(lead)
        return lists[()] if lists.ndim == 0 else lists

    def within(
        self,
        x: Any,
        r: float,
        *,
        sort: bool = True,
        distances: bool = True,
        max_results: Optional[int] = None,
        workers: Optional[int] = None,
    ) -> Within:
        """Every indexed point within distance ``r`` of each query point, as compressed rows:
        nearkit's own radius query, with no Python object per neighbour.

        Parameters
        ----------
        x : array_like, shape (n, 3) (or (..., 3): the rows are its points in C order)
            Query points; converted to the index's dtype.
        r : float
            The radius, inclusive and exact: a point is in when its squared distance,
            computed in the index's precision, is at most ``r * r`` (``r`` rounded to that
            precision first). ``inf`` means every point.
        sort : bool
            Rows ascending by (distance, id) (default); False leaves each row in the index's
            own order (faster; deterministic, the same on every device).
        distances : bool
            Return each neighbour's distance (default). False: ``distances`` is empty and the
            search keeps ids alone, which is faster (with ``sort=False`` most of all).
        max_results : int, optional
            Raise ValueError, before the rows are stored, when they would hold more than this
            many neighbours in all (a guard against a radius that is too large).
        workers : int
            Threads on the CPU: -1 or None (default) for every core.

        Returns
        -------
        Within
            ``(offsets, ids, distances)``: row ``k`` (query ``k``) lists
            ``ids[offsets[k]:offsets[k + 1]]``, int64 rows of ``data``, and their distances in
            the index's dtype. ``offsets`` has ``n + 1`` entries.

        Raises
        ------
        ValueError
            ``r`` negative or NaN, or more neighbours than ``max_results``.

        Examples
        --------
        >>> import numpy as np, nearkit
        >>> index = nearkit.PointIndex(np.array([[0, 0, 0], [1, 0, 0], [3, 0, 0]], dtype=np.float32))
        >>> w = index.within([[0.9, 0, 0], [3, 0, 0], [9, 9, 9]], r=1.0)
        >>> w.offsets
        array([0, 2, 3, 3])
        >>> w.ids                          # 1 (0.1 away), then 0 (0.9 away); 2 (itself)
        array([1, 0, 2])
        >>> w.distances.dtype
        dtype('float32')
        >>> w.counts(), w.row(1)
        (array([2, 1, 0]), (array([2]), array([0.], dtype=float32)))
        """
        q, _ = _arrays.points(x, "x", self.dtype, one_point=True)
        radius = _arrays.search_radius(r, "r", self.dtype)
        limit = _arrays.max_results(max_results)
        w = _arrays.workers(workers)
        if len(q) == 0:
            return Within(np.zeros(1, np.int64), np.empty(0, np.int64), np.empty(0, self.dtype))
        order = "distance" if sort else "index"
        return Within(*self._native.within(q, radius, order, limit, w, distances=bool(distances)))

    def count_within(self, x: Any, r: float, workers: Optional[int] = None) -> Any:
        """How many indexed points lie within distance ``r`` of each query point (inclusive,
        as :meth:`within`), counted without listing them: an int64 array of shape
        ``x.shape[:-1]`` (a scalar for one point of shape (3,)).

        >>> import nearkit
        >>> nearkit.PointIndex([[0, 0, 0], [1, 0, 0], [3, 0, 0]]).count_within([[0.9, 0, 0], [9, 9, 9]], 1.0)
        array([2, 0])
        """
        q, lead = _arrays.points(x, "x", self.dtype, one_point=True)
        radius = _arrays.search_radius(r, "r", self.dtype)
        w = _arrays.workers(workers)
        counts = self._native.count_within(q, radius, w) if len(q) else np.empty(0, np.int64)
        counts = counts.reshape(lead)
        return counts[()] if counts.ndim == 0 else counts

    def pairs_within(
        self,
        r: float,
        *,
        sort: bool = True,
        distances: bool = True,
        max_results: Optional[int] = None,
        workers: Optional[int] = None,
    ) -> Within:
        """Every pair of indexed points within distance ``r`` of each other, each pair once,
        as compressed rows: row ``i`` (one per indexed point) lists the points ``j > i``
        within ``r`` of point ``i``, ascending by (distance, j) unless ``sort=False``.
        ``r``, ``distances``, ``max_results`` and ``workers`` are as for :meth:`within`;
        duplicate points are pairs at distance 0.

        >>> import nearkit
        >>> w = nearkit.PointIndex([[0, 0, 0], [1, 0, 0], [0.5, 0, 0]]).pairs_within(0.6)
        >>> w.offsets.tolist(), w.ids.tolist(), w.distances.tolist()
        ([0, 1, 2, 2], [2, 2], [0.5, 0.5])
        """
        radius = _arrays.search_radius(r, "r", self.dtype)
        limit = _arrays.max_results(max_results)
        w = _arrays.workers(workers)
        order = "distance" if sort else "index"
        return Within(*self._native.pairs_within(None, radius, order, limit, w, distances=bool(distances)))

    def query_pairs(
        self,
        r: float,
        p: float = 2.0,
        eps: float = 0,
        output_type: str = "set",
        workers: Optional[int] = None,
    ) -> Union[Set[Tuple[int, int]], np.ndarray]:
        """Every pair of indexed points within distance ``r`` (inclusive), as
        ``cKDTree.query_pairs``.

        Parameters
        ----------
        r : float
            The radius, as for :meth:`within` (negative or NaN: ValueError).
        p, eps : float
            Accepted for compatibility: only ``p=2`` and ``eps=0`` are valid.
        output_type : str
            ``"set"``: a set of ``(i, j)`` tuples of ints with ``i < j``. ``"ndarray"``: an
            (n_pairs, 2) int64 array, ascending by ``i``, and for each ``i`` in the index's
            order, the same on every device (scipy gives no particular order either;
            :meth:`pairs_within` sorts rows by distance).
        workers : int
            Threads on the CPU: -1 or None (default) for every core (not in scipy).

        Examples
        --------
        >>> import nearkit
        >>> index = nearkit.PointIndex([[0, 0, 0], [1, 0, 0], [0.5, 0, 0], [9, 9, 9]])
        >>> sorted(index.query_pairs(0.6))
        [(0, 2), (1, 2)]
        >>> index.query_pairs(1.0, output_type="ndarray")[:, 0]
        array([0, 0, 1])
        """
        _exact_euclidean(eps, p)
        if output_type not in ("set", "ndarray"):
            raise ValueError(f"unknown output_type {output_type!r}: use 'set' or 'ndarray'")
        radius = _arrays.search_radius(r, "r", self.dtype)
        # Neither output promises an order within a row: rows stay in the index's (cheapest),
        # and no distance is kept.
        pairs = self._native.query_pairs(radius, _arrays.workers(workers))
        if output_type == "ndarray":
            return pairs
        return set(zip(pairs[:, 0].tolist(), pairs[:, 1].tolist()))

    def sparse_distance_matrix(
        self,
        other: Any,
        max_distance: float,
        p: float = 2.0,
        output_type: str = "dok_matrix",
        workers: Optional[int] = None,
    ) -> Any:
        """The distances of every pair of an indexed point and a point of ``other`` at most
        ``max_distance`` apart, as ``cKDTree.sparse_distance_matrix``.

        Parameters
        ----------
        other : PointIndex or array_like, shape (m, 3)
            The other points (an index's ``data``), converted to this index's dtype.
        max_distance : float
            The radius, inclusive, as for :meth:`within`.
        p : float
            Accepted for compatibility: only ``p=2`` is valid.
        output_type : str
            ``"dok_matrix"`` (default) or ``"coo_matrix"``: an (n, m) ``scipy.sparse``
            matrix (scipy must be installed); ``"dict"``: ``{(i, j): distance}``;
            ``"ndarray"``: a structured array with fields ``i``, ``j`` (int64) and ``v``.
            Entries come ascending by ``i``, then ``j``. Pairs at distance 0 (duplicates) are
            stored entries, as in scipy.
        workers : int
            Threads on the CPU: -1 or None (default) for every core (not in scipy).

        Returns
        -------
        The matrix, dict or array. Distances are in the index's dtype (scipy's are float64;
        ``"dict"`` gives Python floats).

        Examples
        --------
        >>> import nearkit
        >>> index = nearkit.PointIndex([[0, 0, 0], [1, 0, 0]])
        >>> index.sparse_distance_matrix([[0.5, 0, 0], [5, 0, 0]], 0.5, output_type="dict")
        {(0, 0): 0.5, (1, 0): 0.5}
        """
        _exact_euclidean(0, p)
        kinds = ("dok_matrix", "coo_matrix", "dict", "ndarray")
        if output_type not in kinds:
            raise ValueError(f"unknown output_type {output_type!r}: use one of {', '.join(kinds)}")
        if isinstance(other, PointIndex):
            o, _ = _arrays.points(other.data, "other", self.dtype)
        else:
            o, _ = _arrays.points(other, "other", self.dtype)
        radius = _arrays.search_radius(max_distance, "max_distance", self.dtype)
        w = _arrays.workers(workers)
        if len(o) == 0:
            offsets, j, v = np.zeros(self.n + 1, np.int64), np.empty(0, np.int64), np.empty(0, self.dtype)
        else:
            # Rows by id: scipy's entries come ascending by (i, j).
            offsets, j, v = self._native.pairs_within(o, radius, "id", None, w)
        i = np.repeat(np.arange(self.n, dtype=np.int64), np.diff(offsets))
        if output_type == "dict":
            return dict(zip(zip(i.tolist(), j.tolist()), v.tolist()))
        if output_type == "ndarray":
            out = np.empty(len(j), dtype=np.dtype([("i", np.intp), ("j", np.intp), ("v", self.dtype)], align=True))
            out["i"], out["j"], out["v"] = i, j, v
            return out
        import scipy.sparse  # optional: only these outputs need it

        coo = scipy.sparse.coo_matrix((v, (i, j)), shape=(self.n, len(o)))
        return coo.todok() if output_type == "dok_matrix" else coo

    def nearest(
        self, x: Any, max_distance: Optional[float] = None, workers: Optional[int] = -1
    ) -> Tuple[np.ndarray, np.ndarray]:
        """Each query point's nearest indexed point: ``(d, i)``, each of shape ``x.shape[:-1]``;
        ``inf`` and ``n`` where none lies within ``max_distance``. The same answer as
        ``query(x, k=1)``, by the nearest-neighbour search of closest pairs.

        >>> import nearkit
        >>> nearkit.PointIndex([[0, 0, 0], [2, 0, 0]]).nearest([[1.5, 0, 0], [0, 0, 9]])
        (array([0.5, 9. ]), array([1, 0]))
        """
        if _cuda.is_cuda(x):
            # Answered on the GPU in place (the GPU's nearest is its k = 1 search).
            r = math.inf if max_distance is None else max_distance
            return self.query(x, k=1, distance_upper_bound=r, workers=workers)
        q, lead = _arrays.points(x, "x", self.dtype, one_point=True)
        r = _arrays.radius(max_distance, "max_distance", self.dtype)
        if q.shape[0] == 0:
            return np.empty(lead, self.dtype), np.empty(lead, np.int64)
        d, i = self._native.nearest(q, r, _arrays.workers(workers))
        return d.reshape(lead), i.reshape(lead)

    def knn_graph(
        self, k: int = 8, max_distance: Optional[float] = None, workers: Optional[int] = -1
    ) -> Tuple[np.ndarray, np.ndarray]:
        """The kNN graph of the indexed points: each point's k nearest *other* points, ``(d, i)``
        of shape (n, k) (``inf`` and ``n`` where missing). A duplicate of a point is still its
        neighbour, at distance 0.

        >>> import nearkit
        >>> d, i = nearkit.PointIndex([[0, 0, 0], [1, 0, 0], [3, 0, 0]]).knn_graph(k=1)
        >>> i.ravel().tolist(), d.ravel().tolist()
        ([1, 0, 1], [1.0, 1.0, 2.0])
        """
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"k must be at least 1 (got {k!r})")
        r = _arrays.radius(max_distance, "max_distance", self.dtype)
        if _cuda.is_cuda(self._data):
            # Data indexed in place: the graph is computed there too, and stays there.
            rows = _cuda.rows(self._data, "data", self.dtype)
            keff = min(int(k), self.n - 1)
            if keff < 1:
                d, i = np.full((self.n, int(k)), np.inf, self.dtype), np.full((self.n, int(k)), self.n, np.int64)
                return _cuda.like(d, self._data), _cuda.like(i, self._data)
            result = self._native.query_cuda(rows.address, rows.len, rows.strides, keff, r, True)
            d, i = _cuda.knn_result(result, rows.array, self.n)
            return _cuda.pad_columns(d, i, int(k), self.n)
        _arrays.check_result_size(self.n, int(k), np.dtype(self.dtype).itemsize + 8, "the neighbour lists")
        return self._native.knn_graph(list(range(1, int(k) + 1)), r, _arrays.workers(workers))

    def closest_pairs(
        self,
        a: Any,
        k: int = 100,
        mode: str = "nearest-per-a",
        max_distance: Optional[float] = None,
        workers: Optional[int] = -1,
    ) -> Pairs:
        """The k closest pairs of a point of ``a`` and an indexed point (see
        :func:`nearkit.closest_pairs`); ``a`` is converted to the index's dtype."""
        q, _ = _arrays.points(a, "a", self.dtype)
        return _pairs(self._native, q, k, mode, max_distance, workers)


def _exact_euclidean(eps: float, p: float) -> None:
    """scipy's ``eps`` and ``p``, of which nearkit has only the exact Euclidean values."""
    if eps != 0:
        raise ValueError(f"nearkit's search is exact: eps must be 0, got {eps}")
    if p != 2:
        raise ValueError(f"nearkit measures Euclidean distance: p must be 2, got {p}")


def _pairs(native: Any, a: np.ndarray, k: int, mode: str, max_distance: Any, workers: Any) -> Pairs:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be at least 1 (got {k!r})")
    if mode not in ("nearest-per-a", "all-pairs"):
        raise ValueError(f"unknown pair mode {mode!r}: use 'nearest-per-a' or 'all-pairs'")
    r = _arrays.radius(max_distance, "max_distance", a.dtype)
    return Pairs(*native.closest_pairs(a, int(k), mode, r, _arrays.workers(workers)))


def closest_pairs(
    a: Any,
    b: Any,
    k: int = 100,
    mode: str = "nearest-per-a",
    max_distance: Optional[float] = None,
    device: str = "auto",
    workers: Optional[int] = -1,
) -> Pairs:
    """The k closest pairs between point sets ``a`` and ``b``, exact.

    Parameters
    ----------
    a, b : array_like, shape (n_a, 3) and (n_b, 3)
        The two sets. Both are computed in float64 if either is float64, else in float32.
    k : int
        How many pairs (fewer come back if there are fewer, or fewer within ``max_distance``).
    mode : str
        ``"nearest-per-a"``: each point of ``a`` paired with its nearest in ``b``, then the k
        closest of those (an ``a`` appears at most once, a ``b`` may repeat: "the closest enemy
        pairs"). ``"all-pairs"``: the k globally closest pairs (an ``a`` may repeat).
    max_distance : float, optional
        Only pairs at most this far apart.
    device : str
        As for :class:`PointIndex`; ``"auto"`` runs small problems (fewer than
        ``AUTO_CPU_BELOW`` points in all) on the CPU.

    Returns
    -------
    Pairs
        ``(a, b, distance)``: int64 row numbers into ``a`` and ``b``, and the distances,
        ascending (ties: smaller a, then smaller b).

    Examples
    --------
    >>> import nearkit
    >>> a = [[0, 0, 0], [10, 0, 0]]
    >>> b = [[1, 0, 0], [10, 0.5, 0]]
    >>> p = nearkit.closest_pairs(a, b, k=1)
    >>> p.a.tolist(), p.b.tolist(), p.distance.tolist()
    ([1], [1], [0.5])
    """
    aa = _arrays.float_array(a, "a")
    bb = _arrays.float_array(b, "b")
    dtype = np.result_type(aa.dtype, bb.dtype)
    qa, _ = _arrays.points(aa, "a", dtype)
    qb, _ = _arrays.points(bb, "b", dtype)
    if device == "auto" and qa.shape[0] + qb.shape[0] < _native.AUTO_CPU_BELOW:
        device = "cpu"
    native = _native.PointIndex(qb, device)
    return _pairs(native, qa, k, mode, max_distance, workers)
