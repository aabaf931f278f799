//! Mesh instances against brute force: every placed triangle (`World::instance_triangle`)
//! tested against every body, sweep, overlap query and ray, on worlds with shapes placed,
//! turned, layered, moved and removed.

use nearkit::collide::scene::heightfield;
use nearkit::collide::{
    Body, BodyId, Collider, Contact, ContactKind, InstanceId, Overlap, Placement, Ray, ShapeId, Sweep, SweepResult,
    World,
};
use nearkit::test_hooks::{
    contact_ellipsoid_ellipsoid, contact_ellipsoid_triangle, ray_hits_brute_force, sub, sweep_ellipsoid_ellipsoid,
    sweep_ellipsoid_triangle, Shape, SweepHit, V3,
};
use nearkit::{Mesh, Points, NO_ID};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

fn rng(seed: u64) -> Pcg64 {
    Pcg64::seed_from_u64(seed)
}

/// A closed box of `half` extents around the origin (12 triangles).
fn cuboid(half: V3) -> Mesh<f64> {
    let v: Vec<[f64; 3]> = (0..8)
        .map(|k| {
            [
                if k & 1 != 0 { half[0] } else { -half[0] },
                if k & 2 != 0 { half[1] } else { -half[1] },
                if k & 4 != 0 { half[2] } else { -half[2] },
            ]
        })
        .collect();
    let q = [[0, 1, 3, 2], [4, 6, 7, 5], [0, 4, 5, 1], [2, 3, 7, 6], [0, 2, 6, 4], [1, 5, 7, 3]];
    let triangles = q.iter().flat_map(|f| [[f[0], f[1], f[2]], [f[0], f[2], f[3]]]).collect();
    Mesh { vertices: Points::from_rows(&v), triangles }
}

/// Random triangles of every size around the origin, a few degenerate.
fn soup(r: &mut Pcg64, n: usize) -> Mesh<f64> {
    let mut v = Vec::new();
    for k in 0..n {
        let c: V3 = [r.random_range(-3.0..3.0), r.random_range(-3.0..3.0), r.random_range(-1.0..1.0)];
        let s = if k % 7 == 0 { 2.5 } else { r.random_range(0.05..1.0) };
        let a: V3 = std::array::from_fn(|i| c[i] + r.random_range(-s..s));
        let b: V3 = std::array::from_fn(|i| c[i] + r.random_range(-s..s));
        // Every 13th triangle is a segment (collinear corners).
        let d: V3 = if k % 13 == 0 {
            std::array::from_fn(|i| 0.5 * (a[i] + b[i]))
        } else {
            std::array::from_fn(|i| c[i] + r.random_range(-s..s))
        };
        v.extend([a, b, d]);
    }
    let triangles = (0..n as u32).map(|k| [3 * k, 3 * k + 1, 3 * k + 2]).collect();
    Mesh { vertices: Points::from_rows(&v), triangles }
}

fn random_orientation(r: &mut Pcg64) -> [f64; 4] {
    [r.random_range(-1.0..1.0), r.random_range(-1.0..1.0), r.random_range(-1.0..1.0), r.random_range(-1.0..1.0)]
}

