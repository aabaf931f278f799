"""Input checks and conversions shared by every class: what the native module takes is
always a float32 or float64 (N, 3) array in native byte order, with validated options."""

from __future__ import annotations

import math
import os
from typing import Any, Optional, Tuple

import numpy as np

from . import _cuda

# Integers beyond this are not all exact in float64.
_EXACT_INT = 2**53


def float_array(x: Any, name: str, dtype: Optional[np.dtype] = None) -> np.ndarray:
    """`x` as a float32 or float64 array: floats keep their precision, integers become
    float64 (as the command reads integer .npy files), `dtype` (if given) wins. A CUDA array
    (CuPy, PyTorch) is copied to host memory: the queries that read them in place do so
    before this."""
    if _cuda.is_cuda(x):
        x = _cuda.to_host(x)
    a = np.asarray(x)
    kind = a.dtype.kind
    if a.dtype not in (np.float32, np.float64):
        if kind in "iu":
            if a.size and (int(a.max()) > _EXACT_INT or int(a.min()) < -_EXACT_INT):
                raise ValueError(
                    f"{name} holds integers beyond 2^53, which float64 cannot hold exactly: "
                    "convert them to floats yourself if rounding is acceptable"
                )
            a = a.astype(np.float64)
        elif kind == "f":  # float16, longdouble
            a = a.astype(np.float64)
        else:
            raise TypeError(f"{name} must be an array of numbers, got dtype {a.dtype}")
    if dtype is not None and a.dtype != dtype:
        a = _narrowed(a, dtype, name) if a.dtype.itemsize > np.dtype(dtype).itemsize else a.astype(dtype)
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    # A field of a structured array (or any view whose steps are not whole items) is read as
    # plain rows by the native code: copy it into a regular layout first.
    if not a.flags.aligned or any(st % a.itemsize for st in a.strides):
        a = np.array(a, order="C")
    return a


def _narrowed(a: np.ndarray, dtype: np.dtype, name: str) -> np.ndarray:
    """`a` (float64) in `dtype` (float32), refusing values it would turn into infinities or
    into 0: rounding to nothing would make distinct points equal (as the command refuses)."""
    with np.errstate(over="ignore"):
        b = a.astype(dtype)
    lost = (np.isinf(b) & np.isfinite(a)) | ((b == 0) & (a != 0))
    if lost.any():
        at = np.unravel_index(int(np.argmax(lost)), a.shape)
        v = float(a[at])
        what = "which float32 rounds to 0" if b[at] == 0 else f"which float32 cannot hold (largest {np.finfo(dtype).max:.7g})"
        raise ValueError(f"{name}{[int(i) for i in at]} is {v:g}, {what}: use float64 (an index built from float64 data)")
    return b


def points(
    x: Any, name: str, dtype: Optional[np.dtype] = None, one_point: bool = False
) -> Tuple[np.ndarray, Tuple[int, ...]]:
    """`x` as (N, 3) float rows and the leading shape to give results. With `one_point`, any
    shape (..., 3) is accepted, like scipy's queries: (3,) is one point, with leading shape ()."""
    a = float_array(x, name, dtype)
    if one_point and a.ndim >= 1 and a.shape[-1] == 3:
        lead = a.shape[:-1]
        return a.reshape(-1, 3), lead
    if a.ndim != 2 or a.shape[1] != 3:
        want = "(N, 3), or (3,) for one point" if one_point else "(N, 3)"
        raise ValueError(f"{name} has shape {a.shape}; it must be {want}")
    return a, a.shape[:1]


def check_result_size(rows: int, per_row: int, bytes_each: int, what: str) -> None:
    """A MemoryError, before anything is made, where a result of `rows` × `per_row` values
    of `bytes_each` bytes cannot fit this machine's memory (as numpy raises one)."""
    need = rows * per_row * bytes_each
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        total = 2**63
    if need > total:
        raise MemoryError(
            f"{what} take {need / 2**30:.1f} GiB ({rows} rows of {per_row}), more than this machine's "
            f"memory ({total / 2**30:.1f} GiB): ask for fewer"
        )


