//! The collision world against brute-force references: every narrow-phase routine checked
//! by independent means (sampling, analytic cases), and the broad phase checked against all
//! pairs on random scenes of several shapes.

use nearkit::collide::scene::{heightfield, Scene};
use nearkit::collide::{
    Body, BodyId, Collider, ColliderOptions, Contact, ContactKind, Heightfield, Overlap, OverlapShape, Sweep,
    SweepResult, World, OVERLAP_LIMIT_MAX,
};
use nearkit::test_hooks::{
    contact_ellipsoid_ellipsoid, contact_ellipsoid_triangle, cuboid_meets_ellipsoid, cuboid_meets_triangle, dot, sub,
    sweep_ellipsoid_ellipsoid, sweep_ellipsoid_triangle, Shape, SweepHit, V3,
};
use nearkit::{Engine, Mesh, Points};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

fn rng(seed: u64) -> Pcg64 {
    Pcg64::seed_from_u64(seed)
}

fn random_shape(r: &mut Pcg64, lo: f64, hi: f64) -> Shape {
    let radii = [r.random_range(lo..hi), r.random_range(lo..hi), r.random_range(lo..hi)];
    let q =
        [r.random_range(-1.0..1.0), r.random_range(-1.0..1.0), r.random_range(-1.0..1.0), r.random_range(-1.0..1.0)];
    Shape::new(radii, q)
}

/// (x − c)ᵀΣ⁻¹(x − c) for offset d: < 1 inside.
fn metric(s: &Shape, d: V3) -> f64 {
    let u = s.unit_of(d);
    dot(u, u)
}

fn triangle_samples(c: [V3; 3], n: usize) -> Vec<V3> {
    let mut out = Vec::new();
    for i in 0..=n {
        for j in 0..=n - i {
            let (u, v) = (i as f64 / n as f64, j as f64 / n as f64);
            out.push(std::array::from_fn(|a| c[0][a] + (c[1][a] - c[0][a]) * u + (c[2][a] - c[0][a]) * v));
        }
    }
    out
}

#[test]
fn sphere_on_a_triangle_has_the_analytic_contact() {
    let s = Shape::new([0.5; 3], [0.0, 0.0, 0.0, 1.0]);
    let tri = [[-3.0, -3.0, -0.3], [3.0, -3.0, -0.3], [0.0, 3.0, -0.3]];
    let g = contact_ellipsoid_triangle(&s, tri).expect("overlap");
    assert!((g.depth - 0.2).abs() < 1e-12, "{g:?}");
    assert!((g.normal[2] - 1.0).abs() < 1e-12 && g.normal[0].abs() < 1e-12, "{g:?}");
    assert!((g.point[2] + 0.3).abs() < 1e-12, "{g:?}");
    // Touching is not overlapping; just apart is apart.
    let touching = tri.map(|p| [p[0], p[1], -0.5]);
    assert!(contact_ellipsoid_triangle(&s, touching).is_none());
}

#[test]
fn ellipsoid_triangle_contacts_agree_with_sampling() {
    let mut r = rng(1);
    let (mut hits, mut misses) = (0, 0);
    for case in 0..3000 {
        let s = random_shape(&mut r, 0.2, 2.0);
        let scale = if case % 3 == 0 { 0.3 } else { 3.0 };
        let tri: [V3; 3] = std::array::from_fn(|_| std::array::from_fn(|_| r.random_range(-scale..scale)));
        let samples = triangle_samples(tri, 40);
        let best = samples.iter().map(|p| metric(&s, *p)).fold(f64::INFINITY, f64::min);
        match contact_ellipsoid_triangle(&s, tri) {
            Some(g) => {
                hits += 1;
                let m = metric(&s, g.point);
                assert!(m < 1.0 + 1e-9, "case {case}: contact point outside the body ({m})");
                assert!(m <= best + 1e-9, "case {case}: a sampled point is deeper ({best} < {m})");
                let on = nearkit::closest_point_triangle(g.point, tri[0], tri[1], tri[2]);
                assert!(on.d2 < 1e-18, "case {case}: contact point off the triangle");
                assert!(g.depth > -1e-12, "case {case}: negative depth {}", g.depth);
                assert!((dot(g.normal, g.normal) - 1.0).abs() < 1e-12);
                // Moving the body by depth along the normal leaves the point on or outside it.
                let moved = sub(g.point, [g.normal[0] * g.depth, g.normal[1] * g.depth, g.normal[2] * g.depth]);
                assert!(metric(&s, moved) > 1.0 - 1e-6, "case {case}: depth does not separate");
            }
            None => {
                misses += 1;
                assert!(best >= 1.0 - 1e-12, "case {case}: a sampled triangle point is inside ({best})");
            }
        }
    }
    assert!(hits > 300 && misses > 300, "{hits} hits, {misses} misses");
}

#[test]
fn spheres_have_the_analytic_contact() {
    let (a, b) = (Shape::new([1.0; 3], [0.0, 0.0, 0.0, 1.0]), Shape::new([0.5; 3], [0.3, 0.1, 0.0, 1.0]));
    let g = contact_ellipsoid_ellipsoid(&a, &b, [1.2, 0.0, 0.0]).expect("overlap");
    assert!((g.depth - 0.3).abs() < 1e-9, "{g:?}");
    assert!((g.normal[0] + 1.0).abs() < 1e-9, "{g:?}");
    assert!((g.point[0] - 0.8).abs() < 1e-12, "{g:?}"); // 1.2 · 1 / (1 + 0.5)
    assert!(contact_ellipsoid_ellipsoid(&a, &b, [1.5, 0.0, 0.0]).is_none(), "touching");
    assert!(contact_ellipsoid_ellipsoid(&a, &b, [1.5000001, 0.0, 0.0]).is_none());
    assert!(contact_ellipsoid_ellipsoid(&a, &b, [1.4999999, 0.0, 0.0]).is_some());
}

/// Points on an ellipsoid's surface (offsets from its center).
fn surface(s: &Shape, n: usize) -> Vec<V3> {
    let mut out = Vec::new();
    for i in 0..n {
        let z = -1.0 + (2.0 * i as f64 + 1.0) / n as f64;
        let phi = i as f64 * 2.399_963_229_728_653;
        let rr = (1.0 - z * z).sqrt();
        out.push(s.world_of([rr * phi.cos(), rr * phi.sin(), z]));
    }
    out
}

/// Perram–Wertheim's F(λ) by Cramer's rule, for the sampling check.
fn pw_function(sa: &[f64; 6], sb: &[f64; 6], r: V3, l: f64) -> f64 {
    let g: Vec<f64> = (0..6).map(|k| (1.0 - l) * sa[k] + l * sb[k]).collect();
    let m = [[g[0], g[3], g[4]], [g[3], g[1], g[5]], [g[4], g[5], g[2]]];
    let det3 = |m: [[f64; 3]; 3]| {
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    };
    let det = det3(m);
    let x: Vec<f64> = (0..3)
        .map(|c| {
            let mut mc = m;
            (0..3).for_each(|row| mc[row][c] = r[row]);
            det3(mc) / det
        })
        .collect();
    l * (1.0 - l) * (r[0] * x[0] + r[1] * x[1] + r[2] * x[2])
}

#[test]
fn ellipsoid_pairs_agree_with_sampling() {
    let mut r = rng(2);
    let (mut hits, mut misses) = (0, 0);
    for case in 0..2000 {
        let a = random_shape(&mut r, 0.2, 2.0);
        let b = random_shape(&mut r, 0.2, 2.0);
        let rv: V3 = std::array::from_fn(|_| r.random_range(-3.0..3.0));
        let got = contact_ellipsoid_ellipsoid(&a, &b, rv);
        let back = contact_ellipsoid_ellipsoid(&b, &a, [-rv[0], -rv[1], -rv[2]]);
        assert_eq!(got.is_some(), back.is_some(), "case {case}: asymmetric");
        match got {
            Some(g) => {
                hits += 1;
                assert!(metric(&a, g.point) < 1.0 + 1e-9, "case {case}: point outside a");
                assert!(metric(&b, sub(g.point, rv)) < 1.0 + 1e-9, "case {case}: point outside b");
                assert!(g.depth > 0.0, "case {case}: depth {}", g.depth);
                // The depth along the normal separates them: a's support plane meets b's.
                let n = [-g.normal[0], -g.normal[1], -g.normal[2]];
                let gap = dot(n, rv) - a.support(n) - b.support(n);
                assert!((gap + g.depth).abs() < 1e-9, "case {case}");
            }
            None => {
                misses += 1;
                // max F < 1 would mean overlap: a dense scan of λ must not find it below 1.
                let (sa, sb) = (a.sigma(), b.sigma());
                let f_max = (1..4000).map(|k| pw_function(&sa, &sb, rv, k as f64 / 4000.0)).fold(0.0, f64::max);
                assert!(f_max > 1.0 - 1e-6, "case {case}: max F {f_max} < 1 but no contact");
                let inside = surface(&a, 4000).into_iter().any(|p| metric(&b, sub(p, rv)) < 1.0 - 1e-9);
                assert!(!inside, "case {case}: a point of a is inside b");
            }
        }
    }
    assert!(hits > 200 && misses > 200, "{hits} hits, {misses} misses");
}

