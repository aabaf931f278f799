//! Ray casts against brute force: every ray's first hit and its sorted hits must be those of
//! a test of every triangle and body (the same exact tests, no tree), on fresh random worlds
//! of several shapes, with rays chosen to be hard (grazing edges and vertices, in a face's
//! plane, from inside bodies, of zero length, behind layer masks). The tests themselves are
//! checked by independent means: hit points on their surfaces, rays aimed at a triangle's
//! interior hitting something no farther, and no gaps between a terrain's triangles.

use nearkit::collide::scene::{heightfield, Scene};
use nearkit::collide::{Body, BodyId, Collider, ColliderOptions, ContactKind, Heightfield, Ray, RayHit, World};
use nearkit::test_hooks::{dot, ray_hits_brute_force, sub, Shape, V3};
use nearkit::Engine;
use nearkit::{Mesh, Points};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

fn rng(seed: u64) -> Pcg64 {
    Pcg64::seed_from_u64(seed)
}

fn unit3(r: &mut Pcg64) -> V3 {
    loop {
        let v = [r.random_range(-1.0..1.0), r.random_range(-1.0..1.0), r.random_range(-1.0..1.0)];
        let l = dot(v, v).sqrt();
        if l > 0.1 && l <= 1.0 {
            return v.map(|x| x / l);
        }
    }
}

fn mesh_of(tris: &[[V3; 3]]) -> Mesh<f64> {
    let rows: Vec<[f64; 3]> = tris.iter().flatten().copied().collect();
    Mesh {
        vertices: Points::from_rows(&rows),
        triangles: (0..tris.len() as u32).map(|t| [3 * t, 3 * t + 1, 3 * t + 2]).collect(),
    }
}

/// Triangles of every size in a 20 m box, some degenerate (a repeated corner, collinear
/// corners), some sharing edges, some axis-aligned and on f32-exact coordinates.
fn triangle_soup(r: &mut Pcg64, n: usize) -> Vec<[V3; 3]> {
    let mut tris: Vec<[V3; 3]> = Vec::new();
    while tris.len() < n {
        let c: V3 = std::array::from_fn(|_| r.random_range(-10.0..10.0));
        let size = [0.01, 0.3, 2.0, 8.0][r.random_range(0..4)];
        let p = |r: &mut Pcg64| -> V3 { std::array::from_fn(|a| c[a] + size * r.random_range(-1.0..1.0)) };
        let t = match r.random_range(0..10) {
            0 => {
                let a = p(r);
                [a, a, p(r)]
            }
            1 => {
                let (a, b) = (p(r), p(r));
                [a, b, std::array::from_fn(|k| a[k] + (b[k] - a[k]) * 0.25)]
            }
            2 => {
                // Axis-aligned, on a quarter-metre lattice (exact in f32).
                let q = |v: f64| (v * 4.0).round() / 4.0;
                let z = q(c[2]);
                [[q(c[0]), q(c[1]), z], [q(c[0]) + 1.0, q(c[1]), z], [q(c[0]), q(c[1]) + 1.0, z]]
            }
            3 if !tris.is_empty() => {
                // Sharing an edge with an earlier triangle.
                let o = tris[r.random_range(0..tris.len())];
                [o[1], o[0], p(r)]
            }
            _ => [p(r), p(r), p(r)],
        };
        tris.push(t);
    }
    tris
}

fn random_body(r: &mut Pcg64, center: V3) -> Body {
    let radii = [r.random_range(0.1..1.5), r.random_range(0.1..1.5), r.random_range(0.1..1.5)];
    let q = [r.random_range(-1.0..1.0), r.random_range(-1.0..1.0), r.random_range(-1.0..1.0), r.random_range(0.1..1.0)];
    Body::ellipsoid(center, radii, q).with_layers(1 << r.random_range(0..3), u32::MAX)
}

