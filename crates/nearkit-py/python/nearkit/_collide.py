"""World and Collider: ellipsoid bodies against a static triangle mesh, a heightfield terrain
and each other."""

from __future__ import annotations

import functools
import threading
from typing import Any, NamedTuple, Optional, Tuple

import numpy as np

from . import _arrays, _native

#: What ``Collider.contacts`` returns: one record per overlap, sorted by body, then a body's
#: mesh triangles, heightfield triangles, bodies and instances' triangles, each by id.
#: ``kind`` is ``CONTACT_TRIANGLE`` (``other`` is a triangle of the mesh),
#: ``CONTACT_HEIGHTFIELD`` (a triangle of the heightfield; see :meth:`World.set_heightfield`),
#: ``CONTACT_BODY`` (``other`` is a body; each pair once, ``body`` the smaller id) or
#: ``CONTACT_INSTANCE`` (``other`` is an instance, ``triangle`` its shape's triangle; see
#: :meth:`World.add_instances`). ``triangle`` is the triangle touched in its own mesh (-1 for a
#: body). ``normal`` (unit) moves ``body`` out by ``depth``; ``point`` is in world coordinates.
CONTACT_DTYPE = np.dtype(
    {
        "names": ["body", "kind", "other", "depth", "normal", "triangle", "point"],
        "formats": ["=u4", "u1", "=u4", "=f4", ("=f4", (3,)), "=i4", ("=f8", (3,))],
        "offsets": [0, 4, 8, 12, 16, 28, 32],
        "itemsize": _native.CONTACT_RECORD_SIZE,
    }
)
CONTACT_TRIANGLE = 0
CONTACT_BODY = 1
CONTACT_HEIGHTFIELD = 2
CONTACT_INSTANCE = 3

_IDENTITY = np.array([0.0, 0.0, 0.0, 1.0])
_ALL_LAYERS = 0xFFFFFFFF


class SweepHits(NamedTuple):
    """Per sweep: ``hit`` (bool), ``toi`` (time of impact, 0 to 1 along the sweep; inf for a
    miss), ``other`` (int64: the triangle or body touched; -1 for a miss), ``point`` and
    ``normal`` ((n, 3); the unit normal that pushes the sweeping body back; NaN for a miss),
    ``kind`` (int8: ``CONTACT_TRIANGLE``, ``CONTACT_HEIGHTFIELD``, ``CONTACT_BODY`` or
    ``CONTACT_INSTANCE``; -1 for a miss), and ``triangle`` (int64: the triangle touched in its
    own mesh, an instance's shape's; -1 for a body or a miss)."""

    hit: np.ndarray
    toi: np.ndarray
    other: np.ndarray
    point: np.ndarray
    normal: np.ndarray
    kind: np.ndarray
    triangle: np.ndarray


class RayHits(NamedTuple):
    """Per ray, its hits in rows: ray i's are ``distance[offsets[i]:offsets[i + 1]]`` and the
    same of ``kind`` (``CONTACT_TRIANGLE``, ``CONTACT_HEIGHTFIELD``, ``CONTACT_BODY`` or
    ``CONTACT_INSTANCE``), ``id`` (the triangle, the body or the instance), ``point`` and
    ``normal`` ((h, 3); the unit normal facing the ray) and ``triangle`` (the triangle hit in
    its own mesh; -1 for a body), nearest first (ties: mesh triangles, heightfield triangles,
    bodies, instances, then the smaller id and triangle)."""

    offsets: np.ndarray
    distance: np.ndarray
    kind: np.ndarray
    id: np.ndarray
    point: np.ndarray
    normal: np.ndarray
    triangle: np.ndarray

    def row(self, i: int) -> slice:
        """The slice of ray i's hits."""
        return slice(int(self.offsets[i]), int(self.offsets[i + 1]))