fn flat_triangle() -> [V3; 3] {
    [[-10.0, -10.0, 0.0], [10.0, -10.0, 0.0], [0.0, 10.0, 0.0]]
}

#[test]
fn sweeps_hit_faces_edges_corners_and_start_in_contact() {
    let s = Shape::new([1.0; 3], [0.0, 0.0, 0.0, 1.0]);
    let at = |c: V3, tri: [V3; 3]| tri.map(|p| sub(p, c));
    // Falling onto the face.
    let h = sweep_ellipsoid_triangle(&s, at([0.0, 0.0, 5.0], flat_triangle()), [0.0, 0.0, -10.0]).unwrap();
    assert!((h.toi - 0.4).abs() < 1e-12 && (h.normal[2] - 1.0).abs() < 1e-12, "{h:?}");
    assert!((h.point[2] + 5.0).abs() < 1e-12, "{h:?}");
    // Too short to reach it, and moving away.
    assert!(sweep_ellipsoid_triangle(&s, at([0.0, 0.0, 5.0], flat_triangle()), [0.0, 0.0, -3.9]).is_none());
    assert!(sweep_ellipsoid_triangle(&s, at([0.0, 0.0, 5.0], flat_triangle()), [0.0, 0.0, 3.0]).is_none());
    // Grazing: gliding at height exactly 1 touches without overlapping.
    assert!(sweep_ellipsoid_triangle(&s, at([-20.0, 0.0, 1.0], flat_triangle()), [40.0, 0.0, 0.0]).is_none());
    // Edge: moving in the triangle's plane towards its edge y = 0.
    let tri = [[0.0, 0.0, 0.0], [10.0, 0.0, 0.0], [0.0, 10.0, 0.0]];
    let h = sweep_ellipsoid_triangle(&s, at([5.0, -5.0, 0.0], tri), [0.0, 10.0, 0.0]).unwrap();
    assert!((h.toi - 0.4).abs() < 1e-12, "{h:?}");
    assert!((h.point[0] - 0.0).abs() < 1e-12 && (h.point[1] - 5.0).abs() < 1e-12, "{h:?}");
    assert!((h.normal[1] + 1.0).abs() < 1e-12, "{h:?}");
    // Corner: straight at (0, 0, 0) from the far side.
    let h = sweep_ellipsoid_triangle(&s, at([-5.0, -5.0, 0.0], tri), [10.0, 10.0, 0.0]).unwrap();
    let want = (50f64.sqrt() - 1.0) / 200f64.sqrt();
    assert!((h.toi - want).abs() < 1e-12, "{h:?} want {want}");
    assert!((h.point[0] - 5.0).abs() < 1e-12 && (h.point[1] - 5.0).abs() < 1e-12, "{h:?}");
    // Starting in contact.
    let h = sweep_ellipsoid_triangle(&s, at([1.0, 1.0, 0.5], tri), [0.0, 0.0, 5.0]).unwrap();
    assert_eq!(h.toi, 0.0);
    assert!((h.normal[2] - 1.0).abs() < 1e-12, "{h:?}");
    // A degenerate (segment) triangle is hit on its edge.
    let seg = [[0.0, 0.0, 0.0], [10.0, 0.0, 0.0], [5.0, 0.0, 0.0]];
    let h = sweep_ellipsoid_triangle(&s, at([5.0, 0.0, 5.0], seg), [0.0, 0.0, -10.0]).unwrap();
    assert!((h.toi - 0.4).abs() < 1e-12, "{h:?}");
}

/// The first t in [0, 1] where `overlaps(t)`, by bisection after a scan in fine steps (so a
/// brief pass-through is not missed).
fn first_overlap_time(overlaps: impl Fn(f64) -> bool) -> Option<f64> {
    let steps = 4000;
    let k = (0..=steps).find(|&k| overlaps(k as f64 / steps as f64))?;
    if k == 0 {
        return Some(0.0);
    }
    let (mut lo, mut hi) = ((k - 1) as f64 / steps as f64, k as f64 / steps as f64);
    for _ in 0..60 {
        let m = 0.5 * (lo + hi);
        if overlaps(m) {
            hi = m;
        } else {
            lo = m;
        }
    }
    Some(hi)
}

/// First overlap time of a moving ellipsoid with a triangle, by the static overlap test.
fn first_overlap(s: &Shape, tri: [V3; 3], motion: V3) -> Option<f64> {
    first_overlap_time(|t| {
        let c = [motion[0] * t, motion[1] * t, motion[2] * t];
        contact_ellipsoid_triangle(s, tri.map(|p| sub(p, c))).is_some()
    })
}

#[test]
fn ellipsoid_sweeps_agree_with_bisection() {
    let mut r = rng(3);
    let (mut hits, mut misses) = (0, 0);
    for case in 0..1500 {
        let s = random_shape(&mut r, 0.3, 1.5);
        let tri: [V3; 3] = std::array::from_fn(|_| std::array::from_fn(|_| r.random_range(-3.0..3.0)));
        let start: V3 = std::array::from_fn(|_| r.random_range(-5.0..5.0));
        // Aimed near the triangle's centroid, so that about half of them hit.
        let aim: V3 = std::array::from_fn(|a| (tri[0][a] + tri[1][a] + tri[2][a]) / 3.0 + r.random_range(-3.0..3.0));
        let reach = r.random_range(0.3..1.6);
        let motion: V3 = std::array::from_fn(|a| (aim[a] - start[a]) * reach);
        let rel = tri.map(|p| sub(p, start));
        let got = sweep_ellipsoid_triangle(&s, rel, motion);
        let want = first_overlap(&s, rel, motion);
        match (got, want) {
            (Some(h), Some(t)) => {
                hits += 1;
                assert!((h.toi - t).abs() < 1e-6, "case {case}: toi {} vs bisection {t}", h.toi);
                let c = [motion[0] * h.toi, motion[1] * h.toi, motion[2] * h.toi];
                assert!((metric(&s, sub(h.point, c)) - 1.0).abs() < 1e-6 || h.toi == 0.0, "case {case}");
            }
            (None, None) => misses += 1,
            // A sweep that only touches (or grazes within rounding) may be seen by one side.
            (Some(h), None) => {
                let c = [motion[0] * h.toi, motion[1] * h.toi, motion[2] * h.toi];
                let m = contact_ellipsoid_triangle(&s, rel.map(|p| sub(p, c)));
                assert!(m.is_none_or(|g| g.depth < 1e-6), "case {case}: hit {h:?} but no overlap");
            }
            (None, Some(t)) => panic!("case {case}: missed an overlap at t = {t}"),
        }
    }
    assert!(hits > 200 && misses > 200, "{hits} hits, {misses} misses");
}

