"""PointIndex (scipy.spatial.cKDTree's query conventions) and closest_pairs."""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _arrays, _native


class Pairs(NamedTuple):
    """Closest pairs, ascending by distance (ties: smaller a, then smaller b). ``a[i]`` is a
    row of the query set, ``b[i]`` a row of the indexed set (int64 arrays); ``distance[i]``
    their Euclidean distance, in the working precision. Unpacks as ``a, b, d = pairs``."""

    a: np.ndarray
    b: np.ndarray
    distance: np.ndarray


class PointIndex:
    """An exact index of 3-D points for nearest-neighbour queries, on the CPU or a GPU.

    A drop-in for ``scipy.spatial.cKDTree`` where the two overlap (``query`` takes the same
    arguments and returns the same shapes), plus nearkit's own queries: ``nearest``,
    ``knn_graph`` and ``closest_pairs``. Answers are exact, ties go to the smaller id, and the
    CPU and a GPU give the same bits.

    Parameters
    ----------
    data : array_like, shape (n, 3)
        The points. float32 is indexed and queried in float32, float64 in float64 (no upcast);
        integers become float64 (exactly, up to 2^53). Any memory order is accepted.
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
    def data(self) -> np.ndarray:
        """The indexed points, (n, 3), in the index's dtype."""
        return self._data

    @property
    def dtype(self) -> np.dtype:
        """float32 or float64: the precision of the index, its queries and its distances."""
        return self._data.dtype

    @property
    def device(self) -> str:
        """What the index runs on, e.g. ``cpu (16 threads)``."""
        return self._native.device

    def __len__(self) -> int:
        return self.n

    def __repr__(self) -> str:
        return f"PointIndex(n={self.n}, dtype={self.dtype}, device={self.device!r})"

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
            Query points; converted to the index's dtype.
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
        if eps != 0:
            raise ValueError(f"nearkit's search is exact: eps must be 0, got {eps}")
        if p != 2:
            raise ValueError(f"nearkit measures Euclidean distance: p must be 2, got {p}")
        if isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            if k < 1:
                raise ValueError(f"k must be at least 1 (got {k})")
            ranks = list(range(1, int(k) + 1))
            squeeze = k == 1
        else:
            ranks = [int(r) for r in np.asarray(k).ravel()]
            if not ranks or any(r < 1 for r in ranks) or not np.issubdtype(np.asarray(k).dtype, np.integer):
                raise ValueError(f"k must be a positive int or a sequence of 1-based ranks, got {k!r}")
            squeeze = False
        q, lead = _arrays.points(x, "x", self.dtype, one_point=True)
        bound = _arrays.radius(distance_upper_bound, "distance_upper_bound")
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
            return d[()], i[()]
        return d, i

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
        q, lead = _arrays.points(x, "x", self.dtype, one_point=True)
        r = _arrays.radius(max_distance, "max_distance")
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
        r = _arrays.radius(max_distance, "max_distance")
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


def _pairs(native: Any, a: np.ndarray, k: int, mode: str, max_distance: Any, workers: Any) -> Pairs:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be at least 1 (got {k!r})")
    if mode not in ("nearest-per-a", "all-pairs"):
        raise ValueError(f"unknown pair mode {mode!r}: use 'nearest-per-a' or 'all-pairs'")
    r = _arrays.radius(max_distance, "max_distance")
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