class OverlapHits(NamedTuple):
    """Per query, what it overlaps, in rows: query i's are ``kind[offsets[i]:offsets[i + 1]]``
    (``CONTACT_TRIANGLE``, ``CONTACT_HEIGHTFIELD``, ``CONTACT_BODY`` or ``CONTACT_INSTANCE``)
    and the same of ``other`` (the triangle, body or instance id) and ``triangle`` (the
    triangle in its own mesh; -1 for a body), sorted by (mesh triangles, heightfield
    triangles, bodies, instances; each by id) and cut at the limit; ``total`` counts them all."""

    offsets: np.ndarray
    kind: np.ndarray
    other: np.ndarray
    total: np.ndarray
    triangle: np.ndarray

    def row(self, i: int) -> Tuple[np.ndarray, np.ndarray]:
        """Query i's (kinds, ids)."""
        s = slice(int(self.offsets[i]), int(self.offsets[i + 1]))
        return self.kind[s], self.other[s]


def _rows(x: Any, name: str, n: int, cols: int, default: Optional[np.ndarray] = None) -> np.ndarray:
    """`x` as an (n, cols) float64 C array, broadcast from a row or a scalar."""
    if x is None:
        x = default
    a = _arrays.float_array(x, name, np.float64)
    return _broadcast(a, name, n, cols)


def _radii(x: Any, n: int) -> np.ndarray:
    """Radii as (n, 3) semi-axes: a scalar, (n,) (one radius per body, also where n is 3),
    (n, 3), or one row of semi-axes for all ((3,) where n is not 3, or (1, 3))."""
    a = _arrays.float_array(x, "radii", np.float64)
    if a.shape == (n,):
        a = a[:, None]
    return _broadcast(a, "radii", n, 3)


def _broadcast(a: np.ndarray, name: str, n: int, cols: int) -> np.ndarray:
    try:
        a = np.broadcast_to(a, (n, cols))
    except ValueError:
        raise ValueError(f"{name} has shape {a.shape}; it must be ({n}, {cols}) or broadcast to it") from None
    return np.ascontiguousarray(a)


def _u32(x: Any, name: str, n: int) -> np.ndarray:
    a = np.asarray(x)
    if a.size == 0 and a.dtype.kind == "f":
        a = a.astype(np.int64)  # [] holds no ids, not floats
    if a.dtype.kind not in "iu":
        raise TypeError(f"{name} must be integers, got dtype {a.dtype}")
    if a.size and (int(a.min()) < 0 or int(a.max()) > 0xFFFFFFFF):
        raise ValueError(f"{name} must be 32-bit masks (0 to 2^32 - 1)")
    try:
        return np.ascontiguousarray(np.broadcast_to(a.astype(np.uint32), (n,)))
    except ValueError:
        raise ValueError(f"{name} has shape {a.shape}; it must be ({n},) or a scalar") from None


def _body_ids(x: Any, name: str, n: int) -> np.ndarray:
    a = np.asarray(x)
    if a.size == 0 and a.dtype.kind == "f":
        a = a.astype(np.int64)  # [] holds no ids, not floats
    if a.dtype.kind not in "iu":
        raise TypeError(f"{name} must be body ids (integers; -1: none), got dtype {a.dtype}")
    if a.size and (int(a.min()) < -1 or int(a.max()) >= 0xFFFFFFFF):
        raise ValueError(f"{name} must be body ids (0 to 2^32 - 2) or -1 for none")
    try:
        return np.ascontiguousarray(np.broadcast_to(a.astype(np.int64), (n,)))
    except ValueError:
        raise ValueError(f"{name} has shape {a.shape}; it must be ({n},) or a scalar") from None


def heightfield_mesh(heights: Any, spacing: float = 1.0) -> Tuple[np.ndarray, np.ndarray]:
    """The terrain of a (rows, cols) grid of heights as a mesh ``(vertices, faces)``: vertex
    (r, c) at ``(c * spacing, r * spacing, heights[r, c])``, two triangles per grid square,
    counter-clockwise seen from above (the command's ``--scene heightfield:`` terrain).

    >>> import numpy as np, nearkit
    >>> v, f = nearkit.heightfield_mesh(np.zeros((3, 4)), spacing=0.5)
    >>> v.shape, f.shape
    ((12, 3), (12, 3))
    """
    h = _arrays.float_array(heights, "heights", np.float64)
    if h.ndim != 2:
        raise ValueError(f"heights has shape {h.shape}; it must be 2-D (rows along y, columns along x)")
    return _native.heightfield_mesh(np.ascontiguousarray(h), float(spacing))