/// Rays of every hard kind for `world`.
fn hard_rays(r: &mut Pcg64, world: &World, n: usize, lo: V3, hi: V3) -> Vec<Ray> {
    let tris = world.triangle_count();
    let bodies = world.bodies();
    let live: Vec<usize> = (0..bodies.len()).filter(|&i| bodies.alive[i]).collect();
    let masks = [u32::MAX, u32::MAX, u32::MAX, 1, 2, 4, 1 | 2, 6, 0];
    let mut rays = Vec::with_capacity(n);
    while rays.len() < n {
        let mask = masks[r.random_range(0..masks.len())];
        let max_distance = [f64::INFINITY, f64::INFINITY, 30.0, 5.0, 0.5][r.random_range(0..5)];
        let anywhere = |r: &mut Pcg64| -> V3 { std::array::from_fn(|a| r.random_range(lo[a]..hi[a])) };
        let ray = match r.random_range(0..9) {
            // From anywhere, any way, with directions of odd lengths.
            0 | 1 => {
                let d = unit3(r).map(|v| v * [1e-3, 1.0, 7.0][r.random_range(0..3)]);
                Ray { origin: anywhere(r), direction: d, max_distance, mask }
            }
            // At a corner or a point on an edge of a triangle (grazing).
            2 | 3 if tris > 0 => {
                let c = world.triangle(r.random_range(0..tris)).unwrap();
                let (i, j) = (r.random_range(0..3), r.random_range(0..3));
                let s = [0.0, 0.5, r.random_range(0.0..1.0)][r.random_range(0..3)];
                let target: V3 = std::array::from_fn(|a| c[i][a] + (c[j][a] - c[i][a]) * s);
                let d = unit3(r);
                let back = r.random_range(0.5..15.0);
                Ray { origin: std::array::from_fn(|a| target[a] - back * d[a]), direction: d, max_distance, mask }
            }
            // In a triangle's plane: from a corner along an edge, or along the plane.
            4 if tris > 0 => {
                let c = world.triangle(r.random_range(0..tris)).unwrap();
                let (e1, e2) = (sub(c[1], c[0]), sub(c[2], c[0]));
                let w = r.random_range(-1.0..1.0);
                let d: V3 = std::array::from_fn(|a| e1[a] + w * e2[a]);
                if d == [0.0; 3] {
                    continue;
                }
                let back = r.random_range(0.0..2.0);
                Ray { origin: std::array::from_fn(|a| c[0][a] - back * d[a]), direction: d, max_distance, mask }
            }
            // From inside (or the centre of) a body.
            5 if !live.is_empty() => {
                let i = live[r.random_range(0..live.len())];
                let off = r.random_range(0.0..0.1);
                let o: V3 = std::array::from_fn(|a| bodies.center[i][a] + off * r.random_range(-1.0..1.0));
                let max = [0.0, 1.0, f64::INFINITY][r.random_range(0..3)];
                Ray { origin: o, direction: unit3(r), max_distance: max, mask }
            }
            // Zero length: from a triangle's corner or from anywhere.
            6 if tris > 0 => {
                let c = world.triangle(r.random_range(0..tris)).unwrap();
                let o = if r.random_bool(0.7) { c[r.random_range(0..3)] } else { anywhere(r) };
                Ray { origin: o, direction: unit3(r), max_distance: 0.0, mask }
            }
            // Along an axis (zero direction components), from a lattice point.
            7 => {
                let mut d = [0.0; 3];
                d[r.random_range(0..3)] = if r.random_bool(0.5) { 1.0 } else { -1.0 };
                let o = anywhere(r).map(|v| (v * 4.0).round() / 4.0);
                Ray { origin: o, direction: d, max_distance, mask }
            }
            // Straight down from above.
            _ => {
                let mut o = anywhere(r);
                o[2] = hi[2] + 1.0;
                Ray { origin: o, direction: [0.0, 0.0, -1.0], max_distance, mask }
            }
        };
        rays.push(ray);
    }
    rays
}

/// A hit's fields as bits (so −0 and 0, or NaNs, cannot pass as equal).
fn bits(h: &RayHit) -> (u64, ContactKind, u32, [u64; 3], [u64; 3]) {
    (h.distance.to_bits(), h.kind, h.id, h.point.map(f64::to_bits), h.normal.map(f64::to_bits))
}

fn same(a: &[RayHit], b: &[RayHit]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| bits(x) == bits(y))
}

/// The collider's first hits and sorted hits (limits 1, 3, all) against brute force; returns
/// (rays with a hit, hits in all).
fn check_against_brute_force(name: &str, collider: &mut Collider, world: &World, rays: &[Ray]) -> (usize, usize) {
    let brute: Vec<Vec<RayHit>> = rays.iter().map(|ray| ray_hits_brute_force(world, ray).unwrap()).collect();
    let first = collider.ray_casts(world, rays).unwrap();
    assert_eq!(first.len(), rays.len());
    for (i, (f, b)) in first.iter().zip(&brute).enumerate() {
        assert!(
            same(f.as_slice(), &b[..b.len().min(1)]),
            "{name}: ray {i} {:?}: first hit {f:?}, brute force {:?}",
            rays[i],
            b.first()
        );
    }
    for limit in [1, 3, usize::MAX] {
        let all = collider.ray_casts_all(world, rays, limit).unwrap();
        assert_eq!(all.len(), rays.len());
        assert_eq!(all.offsets[0], 0);
        assert_eq!(*all.offsets.last().unwrap(), all.hits.len());
        for (i, b) in brute.iter().enumerate() {
            let want = &b[..b.len().min(limit)];
            assert!(
                same(all.row(i), want),
                "{name}: ray {i} {:?}, limit {limit}: {:?} vs brute force {want:?}",
                rays[i],
                all.row(i)
            );
        }
    }
    (brute.iter().filter(|b| !b.is_empty()).count(), brute.iter().map(Vec::len).sum())
}