#[test]
fn sphere_sweeps_meet_spheres_where_the_formula_says() {
    let mut r = rng(30);
    let unit = [0.0, 0.0, 0.0, 1.0];
    let (mut hits, mut misses) = (0, 0);
    for case in 0..3000 {
        let (ra, rb) = (r.random_range(0.1..2.0), r.random_range(0.1..2.0));
        let (a, b) = (Shape::new([ra; 3], unit), Shape::new([rb; 3], unit));
        let r0: V3 = std::array::from_fn(|_| r.random_range(-6.0..6.0));
        let motion: V3 = std::array::from_fn(|k| r0[k] * r.random_range(0.3..1.8) + r.random_range(-2.0..2.0));
        // |r0 − t·m| = ra + rb: m·m t² − 2 m·r0 t + r0·r0 − R² = 0, its smaller root in [0, 1].
        let big = ra + rb;
        let (qa, qb, qc) = (dot(motion, motion), dot(motion, r0), dot(r0, r0) - big * big);
        let want = if qc < 0.0 {
            Some(0.0)
        } else {
            let disc = qb * qb - qa * qc;
            (disc >= 0.0 && qb > 0.0).then(|| (qb - disc.sqrt()) / qa).filter(|t| *t <= 1.0)
        };
        let got = sweep_ellipsoid_ellipsoid(&a, &b, r0, motion);
        match (got, want) {
            (Some(h), Some(t)) => {
                hits += 1;
                assert!((h.toi - t).abs() < 1e-12, "case {case}: toi {} against {t}", h.toi);
                // The point is on both spheres; the normal points from b to a.
                let c: V3 = std::array::from_fn(|k| motion[k] * h.toi);
                let gap: V3 = sub(c, r0);
                let len = dot(gap, gap).sqrt();
                if t > 0.0 {
                    assert!((dot(sub(h.point, c), sub(h.point, c)).sqrt() - ra).abs() < 1e-9, "case {case}");
                    assert!((dot(sub(h.point, r0), sub(h.point, r0)).sqrt() - rb).abs() < 1e-9, "case {case}");
                    assert!((dot(h.normal, gap) / len - 1.0).abs() < 1e-9, "case {case}: normal {:?}", h.normal);
                }
            }
            (None, None) => misses += 1,
            (got, want) => panic!("case {case}: {got:?} against {want:?}"),
        }
    }
    assert!(hits > 500 && misses > 500, "{hits} hits, {misses} misses");
}

/// First overlap time of a moving ellipsoid with a still one, by the static contact test.
fn first_overlap_of_bodies(a: &Shape, b: &Shape, r0: V3, motion: V3) -> Option<f64> {
    first_overlap_time(|t| contact_ellipsoid_ellipsoid(a, b, std::array::from_fn(|k| r0[k] - motion[k] * t)).is_some())
}

#[test]
fn ellipsoid_sweeps_meet_ellipsoids_where_bisection_does() {
    let mut r = rng(31);
    let (mut hits, mut misses) = (0, 0);
    for case in 0..1500 {
        let a = random_shape(&mut r, 0.2, 2.0);
        let b = random_shape(&mut r, 0.2, 2.0);
        let r0: V3 = std::array::from_fn(|_| r.random_range(-6.0..6.0));
        // Aimed near b, so that about half of them hit.
        let motion: V3 = std::array::from_fn(|k| (r0[k] + r.random_range(-2.5..2.5)) * r.random_range(0.4..1.6));
        let got = sweep_ellipsoid_ellipsoid(&a, &b, r0, motion);
        let want = first_overlap_of_bodies(&a, &b, r0, motion);
        let at = |t: f64| -> V3 { std::array::from_fn(|k| r0[k] - motion[k] * t) };
        match (got, want) {
            (Some(h), Some(t)) => {
                hits += 1;
                // Never later than the first overlap, and within the bisection's reach of it.
                assert!(h.toi <= t + 1e-12 && t - h.toi < 1e-8, "case {case}: toi {} against {t}", h.toi);
                if h.toi > 0.0 {
                    // Touching: the point on both surfaces, the normal pushing a away from b.
                    let c: V3 = std::array::from_fn(|k| motion[k] * h.toi);
                    assert!((metric(&a, sub(h.point, c)) - 1.0).abs() < 1e-6, "case {case}: point off a");
                    assert!((metric(&b, sub(h.point, r0)) - 1.0).abs() < 1e-6, "case {case}: point off b");
                    let rt = at(h.toi);
                    assert!(dot(h.normal, rt) < 0.0, "case {case}: normal {:?}", h.normal);
                    assert!(contact_ellipsoid_ellipsoid(&a, &b, at(h.toi * (1.0 - 1e-9))).is_none(), "case {case}");
                }
            }
            (None, None) => misses += 1,
            // A sweep that only grazes b may be seen by one side: check it barely overlaps.
            (Some(h), None) => {
                let m = contact_ellipsoid_ellipsoid(&a, &b, at(h.toi));
                assert!(m.is_none_or(|g| g.depth < 1e-6), "case {case}: hit {h:?} but no overlap");
            }
            (None, Some(t)) => {
                let g = contact_ellipsoid_ellipsoid(&a, &b, at(t)).unwrap();
                let deepest = (0..=400)
                    .filter_map(|k| contact_ellipsoid_ellipsoid(&a, &b, at(k as f64 / 400.0)))
                    .fold(g.depth, |d, g| d.max(g.depth));
                assert!(deepest < 1e-6, "case {case}: missed an overlap at t = {t}, {deepest} deep");
            }
        }
    }
    assert!(hits > 300 && misses > 300, "{hits} hits, {misses} misses");
}

/// The triangle clipped to the box |x_a| ≤ h_a (in the box's frame): whether anything is left.
fn clipped_triangle_is_left(h: V3, tri: [V3; 3]) -> bool {
    let mut poly: Vec<V3> = tri.to_vec();
    for a in 0..3 {
        for sign in [1.0, -1.0] {
            // Keep sign·x_a ≤ h_a.
            let inside = |p: &V3| sign * p[a] <= h[a];
            let mut out = Vec::new();
            for k in 0..poly.len() {
                let (p, q) = (poly[k], poly[(k + 1) % poly.len()]);
                if inside(&p) {
                    out.push(p);
                }
                if inside(&p) != inside(&q) {
                    let t = (h[a] - sign * p[a]) / (sign * (q[a] - p[a]));
                    out.push(std::array::from_fn(|i| p[i] + t * (q[i] - p[i])));
                }
            }
            poly = out;
            if poly.is_empty() {
                return false;
            }
        }
    }
    true
}

#[test]
fn cuboid_triangle_overlaps_agree_with_clipping() {
    let mut r = rng(60);
    let (mut hits, mut misses) = (0, 0);
    for case in 0..4000 {
        let b = random_shape(&mut r, 0.2, 2.0);
        let tri: [V3; 3] = std::array::from_fn(|_| std::array::from_fn(|_| r.random_range(-3.0..3.0)));
        let got = cuboid_meets_triangle(&b, tri);
        // The reference clips the triangle, in the box's frame, to the box shrunk and grown by
        // 1e-9: left in the smaller one, they overlap; nothing left in the larger, they do not.
        let local = tri.map(|p| {
            let m = &b.rot;
            [
                m[0][0] * p[0] + m[1][0] * p[1] + m[2][0] * p[2],
                m[0][1] * p[0] + m[1][1] * p[1] + m[2][1] * p[2],
                m[0][2] * p[0] + m[1][2] * p[1] + m[2][2] * p[2],
            ]
        });
        if clipped_triangle_is_left(b.radii.map(|v| v - 1e-9), local) {
            assert!(got, "case {case}: the triangle reaches into the box");
            hits += 1;
        } else if !clipped_triangle_is_left(b.radii.map(|v| v + 1e-9), local) {
            assert!(!got, "case {case}: the triangle is clear of the box");
            misses += 1;
        }
    }
    // A triangle flat on a face touches without overlapping.
    let unit = Shape::new([1.0; 3], [0.0, 0.0, 0.0, 1.0]);
    assert!(!cuboid_meets_triangle(&unit, [[-0.5, -0.5, 1.0], [0.5, -0.5, 1.0], [0.0, 0.5, 1.0]]));
    assert!(cuboid_meets_triangle(&unit, [[-0.5, -0.5, 0.999], [0.5, -0.5, 0.999], [0.0, 0.5, 0.999]]));
    // A point (a degenerate triangle) inside, and on a corner.
    assert!(cuboid_meets_triangle(&unit, [[0.2, 0.3, 0.4]; 3]));
    assert!(!cuboid_meets_triangle(&unit, [[1.0, 1.0, 1.0]; 3]));
    assert!(hits > 800 && misses > 800, "{hits} hits, {misses} misses");
}