/// A ground mesh, 500 bodies, and two shapes placed 40 times (turned, some in layer 2), a few
/// of them moved and removed; `offset` moves everything (a world far from its origin).
fn placed_world(seed: u64, offset: V3) -> (World, Vec<InstanceId>) {
    let mut r = rng(seed);
    let mut world = World::new(1.0).unwrap();
    let n = 20;
    let heights: Vec<f64> = (0..n * n).map(|_| r.random_range(-1.0..0.0)).collect();
    let ground = heightfield(&heights, n, n, 1.0);
    let moved: Vec<[f64; 3]> = (0..ground.vertices.len())
        .map(|k| {
            let p = ground.vertices.get(k);
            [p[0] + offset[0], p[1] + offset[1], p[2] + offset[2]]
        })
        .collect();
    world.set_mesh(&Mesh { vertices: Points::from_rows(&moved), triangles: ground.triangles }).unwrap();
    let shapes: Vec<ShapeId> =
        vec![world.add_shape(&cuboid([1.5, 0.7, 1.0])).unwrap(), world.add_shape(&soup(&mut r, 150)).unwrap()];
    let mut ids = Vec::new();
    for k in 0..40 {
        let at: V3 = [
            offset[0] + r.random_range(0.0..19.0),
            offset[1] + r.random_range(0.0..19.0),
            offset[2] + r.random_range(-0.5..1.5),
        ];
        let mut p = Placement::new(shapes[k % 2], at, random_orientation(&mut r));
        if k % 5 == 0 {
            p = p.with_layer(2);
        }
        ids.push(world.add_instance(p).unwrap());
    }
    for i in 0..500 {
        let c: V3 = [
            offset[0] + r.random_range(-1.0..20.0),
            offset[1] + r.random_range(-1.0..20.0),
            offset[2] + r.random_range(-1.5..2.0),
        ];
        let radii = [r.random_range(0.1..0.8), r.random_range(0.1..0.8), r.random_range(0.1..0.8)];
        let mut b = Body::ellipsoid(c, radii, random_orientation(&mut r));
        if i % 6 == 0 {
            b = b.with_layers(1, 0b1);
        }
        world.add_body(b).unwrap();
    }
    // Move a few (one at a time and in a batch) and remove a few: slots are reused.
    world
        .set_instance(
            ids[3],
            Placement::new(shapes[1], [offset[0] + 9.0, offset[1] + 9.0, offset[2]], [0.0, 0.0, 0.3, 1.0]),
        )
        .unwrap();
    let moved: Vec<Placement> = ids[10..14]
        .iter()
        .map(|&id| {
            let p = world.instance(id).unwrap();
            Placement { position: [p.position[0] + 0.5, p.position[1] - 0.25, p.position[2]], ..p }
        })
        .collect();
    world.set_instances(&ids[10..14], &moved).unwrap();
    world.remove_instance(ids[7]).unwrap();
    world.remove_instance(ids[20]).unwrap();
    let again = world
        .add_instance(Placement::new(shapes[0], [offset[0] + 5.0, offset[1] + 5.0, offset[2]], [0.0, 0.0, 0.0, 1.0]))
        .unwrap();
    assert_eq!(again, ids[7], "the lowest free id is reused");
    ids.remove(20);
    (world, ids)
}

/// Every placed triangle of every live instance in `mask`: (instance, triangle, corners), in
/// (instance, triangle) order.
fn placed_triangles(world: &World, mask: u32) -> Vec<(u32, u32, [V3; 3])> {
    let mut out = Vec::new();
    for i in 0..100u32 {
        let Some(p) = world.instance(InstanceId(i)) else { continue };
        if p.layer & mask == 0 {
            continue;
        }
        for t in 0..world.shape_triangle_count(p.shape).unwrap() {
            out.push((i, t as u32, world.instance_triangle(InstanceId(i), t).unwrap()));
        }
    }
    out
}

/// Every contact: each body against every mesh triangle, every other body and every placed
/// triangle, in the colliders' order.
fn brute_contacts(world: &World) -> Vec<Contact> {
    let b = world.bodies();
    let mut out = Vec::new();
    for i in 0..b.len() {
        if !b.alive[i] {
            continue;
        }
        let (c, s) = (b.center[i], Shape::new(b.radii[i], b.orientation[i]));
        if b.mask[i] & world.mesh_layer() != 0 {
            for t in 0..world.triangle_count() {
                if let Some(g) = contact_ellipsoid_triangle(&s, world.triangle(t).unwrap().map(|p| sub(p, c))) {
                    out.push(nearkit::test_hooks::contact(i as u32, ContactKind::Triangle, t as u32, c, &g));
                }
            }
        }
        for o in i + 1..b.len() {
            let meet = (b.layer[i] & b.mask[o]) != 0 && (b.layer[o] & b.mask[i]) != 0;
            if b.alive[o] && meet {
                let other = Shape::new(b.radii[o], b.orientation[o]);
                if let Some(g) = contact_ellipsoid_ellipsoid(&s, &other, sub(b.center[o], c)) {
                    out.push(nearkit::test_hooks::contact(i as u32, ContactKind::Body, o as u32, c, &g));
                }
            }
        }
        for (inst, t, corners) in placed_triangles(world, b.mask[i]) {
            if let Some(g) = contact_ellipsoid_triangle(&s, corners.map(|p| sub(p, c))) {
                out.push(nearkit::test_hooks::instance_contact(i as u32, inst, t, c, &g));
            }
        }
    }
    out
}