/// Each hit lies on what it names, its normal faces the ray and is unit, and its distance is
/// the ray's: checked with plain geometry, not the tests under check.
fn check_hit_geometry(world: &World, ray: &Ray, h: &RayHit) {
    let l = dot(ray.direction, ray.direction).sqrt();
    let u = ray.direction.map(|v| v / l);
    assert!(h.distance >= 0.0 && h.distance <= ray.max_distance, "{ray:?}: {h:?}");
    let p: V3 = std::array::from_fn(|a| ray.origin[a] + h.distance * u[a]);
    let scale = 1.0 + dot(ray.origin, ray.origin).sqrt() + h.distance;
    for a in 0..3 {
        assert!((p[a] - h.point[a]).abs() <= 1e-12 * scale, "{ray:?}: {h:?}");
    }
    assert!((dot(h.normal, h.normal) - 1.0).abs() < 1e-12, "{h:?}");
    assert!(dot(h.normal, u) <= 1e-12, "{ray:?}: normal {h:?} does not face the ray");
    if h.kind == ContactKind::Triangle {
        let c = world.triangle(h.id as usize).unwrap();
        let (e1, e2, w) = (sub(c[1], c[0]), sub(c[2], c[0]), sub(h.point, c[0]));
        let n = cross(e1, e2);
        if dot(n, n).sqrt() < 1e-6 * dot(e1, e1).sqrt() * dot(e2, e2).sqrt() {
            return; // a sliver: barycentric coordinates mean little
        }
        // Barycentric coordinates by least squares: inside, and on the plane.
        let (d11, d12, d22, dw1, dw2) = (dot(e1, e1), dot(e1, e2), dot(e2, e2), dot(w, e1), dot(w, e2));
        let den = d11 * d22 - d12 * d12;
        let s = (d22 * dw1 - d12 * dw2) / den;
        let t = (d11 * dw2 - d12 * dw1) / den;
        let tol = 1e-7 * (1.0 + scale / d11.max(d22).sqrt());
        assert!(s >= -tol && t >= -tol && s + t <= 1.0 + tol, "{ray:?}: {h:?} outside ({s}, {t})");
        let q: V3 = std::array::from_fn(|a| c[0][a] + s * e1[a] + t * e2[a]);
        let off = sub(h.point, q);
        assert!(dot(off, off).sqrt() <= 1e-9 * scale, "{ray:?}: {h:?} off the plane by {off:?}");
    } else {
        assert_eq!(h.kind, ContactKind::Body);
        let b = world.body(BodyId(h.id)).unwrap();
        let s = Shape::new(b.radii, b.orientation);
        let m = s.unit_of(sub(h.point, b.center));
        let m = dot(m, m);
        let o = s.unit_of(sub(ray.origin, b.center));
        if h.distance == 0.0 && dot(o, o) <= 1.0 {
            return; // started inside
        }
        let r = b.radii.iter().fold(f64::INFINITY, |a, &v| a.min(v));
        assert!((m.sqrt() - 1.0).abs() <= 1e-9 * scale / r, "{ray:?}: {h:?} off the surface ({m})");
    }
}

#[test]
fn first_and_sorted_hits_equal_brute_force_on_triangle_soups() {
    let mut total = (0, 0);
    for seed in 0..4 {
        let mut r = rng(100 + seed);
        let tris = triangle_soup(&mut r, [1, 2, 300, 700][seed as usize]);
        let mut world = World::new(1.0).unwrap();
        world.set_mesh(&mesh_of(&tris)).unwrap();
        if seed == 3 {
            world.set_mesh_layer(2);
        }
        for _ in 0..[0, 5, 150, 300][seed as usize] {
            let c = std::array::from_fn(|_| r.random_range(-10.0..10.0));
            world.add_body(random_body(&mut r, c)).unwrap();
        }
        if seed == 3 {
            world.remove_body(BodyId(17)).unwrap();
            world.remove_body(BodyId(200)).unwrap();
        }
        let rays = hard_rays(&mut r, &world, 2500, [-12.0; 3], [12.0; 3]);
        let mut collider = Collider::cpu();
        let (hit, hits) = check_against_brute_force(&format!("soup {seed}"), &mut collider, &world, &rays);
        total = (total.0 + hit, total.1 + hits);
        for (ray, h) in rays.iter().zip(collider.ray_casts(&world, &rays).unwrap()) {
            if let Some(h) = h {
                check_hit_geometry(&world, ray, &h);
            }
        }
    }
    assert!(total.0 > 1500 && total.1 > 4000, "{total:?}: too few hits to tell");
}

#[test]
fn first_and_sorted_hits_equal_brute_force_on_terrains_with_bodies() {
    let mut r = rng(7);
    for (k, (rows, cols)) in [(2, 2), (25, 31)].into_iter().enumerate() {
        // Rough ground, and a flat one on f32-exact heights (rays along its faces and edges).
        let flat = k == 0;
        let heights: Vec<f64> = (0..rows * cols)
            .map(|_| if flat { 1.5 } else { (r.random_range(-2.0..2.0f64) * 8.0).round() / 8.0 })
            .collect();
        let terrain = heightfield(&heights, rows, cols, 1.0);
        let scene = Scene::on_surface("terrain", terrain, if flat { 3 } else { 250 }, (0.2, 0.9), 5 + k as u64);
        let mut world = scene.world(1.0).unwrap();
        for id in (0..world.bodies().len() as u32).step_by(3) {
            world.set_layers(BodyId(id), 2, u32::MAX).unwrap();
        }
        let hi = [cols as f64, rows as f64, 3.0];
        let mut rays = hard_rays(&mut r, &world, 2500, [-1.0, -1.0, -3.0], hi);
        if flat {
            // In the ground's plane, across it, along its edges and diagonals.
            for (o, d) in [
                ([-1.0, 0.0, 1.5], [1.0, 0.0, 0.0]),
                ([-1.0, -1.0, 1.5], [1.0, 1.0, 0.0]),
                ([0.5, -1.0, 1.5], [0.0, 1.0, 0.0]),
            ] {
                rays.push(Ray::new(o, d, f64::INFINITY));
            }
        }
        let mut collider = Collider::cpu();
        let (hit, _) = check_against_brute_force(&format!("terrain {rows}×{cols}"), &mut collider, &world, &rays);
        assert!(hit > 800, "terrain {rows}×{cols}: {hit} rays hit");
        for (ray, h) in rays.iter().zip(collider.ray_casts(&world, &rays).unwrap()) {
            if let Some(h) = h {
                check_hit_geometry(&world, ray, &h);
            }
        }
        // The world moves: the bodies' tree is made per call, so the answers follow.
        scene.advance(&mut world, 0);
        world.remove_body(BodyId(1)).unwrap();
        check_against_brute_force("terrain, moved", &mut collider, &world, &rays[..500]);
    }
}