def _one_at_a_time(f: Any) -> Any:
    """A World is changed only while no other thread uses it: the binding's borrow error,
    where two threads met, said so in words of its own."""

    @functools.wraps(f)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return f(*args, **kwargs)
        except RuntimeError as e:
            if "lready" not in str(e) or "borrowed" not in str(e):
                raise
            raise RuntimeError(
                "the World is in use on another thread (a query or a change is running there): "
                "change a World only between queries, or guard it with a lock"
            ) from None

    return call


class World:
    """A static triangle mesh and ellipsoid bodies, for a :class:`Collider` to find the
    contacts of. Coordinates are float64 (metres by convention); everything is exact.

    Parameters
    ----------
    cell_size : float
        The broad phase's grid cell (about a body's size; 1 m suits human-sized bodies).

    Examples
    --------
    >>> import numpy as np, nearkit
    >>> world = nearkit.World()
    >>> world.set_heightfield(np.zeros((11, 11)))          # a flat 10 m square at z = 0
    >>> ids = world.add_bodies([[5, 5, 0.4], [5, 5.9, 0.6]], radii=0.5)
    >>> c = nearkit.Collider(device="cpu").contacts(world)
    >>> ground = c[c["kind"] == nearkit.CONTACT_HEIGHTFIELD]   # sphere 0 sinks 0.1 into the ground
    >>> sorted(set(ground["body"].tolist())), round(float(ground["depth"].max()), 6)
    ([0], 0.1)
    >>> pair = c[c["kind"] == nearkit.CONTACT_BODY]         # and overlaps sphere 1
    >>> pair["body"].tolist(), pair["other"].tolist()
    ([0], [1])
    """

    def __init__(self, cell_size: float = 1.0) -> None:
        self._native = _native.World(_arrays.number(cell_size, "cell_size"))

    @_one_at_a_time
    def set_mesh(self, vertices: Any, faces: Any) -> None:
        """Sets the static mesh ((v, 3) corners, (f, 3) 0-based indices); degenerate
        triangles collide as segments."""
        v, _ = _arrays.points(vertices, "vertices", np.float64)
        self._native.set_mesh(np.ascontiguousarray(v), _arrays.faces(faces))

    @_one_at_a_time
    def set_heightfield(self, heights: Any, spacing: float = 1.0, origin: Any = (0.0, 0.0)) -> None:
        """Sets the terrain, kept as its (rows, cols) grid of heights (rows along y): sample
        (r, c) at ``(origin[0] + c * spacing, origin[1] + r * spacing, heights[r, c])``. It
        may sit beside a mesh; its contacts are of kind ``CONTACT_HEIGHTFIELD``, its triangles
        numbered as :func:`heightfield_mesh` makes them (two per square, row by row), so the
        same terrain as a mesh has the same contacts. A 4096 × 4096 terrain takes 128 MiB."""
        h = _arrays.float_array(heights, "heights", np.float64)
        if h.ndim != 2:
            raise ValueError(f"heights has shape {h.shape}; it must be 2-D (rows along y, columns along x)")
        o = np.asarray(origin, dtype=np.float64).reshape(-1)
        if o.shape != (2,):
            raise ValueError(f"origin must be (x, y), got {origin!r}")
        self._native.set_heightfield(np.ascontiguousarray(h), float(spacing), (float(o[0]), float(o[1])))

    @_one_at_a_time
    def add_bodies(
        self,
        centers: Any,
        radii: Any,
        orientations: Any = None,
        layers: Any = 1,
        masks: Any = _ALL_LAYERS,
    ) -> np.ndarray:
        """Adds n ellipsoids; returns their ids (int64; ids of removed bodies are reused,
        lowest first). All or none: a bad body raises and none is added.

        Parameters
        ----------
        centers : (n, 3)
        radii : scalar, (n,), (n, 3) or (1, 3)
            A sphere's radius (one for all, or one per body), or semi-axes along the body's
            own x, y, z (per body, or one row for all).
        orientations : (n, 4) or (4,), optional
            Quaternions (x, y, z, w) turning the body's axes into the world's; identity if
            None. Need not be of unit length.
        layers, masks : int or (n,) of uint32
            Two bodies collide when each one's layer meets the other's mask; a body and the
            mesh when its mask meets ``mesh_layer``.
        """
        c, _ = _arrays.points(centers, "centers", np.float64)
        n = c.shape[0]
        return self._native.add_bodies(
            np.ascontiguousarray(c),
            _radii(radii, n),
            _rows(orientations, "orientations", n, 4, _IDENTITY),
            _u32(layers, "layers", n),
            _u32(masks, "masks", n),
        )

    def add_body(
        self, center: Any, radii: Any, orientation: Any = None, layer: int = 1, mask: int = _ALL_LAYERS
    ) -> int:
        """Adds one body (see :meth:`add_bodies`); returns its id."""
        def one(x: Any, name: str, sizes: Tuple[int, ...]) -> np.ndarray:
            a = np.asarray(x, dtype=np.float64)
            if a.size not in sizes:
                raise ValueError(f"{name} has shape {a.shape}; it must hold {' or '.join(map(str, sizes))} values")
            return a.reshape(1, -1)

        c = one(center, "center", (3,))
        q = None if orientation is None else one(orientation, "orientation", (4,))
        r = one(radii, "radii", (1, 3))
        return int(self.add_bodies(c, r, q, layer, mask)[0])

    @_one_at_a_time
    def remove_bodies(self, ids: Any) -> None:
        """Removes bodies; their ids become free for reuse."""
        self._native.remove_bodies(np.atleast_1d(_arrays.ids(ids, "ids")))

    @_one_at_a_time
    def set_poses(self, ids: Any, centers: Any, orientations: Any = None) -> None:
        """The per-tick update: new centers ((n, 3)) and, if given, orientations ((n, 4)) of
        bodies ``ids``; bodies without new orientations keep theirs."""
        i = np.atleast_1d(_arrays.ids(ids, "ids"))
        c = _rows(centers, "centers", len(i), 3)
        q = None if orientations is None else _rows(orientations, "orientations", len(i), 4)
        self._native.set_poses(i, c, q)

    @_one_at_a_time
    def set_layers(self, ids: Any, layers: Any, masks: Any) -> None:
        """New layers and masks of bodies ``ids``."""
        i = np.atleast_1d(_arrays.ids(ids, "ids"))
        self._native.set_layers(i, _u32(layers, "layers", len(i)), _u32(masks, "masks", len(i)))

    def bodies(self) -> dict:
        """The living bodies as arrays: ``ids``, ``centers``, ``radii``, ``orientations``,
        ``layers``, ``masks``."""
        return self._native.bodies()

    @_one_at_a_time
    def add_shape(self, vertices: Any, faces: Any) -> int:
        """Adds a shape: a mesh in its own frame (``vertices`` (V, 3), ``faces`` (F, 3)) that
        :meth:`add_instances` places, gridded once however many times it is placed; returns
        its id."""
        v, _ = _arrays.points(vertices, "vertices", np.float64)
        return int(self._native.add_shape(np.ascontiguousarray(v), _arrays.faces(faces)))

    @_one_at_a_time
    def remove_shape(self, shape: int) -> None:
        """Removes a shape no instance places."""
        self._native.remove_shape(_arrays.uint32(shape, "shape"))

    @_one_at_a_time
    def add_instances(self, shapes: Any, positions: Any, orientations: Any = None, layers: Any = 1) -> np.ndarray:
        """Places shapes as rigid instances: ``shapes`` (scalar or (n,)) at ``positions``
        ((n, 3)), turned by ``orientations`` (quaternions (x, y, z, w), (n, 4) or (4,);
        identity if None), their triangles in ``layers`` (bodies and queries meet them when
        their masks do). Returns their ids (int64; ids of removed instances are reused,
        lowest first). Only the instances' top-level grid is rebuilt. Contacts, hits and
        overlaps with them are of kind ``CONTACT_INSTANCE``, ``triangle`` naming the shape's
        triangle. All or none.

        >>> import numpy as np, nearkit
        >>> world = nearkit.World()
        >>> tile = world.add_shape([[-1, -1, 0], [1, -1, 0], [0, 1, 0]], [[0, 1, 2]])
        >>> world.add_instances(tile, [[0, 0, 0], [5, 0, 0]]).tolist()
        [0, 1]
        >>> world.add_bodies([[5, 0, 0.4]], radii=0.5).tolist()
        [0]
        >>> c = nearkit.Collider(device="cpu").contacts(world)
        >>> c["kind"].tolist() == [nearkit.CONTACT_INSTANCE], c["other"].tolist(), c["triangle"].tolist()
        (True, [1], [0])
        """
        p, _ = _arrays.points(positions, "positions", np.float64)
        n = p.shape[0]
        return self._native.add_instances(
            _u32(shapes, "shapes", n),
            np.ascontiguousarray(p),
            _rows(orientations, "orientations", n, 4, _IDENTITY),
            _u32(layers, "layers", n),
        )

    @_one_at_a_time
    def set_instances(self, ids: Any, positions: Any, orientations: Any = None) -> None:
        """Moves instances ``ids`` to ``positions`` ((n, 3)) and, if given, ``orientations``
        ((n, 4)); all or none."""
        i = np.atleast_1d(_arrays.ids(ids, "ids"))
        p = _rows(positions, "positions", len(i), 3)
        q = None if orientations is None else _rows(orientations, "orientations", len(i), 4)
        self._native.set_instances(i, p, q)

    @_one_at_a_time
    def remove_instances(self, ids: Any) -> None:
        """Removes instances; their ids become free for reuse."""
        self._native.remove_instances(np.atleast_1d(_arrays.ids(ids, "ids")))

    def instances(self) -> dict:
        """The instances as arrays: ``ids``, ``shapes``, ``positions``, ``orientations``,
        ``layers``."""
        return self._native.instances()

    def instance_triangles(self, instance: int) -> np.ndarray:
        """An instance's triangles, placed (the corners every query tests), as (F, 3, 3)."""
        return self._native.instance_triangles(_arrays.uint32(instance, "instance"))

    @property
    def instance_count(self) -> int:
        """Instances placed."""
        return self._native.instance_count

    def triangles(self) -> np.ndarray:
        """The static mesh's triangles as (f, 3, 3) corners (empty without a mesh)."""
        return self._native.triangles()

    def heightfield_triangles(self) -> np.ndarray:
        """The heightfield's triangles as (f, 3, 3) corners (empty without one)."""
        return self._native.heightfield_triangles()

    @property
    def heightfield_triangle_count(self) -> int:
        """Triangles of the heightfield (0 without one)."""
        return self._native.heightfield_triangle_count

    @property
    def body_count(self) -> int:
        """Bodies alive."""
        return self._native.body_count

    @property
    def triangle_count(self) -> int:
        """Triangles of the static mesh (0 without one)."""
        return self._native.triangle_count

    @property
    def cell_size(self) -> float:
        """The broad phase's grid cell."""
        return self._native.cell_size

    @property
    def mesh_layer(self) -> int:
        """The layer bits of the mesh (default 1): bodies whose mask meets them collide with it."""
        return self._native.mesh_layer

    @mesh_layer.setter
    def mesh_layer(self, layer: int) -> None:
        self._native.mesh_layer = _arrays.uint32(layer, "mesh_layer")

    def __repr__(self) -> str:
        return f"World(bodies={self.body_count}, triangles={self.triangle_count}, cell_size={self.cell_size})"

    # A copy would share the native world (changing one would change the other).
    def __copy__(self) -> "World":
        raise TypeError(_NO_COPY)

    def __deepcopy__(self, memo: Any) -> "World":
        raise TypeError(_NO_COPY)

    def __reduce__(self) -> Any:
        raise TypeError(_NO_COPY)


