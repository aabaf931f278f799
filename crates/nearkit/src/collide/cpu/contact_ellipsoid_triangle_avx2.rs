//! `contact_ellipsoid_triangle` for four triangles at once, in AVX2 (f64 lanes): one body
//! against the triangles its broad phase passed. Each lane holds one triangle; the body's
//! matrices are broadcast.
//!
//! Every operation is the scalar code's IEEE operation, in its order and without fused
//! multiply-add, so each lane gives the scalar contact's bits. Lanes the clean regions of
//! `closest_point_triangle` do not settle (slivers, degenerate triangles, a center on the
//! triangle's plane where the normal vanishes) are handed to the scalar code whole.

use std::arch::x86_64::*;

use super::avx2_f64::{add, and, ge, gt, lanes, le, lt, ml, sb, splat, F};

use crate::collide::contact_ellipsoid_triangle::{contact_ellipsoid_triangle, ContactGeometry};
use crate::collide::ellipsoid::{sub, Shape, V3};

/// A vector per lane.
#[derive(Clone, Copy)]
struct V {
    x: F,
    y: F,
    z: F,
}

#[inline(always)]
unsafe fn vsub(a: V, b: V) -> V {
    V { x: sb(a.x, b.x), y: sb(a.y, b.y), z: sb(a.z, b.z) }
}

/// (u·v) in `dot`'s order: (x·x' + y·y') + z·z'.
#[inline(always)]
unsafe fn vdot(u: V, v: V) -> F {
    add(add(ml(u.x, v.x), ml(u.y, v.y)), ml(u.z, v.z))
}

/// `o + u·s` (`along`).
#[inline(always)]
unsafe fn along(o: V, u: V, s: F) -> V {
    V { x: add(o.x, ml(u.x, s)), y: add(o.y, ml(u.y, s)), z: add(o.z, ml(u.z, s)) }
}

/// (a, b, c)·u for broadcast a, b, c, in `dot`'s order. (No closures here: they would not
/// inherit AVX2, and the intrinsics would become calls.)
#[inline(always)]
unsafe fn dot3(a: f64, b: f64, c: f64, u: V) -> F {
    add(add(ml(splat(a), u.x), ml(splat(b), u.y)), ml(splat(c), u.z))
}

/// M·u for a broadcast row-major 3×3 matrix, each row in `dot`'s order.
#[inline(always)]
unsafe fn mat(m: &[[f64; 3]; 3], u: V) -> V {
    V {
        x: dot3(m[0][0], m[0][1], m[0][2], u),
        y: dot3(m[1][0], m[1][1], m[1][2], u),
        z: dot3(m[2][0], m[2][1], m[2][2], u),
    }
}

/// Mᵀ·u (`Shape::local_dir`).
#[inline(always)]
unsafe fn mat_t(m: &[[f64; 3]; 3], u: V) -> V {
    V {
        x: dot3(m[0][0], m[1][0], m[2][0], u),
        y: dot3(m[0][1], m[1][1], m[2][1], u),
        z: dot3(m[0][2], m[1][2], m[2][2], u),
    }
}

/// The closest points found so far: `p` where `done` is set.
struct Answer {
    p: V,
    done: F,
}

impl Answer {
    /// Lanes where `cond` holds and none answered yet take `q`.
    #[inline(always)]
    unsafe fn take(&mut self, cond: F, q: V) {
        let m = _mm256_andnot_pd(self.done, cond);
        self.p = V {
            x: _mm256_blendv_pd(self.p.x, q.x, m),
            y: _mm256_blendv_pd(self.p.y, q.y, m),
            z: _mm256_blendv_pd(self.p.z, q.z, m),
        };
        self.done = _mm256_or_pd(self.done, m);
    }
}