/// A terrain given as a heightfield is hit where the same terrain given as a mesh is, bit for
/// bit (kind aside), and where a brute force over its triangles says; beside a mesh and
/// bodies too. Heightfields of several shapes, spacings and origins (far from 0), with rays of
/// every hard kind (grazing its vertices and edges, in its faces' planes, along its grid lines,
/// nearly level across all of it, from below, from far outside).
#[test]
fn heightfields_are_hit_as_the_same_terrain_as_a_mesh() {
    let mut r = rng(31);
    let cases: [(usize, usize, f64, [f64; 2], bool); 6] = [
        (2, 2, 1.0, [0.0, 0.0], false),
        (9, 40, 0.5, [-3.25, 7.5], true),
        (33, 27, 1.0, [0.0, 0.0], false),
        (20, 20, 30.0, [-5000.25, 1234.5], false),
        (17, 23, 0.75, [1.0e5, -2.0e5], true),
        // Far from 0 with fine samples: f64 keeps about 10 bits below the spacing there.
        (12, 15, 0.01, [6.0e5, -9.0e5], true),
    ];
    let mut total = 0;
    for (k, &(rows, cols, spacing, origin, steep)) in cases.iter().enumerate() {
        let amp = if steep { 6.0 * spacing } else { spacing };
        let heights: Vec<f64> = (0..rows * cols)
            .map(|i| match (k + i) % 11 {
                // Flat runs on f32-exact heights, so rays can run along faces and edges.
                0..=2 => 0.5,
                _ => (r.random_range(-amp..amp) * 8.0).round() / 8.0,
            })
            .collect();
        let h = Heightfield::new(heights, rows, cols, spacing, origin).unwrap();
        let (lo, hi) = h.bounds();
        let mut as_mesh = World::new(1.0).unwrap();
        as_mesh.set_mesh(&h.to_mesh()).unwrap();
        let mut native = World::new(1.0).unwrap();
        native.set_heightfield(h.clone()).unwrap();
        let pad = 2.0 * spacing;
        let (blo, bhi) = ([lo[0] - pad, lo[1] - pad, lo[2] - pad], [hi[0] + pad, hi[1] + pad, hi[2] + pad]);
        let mut rays = hard_rays(&mut r, &as_mesh, 2000, blo, bhi);
        let centre: V3 = std::array::from_fn(|a| 0.5 * (lo[a] + hi[a]));
        let width = (hi[0] - lo[0]).max(hi[1] - lo[1]);
        for i in 0..300 {
            let o: V3 = std::array::from_fn(|a| r.random_range(blo[a]..bhi[a]));
            let ray = match i % 6 {
                // Nearly level, across the whole terrain.
                0 => {
                    let a = r.random_range(0.0..std::f64::consts::TAU);
                    let d = [a.cos(), a.sin(), r.random_range(-0.05..0.05)];
                    Ray::new(std::array::from_fn(|k| centre[k] - width * d[k]), d, f64::INFINITY)
                }
                // Along a grid line, at a sample's height.
                1 => {
                    let (row, col) = (r.random_range(0..rows), r.random_range(0..cols));
                    let p = [origin[0] + col as f64 * spacing, origin[1] + row as f64 * spacing, 0.5];
                    let d = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0], [-1.0, 0.0, 0.0]][i % 4];
                    Ray::new(std::array::from_fn(|k| p[k] - width * d[k]), d, f64::INFINITY)
                }
                // From below, upwards.
                2 => Ray::new([o[0], o[1], lo[2] - 1.0], [0.0, 0.0, 1.0], f64::INFINITY),
                // From far outside, towards a point of the terrain.
                3 => {
                    let d = unit3(&mut r);
                    Ray::new(std::array::from_fn(|k| o[k] - 50.0 * width * d[k]), d, f64::INFINITY)
                }
                // Short, from above.
                4 => Ray::new([o[0], o[1], hi[2] + 0.1], [r.random_range(-1.0..1.0), 0.3, -1.0], 2.0 * spacing),
                // Pointing away from the terrain.
                _ => Ray::new([o[0], o[1], hi[2] + 1.0], [0.2, -0.1, 1.0], f64::INFINITY),
            };
            rays.push(ray);
        }
        let name = format!("heightfield {rows}×{cols}, spacing {spacing}");
        let mut collider = Collider::cpu();
        let (hit, hits) = check_against_brute_force(&name, &mut collider, &native, &rays);
        total += hit;
        assert!(hits >= hit);
        // The mesh's hits, kind aside.
        let a = collider.ray_casts_all(&as_mesh, &rays, usize::MAX).unwrap();
        let b = collider.ray_casts_all(&native, &rays, usize::MAX).unwrap();
        assert_eq!(a.offsets, b.offsets, "{name}: hits per ray");
        for (x, y) in a.hits.iter().zip(&b.hits) {
            assert_eq!((x.kind, y.kind), (ContactKind::Triangle, ContactKind::Heightfield));
            assert!(same(&[RayHit { kind: ContactKind::Heightfield, ..*x }], &[*y]), "{name}: {x:?} vs {y:?}");
        }
        for (ray, h) in rays.iter().zip(collider.ray_casts(&native, &rays).unwrap()) {
            if let Some(h) = h {
                check_hit_geometry(&as_mesh, ray, &RayHit { kind: ContactKind::Triangle, ..h });
            }
        }
        // Beside a mesh (a roof over part of it) and bodies, behind layer masks.
        let roof = [[lo[0], lo[1], hi[2] + 0.5], [hi[0], lo[1], hi[2] + 0.5], [lo[0], hi[1], hi[2] + 0.5]];
        native.set_mesh(&mesh_of(&[roof])).unwrap();
        for _ in 0..40 {
            let c = std::array::from_fn(|a| r.random_range(lo[a]..hi[a]));
            native.add_body(random_body(&mut r, c)).unwrap();
        }
        if k == 1 {
            native.set_mesh_layer(2);
        }
        let (hit, _) = check_against_brute_force(&format!("{name}, with a roof"), &mut collider, &native, &rays);
        total += hit;
    }
    assert!(total > 5000, "{total} rays hit");
}