/// min over the box of (x − c)ᵀΣ⁻¹(x − c), the box's points x = R·s (s in [−h, h]) as offsets
/// from its center and c the ellipsoid's center: coordinate descent on the convex quadratic
/// |A·s − b|², A = U·R, b = U·r (U = S⁻¹Rᵀ of the ellipsoid).
fn box_metric_min(b: &Shape, e: &Shape, r: V3) -> f64 {
    let a: [[f64; 3]; 3] =
        std::array::from_fn(|i| std::array::from_fn(|j| (0..3).map(|k| e.unit[i][k] * b.rot[k][j]).sum()));
    let t = e.unit_of(r);
    let mut s = [0.0f64; 3];
    for _ in 0..3000 {
        for j in 0..3 {
            let rest: V3 =
                std::array::from_fn(|i| t[i] - (0..3).filter(|&k| k != j).map(|k| a[i][k] * s[k]).sum::<f64>());
            let aa: f64 = (0..3).map(|i| a[i][j] * a[i][j]).sum();
            let ab: f64 = (0..3).map(|i| a[i][j] * rest[i]).sum();
            s[j] = (ab / aa).clamp(-b.radii[j], b.radii[j]);
        }
    }
    (0..3).map(|i| (0..3).map(|k| a[i][k] * s[k]).sum::<f64>() - t[i]).map(|v| v * v).sum()
}

#[test]
fn cuboid_ellipsoid_overlaps_agree_with_the_nearest_point_of_the_box() {
    let mut r = rng(61);
    let (mut hits, mut misses) = (0, 0);
    for case in 0..3000 {
        let b = random_shape(&mut r, 0.2, 2.0);
        let e = random_shape(&mut r, 0.2, 2.0);
        let off: V3 = std::array::from_fn(|_| r.random_range(-3.5..3.5));
        let got = cuboid_meets_ellipsoid(&b, &e, off);
        let m = box_metric_min(&b, &e, off);
        if m < 1.0 - 1e-6 {
            assert!(got, "case {case}: the box comes within {m} of the ellipsoid's center");
            hits += 1;
        } else if m > 1.0 + 1e-6 {
            assert!(!got, "case {case}: the box stays {m} from the ellipsoid's center");
            misses += 1;
        }
    }
    assert!(hits > 500 && misses > 500, "{hits} hits, {misses} misses");
}

/// Every contact by testing every body against every triangle and every other body.
fn brute_contacts(world: &World) -> Vec<Contact> {
    let b = world.bodies();
    let mut out = Vec::new();
    for i in 0..b.len() {
        if !b.alive[i] {
            continue;
        }
        let (c, s) = (b.center[i], Shape::new(b.radii[i], b.orientation[i]));
        if b.mask[i] & world.mesh_layer() != 0 {
            for (t, corners) in (0..world.triangle_count()).map(|t| (t, world.triangle(t).unwrap())) {
                if let Some(g) = contact_ellipsoid_triangle(&s, corners.map(|p| sub(p, c))) {
                    out.push(nearkit::test_hooks::contact(i as u32, ContactKind::Triangle, t as u32, c, &g));
                }
            }
            if let Some(h) = world.heightfield() {
                for t in 0..h.triangle_count() as u32 {
                    if let Some(g) = contact_ellipsoid_triangle(&s, h.triangle(t).map(|p| sub(p, c))) {
                        out.push(nearkit::test_hooks::contact(i as u32, ContactKind::Heightfield, t, c, &g));
                    }
                }
            }
        }
        for o in i + 1..b.len() {
            let meet = (b.layer[i] & b.mask[o]) != 0 && (b.layer[o] & b.mask[i]) != 0;
            if !b.alive[o] || !meet {
                continue;
            }
            if let Some(g) =
                contact_ellipsoid_ellipsoid(&s, &Shape::new(b.radii[o], b.orientation[o]), sub(b.center[o], c))
            {
                out.push(nearkit::test_hooks::contact(i as u32, ContactKind::Body, o as u32, c, &g));
            }
        }
    }
    out
}

/// A sweep's first hit by testing every candidate triangle, given in (kind, id) order, then
/// every body of `world` its mask and `ignore` let it meet, in id order (the first of equal
/// times wins).
fn brute_sweep(
    s: &Sweep,
    world: &World,
    triangles: impl IntoIterator<Item = (ContactKind, u32, [V3; 3])>,
) -> Option<SweepResult> {
    let shape = Shape::new(s.radii, s.orientation);
    let motion = sub(s.to, s.from);
    let mut best: Option<SweepResult> = None;
    let mut offer = |kind: ContactKind, other: u32, h: SweepHit| {
        if best.is_none_or(|b| h.toi < b.toi) {
            let point = [s.from[0] + h.point[0], s.from[1] + h.point[1], s.from[2] + h.point[2]];
            let triangle = if kind == ContactKind::Body { nearkit::NO_ID } else { other };
            best = Some(SweepResult { toi: h.toi, kind, other, triangle, point, normal: h.normal });
        }
    };
    if s.mask & world.mesh_layer() != 0 {
        for (kind, t, c) in triangles {
            if let Some(h) = sweep_ellipsoid_triangle(&shape, c.map(|p| sub(p, s.from)), motion) {
                offer(kind, t, h);
            }
        }
    }
    let b = world.bodies();
    for o in 0..b.len() {
        if b.alive[o] && s.mask & b.layer[o] != 0 && s.ignore != Some(BodyId(o as u32)) {
            let other = Shape::new(b.radii[o], b.orientation[o]);
            if let Some(h) = sweep_ellipsoid_ellipsoid(&shape, &other, sub(b.center[o], s.from), motion) {
                offer(ContactKind::Body, o as u32, h);
            }
        }
    }
    best
}

fn random_world(seed: u64, shape: &str) -> World {
    let mut r = rng(seed);
    let cell = if shape == "big cells" { 7.5 } else { 1.0 };
    let mut world = World::new(cell).unwrap();
    let n = 24;
    let heights: Vec<f64> = (0..n * n).map(|_| r.random_range(-1.0..1.0)).collect();
    world.set_mesh(&heightfield(&heights, n, n, 0.8)).unwrap();
    let count = 600;
    for i in 0..count {
        let (lo, hi) = match shape {
            "big bodies" if i % 10 == 0 => (1.0, 4.0),
            _ => (0.1, 0.9),
        };
        let center: V3 = match shape {
            "clustered" => {
                let k = (i % 5) as f64 * 4.0;
                [k + r.random_range(-1.0..1.0), k + r.random_range(-1.0..1.0), r.random_range(-1.0..1.0)]
            }
            "duplicates" => [(i % 40) as f64 * 0.45, (i % 40) as f64 * 0.4, 0.2],
            _ => [r.random_range(-1.0..19.0), r.random_range(-1.0..19.0), r.random_range(-2.0..2.0)],
        };
        let mut body = Body::ellipsoid(
            center,
            [r.random_range(lo..hi), r.random_range(lo..hi), r.random_range(lo..hi)],
            [r.random_range(-1.0..1.0), r.random_range(-1.0..1.0), r.random_range(-1.0..1.0), 1.0],
        );
        if shape == "layers" {
            body = body.with_layers(1 << (i % 3), if i % 4 == 0 { 0b110 } else { u32::MAX });
        }
        world.add_body(body).unwrap();
    }
    if shape == "layers" {
        world.set_mesh_layer(0b100);
    }
    if shape == "removed" {
        for i in (0..count).step_by(3) {
            world.remove_body(BodyId(i as u32)).unwrap();
        }
    }
    world
}

const SHAPES: [&str; 7] = ["uniform", "clustered", "duplicates", "big bodies", "big cells", "layers", "removed"];

#[test]
fn world_contacts_equal_all_pairs() {
    let mut cpu = Collider::new(&Engine::cpu(), &ColliderOptions::default()).unwrap();
    for (k, shape) in SHAPES.iter().enumerate() {
        let world = random_world(10 + k as u64, shape);
        let got = cpu.contacts(&world).unwrap();
        let want = brute_contacts(&world);
        assert!(want.len() > 50, "{shape}: only {} contacts", want.len());
        assert!(want.iter().any(|c| c.kind == ContactKind::Body), "{shape}: no body pairs");
        assert_eq!(got.len(), want.len(), "{shape}: contact count");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g, w, "{shape}");
        }
    }
}