#[test]
fn instance_contacts_equal_all_placed_triangles() {
    for (k, offset) in [[0.0; 3], [70_000.0, -40_000.0, 900.0]].into_iter().enumerate() {
        let (world, _) = placed_world(1 + k as u64, offset);
        let want = brute_contacts(&world);
        let placed = want.iter().filter(|c| c.kind == ContactKind::Instance).count();
        assert!(placed > 100, "only {placed} instance contacts");
        assert!(want.iter().any(|c| c.kind == ContactKind::Instance && c.triangle > 12), "no contact with the soup");
        for portable in [false, true] {
            let opts = nearkit::collide::ColliderOptions { portable_code: portable, ..Default::default() };
            let mut cpu = Collider::new(&nearkit::Engine::cpu(), &opts).unwrap();
            let got = cpu.contacts(&world).unwrap();
            assert_eq!(got.len(), want.len(), "offset {offset:?}, portable {portable}");
            for (g, w) in got.iter().zip(&want) {
                assert_eq!(g, w, "offset {offset:?}, portable {portable}");
            }
            // A second tick (lists kept) gives the same.
            assert_eq!(cpu.contacts(&world).unwrap(), got);
        }
    }
}

/// Tick after tick, with bodies moving (most a little, some far), a body's mask changed and
/// instances moved, added and removed between ticks, the CPU collider (whose lists of placed
/// triangles are kept from tick to tick) gives every tick the brute force's contacts.
#[test]
fn kept_instance_lists_follow_moving_bodies_and_instances() {
    for portable in [false, true] {
        let (mut world, ids) = placed_world(5, [0.0; 3]);
        let mut r = rng(55);
        let n = world.body_count();
        let opts = nearkit::collide::ColliderOptions { portable_code: portable, ..Default::default() };
        let mut cpu = Collider::new(&nearkit::Engine::cpu(), &opts).unwrap();
        for tick in 0..12 {
            let want = brute_contacts(&world);
            assert_eq!(cpu.contacts(&world).unwrap(), want, "tick {tick}, portable {portable}");
            let (centers, _) = world.poses_mut();
            for (k, c) in centers.iter_mut().enumerate() {
                // Most bodies creep (inside their lists' reach); every 37th jumps.
                let step = if (k + tick) % 37 == 0 { 3.0 } else { 0.05 };
                for x in c.iter_mut().take(2) {
                    *x = (*x + r.random_range(-step..step)).clamp(-1.0, 20.0);
                }
            }
            match tick % 4 {
                1 => {
                    let p = world.instance(ids[2]).unwrap();
                    let at = [p.position[0] + 0.3, p.position[1], p.position[2]];
                    world.set_instance(ids[2], Placement { position: at, ..p }).unwrap();
                }
                2 => {
                    let b = BodyId((tick * 7 % n) as u32);
                    world.set_layers(b, 1, 0b1).unwrap();
                }
                3 if tick == 3 => world.remove_instance(ids[5]).unwrap(),
                _ => {}
            }
        }
    }
}

/// A shape placed at the origin unturned collides as the same mesh set as the world's.
#[test]
fn an_unmoved_instance_has_the_contacts_of_its_mesh() {
    let mut r = rng(9);
    let mesh = soup(&mut r, 300);
    let bodies: Vec<Body> = (0..400)
        .map(|_| {
            let c: V3 = [r.random_range(-3.0..3.0), r.random_range(-3.0..3.0), r.random_range(-1.0..1.0)];
            Body::ellipsoid(c, [0.3, 0.2, 0.4], random_orientation(&mut r))
        })
        .collect();
    let mut as_mesh = World::new(1.0).unwrap();
    as_mesh.set_mesh(&mesh).unwrap();
    let mut as_instance = World::new(1.0).unwrap();
    let s = as_instance.add_shape(&mesh).unwrap();
    let id = as_instance.add_instance(Placement::new(s, [0.0; 3], [0.0, 0.0, 0.0, 1.0])).unwrap();
    for b in &bodies {
        as_mesh.add_body(*b).unwrap();
        as_instance.add_body(*b).unwrap();
    }
    let mut cpu = Collider::cpu();
    let a: Vec<Contact> = cpu.contacts(&as_mesh).unwrap().into_iter().filter(|c| c.kind != ContactKind::Body).collect();
    let b: Vec<Contact> =
        cpu.contacts(&as_instance).unwrap().into_iter().filter(|c| c.kind != ContactKind::Body).collect();
    assert!(a.len() > 200, "{} contacts", a.len());
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!((y.kind, y.other), (ContactKind::Instance, id.0));
        assert_eq!(Contact { kind: ContactKind::Triangle, other: x.other, ..*y }, *x);
    }
}