/// Rays aimed at a terrain's vertices and edges from above always hit it (no gap between
/// triangles), no farther than the point aimed at. The terrain is gentle (slopes below 40°)
/// and the rays within 27° of vertical, so every triangle faces them: where a ray meets a
/// fold of the surface seen edge-on (a silhouette), grazing past it is no gap.
#[test]
fn a_terrain_has_no_gaps_at_its_edges_and_vertices() {
    let mut r = rng(11);
    let (rows, cols) = (12, 14);
    let heights: Vec<f64> = (0..rows * cols).map(|_| r.random_range(-0.2..0.2)).collect();
    let mut world = World::new(1.0).unwrap();
    world.set_mesh(&heightfield(&heights, rows, cols, 0.7)).unwrap();
    let mut collider = Collider::cpu();
    let mut rays = Vec::new();
    let mut targets = Vec::new();
    for row in 1..rows - 1 {
        for col in 1..cols - 1 {
            let v = |rr: usize, cc: usize| [cc as f64 * 0.7, rr as f64 * 0.7, heights[rr * cols + cc]];
            let (p, right, up, diag) = (v(row, col), v(row, col + 1), v(row + 1, col), v(row + 1, col + 1));
            for target in [p, mid(p, right), mid(p, up), mid(p, diag)] {
                for _ in 0..4 {
                    let d = [r.random_range(-0.35..0.35), r.random_range(-0.35..0.35), -1.0];
                    let back = r.random_range(1.0..5.0);
                    rays.push(Ray::new(std::array::from_fn(|a| target[a] - back * d[a]), d, f64::INFINITY));
                    targets.push(back * dot(d, d).sqrt());
                }
            }
        }
    }
    let hits = collider.ray_casts(&world, &rays).unwrap();
    for (i, h) in hits.iter().enumerate() {
        let h = h.unwrap_or_else(|| panic!("ray {i} {:?} went through the terrain", rays[i]));
        assert!(h.distance <= targets[i] * (1.0 + 1e-12), "ray {i}: {h:?} beyond its target at {}", targets[i]);
    }
    check_against_brute_force("gaps", &mut collider, &world, &rays);
}

fn mid(a: V3, b: V3) -> V3 {
    std::array::from_fn(|k| 0.5 * (a[k] + b[k]))
}

/// Rays aimed at a point inside a triangle (of a random soup) hit something no farther.
#[test]
fn rays_aimed_inside_a_triangle_hit_it_or_something_nearer() {
    let mut r = rng(21);
    let tris = triangle_soup(&mut r, 400);
    let mut world = World::new(1.0).unwrap();
    world.set_mesh(&mesh_of(&tris)).unwrap();
    let mut rays = Vec::new();
    let mut targets = Vec::new();
    for _ in 0..3000 {
        let t = r.random_range(0..tris.len());
        let c = tris[t];
        let (mut s, mut w): (f64, f64) = (r.random_range(0.05..0.85), r.random_range(0.05..0.85));
        if s + w > 0.9 {
            (s, w) = (0.9 - s, 0.9 - w);
        }
        let p: V3 = std::array::from_fn(|a| c[0][a] + (c[1][a] - c[0][a]) * s + (c[2][a] - c[0][a]) * w);
        let n = cross(sub(c[1], c[0]), sub(c[2], c[0]));
        let nl = dot(n, n).sqrt();
        let d = unit3(&mut r);
        // Not degenerate, and not nearly in its plane.
        if nl < 1e-6 || dot(n, d).abs() < 0.2 * nl {
            continue;
        }
        let back = r.random_range(0.5..20.0);
        rays.push(Ray::new(std::array::from_fn(|a| p[a] - back * d[a]), d, f64::INFINITY));
        targets.push(back);
    }
    assert!(rays.len() > 1500);
    let hits = Collider::cpu().ray_casts(&world, &rays).unwrap();
    for (i, h) in hits.iter().enumerate() {
        let h = h.unwrap_or_else(|| panic!("ray {i} {:?} missed the triangle it aims at", rays[i]));
        assert!(h.distance <= targets[i] * (1.0 + 1e-9) + 1e-12, "ray {i}: {h:?} beyond {}", targets[i]);
    }
}

