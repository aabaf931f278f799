"""World and Collider: contacts and sweeps in cases whose answer is known."""

import numpy as np
import pytest

import nearkit


def flat_world(size=20):
    world = nearkit.World(cell_size=1.0)
    world.set_heightfield(np.zeros((size + 1, size + 1)), spacing=1.0)  # z = 0 over [0, size]²
    return world


def contacts(world, device="cpu"):
    return nearkit.Collider(device=device).contacts(world)


def test_a_sphere_resting_on_the_ground_touches_it():
    world = flat_world()
    (body,) = world.add_bodies([[10.3, 10.6, 0.45]], radii=0.5)
    c = contacts(world)
    assert len(c) > 0 and (c["kind"] == nearkit.CONTACT_HEIGHTFIELD).all() and (c["body"] == body).all()
    # Every triangle the sphere reaches is a contact at its own closest point: the one
    # beneath the center 0.05 deep, straight up; neighbours less deep, at an edge.
    deepest = c[np.argmax(c["depth"])]
    np.testing.assert_allclose(deepest["depth"], 0.05, rtol=1e-5)
    np.testing.assert_allclose(deepest["normal"], [0, 0, 1], atol=1e-6)
    np.testing.assert_allclose(deepest["point"], [10.3, 10.6, 0], atol=1e-6)
    np.testing.assert_allclose(c["point"][:, 2], 0.0, atol=1e-6)
    assert (c["depth"] <= 0.05 + 1e-7).all()
    # The ground's triangles under the sphere, and only those.
    tris = world.heightfield_triangles()[c["other"]]
    assert ((tris[..., 0].min(1) <= 10.3 + 0.5) & (tris[..., 0].max(1) >= 10.3 - 0.5)).all()
    world.set_poses([body], [[10.3, 10.6, 0.55]])
    assert len(contacts(world)) == 0


def test_two_overlapping_bodies_make_one_pair():
    world = flat_world()
    ids = world.add_bodies([[5, 5, 3], [5.8, 5, 3], [9, 9, 3]], radii=[0.5, 0.5, 0.5])
    c = contacts(world)
    assert len(c) == 1
    assert (int(c["body"][0]), int(c["kind"][0]), int(c["other"][0])) == (ids[0], nearkit.CONTACT_BODY, ids[1])
    np.testing.assert_allclose(c["depth"][0], 0.2, rtol=1e-5)
    np.testing.assert_allclose(np.abs(c["normal"][0]), [1, 0, 0], atol=1e-6)


def test_layers_and_masks_decide_who_collides():
    world = flat_world()
    world.add_bodies([[5, 5, 3], [5.8, 5, 3]], radii=0.5, layers=[1, 2], masks=[1, 1])
    assert len(contacts(world)) == 0  # body 1's layer 2 misses body 0's mask 1
    world.set_layers([0], [1], [3])
    assert len(contacts(world)) == 1
    world.add_body([15, 15, 0.3], 0.5, mask=2)  # its mask misses the mesh's layer 1
    assert len(contacts(world)) == 1
    world.mesh_layer = 2
    assert (contacts(world)["kind"] == nearkit.CONTACT_HEIGHTFIELD).sum() > 0


def test_ellipsoid_orientation_counts():
    world = flat_world()
    # Semi-axes 2 along the body's x, 0.5 across; its center 1.5 above the ground.
    (lying,) = world.add_bodies([[10, 10, 1.5]], radii=[2, 0.5, 0.5])
    assert len(contacts(world)) == 0
    s = np.sqrt(0.5)
    world.set_poses([lying], [[10, 10, 1.5]], [[0, s, 0, s]])  # 90° about y: x points down
    c = contacts(world)
    assert len(c) > 0
    np.testing.assert_allclose(c["depth"], 0.5, rtol=1e-5)


def test_bodies_come_and_go():
    world = flat_world()
    ids = world.add_bodies(np.array([[1, 1, 5], [3, 3, 5], [6, 6, 5]], dtype=np.int32), radii=0.4)
    assert ids.tolist() == [0, 1, 2] and world.body_count == 3
    world.remove_bodies([1])
    assert world.body_count == 2 and world.add_body([3, 3, 5], 0.4) == 1  # lowest free id
    b = world.bodies()
    assert b["ids"].tolist() == [0, 1, 2] and b["centers"].shape == (3, 3)
    np.testing.assert_array_equal(b["orientations"], [[0, 0, 0, 1]] * 3)
    with pytest.raises(ValueError, match="no body 7"):
        world.set_poses([7], [[0, 0, 0]])
    with pytest.raises(ValueError, match="twice the body 1; nothing was removed"):
        world.remove_bodies([1, 1])
    assert world.body_count == 3


