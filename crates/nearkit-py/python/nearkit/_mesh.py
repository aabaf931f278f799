"""MeshIndex: closest points and signed distances on a triangle mesh."""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Tuple

import numpy as np

from . import _arrays, _native


class ClosestPoints(NamedTuple):
    """Per query point: ``distance`` (the index's dtype), ``point`` (its closest point on the
    mesh, (..., 3)), ``triangle`` (int64 row of ``faces``) and ``barycentric`` ((..., 3):
    ``point = u*A + v*B + w*C`` for the triangle's corners in ``faces`` order). A query with no
    triangle within ``max_distance`` has distance ``inf``, triangle ``len(faces)`` and NaN
    point and barycentric coordinates."""

    distance: np.ndarray
    point: np.ndarray
    triangle: np.ndarray
    barycentric: np.ndarray


def _mesh_index(vertices: Any, faces: Any, device: str) -> "MeshIndex":
    return MeshIndex(vertices, faces, device=device)


class MeshIndex:
    """A triangle mesh indexed for exact closest-point queries, on the CPU or a GPU.

    Parameters
    ----------
    vertices : array_like, shape (v, 3)
        Corners; float32 is queried in float32, float64 in float64, integers become float64.
    faces : array_like of ints, shape (f, 3)
        Each triangle's three 0-based vertex indices. Degenerate triangles are allowed.
    device : str
        ``"auto"``, ``"cpu"``, ``"cuda"`` or ``"cuda:N"``, as for :class:`nearkit.PointIndex`.

    Examples
    --------
    >>> import numpy as np, nearkit
    >>> square = nearkit.MeshIndex([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]],
    ...                            [[0, 1, 2], [0, 2, 3]])
    >>> cp = square.closest_point([[0.25, 0.5, 2.0], [3.0, 0.5, 0.0]])
    >>> cp.distance
    array([2., 2.])
    >>> cp.point
    array([[0.25, 0.5 , 0.  ],
           [1.  , 0.5 , 0.  ]])
    >>> cp.triangle
    array([1, 0])
    """

    def __init__(self, vertices: Any, faces: Any, *, device: str = "auto") -> None:
        self._asked = device
        self._vertices, _ = _arrays.points(vertices, "vertices")
        self._faces = _arrays.faces(faces)
        self._native = _native.MeshIndex(self._vertices, self._faces, device)

    @property
    def vertices(self) -> np.ndarray:
        """The corners, (v, 3), in the index's dtype."""
        return self._vertices

    @property
    def faces(self) -> np.ndarray:
        """The triangles, (f, 3) uint32."""
        return self._faces

    @property
    def dtype(self) -> np.dtype:
        """float32 or float64: the precision of queries and results."""
        return self._vertices.dtype

    @property
    def device(self) -> str:
        """What the index runs on."""
        return self._native.device

    def __repr__(self) -> str:
        return (
            f"MeshIndex(vertices={len(self._vertices)}, faces={len(self._faces)}, "
            f"dtype={self.dtype}, device={self.device!r})"
        )

    def __reduce__(self) -> Tuple[Any, ...]:
        # Pickled as its mesh and the device asked for; the index is built again where loaded.
        return (_mesh_index, (self._vertices, self._faces, self._asked))

    def closest_point(
        self, x: Any, max_distance: Optional[float] = None, workers: Optional[int] = -1
    ) -> ClosestPoints:
        """Each query point's closest point on the mesh, exact (the brute-force minimum over
        every triangle; ties to the smaller triangle id).

        Parameters
        ----------
        x : array_like, shape (..., 3)
            Query points, converted to the index's dtype.
        max_distance : float, optional
            Only triangles at most this far; others count as missing (see ClosestPoints).
        workers : int
            Threads on the CPU: -1 (default) or None for every core.

        Returns
        -------
        ClosestPoints
            ``(distance, point, triangle, barycentric)``, shaped by ``x.shape[:-1]``.
        """
        q, lead = _arrays.points(x, "x", self.dtype, one_point=True)
        r = _arrays.radius(max_distance, "max_distance", self.dtype)
        if q.shape[0] == 0:
            d, p, t, b = (np.empty(0, self.dtype), np.empty((0, 3), self.dtype),
                          np.empty(0, np.int64), np.empty((0, 3), self.dtype))
        else:
            d, p, t, b = self._native.closest_point(q, r, _arrays.workers(workers))
        return ClosestPoints(d.reshape(lead), p.reshape(lead + (3,)), t.reshape(lead), b.reshape(lead + (3,)))

    def signed_distance(
        self, x: Any, max_distance: Optional[float] = None, workers: Optional[int] = -1
    ) -> np.ndarray:
        """Each query point's signed distance to the mesh: negative inside, by the
        angle-weighted pseudo-normal of the closest feature. The mesh must be closed and
        consistently oriented (a ValueError says where it is not).

        >>> import nearkit
        >>> tetra = nearkit.MeshIndex([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]],
        ...                           [[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]])
        >>> tetra.signed_distance([[0.1, 0.1, 0.1], [0.0, 0.0, -2.0]]).round(3)
        array([-0.1,  2. ])
        """
        q, lead = _arrays.points(x, "x", self.dtype, one_point=True)
        r = _arrays.radius(max_distance, "max_distance", self.dtype)
        if q.shape[0] == 0:
            return np.empty(lead, self.dtype)
        return self._native.signed_distance(q, r, _arrays.workers(workers)).reshape(lead)