/// The first hit of a sweep by testing every body (id order) and then every placed
/// triangle ((instance, triangle) order): the first of equal times wins, as in the
/// colliders' order.
fn brute_sweep(s: &Sweep, world: &World) -> Option<SweepResult> {
    let shape = Shape::new(s.radii, s.orientation);
    let motion = sub(s.to, s.from);
    let mut best: Option<SweepResult> = None;
    let mut offer = |kind: ContactKind, other: u32, triangle: u32, h: SweepHit| {
        if best.is_none_or(|b| h.toi < b.toi) {
            let point = [s.from[0] + h.point[0], s.from[1] + h.point[1], s.from[2] + h.point[2]];
            best = Some(SweepResult { toi: h.toi, kind, other, triangle, point, normal: h.normal });
        }
    };
    if s.mask & world.mesh_layer() != 0 {
        for t in 0..world.triangle_count() {
            let c = world.triangle(t).unwrap();
            if let Some(h) = sweep_ellipsoid_triangle(&shape, c.map(|p| sub(p, s.from)), motion) {
                offer(ContactKind::Triangle, t as u32, t as u32, h);
            }
        }
    }
    let b = world.bodies();
    for o in 0..b.len() {
        if b.alive[o] && s.mask & b.layer[o] != 0 && s.ignore != Some(BodyId(o as u32)) {
            let other = Shape::new(b.radii[o], b.orientation[o]);
            if let Some(h) = sweep_ellipsoid_ellipsoid(&shape, &other, sub(b.center[o], s.from), motion) {
                offer(ContactKind::Body, o as u32, NO_ID, h);
            }
        }
    }
    for (inst, t, c) in placed_triangles(world, s.mask) {
        if let Some(h) = sweep_ellipsoid_triangle(&shape, c.map(|p| sub(p, s.from)), motion) {
            offer(ContactKind::Instance, inst, t, h);
        }
    }
    best
}

#[test]
fn instance_sweeps_overlaps_and_rays_equal_brute_force() {
    let (world, _) = placed_world(5, [0.0; 3]);
    let mut r = rng(6);
    let mut cpu = Collider::cpu();

    let sweeps: Vec<Sweep> = (0..300)
        .map(|k| {
            let from: V3 = [r.random_range(0.0..19.0), r.random_range(0.0..19.0), r.random_range(2.0..4.0)];
            let to: V3 =
                [from[0] + r.random_range(-4.0..4.0), from[1] + r.random_range(-4.0..4.0), r.random_range(-2.0..1.0)];
            let s = Sweep::new([0.3, 0.5, 0.25], random_orientation(&mut r), from, to);
            if k % 3 == 0 {
                s.with_mask(0b10)
            } else {
                s
            }
        })
        .collect();
    let got = cpu.sweeps(&world, &sweeps).unwrap();
    let mut on_instances = 0;
    for (i, (s, g)) in sweeps.iter().zip(&got).enumerate() {
        let want = brute_sweep(s, &world);
        assert_eq!(*g, want, "sweep {i}");
        on_instances += want.is_some_and(|w| w.kind == ContactKind::Instance) as usize;
    }
    assert!(on_instances > 40, "{on_instances} sweeps hit an instance first");

    let queries: Vec<Overlap> = (0..600)
        .map(|k| {
            let c: V3 = [r.random_range(-1.0..20.0), r.random_range(-1.0..20.0), r.random_range(-1.0..2.0)];
            let radii = [r.random_range(0.1..1.2), r.random_range(0.1..1.2), r.random_range(0.1..1.2)];
            let q = match k % 3 {
                0 => Overlap::sphere(c, radii[0]),
                1 => Overlap::ellipsoid(c, radii, random_orientation(&mut r)),
                _ => Overlap::cuboid(c, radii, random_orientation(&mut r)),
            };
            if k % 4 == 0 {
                q.with_mask(0b10)
            } else {
                q
            }
        })
        .collect();
    let limit = 40;
    let got = cpu.overlaps(&world, &queries, limit).unwrap();
    let mut seen = 0;
    for (i, q) in queries.iter().enumerate() {
        let shape = Shape::new(q.radii, q.orientation);
        let meets = |c: [V3; 3]| {
            let c = c.map(|p| sub(p, q.center));
            match q.shape {
                nearkit::collide::OverlapShape::Cuboid => nearkit::test_hooks::cuboid_meets_triangle(&shape, c),
                _ => contact_ellipsoid_triangle(&shape, c).is_some(),
            }
        };
        let want: Vec<(ContactKind, u32, u32)> = placed_triangles(&world, q.mask)
            .into_iter()
            .filter(|x| meets(x.2))
            .map(|x| (ContactKind::Instance, x.0, x.1))
            .collect();
        let row: Vec<_> = got.row_triangles(i).filter(|x| x.0 == ContactKind::Instance).collect();
        let room = limit - got.row(i).filter(|x| x.0 != ContactKind::Instance).count();
        assert_eq!(row[..], want[..want.len().min(room)], "query {i}");
        seen += want.len();
    }
    assert!(seen > 300, "{seen} instance overlaps");

    let rays: Vec<Ray> = (0..2000)
        .map(|k| {
            let o: V3 = [r.random_range(-2.0..21.0), r.random_range(-2.0..21.0), r.random_range(-1.0..4.0)];
            let d: V3 = [r.random_range(-1.0..1.0), r.random_range(-1.0..1.0), r.random_range(-1.0..0.3)];
            let ray = Ray::new(o, d, if k % 2 == 0 { f64::INFINITY } else { 6.0 });
            if k % 5 == 0 {
                ray.with_mask(0b10)
            } else {
                ray
            }
        })
        .collect();
    let first = cpu.ray_casts(&world, &rays).unwrap();
    let all = cpu.ray_casts_all(&world, &rays, 6).unwrap();
    let mut on_instances = 0;
    for (i, ray) in rays.iter().enumerate() {
        let want = ray_hits_brute_force(&world, ray).unwrap();
        assert_eq!(first[i], want.first().copied(), "ray {i}");
        assert_eq!(all.row(i), &want[..want.len().min(6)], "ray {i}");
        on_instances += want.first().is_some_and(|h| h.kind == ContactKind::Instance) as usize;
    }
    assert!(on_instances > 300, "{on_instances} rays hit an instance first");
}