/// A terrain of 30 m triangles, triangles a kilometre wide (some upright) and triangles of a
/// centimetre, in a world of 1 m cells: each size on its own level of the mesh's grid.
fn world_of_every_triangle_size(seed: u64, bodies: usize) -> World {
    let mut r = rng(seed);
    let n = 9;
    let heights: Vec<f64> = (0..n * n).map(|_| r.random_range(-40.0..40.0)).collect();
    let mut mesh = heightfield(&heights, n, n, 30.0);
    let add = |mesh: &mut Mesh<f64>, corners: [V3; 3]| {
        let v = mesh.vertices.len() as u32;
        for p in corners {
            mesh.vertices.push(p[0], p[1], p[2]);
        }
        mesh.triangles.push([v, v + 1, v + 2]);
    };
    add(&mut mesh, [[-500.0, -500.0, 3.0], [700.0, -400.0, -2.0], [100.0, 800.0, 1.0]]);
    add(&mut mesh, [[100.0, -500.0, -300.0], [100.0, 600.0, -300.0], [100.0, 0.0, 500.0]]);
    add(&mut mesh, [[-300.0, 120.0, -400.0], [600.0, 120.0, 400.0], [0.0, 121.0, 0.0]]);
    for _ in 0..300 {
        let c: V3 = [r.random_range(0.0..240.0), r.random_range(0.0..240.0), r.random_range(-40.0..40.0)];
        let s = r.random_range(0.002..0.05);
        add(&mut mesh, [c, [c[0] + s, c[1], c[2]], [c[0], c[1] + s, c[2] + s]]);
    }
    let mut scene = Scene::on_surface("sizes", mesh, bodies, (0.2, 0.9), seed);
    // Crowds, so that bodies touch each other too.
    for i in 0..bodies / 4 {
        let mut b = scene.bodies[i];
        b.center[0] += r.random_range(-0.6..0.6);
        b.center[2] += r.random_range(-0.6..0.6);
        scene.bodies.push(b);
    }
    scene.world(1.0).unwrap()
}

/// Triangles of every size against bodies of about a cell: the brute force's contacts and
/// sweeps, over ticks (the CPU collider's lists grid the mesh their own way).
#[test]
fn world_contacts_equal_all_pairs_for_triangles_of_every_size() {
    let mut world = world_of_every_triangle_size(5, 1600);
    let mut cpu = Collider::new(&Engine::cpu(), &ColliderOptions::default()).unwrap();
    let mut r = rng(6);
    for tick in 0..4 {
        let got = cpu.contacts(&world).unwrap();
        let want = brute_contacts(&world);
        assert!(want.iter().filter(|c| c.kind == ContactKind::Triangle && c.other >= 128).count() > 100, "{tick}");
        assert!(want.iter().filter(|c| c.kind == ContactKind::Triangle && c.other >= 131).count() > 10, "{tick}");
        assert!(want.iter().filter(|c| c.kind == ContactKind::Body).count() > 50, "tick {tick}");
        assert_eq!(got, want, "tick {tick}");
        for c in world.poses_mut().0.iter_mut() {
            for v in c.iter_mut() {
                *v += r.random_range(-0.3..0.3);
            }
        }
    }
    let corners: Vec<[V3; 3]> = (0..world.triangle_count()).map(|t| world.triangle(t).unwrap()).collect();
    // Every other sweep meets the mesh only (its mask misses the bodies' layer 1); some
    // ignore the body they start above.
    world.set_mesh_layer(3);
    let sweeps: Vec<Sweep> = world
        .bodies()
        .center
        .iter()
        .enumerate()
        .step_by(4)
        .map(|(i, &c)| {
            let s = Sweep::new(
                [0.3, 0.5, 0.4],
                [0.1, 0.2, 0.0, 1.0],
                [c[0], c[1], c[2] + 2.0],
                [c[0] + r.random_range(-3.0..3.0), c[1] + r.random_range(-3.0..3.0), c[2] - 3.0],
            );
            match i % 12 {
                0 | 8 => s.with_mask(2),
                4 => s.ignoring(BodyId(i as u32)),
                _ => s,
            }
        })
        .collect();
    let got = cpu.sweeps(&world, &sweeps).unwrap();
    let mut hits = [0; 2];
    for (s, g) in sweeps.iter().zip(&got) {
        let best =
            brute_sweep(s, &world, corners.iter().enumerate().map(|(t, c)| (ContactKind::Triangle, t as u32, *c)));
        assert_eq!(*g, best);
        if let Some(b) = best {
            hits[(b.kind == ContactKind::Body) as usize] += 1;
        }
    }
    assert!(hits[0] > 150 && hits[1] > 60, "{hits:?} hits on triangles and bodies");
}

/// The generated elevation model (30 m triangles) at 1 m cells: the mesh's grid holds a few
/// entries per triangle, where one level of 1 m cells would need billions.
#[test]
fn a_dem_of_30_m_triangles_grids_at_1_m_cells() {
    let scene = Scene::on_surface("dem", nearkit::collide::scene::dem_terrain(), 2000, (0.2, 0.8), 3);
    let world = scene.world(1.0).unwrap();
    let mut cpu = Collider::new(&Engine::cpu(), &ColliderOptions::default()).unwrap();
    let got = cpu.contacts(&world).unwrap();
    assert!(got.len() > 1000, "{} contacts", got.len());
    // The brute force on a sample of bodies (all 276,000 triangles each).
    let mut sample = World::new(1.0).unwrap();
    sample.set_mesh(&scene.mesh).unwrap();
    for b in scene.bodies.iter().step_by(50) {
        sample.add_body(*b).unwrap();
    }
    assert_eq!(cpu.contacts(&sample).unwrap(), brute_contacts(&sample));
}

/// The CPU collider's portable code (for CPUs without AVX2) finds the brute force's contacts
/// too, bit for bit the AVX2 code's.
#[test]
fn world_contacts_equal_all_pairs_in_portable_code() {
    let mut cpu = Collider::new(&Engine::cpu(), &ColliderOptions::default()).unwrap();
    for (k, shape) in SHAPES.iter().enumerate() {
        let world = random_world(30 + k as u64, shape);
        let fast: Vec<Contact> = cpu.contacts(&world).unwrap().to_vec();
        let portable_code = ColliderOptions { portable_code: true, ..ColliderOptions::default() };
        let portable: Vec<Contact> =
            Collider::new(&Engine::cpu(), &portable_code).unwrap().contacts(&world).unwrap().to_vec();
        let want = brute_contacts(&world);
        assert!(want.len() > 50, "{shape}: only {} contacts", want.len());
        assert_eq!(portable, want, "{shape}: portable code against the brute force");
        assert_eq!(fast, want, "{shape}: AVX2 code against the brute force");
    }
}

/// The CPU collider keeps candidate lists from tick to tick: over many ticks of small steps,
/// turns, jumps, most bodies teleporting, bodies added and removed, layers changed, and
/// another world in between, its contacts stay those of the brute force.
#[test]
fn world_contacts_stay_exact_over_ticks() {
    let mut cpu = Collider::new(&Engine::cpu(), &ColliderOptions::default()).unwrap();
    let mut r = rng(77);
    let mut world = random_world(20, "uniform");
    let other = random_world(21, "clustered");
    for tick in 0..40 {
        {
            let (centers, orientations) = world.poses_mut();
            for (c, q) in centers.iter_mut().zip(orientations.iter_mut()) {
                // Mostly centimetres; now and then a jump of metres.
                let step = if r.random_range(0.0..1.0) < 0.02 { 3.0 } else { 0.06 };
                for v in c.iter_mut() {
                    *v += r.random_range(-step..step);
                }
                for v in q.iter_mut() {
                    *v += r.random_range(-0.1..0.1);
                }
            }
        }
        if tick % 10 == 5 {
            world.remove_body(BodyId(tick as u32)).unwrap();
            world.add_body(Body::sphere([9.0, 9.0, 0.0], 1.5)).unwrap();
            world.add_body(Body::sphere([4.0, 12.0, 0.5], 0.7)).unwrap();
        }
        if tick == 25 {
            for i in (0..100).step_by(7) {
                world.set_layers(BodyId(i), 2, 2).unwrap();
            }
        }
        if tick == 30 || tick == 31 {
            // Most bodies teleport (the lists start afresh), then move back.
            let shift = if tick == 30 { 2.5 } else { -2.5 };
            for c in world.poses_mut().0.iter_mut().skip(50) {
                c[0] += shift;
            }
        }
        let got = cpu.contacts(&world).unwrap();
        let want = brute_contacts(&world);
        assert!(want.len() > 50, "tick {tick}: only {} contacts", want.len());
        assert_eq!(got, want, "tick {tick}");
        if tick % 7 == 3 {
            assert_eq!(cpu.contacts(&other).unwrap(), brute_contacts(&other), "the other world, tick {tick}");
        }
    }
}