fn cross(u: V3, v: V3) -> V3 {
    [u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]]
}

#[test]
fn spheres_are_hit_where_the_formula_says() {
    let mut world = World::new(1.0).unwrap();
    world.add_body(Body::sphere([10.0, 0.0, 0.0], 2.0)).unwrap();
    world.add_body(Body::ellipsoid([0.0, 10.0, 0.0], [1.0, 3.0, 1.0], [0.0, 0.0, 0.0, 1.0]).with_layers(2, 2)).unwrap();
    let mut c = Collider::cpu();
    let rays = [
        Ray::new([0.0; 3], [2.0, 0.0, 0.0], f64::INFINITY),
        Ray::new([0.0; 3], [0.0, 1.0, 0.0], f64::INFINITY),
        Ray::new([0.0; 3], [0.0, 1.0, 0.0], f64::INFINITY).with_mask(1),
        Ray::new([0.0; 3], [1.0, 0.0, 0.0], 7.9),
        Ray::new([10.5, 0.0, 0.0], [0.0, 0.0, 1.0], 0.0),
        Ray::new([0.0, 0.0, 1.0], [1.0, 0.0, 0.0], f64::INFINITY),
    ];
    let h = c.ray_casts(&world, &rays).unwrap();
    let h0 = h[0].unwrap();
    assert_eq!(
        (h0.distance, h0.kind, h0.id, h0.point, h0.normal),
        (8.0, ContactKind::Body, 0, [8.0, 0.0, 0.0], [-1.0, 0.0, 0.0])
    );
    let h1 = h[1].unwrap();
    assert!((h1.distance - 7.0).abs() < 1e-12 && h1.id == 1 && (h1.normal[1] + 1.0).abs() < 1e-12, "{h1:?}");
    assert_eq!(h[2], None, "layer 2 is not in mask 1");
    assert_eq!(h[3], None, "too short");
    let h4 = h[4].unwrap();
    assert_eq!((h4.distance, h4.id, h4.normal), (0.0, 0, [-0.0, -0.0, -1.0]), "from inside");
    // Tangent at (10, 0, 1)? No: radius 2, so z = 1 is a chord from x = 10 − √3.
    let h5 = h[5].unwrap();
    assert!((h5.distance - (10.0 - 3f64.sqrt())).abs() < 1e-12, "{h5:?}");
    let all = c.ray_casts_all(&world, &[Ray::new([-5.0, 0.0, 0.0], [1.0, 0.0, 0.0], f64::INFINITY)], 10).unwrap();
    assert_eq!(all.row(0).len(), 1);
}

#[test]
fn ties_go_to_triangles_then_smaller_ids() {
    // Two copies of one triangle and a body touching it from below at the same point.
    let t = [[-1.0, -1.0, 0.0], [1.0, -1.0, 0.0], [0.0, 1.0, 0.0]];
    let mut world = World::new(1.0).unwrap();
    world.set_mesh(&mesh_of(&[t, t, t])).unwrap();
    world.add_body(Body::sphere([0.0, 0.0, -1.0], 1.0)).unwrap();
    world.add_body(Body::sphere([0.0, 0.0, -1.0], 1.0)).unwrap();
    let ray = Ray::new([0.0, 0.0, 5.0], [0.0, 0.0, -1.0], 10.0);
    let mut c = Collider::cpu();
    let first = c.ray_casts(&world, &[ray]).unwrap()[0].unwrap();
    assert_eq!((first.distance, first.kind, first.id), (5.0, ContactKind::Triangle, 0));
    let all = c.ray_casts_all(&world, &[ray], 10).unwrap();
    let order: Vec<(f64, ContactKind, u32)> = all.row(0).iter().map(|h| (h.distance, h.kind, h.id)).collect();
    assert_eq!(
        order,
        [
            (5.0, ContactKind::Triangle, 0),
            (5.0, ContactKind::Triangle, 1),
            (5.0, ContactKind::Triangle, 2),
            (5.0, ContactKind::Body, 0),
            (5.0, ContactKind::Body, 1)
        ]
    );
    // Into a kept vector, batch after batch: the same hits as fresh calls.
    let mut kept = Vec::new();
    for batch in [&[ray, ray][..], &[ray][..], &[][..]] {
        c.ray_casts_into(&world, batch, &mut kept).unwrap();
        assert_eq!(kept, c.ray_casts(&world, batch).unwrap());
    }
    let two = c.ray_casts_all(&world, &[ray], 2).unwrap();
    assert_eq!(two.row(0), &all.row(0)[..2]);
    assert!(c.ray_casts_all(&world, &[ray], 0).unwrap().hits.is_empty());
}

