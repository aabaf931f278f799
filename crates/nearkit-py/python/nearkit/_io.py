"""read_points and read_mesh: the command's file readers."""

from __future__ import annotations

import errno
import os
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np

from . import _native

PathLike = Union[str, "os.PathLike[str]"]


def _dtype_name(dtype: Any) -> str:
    d = np.dtype(dtype)
    if d not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64, got {d}")
    return d.name


def _check_exists(path: PathLike) -> str:
    p = os.fspath(path)
    if not os.path.exists(p):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), p)
    return p


def read_points(
    path: PathLike, dtype: Any = np.float64, columns: Optional[Sequence[Union[str, int]]] = None
) -> np.ndarray:
    """Reads a point file as the ``nearkit`` command does, choosing the format by extension:
    ``.csv`` (x,y,z; header optional), ``.npy`` (N×3 float32/float64/int32/int64), ``.ply``,
    ``.off``, ``.obj``, ``.stl`` (a mesh's vertices), ``.xyz``/``.txt``.

    Parameters
    ----------
    path : str or path-like
    dtype : float32 or float64
        The precision to read into (values that do not fit float32 are an error).
    columns : three names or indices, optional
        CSV only: which columns hold x, y and z (``["lon", "lat", "h"]`` or ``[2, 3, 4]``).

    Returns
    -------
    ndarray, shape (n, 3)

    Raises
    ------
    FileNotFoundError, or OSError naming the file and the line or row of a problem.
    """
    p = _check_exists(path)
    cols = None
    if columns is not None:
        cols = [str(c) for c in columns]
        if len(cols) != 3:
            raise ValueError(f"columns needs three names or indices (x, y, z), got {len(cols)}")
    return _native.read_points(p, _dtype_name(dtype), cols)


def read_mesh(path: PathLike, dtype: Any = np.float64) -> Tuple[np.ndarray, np.ndarray]:
    """Reads a triangle mesh (``.ply``, ``.off``, ``.obj``, ``.stl``; polygons are split into
    triangles) as ``(vertices, faces)``: (v, 3) of ``dtype`` and (f, 3) int64, ready for
    :class:`nearkit.MeshIndex` or :meth:`nearkit.World.set_mesh`."""
    p = _check_exists(path)
    return _native.read_mesh(p, _dtype_name(dtype))