def uint32(v: Any, name: str, lo: int = 0, hi: int = 2**32 - 1) -> int:
    """An int argument in [lo, hi] (a ValueError naming it otherwise; a TypeError for
    non-integers), as the native module takes unsigned 32-bit values."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {v!r}")
    if not lo <= int(v) <= hi:
        raise ValueError(f"{name} must be from {lo} to {hi}, got {v}")
    return int(v)


def workers(w: Optional[int]) -> int:
    """scipy's `workers`: -1 or None for every core, else a positive thread count (0 here
    means the global pool)."""
    if w is None or w == -1:
        return 0
    if isinstance(w, (int, np.integer)) and not isinstance(w, bool) and w >= 1:
        # More threads than cores never helps, and each size keeps a pool of its own.
        return min(int(w), os.cpu_count() or 1)
    raise ValueError(f"workers must be -1 (every core) or a positive number of threads, got {w!r}")


def number(v: Any, name: str) -> float:
    """A real number given as one (a string is not: float() would read it)."""
    if isinstance(v, (str, bytes)) or np.ndim(v) != 0:
        raise TypeError(f"{name} must be a number, got {v!r}")
    try:
        return float(v)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, got {v!r}") from None


def radius(r: Optional[float], name: str, dtype: Optional[np.dtype] = None) -> Optional[float]:
    """A distance bound: None or inf means none, and so does one beyond `dtype`'s range (no
    distance in it is larger); otherwise a finite number >= 0."""
    if r is None:
        return None
    r = number(r, name)
    if r == math.inf:
        return None
    if not (r >= 0 and math.isfinite(r)):
        raise ValueError(f"{name} must be a number >= 0 (or inf for no bound), got {r}")
    if dtype is not None and r > float(np.finfo(dtype).max):
        return None
    return r


def search_radius(r: Any, name: str, dtype: np.dtype) -> float:
    """A radius query's radius: one number >= 0. inf, or anything beyond the dtype's range,
    means every point: it is passed as the dtype's largest number, whose square overflows
    to inf (the library itself takes finite radii only)."""
    if np.ndim(r) != 0:
        raise ValueError(
            f"{name} must be a single number: a radius per query point is not supported (got shape {np.shape(r)})"
        )
    v = number(r, name)
    if not v >= 0:  # NaN too
        raise ValueError(f"{name} must be a number >= 0 (inf for every point), got {v}")
    return min(v, float(np.finfo(dtype).max))


def max_results(m: Any) -> Optional[int]:
    """A limit on a radius query's result: None, or an int >= 0."""
    if m is None:
        return None
    if isinstance(m, (int, np.integer)) and not isinstance(m, bool) and m >= 0:
        return min(int(m), 2**64 - 1)
    raise ValueError(f"max_results must be None or an int >= 0, got {m!r}")


def ids(x: Any, name: str) -> np.ndarray:
    """Body ids (or vertex indices) as uint32, checked."""
    a = np.asarray(x)
    if a.size == 0 and a.dtype.kind == "f":
        a = a.astype(np.int64)  # [] is an empty list of ids, not of numbers
    if a.dtype.kind not in "iu":
        raise TypeError(f"{name} must be integers, got dtype {a.dtype}")
    if a.size and (int(a.min()) < 0 or int(a.max()) >= 2**32 - 1):
        bad = int(a.min()) if int(a.min()) < 0 else int(a.max())
        raise ValueError(f"{name} holds {bad}; ids and indices are 0-based and below 2^32 - 1")
    return np.ascontiguousarray(a, dtype=np.uint32)


def faces(f: Any) -> np.ndarray:
    """Triangles as an (F, 3) uint32 array of 0-based vertex indices."""
    a = ids(f, "faces")
    if a.ndim != 2 or a.shape[1] != 3:
        raise ValueError(f"faces has shape {a.shape}; it must be (F, 3): three vertex indices per triangle")
    return a
