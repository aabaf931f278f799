"""Arrays in GPU memory from other libraries: CuPy arrays, PyTorch tensors, and anything else
with ``__cuda_array_interface__`` (or DLPack on a CUDA device, through CuPy or PyTorch).
Their points are read in place on the GPU, and results come back as arrays of the caller's
library on the same device, with no trip through host memory."""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Tuple

import numpy as np

_KDL_CUDA = 2  # DLPack's device type of CUDA memory


def _interface(x: Any) -> Optional[dict]:
    try:
        return x.__cuda_array_interface__
    except (AttributeError, RuntimeError):
        return None


def is_cuda(x: Any) -> bool:
    """Whether `x` is an array in CUDA memory (numpy arrays and lists are not)."""
    if isinstance(x, (np.ndarray, list, tuple, float, int)):
        return False
    if _interface(x) is not None or _is_torch(x) and x.is_cuda:
        return True
    dev = getattr(x, "__dlpack_device__", None)
    if dev is not None:
        try:
            return dev()[0] == _KDL_CUDA
        except Exception:
            return False
    return False


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


class Rows(NamedTuple):
    """An (N, 3) float array in GPU memory as the native module takes it."""

    array: Any  # the array read (kept alive for the call)
    address: int
    len: int
    strides: Tuple[int, int]  # in elements
    dtype: np.dtype
    device: str  # "cuda:N"
    lead: Tuple[int, ...]  # the leading shape results take


def _as_library_array(x: Any) -> Any:
    """`x` as a CuPy array or PyTorch tensor (a DLPack-only array becomes one of them)."""
    if _is_torch(x):
        return x.detach() if x.requires_grad else x
    if type(x).__module__.startswith("cupy"):
        return x
    try:
        import cupy

        return cupy.asarray(x) if _interface(x) is not None else cupy.from_dlpack(x)
    except ImportError:
        pass
    import torch

    return torch.as_tensor(x, device="cuda") if _interface(x) is not None else torch.from_dlpack(x)


def _dtype_of(a: Any) -> np.dtype:
    if _is_torch(a):
        import torch

        table = {torch.float32: np.float32, torch.float64: np.float64, torch.float16: np.float16}
        if a.dtype in table:
            return np.dtype(table[a.dtype])
        if a.dtype.is_floating_point:
            return np.dtype(np.float64)
        if a.dtype == torch.bool or a.dtype.is_complex:
            return np.dtype(object)
        return np.dtype(np.int64)
    return np.dtype(a.dtype)


def _astype(a: Any, dtype: np.dtype) -> Any:
    if _is_torch(a):
        import torch

        return a.to(torch.float32 if dtype == np.float32 else torch.float64)
    return a.astype(dtype)


def _ordinal(a: Any) -> int:
    if _is_torch(a):
        return a.device.index or 0
    return int(a.device.id)


def rows(x: Any, name: str, dtype: Optional[np.dtype] = None, one_point: bool = False) -> Rows:
    """A CUDA array of points as rows the native module reads in place: floats keep their
    precision, integers become float64 (as from numpy), `dtype` wins; converted on the GPU
    where needed. With `one_point`, any shape (..., 3) is taken, like the host queries."""
    a = _as_library_array(x)
    have = _dtype_of(a)
    if have.kind not in "fiu":
        raise TypeError(f"{name} must be an array of numbers, got dtype {have}")
    want = dtype if dtype is not None else (have if have in (np.float32, np.float64) else np.dtype(np.float64))
    if have.kind in "iu" and a.size and (int(a.max()) > 2**53 or int(a.min()) < -(2**53)):
        raise ValueError(
            f"{name} holds integers beyond 2^53, which float64 cannot hold exactly: "
            "convert them to floats yourself if rounding is acceptable"
        )
    if have != want:
        a = _astype(a, want)
    shape = tuple(a.shape)
    if one_point and len(shape) >= 1 and shape[-1] == 3:
        lead = shape[:-1]
        a = a.reshape(-1, 3)
    elif len(shape) != 2 or shape[1] != 3:
        need = "(N, 3), or (3,) for one point" if one_point else "(N, 3)"
        raise ValueError(f"{name} has shape {shape}; it must be {need}")
    else:
        lead = shape[:1]
    item = np.dtype(want).itemsize
    cai = _interface(a)
    strides = cai.get("strides")
    if strides is None:
        strides = (3 * item, item)
    if any(s % item for s in strides):
        a = a.contiguous() if _is_torch(a) else a.copy()
        cai, strides = _interface(a), (3 * item, item)
    element_strides = (strides[0] // item, strides[1] // item)
    return Rows(a, int(cai["data"][0]), int(a.shape[0]), element_strides, np.dtype(want), f"cuda:{_ordinal(a)}", lead)


class _View:
    """One array of a native GPU result, as ``__cuda_array_interface__``; holds the result."""

    def __init__(self, owner: Any, interface: dict) -> None:
        self._owner = owner
        self.__cuda_array_interface__ = interface


def knn_result(result: Any, like: Any, n: int) -> Tuple[Any, Any]:
    """A native kNN result as (distances, int64 ids) in the library of `like` (a CuPy array
    or a PyTorch tensor), missing neighbours as (inf, n), as the host queries give them."""
    ids_if, d_if = result.interfaces()
    if _is_torch(like):
        import torch

        dev = like.device
        d = torch.as_tensor(_View(result, d_if), device=dev)
        raw = torch.as_tensor(_View(result, ids_if), device=dev).to(torch.int64) & 0xFFFFFFFF
        i = torch.where(raw == 0xFFFFFFFF, torch.full_like(raw, n), raw)
        return d, i
    import cupy

    d = cupy.asarray(_View(result, d_if))
    raw = cupy.asarray(_View(result, ids_if)).astype(cupy.int64) & 0xFFFFFFFF
    i = cupy.where(raw == 0xFFFFFFFF, n, raw)
    return d, i


def to_host(x: Any) -> np.ndarray:
    """A CUDA array copied to a numpy array (for the queries that run from host memory)."""
    a = _as_library_array(x)
    if _is_torch(a):
        return a.cpu().numpy()
    import cupy

    return cupy.asnumpy(a)


def like(value: Any, ref: Any) -> Any:
    """A numpy result as an array of `ref`'s library on `ref`'s device."""
    a = _as_library_array(ref)
    if _is_torch(a):
        import torch

        return torch.as_tensor(np.ascontiguousarray(value), device=a.device)
    import cupy

    with cupy.cuda.Device(_ordinal(a)):
        return cupy.asarray(value)


def take_columns(a: Any, cols: Any) -> Any:
    """Columns `cols` (a list) of a 2-D CuPy array or PyTorch tensor."""
    if _is_torch(a):
        import torch

        return a[:, torch.as_tensor(cols, device=a.device)]
    return a[:, cols]


def pad_columns(d: Any, i: Any, m: int, n: int) -> Tuple[Any, Any]:
    """(distances, ids) widened to `m` columns with (inf, n)."""
    extra = m - d.shape[1]
    if extra <= 0:
        return d, i
    if _is_torch(d):
        import torch

        dd = torch.full((d.shape[0], extra), float("inf"), dtype=d.dtype, device=d.device)
        ii = torch.full((i.shape[0], extra), n, dtype=i.dtype, device=i.device)
        return torch.cat([d, dd], 1), torch.cat([i, ii], 1)
    import cupy

    dd = cupy.full((d.shape[0], extra), np.inf, dtype=d.dtype)
    ii = cupy.full((i.shape[0], extra), n, dtype=i.dtype)
    return cupy.concatenate([d, dd], 1), cupy.concatenate([i, ii], 1)