#[test]
fn a_changed_mesh_is_searched_afresh_and_bad_rays_are_refused() {
    let mut world = World::new(1.0).unwrap();
    let mut c = Collider::cpu();
    let ray = Ray::new([0.0, 0.0, 5.0], [0.0, 0.0, -1.0], 10.0);
    assert_eq!(c.ray_casts(&world, &[ray]).unwrap(), vec![None], "an empty world");
    let ground = |z: f64| mesh_of(&[[[-1.0, -1.0, z], [1.0, -1.0, z], [0.0, 1.0, z]]]);
    world.set_mesh(&ground(1.0)).unwrap();
    assert_eq!(c.ray_casts(&world, &[ray]).unwrap()[0].unwrap().distance, 4.0);
    world.set_mesh(&ground(2.0)).unwrap();
    assert_eq!(c.ray_casts(&world, &[ray]).unwrap()[0].unwrap().distance, 3.0);
    // Another world with its own mesh, then the first again.
    let mut other = World::new(1.0).unwrap();
    other.set_mesh(&ground(-1.0)).unwrap();
    assert_eq!(c.ray_casts(&other, &[ray]).unwrap()[0].unwrap().distance, 6.0);
    assert_eq!(c.ray_casts(&world, &[ray]).unwrap()[0].unwrap().distance, 3.0);
    world.set_mesh_layer(4);
    assert_eq!(c.ray_casts(&world, &[ray.with_mask(3)]).unwrap(), vec![None], "the mesh is in layer 4 only");
    assert!(c.ray_casts(&world, &[ray.with_mask(4)]).unwrap()[0].is_some());
    for (bad, says) in [
        (Ray::new([f64::NAN, 0.0, 0.0], [1.0, 0.0, 0.0], 1.0), "origin"),
        (Ray::new([0.0; 3], [0.0; 3], 1.0), "direction"),
        (Ray::new([0.0; 3], [f64::INFINITY, 0.0, 0.0], 1.0), "direction"),
        // NaN in x or y once passed (`f64::max` skips a NaN) and the ray hit nothing.
        (Ray::new([0.0; 3], [f64::NAN, 0.0, -1.0], 1.0), "direction"),
        (Ray::new([0.0; 3], [0.0, f64::NAN, -1.0], 1.0), "direction"),
        (Ray::new([0.0; 3], [1.0, 0.0, 0.0], -1.0), "max_distance"),
        (Ray::new([0.0; 3], [1.0, 0.0, 0.0], f64::NAN), "max_distance"),
    ] {
        let e = c.ray_casts(&world, &[ray, bad]).unwrap_err().to_string();
        assert!(e.contains("ray 1") && e.contains(says), "{e}");
        // Into a kept vector: the same error, and the vector left empty.
        let mut kept = vec![None; 3];
        assert!(c.ray_casts_into(&world, &[ray, bad], &mut kept).is_err() && kept.is_empty());
        assert!(c.ray_casts_all(&world, &[bad], 3).is_err());
    }
    // A body whose centre was made not finite through the bulk access is named.
    world.add_body(Body::sphere([0.0; 3], 1.0)).unwrap();
    world.poses_mut().0[0] = [f64::NAN, 0.0, 0.0];
    let e = c.ray_casts(&world, &[ray]).unwrap_err().to_string();
    assert!(e.contains("body 0"), "{e}");
}

#[test]
fn changed_bodies_are_searched_afresh() {
    // The collider keeps the bodies' tree while the world's bodies do not change: every change
    // (a pose, many poses, the bulk access, layers, an added or removed body) is seen.
    let mut world = World::new(1.0).unwrap();
    let mut c = Collider::cpu();
    let ray = Ray::new([0.0, 0.0, 10.0], [0.0, 0.0, -1.0], f64::INFINITY);
    let first = |c: &mut Collider, w: &World| c.ray_casts(w, &[ray]).unwrap()[0].map(|h| (h.distance, h.id));
    let a = world.add_body(Body::sphere([0.0, 0.0, 0.0], 1.0)).unwrap();
    assert_eq!(first(&mut c, &world), Some((9.0, a.0)));
    assert_eq!(first(&mut c, &world), Some((9.0, a.0)), "the same world again");
    world.set_pose(a, [0.0, 0.0, 2.0], [0.0, 0.0, 0.0, 1.0]).unwrap();
    assert_eq!(first(&mut c, &world), Some((7.0, a.0)));
    world.set_poses(&[a], &[[0.0, 0.0, 3.0]], &[[0.0, 0.0, 0.0, 1.0]]).unwrap();
    assert_eq!(first(&mut c, &world), Some((6.0, a.0)));
    world.poses_mut().0[0] = [0.0, 0.0, 4.0];
    assert_eq!(first(&mut c, &world), Some((5.0, a.0)));
    let b = world.add_body(Body::sphere([0.0, 0.0, 6.0], 1.0)).unwrap();
    assert_eq!(first(&mut c, &world), Some((3.0, b.0)));
    world.set_layers(b, 2, u32::MAX).unwrap();
    assert_eq!(c.ray_casts(&world, &[ray.with_mask(1)]).unwrap()[0].map(|h| h.id), Some(a.0));
    world.remove_body(b).unwrap();
    assert_eq!(first(&mut c, &world), Some((5.0, a.0)));
    // Another world with the same bodies' versions is another world.
    let mut other = World::new(1.0).unwrap();
    other.add_body(Body::sphere([0.0, 0.0, 8.0], 1.0)).unwrap();
    assert_eq!(first(&mut c, &other), Some((1.0, 0)));
    assert_eq!(first(&mut c, &world), Some((5.0, a.0)));
}

