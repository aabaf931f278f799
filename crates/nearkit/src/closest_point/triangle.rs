//! The closest point of a triangle to a point, by Voronoi-region classification (Ericson,
//! Real-Time Collision Detection, 5.1.5), in the working precision. Degenerate (zero-area)
//! triangles fall back to the nearest of their three edges. Every operation is written out in
//! a fixed order, without fused multiply-add, so another backend can repeat it bit for bit.

use crate::geometry::real::Real;

/// The closest point of triangle (a, b, c) to p: its squared distance, the point, and its
/// barycentric coordinates (u, v, w) with point = u·a + v·b + w·c.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TrianglePoint<T> {
    /// Squared distance from the query.
    pub d2: T,
    /// The closest point of the triangle.
    pub point: [T; 3],
    /// Its barycentric coordinates (u, v, w) on corners a, b, c.
    pub bary: [T; 3],
}

#[inline(always)]
fn sub<T: Real>(u: [T; 3], v: [T; 3]) -> [T; 3] {
    [u[0] - v[0], u[1] - v[1], u[2] - v[2]]
}

#[inline(always)]
fn dot<T: Real>(u: [T; 3], v: [T; 3]) -> T {
    u[0] * v[0] + u[1] * v[1] + u[2] * v[2]
}

/// `o + u·s`.
#[inline(always)]
fn along<T: Real>(o: [T; 3], u: [T; 3], s: T) -> [T; 3] {
    [o[0] + u[0] * s, o[1] + u[1] * s, o[2] + u[2] * s]
}

#[inline(always)]
fn finish<T: Real>(p: [T; 3], point: [T; 3], bary: [T; 3]) -> TrianglePoint<T> {
    let d = sub(p, point);
    TrianglePoint { d2: dot(d, d), point, bary }
}

/// The point of triangle (a, b, c) closest to `p`, exactly as both backends compute it
/// (Ericson's regions in a fixed operation order; degenerate triangles as their edges).
pub fn closest_point_triangle<T: Real>(p: [T; 3], a: [T; 3], b: [T; 3], c: [T; 3]) -> TrianglePoint<T> {
    let (zero, one) = (T::ZERO, T::from_f64(1.0));
    let (ab, ac, ap) = (sub(b, a), sub(c, a), sub(p, a));
    let (d1, d2) = (dot(ab, ap), dot(ac, ap));
    if d1 <= zero && d2 <= zero {
        return finish(p, a, [one, zero, zero]);
    }
    let bp = sub(p, b);
    let (d3, d4) = (dot(ab, bp), dot(ac, bp));
    if d3 >= zero && d4 <= d3 {
        return finish(p, b, [zero, one, zero]);
    }
    let vc = d1 * d4 - d3 * d2;
    if vc <= zero && d1 >= zero && d3 <= zero && d1 - d3 > zero {
        let v = d1 / (d1 - d3);
        return finish(p, along(a, ab, v), [one - v, v, zero]);
    }
    let cp = sub(p, c);
    let (d5, d6) = (dot(ab, cp), dot(ac, cp));
    if d6 >= zero && d5 <= d6 {
        return finish(p, c, [zero, zero, one]);
    }
    let vb = d5 * d2 - d1 * d6;
    if vb <= zero && d2 >= zero && d6 <= zero && d2 - d6 > zero {
        let w = d2 / (d2 - d6);
        return finish(p, along(a, ac, w), [one - w, zero, w]);
    }
    let va = d3 * d6 - d5 * d4;
    if va <= zero && (d4 - d3) >= zero && (d5 - d6) >= zero && (d4 - d3) + (d5 - d6) > zero {
        let w = (d4 - d3) / ((d4 - d3) + (d5 - d6));
        return finish(p, along(b, sub(c, b), w), [zero, one - w, w]);
    }
    // Inside: p projects onto the face. va + vb + vc is |ab × ac|²; for a sliver it is the
    // difference of nearly equal products, and the projection can land off the triangle. So
    // the face point is trusted only with barycentrics in [0, 1], and for slivers the edges
    // are tried as well.
    let denom = va + vb + vc;
    if denom > zero && denom.is_finite() {
        let (v, w) = (vb / denom, vc / denom);
        let u = one - v - w;
        let point = [a[0] + ab[0] * v + ac[0] * w, a[1] + ab[1] * v + ac[1] * w, a[2] + ab[2] * v + ac[2] * w];
        let on_face = v >= zero && w >= zero && u >= zero;
        let sliver = denom <= dot(ab, ab) * dot(ac, ac) * T::from_f64(if T::NAME == "f32" { 1e-3 } else { 1e-9 });
        if on_face && !sliver {
            return finish(p, point, [u, v, w]);
        }
        let edge = nearest_edge(p, a, b, c);
        let face = finish(p, point, [u, v, w]);
        return if on_face && face.d2 < edge.d2 { face } else { edge };
    }
    nearest_edge(p, a, b, c)
}

/// The nearest point of the triangle's three edges (the first in edge order on ties).
fn nearest_edge<T: Real>(p: [T; 3], a: [T; 3], b: [T; 3], c: [T; 3]) -> TrianglePoint<T> {
    let (zero, one) = (T::ZERO, T::from_f64(1.0));
    // Degenerate (collinear or coinciding corners), or a zero-length edge met above: the
    // nearest of the three edges, the first in edge order on ties. For a proper triangle the
    // regions above always answer, since every denominator there is a squared edge length or
    // twice the squared area.
    let edges = [(a, b, 0usize, 1usize), (b, c, 1, 2), (c, a, 2, 0)];
    let mut best: Option<TrianglePoint<T>> = None;
    for (s, e, i, j) in edges {
        let d = sub(e, s);
        let l = dot(d, d);
        let t = if l > zero { (dot(sub(p, s), d) / l).max(zero).min(one) } else { zero };
        let mut bary = [zero; 3];
        bary[i] = one - t;
        bary[j] = bary[j] + t;
        let cand = finish(p, along(s, d, t), bary);
        if best.is_none_or(|b| cand.d2 < b.d2) {
            best = Some(cand);
        }
    }
    best.expect("three edges")
}