#[test]
fn bad_instances_are_refused_clearly() {
    let mut world = World::new(1.0).unwrap();
    let s = world.add_shape(&cuboid([1.0; 3])).unwrap();
    let e = world.add_instance(Placement::new(ShapeId(5), [0.0; 3], [0.0, 0.0, 0.0, 1.0])).unwrap_err();
    assert!(e.to_string().contains("no shape 5"), "{e}");
    let e = world.add_instance(Placement::new(s, [f64::NAN, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0])).unwrap_err();
    assert!(e.to_string().contains("not finite"), "{e}");
    let e = world.add_instance(Placement::new(s, [0.0; 3], [0.0; 4])).unwrap_err();
    assert!(e.to_string().contains("quaternion"), "{e}");
    let e = world.add_instance(Placement::new(s, [1e12, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0])).unwrap_err();
    assert!(e.to_string().contains("larger cells"), "{e}");
    let id = world.add_instance(Placement::new(s, [0.0; 3], [0.0, 0.0, 0.0, 1.0])).unwrap();
    let e = world.remove_shape(s).unwrap_err();
    assert!(e.to_string().contains("instance 0"), "{e}");
    // A bad placement in a batch changes nothing.
    let good = Placement::new(s, [3.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]);
    let bad = Placement::new(s, [0.0, f64::INFINITY, 0.0], [0.0, 0.0, 0.0, 1.0]);
    let other = world.add_instance(good).unwrap();
    let e = world.set_instances(&[id, other], &[good, bad]).unwrap_err();
    assert!(e.to_string().contains("instance 1"), "{e}");
    assert_eq!(world.instance(id).unwrap().position, [0.0; 3]);
    assert!(world.set_instance(InstanceId(9), good).unwrap_err().to_string().contains("no instance 9"));
    world.remove_instance(id).unwrap();
    world.remove_instance(other).unwrap();
    world.remove_shape(s).unwrap();
    assert_eq!(world.instance_count(), 0);
    let e = world.add_shape(&Mesh { vertices: Points::from_rows(&[[0.0; 3]]), triangles: vec![] }).unwrap_err();
    assert!(e.to_string().contains("no triangles"), "{e}");
}