/// The same hits, bit for bit, for any thread count, with and without AVX2, and whatever the
/// rays' order, on a world of a mesh, a heightfield beside it and bodies on both.
#[test]
fn hits_are_the_same_bits_on_any_thread_count_with_or_without_avx2() {
    let mut r = rng(41);
    let scene = Scene::crater(600, 4);
    let mut world = scene.world(1.0).unwrap();
    let heights: Vec<f64> = (0..60 * 70).map(|_| r.random_range(-3.0..1.0)).collect();
    world.set_heightfield(Heightfield::new(heights, 60, 70, 1.5, [-20.0, -10.0]).unwrap()).unwrap();
    let rays = hard_rays(&mut r, &world, 6000, [-22.0, -12.0, -4.0], [110.0, 92.0, 8.0]);
    let run = |threads: usize, portable_code: bool, rays: &[Ray]| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| {
            let opts = ColliderOptions { portable_code, ..ColliderOptions::default() };
            let mut c = Collider::new(&Engine::cpu(), &opts).unwrap();
            (c.ray_casts(&world, rays).unwrap(), c.ray_casts_all(&world, rays, 6).unwrap())
        })
    };
    let (first, all) = run(2, false, &rays);
    let kinds = |k| first.iter().flatten().filter(|h| h.kind == k).count();
    assert!(
        kinds(ContactKind::Triangle) > 500 && kinds(ContactKind::Heightfield) > 300 && kinds(ContactKind::Body) > 200,
        "{} {} {}",
        kinds(ContactKind::Triangle),
        kinds(ContactKind::Heightfield),
        kinds(ContactKind::Body)
    );
    let same_first = |a: &[Option<RayHit>], b: &[Option<RayHit>]| {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x.as_slice(), y.as_slice()))
    };
    for (threads, portable) in [(1, false), (3, true), (8, false), (2, true)] {
        let (f, a) = run(threads, portable, &rays);
        assert!(same_first(&f, &first), "{threads} threads, portable code {portable}: first hits");
        assert!(a.offsets == all.offsets && same(&a.hits, &all.hits), "{threads} threads, portable {portable}: all");
    }
    // The rays backwards: each ray's hits are its own.
    let reversed: Vec<Ray> = rays.iter().rev().copied().collect();
    let (f, _) = run(2, false, &reversed);
    let back: Vec<Option<RayHit>> = f.into_iter().rev().collect();
    assert!(same_first(&back, &first), "the rays in another order");
}

/// A scene too big for the caches (a heightfield of 1,100 × 1,100 heights, 9.7 MB): big
/// batches are cast in a coherent order, small ones in the order given; the same hits.
#[test]
fn big_scenes_cast_in_a_coherent_order_give_the_same_hits() {
    let mut r = rng(67);
    let scene = Scene::crater(400, 5);
    let mut world = scene.world(1.0).unwrap();
    let heights: Vec<f64> = (0..1100 * 1100).map(|_| r.random_range(-3.0..1.0)).collect();
    world.set_heightfield(Heightfield::new(heights, 1100, 1100, 0.1, [-2.0, -2.0]).unwrap()).unwrap();
    let rays = hard_rays(&mut r, &world, 9000, [-4.0, -4.0, -4.0], [112.0, 112.0, 8.0]);
    let mut c = Collider::cpu();
    let whole = c.ray_casts(&world, &rays).unwrap();
    let pieces: Vec<Option<RayHit>> = rays.chunks(1000).flat_map(|p| c.ray_casts(&world, p).unwrap()).collect();
    assert!(whole.iter().flatten().filter(|h| h.kind == ContactKind::Heightfield).count() > 1000);
    assert!(whole.len() == pieces.len() && whole.iter().zip(&pieces).all(|(a, b)| same(a.as_slice(), b.as_slice())));
    let whole = c.ray_casts_all(&world, &rays, 3).unwrap();
    for (k, p) in rays.chunks(1000).enumerate() {
        let part = c.ray_casts_all(&world, p, 3).unwrap();
        for i in 0..p.len() {
            assert!(same(whole.row(k * 1000 + i), part.row(i)), "ray {}", k * 1000 + i);
        }
    }
}

/// Bodies that move tick after tick (the collider refits its tree of them, and rebuilds it
/// every so often), some far and turned: every tick's hits are the brute force's.
#[test]
fn moving_bodies_are_hit_where_they_are_now() {
    let mut r = rng(53);
    let scene = Scene::crater(300, 9);
    let mut world = scene.world(1.0).unwrap();
    let mut collider = Collider::cpu();
    for tick in 0..40u64 {
        scene.advance(&mut world, tick);
        if tick % 7 == 3 {
            // A few bodies leap across the scene and turn.
            let ids: Vec<BodyId> = (0..5).map(|k| BodyId(((tick as u32) * 13 + k * 37) % 300)).collect();
            let centers: Vec<V3> =
                ids.iter().map(|_| [r.random_range(0.0..108.0), r.random_range(0.0..90.0), 2.0]).collect();
            let turns: Vec<[f64; 4]> = ids.iter().map(|_| [r.random_range(-1.0..1.0), 0.3, 0.1, 1.0]).collect();
            world.set_poses(&ids, &centers, &turns).unwrap();
        }
        let b = world.bodies();
        let rays: Vec<Ray> = (0..150)
            .map(|k| {
                let c = b.center[(k * 7 + tick as usize) % b.len()];
                let o = [c[0] + r.random_range(-3.0..3.0), c[1] + r.random_range(-3.0..3.0), c[2] + 6.0];
                Ray::new(o, [r.random_range(-0.3..0.3), r.random_range(-0.3..0.3), -1.0], f64::INFINITY)
            })
            .collect();
        let (hit, _) = check_against_brute_force(&format!("tick {tick}"), &mut collider, &world, &rays);
        assert!(hit > 100, "tick {tick}: {hit} rays hit");
    }
}