/// A body whose box fits the grid but whose candidate-list box (a margin wider) does not is
/// refused by name; moved back, the collider recovers and is exact again.
#[test]
fn a_body_at_the_grids_edge_is_refused_and_the_lists_recover() {
    let mut cpu = Collider::new(&Engine::cpu(), &ColliderOptions::default()).unwrap();
    // 7.5 m cells, which the lists use too (they take cells of at least twice a body's box).
    let mut world = random_world(30, "big cells");
    assert_eq!(cpu.contacts(&world).unwrap(), brute_contacts(&world));
    let edge = world.add_body(Body::sphere([7.5 * 1_048_575.0 - 0.2, 0.0, 0.0], 0.01)).unwrap();
    let e = cpu.contacts(&world).unwrap_err().to_string();
    assert!(e.contains(&format!("body {}", edge.0)) && e.contains("larger cells"), "{e}");
    world.set_pose(edge, [5.0, 5.0, 0.0], [0.0, 0.0, 0.0, 1.0]).unwrap();
    for _ in 0..2 {
        assert_eq!(cpu.contacts(&world).unwrap(), brute_contacts(&world));
    }
}

#[test]
fn world_sweeps_equal_all_triangles_and_bodies() {
    let mut world = random_world(20, "uniform");
    world.set_mesh_layer(3);
    let corners: Vec<[V3; 3]> = (0..world.triangle_count()).map(|t| world.triangle(t).unwrap()).collect();
    let mut r = rng(21);
    let sweeps: Vec<Sweep> = (0..400)
        .map(|_| {
            let from: V3 = [r.random_range(0.0..18.0), r.random_range(0.0..18.0), r.random_range(1.5..4.0)];
            let to: V3 =
                [from[0] + r.random_range(-4.0..4.0), from[1] + r.random_range(-4.0..4.0), r.random_range(-3.0..1.0)];
            let s = Sweep::new([0.3, 0.6, 0.4], [0.1, 0.2, 0.0, 1.0], from, to);
            // Half of them meet the mesh only (the bodies are in layer 1); some ignore a body.
            match r.random_range(0..4) {
                0 | 1 => s.with_mask(2),
                2 => s.ignoring(BodyId(r.random_range(0..600))),
                _ => s,
            }
        })
        .collect();
    let mut cpu = Collider::new(&Engine::cpu(), &ColliderOptions::default()).unwrap();
    let got = cpu.sweeps(&world, &sweeps).unwrap();
    let mut hits = [0; 2];
    for (s, g) in sweeps.iter().zip(&got) {
        let best =
            brute_sweep(s, &world, corners.iter().enumerate().map(|(t, c)| (ContactKind::Triangle, t as u32, *c)));
        assert_eq!(*g, best);
        if let Some(b) = best {
            hits[(b.kind == ContactKind::Body) as usize] += 1;
        }
    }
    assert!(hits[0] > 100 && hits[1] > 100, "{hits:?} hits on triangles and bodies");
    // In small batches, which look at every body instead of gridding them: the same.
    let batched: Vec<_> = sweeps.chunks(50).flat_map(|c| cpu.sweeps(&world, c).unwrap()).collect();
    assert_eq!(batched, got);
}

/// A terrain as a heightfield (with a mesh beside it) has the brute force's contacts and
/// sweeps, and the same ones, bit for bit, as the terrain given as a mesh.
#[test]
fn a_heightfield_has_the_contacts_of_its_mesh() {
    let mut r = rng(41);
    let (rows, cols, spacing) = (23, 31, 1.7);
    let heights: Vec<f64> = (0..rows * cols).map(|_| r.random_range(-1.5..1.5)).collect();
    let origin = [-3.25, 7.5];
    let terrain = Heightfield::new(heights, rows, cols, spacing, origin).unwrap();
    let as_mesh = terrain.to_mesh();
    let scene = Scene::on_surface("terrain", as_mesh.clone(), 1500, (0.1, 0.9), 42);
    let mut native = World::new(1.0).unwrap();
    native.set_heightfield(terrain.clone()).unwrap();
    // A few triangles of a mesh over the terrain too: the mesh's contacts come first.
    let ramp = Mesh {
        vertices: Points::from_rows(&[[0.0, 10.0, -1.0], [40.0, 10.0, 1.0], [0.0, 40.0, 0.5], [40.0, 40.0, 0.0]]),
        triangles: vec![[0, 1, 2], [1, 3, 2]],
    };
    native.set_mesh(&ramp).unwrap();
    let mut meshed = World::new(1.0).unwrap();
    meshed.set_mesh(&as_mesh).unwrap();
    for b in &scene.bodies {
        native.add_body(*b).unwrap();
        meshed.add_body(*b).unwrap();
    }
    let mut cpu = Collider::new(&Engine::cpu(), &ColliderOptions::default()).unwrap();
    let portable = ColliderOptions { portable_code: true, ..ColliderOptions::default() };
    let mut cpu_portable = Collider::new(&Engine::cpu(), &portable).unwrap();
    for tick in 0..3 {
        let got = cpu.contacts(&native).unwrap();
        let want = brute_contacts(&native);
        assert!(want.iter().filter(|c| c.kind == ContactKind::Heightfield).count() > 1000, "tick {tick}");
        assert!(want.iter().filter(|c| c.kind == ContactKind::Triangle).count() > 20, "tick {tick}");
        assert_eq!(got, want, "tick {tick}");
        assert_eq!(cpu_portable.contacts(&native).unwrap(), want, "tick {tick}, portable code");
        let terrain_only: Vec<Contact> = got
            .iter()
            .filter(|c| c.kind != ContactKind::Triangle)
            .map(|c| Contact {
                kind: if c.kind == ContactKind::Heightfield { ContactKind::Triangle } else { c.kind },
                ..*c
            })
            .collect();
        assert_eq!(terrain_only, cpu.contacts(&meshed).unwrap(), "tick {tick}: the mesh of the terrain");
        scene.advance(&mut native, tick);
        scene.advance(&mut meshed, tick);
    }
    native.set_mesh_layer(3);
    let sweeps: Vec<Sweep> = (0..600)
        .map(|k| {
            let from: V3 = [r.random_range(-5.0..50.0), r.random_range(5.0..50.0), r.random_range(1.0..4.0)];
            let to: V3 = [from[0] + r.random_range(-5.0..5.0), from[1] + r.random_range(-5.0..5.0), -3.0];
            // Two in three meet the terrain only (the bodies are in layer 1).
            Sweep::new([0.3, 0.5, 0.4], [0.1, 0.2, 0.0, 1.0], from, to).with_mask(if k % 3 == 0 { 3 } else { 2 })
        })
        .collect();
    let got = cpu.sweeps(&native, &sweeps).unwrap();
    let mut kinds = [0; 3];
    for (s, g) in sweeps.iter().zip(&got) {
        let candidates = (0..2u32)
            .map(|t| (ContactKind::Triangle, t, native.triangle(t as usize).unwrap()))
            .chain((0..terrain.triangle_count() as u32).map(|t| (ContactKind::Heightfield, t, terrain.triangle(t))));
        let best = brute_sweep(s, &native, candidates);
        assert_eq!(*g, best);
        if let Some(b) = best {
            kinds[b.kind as usize] += 1;
        }
    }
    assert!(kinds[0] > 20 && kinds[1] > 200 && kinds[2] > 20, "{kinds:?}");
}