def test_add_bodies_is_all_or_none():
    world = flat_world()
    with pytest.raises(ValueError, match="body 1: .*radii"):
        world.add_bodies([[1, 1, 1], [2, 2, 2]], radii=[0.5, -1.0])
    assert world.body_count == 0
    with pytest.raises(ValueError, match="not finite"):
        world.add_bodies([[1, 1, np.nan]], radii=0.5)
    with pytest.raises(ValueError, match="quaternion"):
        world.add_bodies([[1, 1, 1]], radii=0.5, orientations=[0, 0, 0, 0])
    with pytest.raises(ValueError, match="shape"):
        world.add_bodies([[1, 1, 1], [2, 2, 2]], radii=[0.5, 0.5, 0.5, 0.5])
    assert world.body_count == 0


def test_sweeps_hit_the_ground():
    world = flat_world()
    hits = nearkit.Collider(device="cpu").sweeps(
        world,
        starts=[[10, 10, 5.0], [10, 10, 5.0]],
        ends=[[10, 10, -5.0], [12, 10, 5.0]],
        radii=0.5,
    )
    assert hits.hit.tolist() == [True, False]
    np.testing.assert_allclose(hits.toi[0], 0.45, atol=1e-9)  # the sphere's bottom meets z = 0
    np.testing.assert_allclose(hits.normal[0], [0, 0, 1], atol=1e-9)
    np.testing.assert_allclose(hits.point[0], [10, 10, 0], atol=1e-9)
    assert hits.kind.tolist() == [nearkit.CONTACT_HEIGHTFIELD, -1]
    assert np.isinf(hits.toi[1]) and hits.other[1] == -1 and np.isnan(hits.point[1]).all()


def test_sweeps_meet_bodies_by_mask_and_pass_the_one_ignored():
    world = flat_world()
    world.add_bodies([[10, 10, 1.0], [10, 10, 3.0]], radii=0.5, layers=[1, 2])
    collider = nearkit.Collider(device="cpu")
    start, end = [[10, 10, 8.0]] * 4, [[10, 10, -2.0]] * 4
    hits = collider.sweeps(world, start, end, radii=0.5, masks=[0xFFFFFFFF, 1, 0xFFFFFFFF, 0], ignore=[-1, -1, 1, -1])
    # Body 1's top is at 3.5, body 0's at 1.5: the sweep's bottom (center − 0.5) meets them
    # there, and the ground (mesh layer 1) at 0.
    np.testing.assert_allclose(hits.toi[:3], [(7.5 - 3.5) / 10, (7.5 - 1.5) / 10, (7.5 - 1.5) / 10], atol=1e-9)
    assert hits.kind[:3].tolist() == [nearkit.CONTACT_BODY] * 3 and hits.other[:3].tolist() == [1, 0, 0]
    np.testing.assert_allclose(hits.normal[0], [0, 0, 1], atol=1e-9)
    assert not hits.hit[3]
    with pytest.raises(ValueError, match="ignore"):
        collider.sweeps(world, start, end, radii=0.5, ignore=-2)


def test_box_overlaps_touching_is_not_overlapping():
    world = flat_world()
    world.add_bodies([[10, 10, 1.0]], radii=0.5)
    collider = nearkit.Collider(device="cpu")
    centers = [[10, 10, 0.25], [10, 10, 0.2], [10, 10, 1.75], [10, 10, 1.7], [3, 3, 0.0]]
    hits = collider.overlaps(world, centers, radii=[2, 2, 0.25], shape="box")
    kinds = [hits.row(i)[0].tolist() for i in range(len(centers))]
    # Resting on the ground (and under the body, 0.5 below it): nothing; a hair lower, the
    # ground's triangles under it. Just over the body's top: nothing; a hair lower, the body.
    assert kinds[0] == [] and kinds[2] == []
    assert set(kinds[1]) == {nearkit.CONTACT_HEIGHTFIELD} and hits.total[1] == 32
    assert kinds[3] == [nearkit.CONTACT_BODY]
    assert set(kinds[4]) == {nearkit.CONTACT_HEIGHTFIELD}
    turned = collider.overlaps(world, [[10, 10, 1.75]], radii=[2, 2, 0.25], orientations=[0, 0.1, 0, 1], shape="box")
    assert turned.row(0)[0].tolist() == [nearkit.CONTACT_BODY]
    with pytest.raises(ValueError, match="shape"):
        collider.overlaps(world, centers, radii=1.0, shape="cone")