/// `closest_point_triangle(0, a, b, c).point` per lane, and the lanes it settles; the others
/// (the inside case off the face, slivers, degenerate triangles) are left to the scalar code.
#[inline(always)]
unsafe fn closest_to_origin(a: V, b: V, c: V) -> Answer {
    let zero = _mm256_setzero_pd();
    let o = V { x: zero, y: zero, z: zero };
    let (ab, ac, ap) = (vsub(b, a), vsub(c, a), vsub(o, a));
    let (d1, d2) = (vdot(ab, ap), vdot(ac, ap));
    let mut ans = Answer { p: o, done: zero };
    ans.take(and(le(d1, zero), le(d2, zero)), a);
    let bp = vsub(o, b);
    let (d3, d4) = (vdot(ab, bp), vdot(ac, bp));
    ans.take(and(ge(d3, zero), le(d4, d3)), b);
    let vc = sb(ml(d1, d4), ml(d3, d2));
    let d13 = sb(d1, d3);
    let m = and(and(le(vc, zero), ge(d1, zero)), and(le(d3, zero), gt(d13, zero)));
    if _mm256_movemask_pd(_mm256_andnot_pd(ans.done, m)) != 0 {
        ans.take(m, along(a, ab, _mm256_div_pd(d1, d13)));
    }
    let cp = vsub(o, c);
    let (d5, d6) = (vdot(ab, cp), vdot(ac, cp));
    ans.take(and(ge(d6, zero), le(d5, d6)), c);
    let vb = sb(ml(d5, d2), ml(d1, d6));
    let d26 = sb(d2, d6);
    let m = and(and(le(vb, zero), ge(d2, zero)), and(le(d6, zero), gt(d26, zero)));
    if _mm256_movemask_pd(_mm256_andnot_pd(ans.done, m)) != 0 {
        ans.take(m, along(a, ac, _mm256_div_pd(d2, d26)));
    }
    let va = sb(ml(d3, d6), ml(d5, d4));
    let (e43, e56) = (sb(d4, d3), sb(d5, d6));
    let s = add(e43, e56);
    let m = and(and(le(va, zero), ge(e43, zero)), and(ge(e56, zero), gt(s, zero)));
    if _mm256_movemask_pd(_mm256_andnot_pd(ans.done, m)) != 0 {
        ans.take(m, along(b, vsub(c, b), _mm256_div_pd(e43, s)));
    }
    if _mm256_movemask_pd(ans.done) == 0xf {
        return ans;
    }
    // Inside: the face point, where the scalar code trusts it (a proper, non-sliver triangle
    // and barycentrics in [0, 1]).
    let denom = add(add(va, vb), vc);
    let proper = and(gt(denom, zero), lt(denom, splat(f64::INFINITY)));
    let (v, w) = (_mm256_div_pd(vb, denom), _mm256_div_pd(vc, denom));
    let u = sb(sb(splat(1.0), v), w);
    let face = V {
        x: add(add(a.x, ml(ab.x, v)), ml(ac.x, w)),
        y: add(add(a.y, ml(ab.y, v)), ml(ac.y, w)),
        z: add(add(a.z, ml(ab.z, v)), ml(ac.z, w)),
    };
    let on_face = and(and(ge(v, zero), ge(w, zero)), ge(u, zero));
    let sliver = le(denom, ml(ml(vdot(ab, ab), vdot(ac, ac)), splat(1e-9)));
    ans.take(_mm256_andnot_pd(sliver, and(proper, on_face)), face);
    ans
}

