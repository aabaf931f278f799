//! Signs of closest-point distances on closed meshes: inside negative, whichever way the
//! triangles are wound; open meshes are refused with the offending edge named.

use nearkit::{ClosestPointOptions, Engine, Mesh, MeshIndex, Points};
use rand::{Rng, SeedableRng};

fn cube() -> Mesh<f64> {
    let v: Vec<[f64; 3]> = (0..8).map(|i| [(i & 1) as f64, (i >> 1 & 1) as f64, (i >> 2 & 1) as f64]).collect();
    // Outward-wound quads (as two triangles each).
    let quads = [[0, 2, 3, 1], [4, 5, 7, 6], [0, 1, 5, 4], [2, 6, 7, 3], [0, 4, 6, 2], [1, 3, 7, 5]];
    let triangles = quads.iter().flat_map(|q| [[q[0], q[1], q[2]], [q[0], q[2], q[3]]]).collect();
    Mesh { vertices: Points::from_rows(&v), triangles }
}

fn check(mesh: &Mesh<f64>, inside: impl Fn([f64; 3]) -> Option<bool>, seed: u64, lo: f64, hi: f64) {
    let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
    let q = Points::from_rows(
        &(0..4000).map(|_| [0; 3].map(|_: i32| lo + rng.random::<f64>() * (hi - lo))).collect::<Vec<_>>(),
    );
    let index = MeshIndex::new(mesh, &Engine::cpu()).unwrap();
    let r = index.closest_points(&q, &ClosestPointOptions::default()).unwrap();
    let s = index.signs_of(&q, &r).unwrap();
    let again = index.signed_distances(&q, &ClosestPointOptions::default()).unwrap();
    assert!(s.iter().zip(&again).all(|(a, b)| a.to_bits() == b.to_bits()), "signs_of and signed_distances agree");
    let mut checked = 0;
    for i in 0..q.len() {
        assert_eq!(s[i].abs(), r.distance[i]);
        if let Some(inn) = inside(q.get(i)) {
            assert_eq!(s[i] < 0.0, inn, "query {:?}: signed {}", q.get(i), s[i]);
            checked += 1;
        }
    }
    assert!(checked > 3000, "{checked}");
}

#[test]
fn cube_signs_match_point_in_box() {
    let inside = |p: [f64; 3]| {
        let m = p.iter().map(|&x| x.min(1.0 - x)).fold(f64::INFINITY, f64::min);
        (m.abs() > 1e-9).then_some(m > 0.0)
    };
    check(&cube(), inside, 1, -1.0, 2.0);
    // Wound the other way round: the same signs.
    let mut flipped = cube();
    flipped.triangles.iter_mut().for_each(|t| t.swap(1, 2));
    check(&flipped, inside, 2, -1.0, 2.0);
}

#[test]
fn sphere_signs_match_the_radius() {
    let mesh = Mesh::<f64>::uv_sphere(30, 60, 10.0, [1.0, 2.0, 3.0]);
    let inside = |p: [f64; 3]| {
        let r = ((p[0] - 1.0).powi(2) + (p[1] - 2.0).powi(2) + (p[2] - 3.0).powi(2)).sqrt();
        ((r - 10.0).abs() > 0.3).then_some(r < 10.0)
    };
    check(&mesh, inside, 3, -14.0, 16.0);
}

#[test]
fn open_meshes_are_refused() {
    let mut open = cube();
    open.triangles.pop();
    let q = Points::from_rows(&[[0.5, 0.5, 0.5]]);
    let index = MeshIndex::new(&open, &Engine::cpu()).unwrap();
    let r = index.closest_points(&q, &ClosestPointOptions::default()).unwrap();
    let e = index.signs_of(&q, &r).unwrap_err().to_string();
    assert_eq!(e, index.signed_distances(&q, &ClosestPointOptions::default()).unwrap_err().to_string());
    assert!(e.contains("not closed") && e.contains("edge ("), "{e}");
}

/// A closed, non-convex solid: a random heightfield over a 6 × 6 grid, walls, a flat bottom.
/// Near its valleys a face normal alone gives the wrong sign; pseudo-normals do not.
#[test]
fn heightfield_solid_signs_match_its_surface() {
    let n = 7usize;
    let mut rng = rand_pcg::Pcg64::seed_from_u64(9);
    let h: Vec<f64> = (0..n * n).map(|_| 1.0 + rng.random::<f64>() * 2.0).collect();
    let mut v = vec![];
    for j in 0..n {
        for i in 0..n {
            v.push([i as f64, j as f64, h[j * n + i]]);
        }
    }
    for j in 0..n {
        for i in 0..n {
            v.push([i as f64, j as f64, 0.0]);
        }
    }
    let t = |i: usize, j: usize| (j * n + i) as u32;
    let b = |i: usize, j: usize| (n * n + j * n + i) as u32;
    let mut tris = vec![];
    for j in 0..n - 1 {
        for i in 0..n - 1 {
            tris.push([t(i, j), t(i + 1, j), t(i + 1, j + 1)]);
            tris.push([t(i, j), t(i + 1, j + 1), t(i, j + 1)]);
            tris.push([b(i, j), b(i + 1, j + 1), b(i + 1, j)]);
            tris.push([b(i, j), b(i, j + 1), b(i + 1, j + 1)]);
        }
    }
    // Walls: each top boundary edge A -> B (as its top triangle runs it) joined to the bottom.
    let mut wall = |a: (usize, usize), bb: (usize, usize)| {
        let (ta, tb, ba, bbb) = (t(a.0, a.1), t(bb.0, bb.1), b(a.0, a.1), b(bb.0, bb.1));
        tris.push([tb, ta, ba]);
        tris.push([tb, ba, bbb]);
    };
    for i in 0..n - 1 {
        wall((i, 0), (i + 1, 0));
        wall((i + 1, n - 1), (i, n - 1));
    }
    for j in 0..n - 1 {
        wall((n - 1, j), (n - 1, j + 1));
        wall((0, j + 1), (0, j));
    }
    let mesh = Mesh { vertices: Points::from_rows(&v), triangles: tris };
    let height = |x: f64, y: f64| {
        let (i, j) = ((x.floor() as usize).min(n - 2), (y.floor() as usize).min(n - 2));
        let (fx, fy) = (x - i as f64, y - j as f64);
        let (h00, h10, h01, h11) = (h[j * n + i], h[j * n + i + 1], h[(j + 1) * n + i], h[(j + 1) * n + i + 1]);
        if fx >= fy {
            h00 + fx * (h10 - h00) + fy * (h11 - h10)
        } else {
            h00 + fy * (h01 - h00) + fx * (h11 - h01)
        }
    };
    let inside = |p: [f64; 3]| {
        let (x, y, z) = (p[0], p[1], p[2]);
        let m = (n - 1) as f64;
        if x <= 1e-6 || y <= 1e-6 || x >= m - 1e-6 || y >= m - 1e-6 {
            return (x < -1e-6 || y < -1e-6 || x > m + 1e-6 || y > m + 1e-6).then_some(false);
        }
        let top = height(x, y);
        ((z - top).abs() > 1e-6 && z.abs() > 1e-6).then_some(z > 0.0 && z < top)
    };
    check(&mesh, inside, 10, -1.0, 7.0);
}