def test_a_crater_tick_matches_itself_across_devices_and_layouts(rng):
    h = rng.uniform(-0.3, 0.3, (41, 41))
    world = nearkit.World()
    world.set_heightfield(np.asfortranarray(h), spacing=1.0)
    v, f = nearkit.heightfield_mesh(h, 1.0)
    assert world.heightfield_triangle_count == len(f) == 2 * 40 * 40 and world.triangle_count == 0
    np.testing.assert_array_equal(world.heightfield_triangles(), v[f])
    centers = np.column_stack([rng.uniform(1, 39, (500, 2)), rng.uniform(-0.2, 1.0, 500)])
    q = rng.normal(size=(500, 4))
    world.add_bodies(centers, radii=rng.uniform(0.2, 0.8, (500, 3)), orientations=q)
    collider = nearkit.Collider(device="cpu")
    first = collider.contacts(world)
    assert len(first) > 100
    assert (np.diff(first["body"].astype(np.int64)) >= 0).all()
    pairs = first[first["kind"] == nearkit.CONTACT_BODY]
    assert (pairs["body"] < pairs["other"]).all()
    collider.device = "cpu"  # a fresh collider: the same contacts, bit for bit
    np.testing.assert_array_equal(collider.contacts(world), first)


def test_world_options():
    with pytest.raises(ValueError, match="cell size"):
        nearkit.World(cell_size=0)
    with pytest.raises(ValueError, match="2 × 2"):
        nearkit.World().set_heightfield(np.zeros((1, 5)))
    with pytest.raises(ValueError, match="finite"):
        nearkit.World().set_heightfield([[0, 0], [0, np.nan]])
    w = flat_world(4)
    assert w.cell_size == 1.0 and w.heightfield_triangle_count == 32 and "World(bodies=0" in repr(w)


def test_a_heightfield_has_the_contacts_of_its_mesh(rng):
    h = rng.uniform(-0.5, 0.5, (31, 26))
    native, meshed = nearkit.World(), nearkit.World()
    native.set_heightfield(h, spacing=0.7, origin=(-2.0, 3.5))
    v, f = nearkit.heightfield_mesh(h, 0.7)
    meshed.set_mesh(v + [-2.0, 3.5, 0.0], f)
    centers = np.column_stack([rng.uniform(-1, 15, (800, 1)), rng.uniform(4, 23, (800, 1)), rng.uniform(-0.5, 1, 800)])
    radii = rng.uniform(0.2, 0.6, (800, 3))
    for w in (native, meshed):
        w.add_bodies(centers, radii=radii)
    a, b = contacts(native), contacts(meshed)
    assert len(a) > 500
    kinds = a["kind"].copy()
    assert set(kinds.tolist()) == {nearkit.CONTACT_HEIGHTFIELD, nearkit.CONTACT_BODY}
    kinds[kinds == nearkit.CONTACT_HEIGHTFIELD] = nearkit.CONTACT_TRIANGLE
    a["kind"] = kinds
    np.testing.assert_array_equal(a, b)