/// A body (shape `me`, center `c`) against triangles `tris` of `corners`: each contact, in
/// the order of `tris`, given to `found` as `contact_ellipsoid_triangle` gives it.
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn triangle_contacts(
    me: &Shape,
    c: V3,
    tris: &[u32],
    corners: &[[V3; 3]],
    mut found: impl FnMut(u32, ContactGeometry),
) {
    let scalar = |t: u32, found: &mut dyn FnMut(u32, ContactGeometry)| {
        let corners = corners[t as usize].map(|p| sub(p, c));
        if let Some(g) = contact_ellipsoid_triangle(me, corners) {
            found(t, g);
        }
    };
    for group in tris.chunks(4) {
        let live = group.len();
        // Corner k, axis a, lane l (a short group repeats its last triangle).
        let mut raw = [[[0.0f64; 4]; 3]; 3];
        for l in 0..4 {
            let t = group[l.min(live - 1)] as usize;
            let tri = &corners[t];
            for k in 0..3 {
                for a in 0..3 {
                    raw[k][a][l] = tri[k][a] - c[a];
                }
            }
        }
        let mut unit = [V { x: _mm256_setzero_pd(), y: _mm256_setzero_pd(), z: _mm256_setzero_pd() }; 3];
        for k in 0..3 {
            let [x, y, z] = &raw[k];
            let d =
                V { x: _mm256_loadu_pd(x.as_ptr()), y: _mm256_loadu_pd(y.as_ptr()), z: _mm256_loadu_pd(z.as_ptr()) };
            unit[k] = mat(&me.unit, d);
        }
        let near = closest_to_origin(unit[0], unit[1], unit[2]);
        let zero = _mm256_setzero_pd();
        let q = near.p;
        let d = vsub(V { x: zero, y: zero, z: zero }, q);
        let hit = lt(vdot(d, d), splat(1.0));
        let (hit_bits, settled) = (_mm256_movemask_pd(hit), _mm256_movemask_pd(near.done));
        // Lanes the SIMD path settled as apart need nothing more.
        if hit_bits & settled & ((1 << live) - 1) == 0 && settled & ((1 << live) - 1) == (1 << live) - 1 {
            continue;
        }
        let r = me.radii;
        let point = mat(&me.rot, V { x: ml(q.x, splat(r[0])), y: ml(q.y, splat(r[1])), z: ml(q.z, splat(r[2])) });
        let g = mat(
            &me.rot,
            V {
                x: _mm256_div_pd(q.x, splat(r[0])),
                y: _mm256_div_pd(q.y, splat(r[1])),
                z: _mm256_div_pd(q.z, splat(r[2])),
            },
        );
        let neg = splat(-0.0);
        let u = V { x: _mm256_xor_pd(g.x, neg), y: _mm256_xor_pd(g.y, neg), z: _mm256_xor_pd(g.z, neg) };
        let len = _mm256_sqrt_pd(vdot(u, u));
        let normal_ok = _mm256_movemask_pd(gt(len, zero));
        let n = V { x: _mm256_div_pd(u.x, len), y: _mm256_div_pd(u.y, len), z: _mm256_div_pd(u.z, len) };
        let loc = mat_t(&me.rot, n);
        let s = V { x: ml(loc.x, splat(r[0])), y: ml(loc.y, splat(r[1])), z: ml(loc.z, splat(r[2])) };
        let depth = add(_mm256_sqrt_pd(vdot(s, s)), vdot(n, point));
        let (nx, ny, nz, dp) = (lanes(n.x), lanes(n.y), lanes(n.z), lanes(depth));
        let (px, py, pz) = (lanes(point.x), lanes(point.y), lanes(point.z));
        // Only the lanes with something to give, in order: a branch per lane on whether it
        // hit would miss about as often as the hits are random.
        let to_scalar = (!settled | (hit_bits & !normal_ok)) & ((1 << live) - 1);
        let mut todo = to_scalar | (hit_bits & ((1 << live) - 1));
        while todo != 0 {
            let l = todo.trailing_zeros() as usize;
            todo &= todo - 1;
            if to_scalar >> l & 1 != 0 {
                scalar(group[l], &mut found);
            } else {
                let g = ContactGeometry { normal: [nx[l], ny[l], nz[l]], depth: dp[l], point: [px[l], py[l], pz[l]] };
                found(group[l], g);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Lane by lane, the scalar contact's bits: random ellipsoids against random, degenerate
    /// and sliver triangles around them, in every region, and groups of 1 to 4.
    #[test]
    fn matches_the_scalar_contact() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
        let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
        let (mut hits, mut total) = (0, 0);
        for round in 0..3_000 {
            let q: [f64; 4] = std::array::from_fn(|_| rng.random_range(-1.0..1.0));
            let radii: V3 = std::array::from_fn(|_| rng.random_range(0.2..2.0));
            let shape = Shape::new(radii, if round % 4 == 0 { [0.0, 0.0, 0.0, 1.0] } else { q });
            let c: V3 = std::array::from_fn(|_| rng.random_range(-100.0..100.0));
            let count = 1 + round % 12;
            let corners: Vec<[V3; 3]> = (0..count)
                .map(|t| {
                    let mut tri: [V3; 3] =
                        std::array::from_fn(|_| std::array::from_fn(|k| c[k] + rng.random_range(-2.5..2.5)));
                    match t % 6 {
                        1 => tri[2] = tri[1],
                        2 => tri[2] = std::array::from_fn(|k| tri[0][k] + 2.0 * (tri[1][k] - tri[0][k])),
                        3 => {
                            // A sliver, from hair-thin to merely thin.
                            let thin = 10f64.powf(-rng.random_range(2.0..8.0));
                            let along = rng.random_range(-0.5..1.5);
                            tri[2] = std::array::from_fn(|k| {
                                tri[0][k] + along * (tri[1][k] - tri[0][k]) + thin * rng.random_range(-1.0..1.0)
                            })
                        }
                        4 if round % 3 == 0 => tri[0] = c, // the center on a corner
                        _ => {}
                    }
                    tri
                })
                .collect();
            let tris: Vec<u32> = (0..count as u32).collect();
            let bits = |t: u32, g: ContactGeometry| {
                (t, g.normal.map(f64::to_bits), g.depth.to_bits(), g.point.map(f64::to_bits))
            };
            let mut got = Vec::new();
            // SAFETY: the CPU has AVX2.
            unsafe { triangle_contacts(&shape, c, &tris, &corners, |t, g| got.push(bits(t, g))) };
            let mut want = Vec::new();
            for &t in &tris {
                let rel = corners[t as usize].map(|p| sub(p, c));
                if let Some(g) = contact_ellipsoid_triangle(&shape, rel) {
                    want.push(bits(t, g));
                }
            }
            assert_eq!(got, want, "round {round}");
            hits += want.len();
            total += count;
        }
        assert!(hits > total / 5 && hits < total * 4 / 5, "{hits} contacts of {total} tests");
    }
}