_NO_COPY = "a World cannot be copied or pickled: build another from the same mesh and bodies"


def _world(world: Any) -> Any:
    if not isinstance(world, World):
        raise TypeError(f"world must be a nearkit.World, got {type(world).__name__}")
    return world._native


class Collider:
    """Finds a :class:`World`'s contacts and sweeps, on the CPU or a GPU: the same contacts,
    bit for bit. The device may change between ticks (``collider.device = "cpu"``); a CUDA
    collider uploads only what changed since its last tick. A collider stays on the thread
    that made it.

    Parameters
    ----------
    device : str
        ``"auto"`` (a GPU if usable), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
    """

    def __init__(self, device: str = "auto") -> None:
        self._made = _native.Collider(device)
        self._thread = threading.get_ident()

    @property
    def _native(self) -> Any:
        # The native collider may be used only on its own thread: say so, rather than let
        # the binding's check panic.
        if threading.get_ident() != self._thread:
            raise RuntimeError(
                "this Collider was made on another thread, and a collider stays on the thread "
                "that made it: make one per thread"
            )
        return self._made

    @property
    def device(self) -> str:
        """The device asked for; set it to move the collider (the next tick runs there)."""
        return self._native.device

    @device.setter
    def device(self, device: str) -> None:
        self._native.device = device

    def describe(self) -> str:
        """What the collider runs on."""
        return self._native.describe()

    def __repr__(self) -> str:
        return f"Collider({self.describe()!r})"

    @_one_at_a_time
    def contacts(self, world: World) -> np.ndarray:
        """One tick: every overlap of a body with the mesh or another body, exact, as a
        structured array of :data:`CONTACT_DTYPE`, sorted by (body, kind, other)."""
        return self._native.contacts(_world(world)).view(CONTACT_DTYPE)

    @_one_at_a_time
    def sweeps(
        self,
        world: World,
        starts: Any,
        ends: Any,
        radii: Any,
        orientations: Any = None,
        masks: Any = _ALL_LAYERS,
        ignore: Any = -1,
    ) -> SweepHits:
        """Swept queries (shape casts): ellipsoids of ``radii`` (scalar, (n,) or (n, 3)) and
        ``orientations`` moving from ``starts`` to ``ends`` ((n, 3)); each one's first hit on
        the static mesh and the heightfield (when its mask meets ``mesh_layer``) or a body
        (when its mask meets the body's layer), passing through body ``ignore`` (scalar or
        (n,); -1: none). On equal times the mesh comes first, then the heightfield, then
        bodies, then the smaller id. A body's time of impact is found by steps that never
        pass it, to 2^-40 of the sweep.

        >>> import numpy as np, nearkit
        >>> world = nearkit.World()
        >>> world.add_bodies([[0, 0, 0], [4, 0, 0]], radii=1.0).tolist()
        [0, 1]
        >>> hits = nearkit.Collider(device="cpu").sweeps(world, [[0, 0, 0]], [[10, 0, 0]], radii=1.0, ignore=0)
        >>> hits.kind.tolist(), hits.other.tolist(), hits.toi.round(6).tolist()
        ([1], [1], [0.2])
        """
        s, _ = _arrays.points(starts, "starts", np.float64)
        n = s.shape[0]
        return SweepHits(
            *self._native.sweeps(
                _world(world),
                np.ascontiguousarray(s),
                _rows(ends, "ends", n, 3),
                _radii(radii, n),
                _rows(orientations, "orientations", n, 4, _IDENTITY),
                _u32(masks, "masks", n),
                _body_ids(ignore, "ignore", n),
            )
        )

    @_one_at_a_time
    def overlaps(
        self,
        world: World,
        centers: Any,
        radii: Any,
        orientations: Any = None,
        masks: Any = _ALL_LAYERS,
        limit: int = 64,
        shape: str = "ellipsoid",
    ) -> OverlapHits:
        """What spheres, ellipsoids or boxes overlap: the mesh's and the heightfield's
        triangles (when a query's mask meets ``mesh_layer``) and the bodies (when it meets
        theirs), by exact tests (touching is not overlapping; an ellipsoid's are the
        contacts'). ``shape``: ``"ellipsoid"`` (``radii``: a sphere's radius or semi-axes) or
        ``"box"`` (``radii``: half extents along the box's axes), scalar, (n,) or (n, 3) either
        way, turned by ``orientations``; at most ``limit`` (1 to 64) kept per query, the first
        by (kind, id).

        >>> import numpy as np, nearkit
        >>> world = nearkit.World()
        >>> world.set_heightfield(np.zeros((11, 11)))
        >>> world.add_bodies([[5, 5, 0.4]], radii=0.5).tolist()
        [0]
        >>> hits = nearkit.Collider(device="cpu").overlaps(world, [[5.2, 5, 0.5], [5, 5, 3]], radii=0.3)
        >>> hits.total.tolist(), hits.row(1)[0].tolist()
        ([1, 0], [])
        >>> crate = nearkit.Collider(device="cpu").overlaps(world, [[5, 5, 1.2]], radii=[2, 2, 0.25], shape="box")
        >>> crate.total.tolist()  # the body's top is at 0.9, the box's bottom at 0.95
        [0]
        """
        if shape not in ("ellipsoid", "sphere", "box"):
            raise ValueError(f"shape must be 'ellipsoid' (or 'sphere') or 'box', got {shape!r}")
        c, _ = _arrays.points(centers, "centers", np.float64)
        n = c.shape[0]
        return OverlapHits(
            *self._native.overlaps(
                _world(world),
                np.ascontiguousarray(c),
                _radii(radii, n),
                _rows(orientations, "orientations", n, 4, _IDENTITY),
                _u32(masks, "masks", n),
                _arrays.uint32(limit, "limit", 1, 64),
                shape == "box",
            )
        )

    @_one_at_a_time
    def ray_casts(
        self,
        world: World,
        origins: Any,
        directions: Any,
        max_distance: Any = np.inf,
        masks: Any = _ALL_LAYERS,
        limit: int = 1,
    ) -> RayHits:
        """Rays against the static mesh, the heightfield, the bodies and the instances, exact (a
        brute force over every triangle, body and placed triangle finds the same hits), the
        same bits on either device: ``origins`` and ``directions`` (n, 3; any nonzero length),
        ``max_distance`` (scalar or (n,), in world units), ``masks`` (a ray hits the mesh and
        the heightfield when its mask meets ``mesh_layer``, a body or an instance when it meets
        its layer). Each ray's nearest ``limit`` hits (1: its first hit) in rows.

        >>> import numpy as np, nearkit
        >>> world = nearkit.World()
        >>> world.set_mesh([[-9, -9, 0], [9, -9, 0], [0, 9, 0]], [[0, 1, 2]])
        >>> world.add_bodies([[0, 0, 5]], radii=1.0).tolist()
        [0]
        >>> hits = nearkit.Collider(device="cpu").ray_casts(world, [[0, 0, 10], [3, 0, 10]], [[0, 0, -1]] * 2, limit=2)
        >>> hits.offsets.tolist(), hits.distance.tolist(), hits.kind.tolist()
        ([0, 2, 3], [4.0, 10.0, 10.0], [1, 0, 0])
        """
        o, _ = _arrays.points(origins, "origins", np.float64)
        n = o.shape[0]
        limit = _arrays.uint32(limit, "limit", 1)
        try:
            d = np.broadcast_to(np.asarray(max_distance, dtype=np.float64), (n,))
        except ValueError:
            raise ValueError(f"max_distance has shape {np.shape(max_distance)}; it must be ({n},) or a scalar") from None
        return RayHits(
            *self._native.ray_casts(
                _world(world),
                np.ascontiguousarray(o),
                _rows(directions, "directions", n, 3),
                np.ascontiguousarray(d),
                _u32(masks, "masks", n),
                0 if limit == 1 else limit,
            )
        )