#[test]
fn a_bad_heightfield_is_refused_clearly() {
    let e = |r: nearkit::Result<Heightfield>| r.unwrap_err().to_string();
    assert!(e(Heightfield::new(vec![0.0; 3], 1, 3, 1.0, [0.0; 2])).contains("at least 2 × 2"));
    assert!(e(Heightfield::new(vec![0.0; 5], 2, 3, 1.0, [0.0; 2])).contains("needs 6 heights, got 5"));
    assert!(e(Heightfield::new(vec![0.0, 1.0, f64::NAN, 0.0], 2, 2, 1.0, [0.0; 2])).contains("row 1, column 0"));
    assert!(e(Heightfield::new(vec![0.0; 4], 2, 2, 0.0, [0.0; 2])).contains("spacing"));
    assert!(e(Heightfield::new(vec![0.0; 4], 2, 2, 1.0, [f64::INFINITY, 0.0])).contains("origin"));
    // Samples that would share a coordinate (a spacing below f64's step there), or lie beyond
    // f64's range.
    let fine = e(Heightfield::new(vec![0.0; 6], 2, 3, 1e-10, [0.0, 1e8]));
    assert!(fine.contains("samples 0 and 1 along y") && fine.contains("too far from 0"), "{fine}");
    assert!(e(Heightfield::new(vec![0.0; 4], 2, 2, 1e308, [1.7e308, 0.0])).contains("along x"));
    let mut world = World::new(1.0).unwrap();
    let far = Heightfield::new(vec![0.0; 4], 2, 2, 1.0, [1e7, 0.0]).unwrap();
    assert!(world.set_heightfield(far).unwrap_err().to_string().contains("larger cells"));
}

/// Overlap queries (spheres and ellipsoids, with masks) against a mesh, a heightfield and
/// bodies: each row is the brute force's, sorted by (kind, id), cut at the limit with the
/// total kept.
#[test]
fn overlap_queries_equal_all_pairs() {
    let mut r = rng(51);
    let (rows, cols) = (30, 30);
    let heights: Vec<f64> = (0..rows * cols).map(|_| r.random_range(-1.0..1.0)).collect();
    let terrain = Heightfield::new(heights, rows, cols, 1.3, [0.0, 0.0]).unwrap();
    let mut world = random_world(52, "layers");
    world.set_heightfield(terrain.clone()).unwrap();
    let queries: Vec<Overlap> = (0..3000)
        .map(|k| {
            let c: V3 = [r.random_range(-1.0..30.0), r.random_range(-1.0..30.0), r.random_range(-2.0..2.0)];
            let radii = [r.random_range(0.1..1.5), r.random_range(0.1..1.5), r.random_range(0.1..1.5)];
            let o = [r.random_range(-1.0..1.0), r.random_range(-1.0..1.0), r.random_range(-1.0..1.0), 1.0];
            let q = match k % 4 {
                0 => Overlap::sphere(c, r.random_range(0.05..2.5)),
                1 => Overlap::ellipsoid(c, radii, o),
                2 => Overlap::cuboid(c, radii, o),
                _ => Overlap::cuboid(c, radii, [0.0, 0.0, 0.0, 1.0]),
            };
            if k % 5 == 0 {
                q.with_mask(0b10)
            } else {
                q
            }
        })
        .collect();
    let mut cpu = Collider::cpu();
    for limit in [OVERLAP_LIMIT_MAX, 3] {
        let got = cpu.overlaps(&world, &queries, limit).unwrap();
        assert_eq!(got.len(), queries.len());
        let (mut cut, mut kinds) = (0, [0usize; 3]);
        let b = world.bodies();
        for (i, q) in queries.iter().enumerate() {
            let shape = Shape::new(q.radii, q.orientation);
            let cuboid = q.shape == OverlapShape::Cuboid;
            let meets_triangle = |c: [V3; 3]| {
                let c = c.map(|p| sub(p, q.center));
                if cuboid {
                    cuboid_meets_triangle(&shape, c)
                } else {
                    contact_ellipsoid_triangle(&shape, c).is_some()
                }
            };
            let mut want: Vec<(ContactKind, u32)> = Vec::new();
            if q.mask & world.mesh_layer() != 0 {
                for t in 0..world.triangle_count() {
                    if meets_triangle(world.triangle(t).unwrap()) {
                        want.push((ContactKind::Triangle, t as u32));
                    }
                }
                for t in 0..terrain.triangle_count() as u32 {
                    if meets_triangle(terrain.triangle(t)) {
                        want.push((ContactKind::Heightfield, t));
                    }
                }
            }
            for o in 0..b.len() {
                let other = Shape::new(b.radii[o], b.orientation[o]);
                let off = sub(b.center[o], q.center);
                let meets = if cuboid {
                    cuboid_meets_ellipsoid(&shape, &other, off)
                } else {
                    contact_ellipsoid_ellipsoid(&shape, &other, off).is_some()
                };
                if b.alive[o] && q.mask & b.layer[o] != 0 && meets {
                    want.push((ContactKind::Body, o as u32));
                }
            }
            assert_eq!(got.total[i] as usize, want.len(), "query {i}");
            cut += (want.len() > limit) as usize;
            want.truncate(limit);
            for (k, _) in &want {
                kinds[*k as usize] += 1;
            }
            assert_eq!(got.row(i).collect::<Vec<_>>(), want, "query {i}, limit {limit}");
        }
        assert!(kinds.iter().all(|&k| k > 200), "{kinds:?}");
        assert!(limit > 10 || cut > 500, "{cut} rows cut");
        // In small batches, which look at every body instead of gridding them: the same.
        for (k, chunk) in queries.chunks(100).enumerate() {
            let part = cpu.overlaps(&world, chunk, limit).unwrap();
            for i in 0..chunk.len() {
                assert_eq!(part.row(i).collect::<Vec<_>>(), got.row(100 * k + i).collect::<Vec<_>>());
            }
            assert_eq!(part.total[..], got.total[100 * k..100 * k + chunk.len()]);
        }
    }
    let bad = [Overlap::sphere([0.0, 0.0, f64::NAN], 1.0)];
    assert!(cpu.overlaps(&world, &bad, 4).unwrap_err().to_string().contains("overlap query 0"));
    assert!(cpu.overlaps(&world, &queries[..1], 0).unwrap_err().to_string().contains("limit"));
    // Queries whose boxes cover too many cells to walk are refused, not left to run for
    // minutes: an overlap query 1 km wide, a sweep 5 km long, at 1 m cells.
    let e = cpu.overlaps(&world, &[Overlap::sphere([0.0; 3], 1000.0)], 4).unwrap_err().to_string();
    assert!(e.contains("overlap query 0") && e.contains("grid cells"), "{e}");
    let long = Sweep::sphere(0.5, [0.0; 3], [5000.0, 3000.0, 500.0]);
    let e = cpu.sweeps(&world, &[long, long]).unwrap_err().to_string();
    assert!(e.contains("sweep 0") && e.contains("grid cells"), "{e}");
}

/// Determinism: the contacts and sweeps of a replayed run are the same bits on 1, 2, 3 and 8
/// threads, with and without AVX2, tick after tick (the collider's lists carry history). The
/// GPU gives the same bits too (`cuda_equality`).
#[test]
fn contacts_are_the_same_bits_on_any_thread_count_and_on_replay() {
    let scene = Scene::crater(1000, 9);
    let run = |threads: usize, portable_code: bool| -> Vec<Vec<Contact>> {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| {
            let mut world = scene.world(1.0).unwrap();
            let opts = ColliderOptions { portable_code, ..ColliderOptions::default() };
            let mut collider = Collider::new(&Engine::cpu(), &opts).unwrap();
            let mut ticks = Vec::new();
            for tick in 0..4 {
                ticks.push(collider.contacts(&world).unwrap());
                scene.advance(&mut world, tick);
            }
            let sweeps: Vec<Sweep> = scene
                .bodies
                .iter()
                .enumerate()
                .map(|(i, b)| Sweep::new(b.radii, b.orientation, b.center, [0.0, 0.0, -5.0]).ignoring(BodyId(i as u32)))
                .collect();
            let hits = collider.sweeps(&world, &sweeps).unwrap();
            // Sweeps as contacts, to compare them alongside.
            ticks.push(
                hits.iter()
                    .enumerate()
                    .filter_map(|(i, h)| h.map(|h| (i, h)))
                    .map(|(i, h)| Contact {
                        body: i as u32,
                        kind: h.kind,
                        other: h.other,
                        triangle: h.triangle,
                        normal: h.normal.map(|v| v as f32),
                        depth: h.toi as f32,
                        point: h.point,
                    })
                    .collect(),
            );
            ticks
        })
    };
    let first = run(1, false);
    assert!(first[0].len() > 2000, "{} contacts", first[0].len());
    assert!(first[4].len() > 500, "{} sweep hits", first[4].len());
    let bits = |ticks: &Vec<Vec<Contact>>| -> Vec<u64> {
        ticks
            .iter()
            .flatten()
            .flat_map(|c| {
                let n = c.normal.map(f32::to_bits);
                [c.body as u64, c.other as u64, n[0] as u64, n[1] as u64, n[2] as u64, c.depth.to_bits() as u64]
                    .into_iter()
                    .chain(c.point.map(f64::to_bits))
            })
            .collect()
    };
    let want = bits(&first);
    for (threads, portable) in [(3, true), (2, false), (8, false), (1, false)] {
        assert!(bits(&run(threads, portable)) == want, "{threads} threads, portable code {portable}");
    }
}

