"""nearkit: exact 3-D proximity queries on multi-core CPUs and CUDA GPUs, with bitwise
identical answers on both.

- :class:`PointIndex`: k nearest neighbours and radius queries with scipy ``cKDTree``'s
  conventions, nearest neighbours, kNN graphs, radius queries as compressed rows
  (:class:`Within`); :func:`closest_pairs` between two point sets.
- :class:`ShardedIndex`: one point set cut across several GPUs, for nearest neighbours on
  all of them at once.
- :class:`MeshIndex`: closest points on a triangle mesh, signed distances.
- :class:`World` and :class:`Collider`: ellipsoid bodies against a static mesh and each other.
- :func:`read_points`, :func:`read_mesh`: the ``nearkit`` command's file readers.

Arrays in, arrays out: float32 is computed in float32 and float64 in float64; integers become
float64. ``device="auto"`` uses a GPU when one is usable (one CUDA context per process, made on
first use and kept) and the CPU for calls too small to be worth a GPU round trip.

>>> import numpy as np, nearkit
>>> rng = np.random.default_rng(1)
>>> data, queries = rng.random((10_000, 3)), rng.random((100, 3))
>>> d, i = nearkit.PointIndex(data).query(queries, k=8)
>>> d.shape, i.shape
((100, 8), (100, 8))
"""

from __future__ import annotations

import os
from typing import List, Optional, Tuple

from . import _native
from ._collide import (
    CONTACT_BODY,
    CONTACT_DTYPE,
    CONTACT_HEIGHTFIELD,
    CONTACT_INSTANCE,
    CONTACT_TRIANGLE,
    Collider,
    OverlapHits,
    RayHits,
    SweepHits,
    World,
    heightfield_mesh,
)
from ._io import read_mesh, read_points
from ._mesh import ClosestPoints, MeshIndex
from ._points import Pairs, PointIndex, Within, closest_pairs
from ._sharded import ShardedIndex

__all__ = [
    "AUTO_CPU_BELOW",
    "CONTACT_BODY",
    "CONTACT_DTYPE",
    "CONTACT_HEIGHTFIELD",
    "CONTACT_INSTANCE",
    "CONTACT_TRIANGLE",
    "ClosestPoints",
    "Collider",
    "MeshIndex",
    "OverlapHits",
    "RayHits",
    "Pairs",
    "PointIndex",
    "ShardedIndex",
    "SweepHits",
    "Within",
    "World",
    "closest_pairs",
    "configure_cuda",
    "cuda_available",
    "cuda_device_count",
    "device_info",
    "heightfield_mesh",
    "kernel_images",
    "read_mesh",
    "read_points",
]

#: With ``device="auto"`` and a GPU, calls with fewer query points than this run on the CPU.
AUTO_CPU_BELOW: int = _native.AUTO_CPU_BELOW


def configure_cuda(
    cccl_include: Optional[str] = None,
    kernel_cache: Optional[str] = None,
    chunk_points: Optional[int] = None,
    profile: Optional[bool] = None,
) -> None:
    """Where the CUDA backend finds CUB's headers (the toolkit's ``include/cccl``, which NVRTC
    needs to compile the kernels), where it keeps compiled kernels, how many query points go
    to the GPU at a time, and whether GPU calls print the time of each phase to stderr
    (``profile``: the GPU waits between phases, so only for finding where time goes). Call it
    before the first GPU use in the process (a RuntimeError after). On import, nearkit sets these from the variables the command reads, where set:
    ``NEARKIT_CCCL_INCLUDE`` (else ``$CUDA_HOME/include/cccl``) and ``NEARKIT_CACHE_DIR``."""
    _native.configure_cuda(cccl_include, kernel_cache, chunk_points, profile)


def device_info(device: str = "auto") -> Tuple[str, Optional[str]]:
    """``(description, note)`` of a device, opening it if not yet open: what it runs on, e.g.
    ``"cuda:0 (NVIDIA H100, sm_90)"``, and for ``"auto"`` on the CPU why not a GPU.
    An explicit ``"cuda"`` that is not usable raises RuntimeError saying why."""
    return _native.device_info(device)


def kernel_images() -> List[Tuple[str, str, int]]:
    """The CUDA kernels compiled into this package when it was built: ``(module, target,
    bytes)`` per image, the target ``"sm_XY"`` (a cubin) or ``"compute_XY"`` (PTX, which the
    driver translates for newer GPUs). With them a GPU needs only the NVIDIA driver, and the
    first query loads its kernels in milliseconds. Empty when the package was built without
    NVRTC: the kernels are then compiled at their first use, which needs the CUDA toolkit."""
    return _native.kernel_images()


def cuda_device_count() -> int:
    """How many CUDA GPUs this process can see (``CUDA_VISIBLE_DEVICES`` applies); 0 without the
    NVIDIA driver. Opens none of them (no context, no GPU memory): for choosing devices, e.g.
    one worker per GPU (:func:`nearkit.dask.gpu_cluster`)."""
    return _native.cuda_device_count()


_cuda: Optional[bool] = None


def cuda_available() -> bool:
    """Whether a CUDA GPU is usable here: the driver, and kernels for it (compiled into the
    package, see :func:`kernel_images`, or NVRTC and CUB's headers to compile them); tried once."""
    global _cuda
    if _cuda is None:
        try:
            _native.device_info("cuda")
            _cuda = True
        except RuntimeError:
            _cuda = False
    return _cuda


def _configure_from_environment() -> None:
    # The command's variables, so that a machine set up for it works here too; the Rust
    # library itself reads no environment.
    include = os.environ.get("NEARKIT_CCCL_INCLUDE")
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if include is None and home:
        include = os.path.join(home, "include", "cccl")
    cache = os.environ.get("NEARKIT_CACHE_DIR")
    if include or cache:
        _native.configure_cuda(include, cache, None, None)


_configure_from_environment()
