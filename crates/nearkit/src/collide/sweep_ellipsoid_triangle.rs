//! A moving ellipsoid against a triangle: the first time of contact (Fauerby, "Improved
//! Collision detection and Response", 2003). In the ellipsoid's unit-ball space the body is a
//! unit sphere moving along v; it meets the triangle's interior when it touches the plane
//! inside the triangle, else first at a corner or an edge (each a quadratic in t).

use super::ellipsoid::{cross, dot, normalize, sub, Shape, V3};
use crate::closest_point::triangle::closest_point_triangle;

/// Where a sweep first touches: `toi` in [0, 1] along the motion; `point` on the triangle, as
/// an offset from the body's start center; `normal` the unit direction that pushes the body
/// back (the body's surface normal at the point, reversed).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SweepHit {
    pub toi: f64,
    pub point: V3,
    pub normal: V3,
}

/// The smallest root of a·t² + b·t + c = 0 in [0, t_max], if any.
#[inline(always)]
fn lowest_root(a: f64, b: f64, c: f64, t_max: f64) -> Option<f64> {
    if a == 0.0 {
        return None;
    }
    let disc = b * b - 4.0 * a * c;
    if disc < 0.0 {
        return None;
    }
    let s = disc.sqrt();
    let (mut r1, mut r2) = ((-b - s) / (2.0 * a), (-b + s) / (2.0 * a));
    if r1 > r2 {
        std::mem::swap(&mut r1, &mut r2);
    }
    if r1 >= 0.0 && r1 <= t_max {
        return Some(r1);
    }
    if r2 >= 0.0 && r2 <= t_max {
        return Some(r2);
    }
    None
}

/// The first contact of an ellipsoid moving by `motion` (world) with a triangle whose corners
/// are offsets from the start center; `None` when it does not touch it before the end. A body
/// that starts overlapping the triangle hits it at toi 0.
pub fn sweep_ellipsoid_triangle(shape: &Shape, corners: [V3; 3], motion: V3) -> Option<SweepHit> {
    let p = corners.map(|c| shape.unit_of(c));
    let v = shape.unit_of(motion);
    // Unit-space hit (t, point on the triangle) → world.
    let hit = |t: f64, q: V3| {
        let g = shape.normal_of_unit([t * v[0] - q[0], t * v[1] - q[1], t * v[2] - q[2]]);
        let normal = normalize(g)
            .or_else(|| normalize(cross(sub(corners[1], corners[0]), sub(corners[2], corners[0]))))
            .unwrap_or([0.0, 0.0, 1.0]);
        SweepHit { toi: t, point: shape.world_of(q), normal }
    };
    let start = closest_point_triangle([0.0; 3], p[0], p[1], p[2]);
    if start.d2 < 1.0 {
        return Some(hit(0.0, start.point));
    }
    // The plane: first touch at t0, where the sphere's signed distance reaches 1.
    if let Some(face) = normalize(cross(sub(p[1], p[0]), sub(p[2], p[0]))) {
        let mut n = face;
        let mut dist = -dot(n, p[0]);
        if dist < 0.0 {
            n = [-n[0], -n[1], -n[2]];
            dist = -dist;
        }
        let nv = dot(n, v);
        if dist >= 1.0 {
            if !(nv < 0.0) {
                return None; // moving away from or along the plane, never nearer than 1
            }
            let t0 = (1.0 - dist) / nv;
            if t0 > 1.0 {
                return None;
            }
            // The sphere's point nearest the plane at t0, and whether it is on the triangle
            // (on the inner side of each edge, by the winding's own normal).
            let q = [t0 * v[0] - n[0], t0 * v[1] - n[1], t0 * v[2] - n[2]];
            let inside = (0..3).all(|k| {
                let (s, e) = (p[k], p[(k + 1) % 3]);
                dot(cross(sub(e, s), sub(q, s)), face) >= 0.0
            });
            if inside {
                return Some(hit(t0, q));
            }
        }
    }
    // Corners, then edges: the earliest touch; on equal times the first found.
    let vv = dot(v, v);
    let mut best: Option<(f64, V3)> = None;
    for &c in &p {
        let t_max = best.map_or(1.0, |b| b.0);
        if let Some(t) = lowest_root(vv, -2.0 * dot(v, c), dot(c, c) - 1.0, t_max) {
            if best.is_none_or(|b| t < b.0) {
                best = Some((t, c));
            }
        }
    }
    for k in 0..3 {
        let (s, e) = (p[k], p[(k + 1) % 3]);
        let edge = sub(e, s);
        let (ee, ev, es) = (dot(edge, edge), dot(edge, v), dot(edge, s));
        if ee == 0.0 {
            continue;
        }
        let a = ee * -vv + ev * ev;
        let b = ee * (2.0 * dot(v, s)) - 2.0 * ev * es;
        let c = ee * (1.0 - dot(s, s)) + es * es;
        let t_max = best.map_or(1.0, |b| b.0);
        if let Some(t) = lowest_root(a, b, c, t_max) {
            let f = (ev * t - es) / ee;
            if (0.0..=1.0).contains(&f) && best.is_none_or(|b| t < b.0) {
                best = Some((t, [s[0] + f * edge[0], s[1] + f * edge[1], s[2] + f * edge[2]]));
            }
        }
    }
    best.map(|(t, q)| hit(t, q))
}