def test_overlaps_find_the_ground_and_the_bodies():
    world = flat_world()
    ids = world.add_bodies([[5, 5, 2], [8, 8, 2]], radii=0.5, layers=[1, 2])
    collider = nearkit.Collider(device="cpu")
    hits = collider.overlaps(world, [[5, 5, 0.2], [5.5, 5, 2], [8.6, 8, 2], [12, 12, 5]], radii=[0.3, 0.3, 0.3, 1])
    assert hits.total.tolist() == [hits.total[0], 1, 1, 0] and hits.total[0] >= 2
    kinds, others = hits.row(0)
    assert (kinds == nearkit.CONTACT_HEIGHTFIELD).all()
    assert hits.row(1)[1].tolist() == [ids[0]] and hits.row(1)[0].tolist() == [nearkit.CONTACT_BODY]
    # A mask that misses body 1's layer 2, and a limit that cuts the ground's row.
    masked = collider.overlaps(world, [[8.6, 8, 2], [5, 5, 0.2]], radii=0.3, masks=1, limit=1)
    assert masked.total.tolist() == [0, hits.total[0]] and masked.row(1)[1].tolist() == [others[0]]
    with pytest.raises(ValueError, match="limit"):
        collider.overlaps(world, [[0, 0, 0]], radii=1, limit=0)
    with pytest.raises(ValueError, match="overlap query 0"):
        collider.overlaps(world, [[0, 0, np.nan]], radii=1)


def test_rays_hit_the_mesh_and_the_bodies():
    world = nearkit.World()
    world.set_mesh([[0, 0, 1], [20, 0, 1], [0, 20, 1]], [[0, 1, 2]])  # a roof at z = 1 over half
    ids = world.add_bodies([[15, 15, 3], [15, 15, 6]], radii=0.5, layers=[1, 2])
    collider = nearkit.Collider(device="cpu")
    down = [[0, 0, -1]] * 3
    hits = collider.ray_casts(world, [[15, 15, 10], [2, 2, 10], [30, 30, 10]], down, limit=4)
    assert hits.offsets.tolist() == [0, 2, 3, 3]
    np.testing.assert_allclose(hits.distance, [3.5, 6.5, 9.0])
    assert hits.kind.tolist() == [nearkit.CONTACT_BODY, nearkit.CONTACT_BODY, nearkit.CONTACT_TRIANGLE]
    assert hits.id.tolist() == [ids[1], ids[0], 0]
    np.testing.assert_allclose(hits.normal[2], [0, 0, 1])
    # The first hit only, a mask that misses body 1's layer 2, and a short reach.
    first = collider.ray_casts(world, [[15, 15, 10], [2, 2, 10]], down[:2], max_distance=[20, 5], masks=1)
    assert first.offsets.tolist() == [0, 1, 1] and first.id.tolist() == [ids[0]]
    with pytest.raises(ValueError, match="limit"):
        collider.ray_casts(world, [[0, 0, 0]], [[0, 0, 1]], limit=0)


def test_rays_hit_a_heightfield_where_its_mesh_is_hit():
    rng = np.random.default_rng(5)
    heights = rng.uniform(-1, 1, (30, 40))
    world = nearkit.World()
    world.set_heightfield(heights, spacing=0.5, origin=(-3.0, 2.0))
    corners = world.heightfield_triangles()
    as_mesh = nearkit.World()
    as_mesh.set_mesh(corners.reshape(-1, 3), np.arange(3 * len(corners)).reshape(-1, 3))
    n = 2000
    origins = np.column_stack([rng.uniform(-4, 18, n), rng.uniform(1, 18, n), rng.uniform(-2, 3, n)])
    directions = rng.normal(size=(n, 3))
    collider = nearkit.Collider(device="cpu")
    a = collider.ray_casts(world, origins, directions, limit=1000)
    b = collider.ray_casts(as_mesh, origins, directions, limit=1000)
    assert len(a.distance) > 1000
    assert (a.kind == nearkit.CONTACT_HEIGHTFIELD).all() and (b.kind == nearkit.CONTACT_TRIANGLE).all()
    for x, y in [(a.offsets, b.offsets), (a.distance, b.distance), (a.id, b.id), (a.point, b.point), (a.normal, b.normal)]:
        np.testing.assert_array_equal(x, y)
    # The heightfield is in the mesh's layer.
    world.mesh_layer = 2
    assert len(collider.ray_casts(world, origins, directions, masks=1).distance) == 0