#[test]
fn a_world_100_km_away_keeps_millimetres() {
    let scene = Scene::crater(300, 5);
    let near = scene.world(1.0).unwrap();
    let shift = [100_000.0, -100_000.0, 2_000.0];
    let mut far_mesh = scene.mesh.clone();
    for (col, s) in
        [&mut far_mesh.vertices.x, &mut far_mesh.vertices.y, &mut far_mesh.vertices.z].into_iter().zip(shift)
    {
        col.iter_mut().for_each(|v| *v += s);
    }
    let mut far = World::new(1.0).unwrap();
    far.set_mesh(&far_mesh).unwrap();
    for b in &scene.bodies {
        far.add_body(Body { center: [b.center[0] + shift[0], b.center[1] + shift[1], b.center[2] + shift[2]], ..*b })
            .unwrap();
    }
    let mut cpu = Collider::new(&Engine::cpu(), &ColliderOptions::default()).unwrap();
    let (a, b) = (cpu.contacts(&near).unwrap(), cpu.contacts(&far).unwrap());
    assert!(a.len() > 100);
    // Grid cells differ by the shift, so a pair at the edge of overlap could differ; none do here.
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.order_key(), y.order_key());
        for k in 0..3 {
            assert!((x.point[k] + shift[k] - y.point[k]).abs() < 1e-6, "{x:?} vs {y:?}");
        }
        assert!((x.depth - y.depth).abs() < 1e-6);
        assert!((0..3).all(|k| (x.normal[k] - y.normal[k]).abs() < 1e-6));
    }
}

#[test]
fn bad_input_is_refused_clearly() {
    let mut world = World::new(1.0).unwrap();
    assert!(World::new(0.0).is_err());
    let e = world.add_body(Body::sphere([f64::NAN, 0.0, 0.0], 1.0)).unwrap_err().to_string();
    assert!(e.contains("not finite"), "{e}");
    let e = world.add_body(Body::sphere([0.0; 3], 0.0)).unwrap_err().to_string();
    assert!(e.contains("positive"), "{e}");
    let e = world.add_body(Body::ellipsoid([0.0; 3], [1.0; 3], [0.0; 4])).unwrap_err().to_string();
    assert!(e.contains("quaternion"), "{e}");
    let a = world.add_body(Body::sphere([0.0; 3], 1.0)).unwrap();
    let b = world.add_body(Body::sphere([1.0, 0.0, 0.0], 1.0)).unwrap();
    world.remove_body(a).unwrap();
    assert!(world.remove_body(a).is_err());
    assert!(world.set_pose(a, [0.0; 3], [0.0, 0.0, 0.0, 1.0]).is_err());
    assert_eq!(world.add_body(Body::sphere([0.5, 0.0, 0.0], 1.0)).unwrap(), a, "the freed id is reused");
    // A body beyond the grid's range is refused where it is placed, and by the tick where it
    // got there by the bulk update (which does not check).
    let far = [2.0e9, 0.0, 0.0];
    let e = world.set_pose(b, far, [0.0, 0.0, 0.0, 1.0]).unwrap_err().to_string();
    assert!(e.contains("larger cells"), "{e}");
    let e = world.add_body(Body::sphere(far, 1.0)).unwrap_err().to_string();
    assert!(e.contains("larger cells"), "{e}");
    let e = world.set_poses(&[b], &[far], &[[0.0, 0.0, 0.0, 1.0]]).unwrap_err().to_string();
    assert!(e.contains(&format!("body {}", b.0)) && e.contains("larger cells"), "{e}");
    // At the edge: the box's far side decides, not the center (the grid holds cells
    // -1,048,575 < c < 1,048,575 a side).
    const CELL_EDGE: f64 = 1_048_575.0;
    let edge = (CELL_EDGE - 0.5) * world.cell_size();
    assert!(world.set_pose(b, [edge, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]).is_err());
    world.set_pose(b, [edge - 2.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]).unwrap();
    world.poses_mut().0[b.0 as usize] = far;
    let mut cpu = Collider::new(&Engine::cpu(), &ColliderOptions::default()).unwrap();
    let e = cpu.contacts(&world).unwrap_err().to_string();
    assert!(e.contains("larger cells"), "{e}");
    let empty = Mesh::<f64> { vertices: Points::default(), triangles: vec![] };
    assert!(world.set_mesh(&empty).is_err());
}

/// A batch of poses with one bad pose changes nothing (a GPU collider would not see a half
/// applied batch).
#[test]
fn a_bad_pose_in_a_batch_changes_nothing() {
    let mut world = World::new(1.0).unwrap();
    let ids: Vec<BodyId> = (0..3).map(|i| world.add_body(Body::sphere([i as f64, 0.0, 0.0], 0.3)).unwrap()).collect();
    let before = world.bodies().center.clone();
    let q = [[0.0, 0.0, 0.0, 1.0]; 3];
    let e = world.set_poses(&ids, &[[5.0, 5.0, 5.0], [6.0, 6.0, 6.0], [f64::NAN, 0.0, 0.0]], &q).unwrap_err();
    assert!(e.to_string().contains("not finite"), "{e}");
    let e = world.set_poses(&[ids[0], BodyId(9)], &[[5.0; 3], [6.0; 3]], &q[..2]).unwrap_err();
    assert!(e.to_string().contains("no body 9"), "{e}");
    assert_eq!(world.bodies().center, before);
}

/// `integrate` that would carry a body beyond the grid's range (or to an infinite center),
/// or a `dt` that is not finite, moves no body and names the body; a removed body's
/// velocity does not count.
#[test]
fn integrate_refuses_a_step_beyond_the_grid_and_moves_nothing() {
    let mut world = World::new(1.0).unwrap();
    let ids: Vec<BodyId> = (0..3).map(|i| world.add_body(Body::sphere([i as f64, 0.0, 0.0], 0.3)).unwrap()).collect();
    world.set_velocity(ids[0], [1.0, 0.0, 0.0]).unwrap();
    world.set_velocity(ids[2], [0.0, 1.0e9, 0.0]).unwrap();
    let before = world.bodies().center.clone();
    let e = world.integrate(10.0).unwrap_err().to_string();
    assert!(e.contains("body 2") && e.contains("larger cells"), "{e}");
    world.set_velocity(ids[2], [0.0, f64::MAX, 0.0]).unwrap();
    let e = world.integrate(10.0).unwrap_err().to_string();
    assert!(e.contains("body 2") && e.contains("not finite"), "{e}");
    for dt in [f64::NAN, f64::INFINITY] {
        let e = world.integrate(dt).unwrap_err().to_string();
        assert!(e.contains("dt"), "{e}");
    }
    assert_eq!(world.bodies().center, before);
    world.remove_body(ids[2]).unwrap();
    world.integrate(10.0).unwrap();
    assert_eq!(world.bodies().center[0], [10.0, 0.0, 0.0]);
    let mut cpu = Collider::new(&Engine::cpu(), &ColliderOptions::default()).unwrap();
    cpu.contacts(&world).unwrap();
}

#[test]
fn integrate_moves_bodies_by_their_velocity() {
    let mut world = World::new(1.0).unwrap();
    let a = world.add_body(Body::sphere([0.0; 3], 0.5)).unwrap();
    let b = world.add_body(Body::sphere([3.0, 0.0, 0.0], 0.5)).unwrap();
    world.set_velocity(a, [1.0, 0.0, 0.0]).unwrap();
    let mut cpu = Collider::new(&Engine::cpu(), &ColliderOptions::default()).unwrap();
    assert!(cpu.contacts(&world).unwrap().is_empty());
    world.integrate(2.5).unwrap();
    let c = cpu.contacts(&world).unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!((c[0].body, c[0].other), (a.0, b.0));
    assert!((c[0].depth - 0.5).abs() < 1e-6);
}
