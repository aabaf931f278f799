"""ShardedIndex: one point set cut by space across several GPUs of one host."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _arrays, _native

Rows = Union[np.ndarray, Sequence[np.ndarray]]


def _pieces(x: Rows, name: str, dtype: Optional[np.dtype] = None) -> List[np.ndarray]:
    """`x` (one (n, 3) array, or a list of them read one after another) as C-contiguous,
    aligned float rows of one dtype: float64 if any piece is, else float32 (or `dtype` if given)."""
    parts = [x] if not isinstance(x, (list, tuple)) else list(x)
    arrays = [_arrays.points(p, name)[0] for p in parts]
    if dtype is None:
        dtype = np.float32 if arrays and all(a.dtype == np.float32 for a in arrays) else np.float64
    # Aligned too: arrays that come over the wire (Dask's frames) may start at any byte.
    return [np.require(a, dtype=dtype, requirements=["C_CONTIGUOUS", "ALIGNED"]) for a in arrays]


class ShardedIndex:
    """A point set cut by space across several GPUs of one host, each holding one cell (a
    range of the Morton curve with an equal share of the points), for each query's nearest
    point on all the GPUs at once. Answers are bitwise those of
    ``PointIndex(data).nearest(queries)``: ties to the smaller row, ``inf`` and ``n`` where
    none lies within ``max_distance``.

    Parameters
    ----------
    data : (n, 3) array, or a list of them (one set, read one after another: a Dask
        array's chunks, with no copy joining them). float32 stays float32; any float64
        piece makes it float64.
    devices : "all" or a list of GPU numbers
        The GPUs to cut the set across (a number may repeat, for tests on one GPU).

    >>> import numpy as np, nearkit
    >>> rng = np.random.default_rng(0)
    >>> data, queries = rng.random((10**6, 3), np.float32), rng.random((10**6, 3), np.float32)
    >>> index = nearkit.ShardedIndex(data, devices="all")  # doctest: +SKIP
    >>> d, i = index.nearest(queries)                      # doctest: +SKIP
    """

    def __init__(self, data: Rows, devices: Union[str, Sequence[int]] = "all"):
        if isinstance(devices, str):
            if devices != "all":
                raise ValueError(f"devices must be 'all' or a list of GPU numbers, got {devices!r}")
            count = _native.cuda_device_count()
            if count == 0:
                raise RuntimeError("a ShardedIndex needs CUDA GPUs, and this process sees none")
            devices = list(range(count))
        devices = [int(d) for d in devices]
        if not devices or any(d < 0 for d in devices):
            raise ValueError(f"devices must list GPU numbers >= 0, got {devices!r}")
        self._native = _native.ShardedIndex(_pieces(data, "data"), devices)

    @property
    def n(self) -> int:
        """The number of indexed points."""
        return self._native.n

    @property
    def dtype(self) -> np.dtype:
        """float32 or float64."""
        return np.dtype(self._native.dtype)

    @property
    def devices(self) -> List[str]:
        """The GPUs the index spans."""
        return self._native.devices

    def __len__(self) -> int:
        return self.n

    def nearest(self, x: Rows, max_distance: Optional[float] = None) -> Tuple[np.ndarray, np.ndarray]:
        """Each query row's nearest indexed point: ``(d, i)``, 1-D arrays over the rows of
        ``x`` (one array, or a list read one after another), in the index's dtype."""
        bound = _arrays.radius(max_distance, "max_distance", self.dtype)
        return self._native.nearest(_pieces(x, "x", self.dtype), bound)