def _quat_matrix(q):
    x, y, z, w = q / np.linalg.norm(q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def test_instances_place_a_shape_and_meet_spheres_rays_and_queries(rng):
    """A unit cube placed 20 times, turned: its placed triangles are R·v + p; spheres touch
    the placed walls where numpy says; rays down hit the instances' tops; moved and removed
    instances move and go."""
    v = np.array([[x, y, z] for z in (-1, 1) for y in (-1, 1) for x in (-1, 1)], dtype=float)
    quads = [[0, 1, 3, 2], [4, 6, 7, 5], [0, 4, 5, 1], [2, 3, 7, 6], [0, 2, 6, 4], [1, 5, 7, 3]]
    faces = np.array([t for q in quads for t in ([q[0], q[1], q[2]], [q[0], q[2], q[3]])])
    world = nearkit.World()
    cube = world.add_shape(v, faces)
    n = 20
    positions = np.column_stack([np.arange(n) * 5.0, np.zeros(n), np.zeros(n)])
    angles = rng.uniform(0, 2 * np.pi, n)
    quats = np.column_stack([np.zeros(n), np.zeros(n), np.sin(angles / 2), np.cos(angles / 2)])
    ids = world.add_instances(cube, positions, quats, layers=np.where(np.arange(n) % 4 == 0, 2, 1))
    assert ids.tolist() == list(range(n)) and world.instance_count == n
    for i in (0, 7):
        want = (v[faces] @ _quat_matrix(quats[i]).T) + positions[i]
        np.testing.assert_allclose(world.instance_triangles(i), want, atol=1e-12)
    # A sphere of radius 0.5 just above each cube's top (z = 1), sinking 0.1: the top face's
    # triangle under it 0.1 deep, pushed straight up; the other top triangle at most that.
    world.add_bodies(positions + [0.2, 0.1, 1.4], radii=0.5, layers=4)
    c = nearkit.Collider(device="cpu").contacts(world)
    assert (c["kind"] == nearkit.CONTACT_INSTANCE).all()
    assert c["other"].tolist() == c["body"].tolist() and set(c["other"].tolist()) == set(range(n))
    assert (c["depth"] <= 0.1 + 1e-6).all() and ((c["triangle"] >= 0) & (c["triangle"] < 12)).all()
    for b in range(n):
        deepest = c[c["body"] == b][np.argmax(c[c["body"] == b]["depth"])]
        np.testing.assert_allclose(deepest["depth"], 0.1, rtol=1e-5)
        np.testing.assert_allclose(deepest["normal"], [0, 0, 1], atol=1e-6)
    # Rays straight down onto each cube hit its top at z = 1; those in layer 2 only when the
    # mask allows.
    origins = positions + [0.3, -0.2, 10.0]
    hits = nearkit.Collider(device="cpu").ray_casts(world, origins, [0, 0, -1], masks=1)
    first = hits.offsets[:-1] != hits.offsets[1:]
    assert first.tolist() == (np.arange(n) % 4 != 0).tolist()
    assert (hits.kind == nearkit.CONTACT_INSTANCE).all() and (hits.distance == 8.6).sum() == 0
    np.testing.assert_allclose(hits.point[:, 2], 1.0, atol=1e-12)
    # Overlap queries and sweeps name the instance and its triangle.
    o = nearkit.Collider(device="cpu").overlaps(world, positions[:3] + [0, 0, 1.0], radii=0.25)
    on = o.kind == nearkit.CONTACT_INSTANCE
    assert on.sum() == 6 and (o.triangle[on] >= 0).all() and (o.triangle[~on] == -1).all()
    s = nearkit.Collider(device="cpu").sweeps(world, [[5, 0, 5]], [[5, 0, -5]], radii=0.1, masks=1)
    assert s.kind.tolist() == [nearkit.CONTACT_INSTANCE] and s.other.tolist() == [1]
    np.testing.assert_allclose(s.point[0], [5, 0, 1], atol=1e-9)
    # Moved up by 10 m, the spheres no longer touch cube 3; removed, cube 4 is gone.
    world.set_instances([3], [positions[3] + [0, 0, 10]])
    world.remove_instances([4])
    c = nearkit.Collider(device="cpu").contacts(world)
    assert 3 not in c["other"] and 4 not in c["other"] and world.instance_count == n - 1
    assert world.instances()["ids"].tolist() == [i for i in range(n) if i != 4]
    with pytest.raises(ValueError, match="no shape 9"):
        world.add_instances(9, [[0, 0, 0]])
    with pytest.raises(ValueError, match="remove its instances first"):
        world.remove_shape(cube)


def test_three_bodies_get_one_radius_each():
    world = nearkit.World()
    world.add_bodies([[0, 0, 0], [5, 0, 0], [10, 0, 0]], radii=[0.1, 0.2, 0.3])
    radii = world.bodies()["radii"]
    assert np.array_equal(radii, [[0.1] * 3, [0.2] * 3, [0.3] * 3]), radii
    world.add_bodies([[0, 5, 0], [5, 5, 0], [10, 5, 0]], radii=[[1, 2, 3]])  # semi-axes for all
    assert np.array_equal(world.bodies()["radii"][3:], [[1, 2, 3]] * 3)


def test_remove_bodies_is_all_or_nothing():
    world = nearkit.World()
    world.add_bodies([[0, 0, 0], [3, 0, 0], [6, 0, 0]], radii=0.5)
    for bad in ([1, 1], [0, 7]):
        with pytest.raises(ValueError, match="nothing was removed"):
            world.remove_bodies(bad)
        assert list(world.bodies()["ids"]) == [0, 1, 2]
    world.remove_bodies([0, 2])
    assert list(world.bodies()["ids"]) == [1]


def test_bodies_beyond_the_grid_are_refused_where_placed():
    world = nearkit.World(cell_size=1.0)
    with pytest.raises(ValueError, match="larger cells"):
        world.add_bodies([[1e300, 0, 0]], radii=1.0)
    with pytest.raises(ValueError, match="larger cells"):
        world.add_bodies([[0, 0, 0]], radii=1e300)
    world.add_bodies([[0, 0, 0]], radii=1.0)
    with pytest.raises(ValueError, match="larger cells"):
        world.set_poses([0], [[1e12, 0, 0]])
    assert len(contacts(world)) == 0


def test_out_of_range_ints_are_value_errors():
    world = nearkit.World()
    collider = nearkit.Collider(device="cpu")
    for call in (
        lambda: setattr(world, "mesh_layer", -1),
        lambda: world.remove_shape(-1),
        lambda: world.instance_triangles(-1),
        lambda: collider.overlaps(world, [[0, 0, 0]], radii=1, limit=-1),
    ):
        with pytest.raises(ValueError):
            call()


def test_misuse_gets_a_plain_error_naming_it():
    """An audit's findings (session 58): each misuse is an ordinary exception that says what
    is wrong, not a panic, a silent miss or a numpy message."""
    import copy
    import threading

    world = nearkit.World()
    world.set_mesh([[-5, -5, 0], [5, -5, 0], [0, 5, 0]], [[0, 1, 2]])
    collider = nearkit.Collider(device="cpu")
    hits = collider.ray_casts(world, [[0, 0, 10]], [[0, 0, -1]])
    assert hits.distance.tolist() == [10.0]
    # A NaN in any component of a direction (x and y once passed as a miss).
    for d in ([np.nan, 0, -1], [0, np.nan, -1], [0, 0, np.nan]):
        with pytest.raises(ValueError, match="direction"):
            collider.ray_casts(world, [[0, 0, 10]], [d])
    with pytest.raises(ValueError, match="max_distance"):
        collider.ray_casts(world, [[0, 0, 10]] * 2, [[0, 0, -1]] * 2, max_distance=[1, 2, 3])
    with pytest.raises(TypeError, match="limit"):
        collider.ray_casts(world, [[0, 0, 10]], [[0, 0, -1]], limit=2.7)
    with pytest.raises(TypeError, match="nearkit.World"):
        collider.contacts("world")
    with pytest.raises(ValueError, match="center"):
        world.add_body([0, 0], 1.0)
    with pytest.raises(TypeError, match="cell_size"):
        nearkit.World(cell_size="2")
    # Empty lists of ids change nothing.
    world.remove_bodies([])
    world.set_poses([], np.empty((0, 3)))
    # A collider on another thread: a RuntimeError saying so.
    caught = []

    def other():
        try:
            collider.contacts(world)
        except Exception as e:  # noqa: BLE001
            # Not the exception itself: its frames would keep the collider alive until a
            # collection on whatever thread runs it.
            caught.append((type(e), str(e)))

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert len(caught) == 1 and caught[0][0] is RuntimeError and "thread" in caught[0][1], caught
    # A copy would share the native world.
    for f in (copy.copy, copy.deepcopy):
        with pytest.raises(TypeError, match="cannot be copied"):
            f(world)
