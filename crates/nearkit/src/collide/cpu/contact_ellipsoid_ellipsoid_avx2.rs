//! `contact_ellipsoid_ellipsoid` for four pairs at once, in AVX2 (f64 lanes). The Newton search is a chain of dependent divisions, so one pair at a time
//! waits on latency; four lanes wait once for all of them.
//!
//! Every operation is the scalar code's IEEE operation, in its order and without fused
//! multiply-add; a lane leaves the search where the scalar code stops, and later steps leave
//! it unchanged. So each lane gives the scalar contact's bits.

use std::arch::x86_64::*;

use super::avx2_f64::{add, dv, lanes, load, ml, sb, splat, F};

use crate::collide::contact_ellipsoid_ellipsoid::{SETTLED, STEPS};
use crate::collide::contact_ellipsoid_triangle::ContactGeometry;
use crate::collide::ellipsoid::{Shape, V3};

#[inline(always)]
unsafe fn bits(m: F) -> i32 {
    _mm256_movemask_pd(m)
}

type V = [F; 3];
/// Symmetric (xx, yy, zz, xy, xz, yz).
type Sym = [F; 6];

/// (u·v) in `dot`'s order.
#[inline(always)]
unsafe fn dot(u: V, v: V) -> F {
    add(add(ml(u[0], v[0]), ml(u[1], v[1])), ml(u[2], v[2]))
}

/// `support`: |S·Rᵀ·u|, with R and S per lane. (No closures in this file: they would not
/// inherit AVX2, and the intrinsics would become calls.)
#[inline(always)]
unsafe fn support(rot: &[[F; 3]; 3], radii: &V, u: V) -> F {
    let a = ml(add(add(ml(rot[0][0], u[0]), ml(rot[1][0], u[1])), ml(rot[2][0], u[2])), radii[0]);
    let b = ml(add(add(ml(rot[0][1], u[0]), ml(rot[1][1], u[1])), ml(rot[2][1], u[2])), radii[1]);
    let c = ml(add(add(ml(rot[0][2], u[0]), ml(rot[1][2], u[1])), ml(rot[2][2], u[2])), radii[2]);
    _mm256_sqrt_pd(add(add(ml(a, a), ml(b, b)), ml(c, c)))
}

#[inline(always)]
unsafe fn blend(sa: &Sym, sb_: &Sym, l: F) -> Sym {
    let m = sb(splat(1.0), l);
    let mut out = [m; 6];
    for k in 0..6 {
        out[k] = add(ml(m, sa[k]), ml(l, sb_[k]));
    }
    out
}

/// `inverse`: the adjugate and the reciprocal of the determinant.
#[inline(always)]
unsafe fn inverse(g: &Sym) -> (Sym, F) {
    let [xx, yy, zz, xy, xz, yz] = *g;
    let c00 = sb(ml(yy, zz), ml(yz, yz));
    let c01 = sb(ml(xz, yz), ml(xy, zz));
    let c02 = sb(ml(xy, yz), ml(xz, yy));
    let c11 = sb(ml(xx, zz), ml(xz, xz));
    let c12 = sb(ml(xy, xz), ml(xx, yz));
    let c22 = sb(ml(xx, yy), ml(xy, xy));
    let det = add(add(ml(xx, c00), ml(xy, c01)), ml(xz, c02));
    ([c00, c11, c22, c01, c02, c12], dv(splat(1.0), det))
}

#[inline(always)]
unsafe fn apply(inv: &(Sym, F), r: V) -> V {
    let ([c00, c11, c22, c01, c02, c12], k) = *inv;
    [
        ml(add(add(ml(c00, r[0]), ml(c01, r[1])), ml(c02, r[2])), k),
        ml(add(add(ml(c01, r[0]), ml(c11, r[1])), ml(c12, r[2])), k),
        ml(add(add(ml(c02, r[0]), ml(c12, r[1])), ml(c22, r[2])), k),
    ]
}

#[inline(always)]
unsafe fn sym_mul(m: &Sym, x: V) -> V {
    [
        add(add(ml(m[0], x[0]), ml(m[3], x[1])), ml(m[4], x[2])),
        add(add(ml(m[3], x[0]), ml(m[1], x[1])), ml(m[5], x[2])),
        add(add(ml(m[4], x[0]), ml(m[5], x[1])), ml(m[2], x[2])),
    ]
}

/// A pair of bodies: their shapes and Σ, and b's center as an offset from a's.
pub(crate) struct Pair<'a> {
    pub a: &'a Shape,
    pub sigma_a: &'a [f64; 6],
    pub b: &'a Shape,
    pub sigma_b: &'a [f64; 6],
    pub r: V3,
}

/// Lane by lane (a short group repeats its last pair): the 20 numbers of one body of each
/// pair, Σ (6), R (9), S (3), its reach, and a spare.
#[inline(always)]
unsafe fn body_lanes(pairs: &[Pair], b_side: bool) -> ([F; 6], [[F; 3]; 3], V, F) {
    let live = pairs.len();
    let mut raw = [[0.0f64; 4]; 19];
    for l in 0..4 {
        let p = &pairs[l.min(live - 1)];
        let (shape, sigma) = if b_side { (p.b, p.sigma_b) } else { (p.a, p.sigma_a) };
        for k in 0..6 {
            raw[k][l] = sigma[k];
        }
        for i in 0..3 {
            for j in 0..3 {
                raw[6 + 3 * i + j][l] = shape.rot[i][j];
            }
            raw[15 + i][l] = shape.radii[i];
        }
        raw[18][l] = shape.radii[0].max(shape.radii[1]).max(shape.radii[2]);
    }
    let sigma = [load(&raw[0]), load(&raw[1]), load(&raw[2]), load(&raw[3]), load(&raw[4]), load(&raw[5])];
    let rot = [
        [load(&raw[6]), load(&raw[7]), load(&raw[8])],
        [load(&raw[9]), load(&raw[10]), load(&raw[11])],
        [load(&raw[12]), load(&raw[13]), load(&raw[14])],
    ];
    (sigma, rot, [load(&raw[15]), load(&raw[16]), load(&raw[17])], load(&raw[18]))
}

/// `contact_ellipsoid_ellipsoid(a, b, r)` for each of up to four pairs.
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn contacts(pairs: &[Pair]) -> [Option<ContactGeometry>; 4] {
    let live = pairs.len();
    debug_assert!((1..=4).contains(&live));
    let mut raw = [[0.0f64; 4]; 3];
    for l in 0..4 {
        let p = &pairs[l.min(live - 1)];
        for k in 0..3 {
            raw[k][l] = p.r[k];
        }
    }
    let r: V = [load(&raw[0]), load(&raw[1]), load(&raw[2])];
    let (sa, rot_a, radii_a, reach_a) = body_lanes(pairs, false);
    let (sbm, rot_b, radii_b, reach_b) = body_lanes(pairs, true);
    let zero = _mm256_setzero_pd();
    let live_mask = (1 << live) - 1;

    let reach = add(reach_a, reach_b);
    let mut alive = bits(_mm256_cmp_pd::<_CMP_LT_OQ>(dot(r, r), ml(reach, reach))) & live_mask;
    if alive == 0 {
        return [None; 4];
    }
    let (ha, hb) = (support(&rot_a, &radii_a, r), support(&rot_b, &radii_b, r));
    let sum = add(ha, hb);
    let mut l = _mm256_blendv_pd(splat(0.5), dv(ha, sum), _mm256_cmp_pd::<_CMP_GT_OQ>(sum, zero));
    let f0 = {
        let x = apply(&inverse(&blend(&sa, &sbm, l)), r);
        ml(ml(l, sb(splat(1.0), l)), dot(r, x))
    };
    alive &= bits(_mm256_cmp_pd::<_CMP_LT_OQ>(f0, splat(1.0)));
    if alive == 0 {
        return [None; 4];
    }
    let d: Sym = [
        sb(sbm[0], sa[0]),
        sb(sbm[1], sa[1]),
        sb(sbm[2], sa[2]),
        sb(sbm[3], sa[3]),
        sb(sbm[4], sa[4]),
        sb(sbm[5], sa[5]),
    ];
    let (mut lo, mut hi) = (zero, splat(1.0));
    let mut run = alive;
    for _ in 0..STEPS {
        let inv = inverse(&blend(&sa, &sbm, l));
        let x = apply(&inv, r);
        let y = sym_mul(&d, x);
        let (s, q, w) = (dot(r, x), dot(x, y), dot(y, apply(&inv, y)));
        let m = ml(l, sb(splat(1.0), l));
        let t = sb(splat(1.0), ml(splat(2.0), l));
        let d1 = sb(ml(t, s), ml(m, q));
        let d2 = add(sb(ml(splat(-2.0), s), ml(ml(splat(2.0), t), q)), ml(ml(splat(2.0), m), w));
        // Lanes whose derivative is exactly zero stop where they are.
        run &= !bits(_mm256_cmp_pd::<_CMP_EQ_OQ>(d1, zero));
        if run == 0 {
            break;
        }
        let upd = mask_of(run);
        let up = _mm256_cmp_pd::<_CMP_GT_OQ>(d1, zero);
        lo = _mm256_blendv_pd(lo, l, _mm256_and_pd(upd, up));
        hi = _mm256_blendv_pd(hi, l, _mm256_andnot_pd(up, upd));
        let step = sb(l, dv(d1, d2));
        let inside = _mm256_and_pd(
            _mm256_cmp_pd::<_CMP_LT_OQ>(d2, zero),
            _mm256_and_pd(_mm256_cmp_pd::<_CMP_GE_OQ>(step, lo), _mm256_cmp_pd::<_CMP_LE_OQ>(step, hi)),
        );
        let next = _mm256_blendv_pd(ml(splat(0.5), add(lo, hi)), step, inside);
        let moved = _mm256_andnot_pd(splat(-0.0), sb(next, l));
        l = _mm256_blendv_pd(l, next, upd);
        run &= !bits(_mm256_cmp_pd::<_CMP_LE_OQ>(moved, splat(SETTLED)));
        if run == 0 {
            break;
        }
    }
    let x = apply(&inverse(&blend(&sa, &sbm, l)), r);
    let f = ml(ml(l, sb(splat(1.0), l)), dot(r, x));
    alive &= bits(_mm256_cmp_pd::<_CMP_LT_OQ>(f, splat(1.0)));
    if alive == 0 {
        return [None; 4];
    }
    let m = sb(splat(1.0), l);
    let sx = sym_mul(&sa, x);
    let point = [ml(m, sx[0]), ml(m, sx[1]), ml(m, sx[2])];
    let len = _mm256_sqrt_pd(dot(x, x));
    let ok = _mm256_cmp_pd::<_CMP_GT_OQ>(len, zero);
    let ab: V = [
        _mm256_blendv_pd(zero, dv(x[0], len), ok),
        _mm256_blendv_pd(zero, dv(x[1], len), ok),
        _mm256_blendv_pd(splat(1.0), dv(x[2], len), ok),
    ];
    let depth = sb(add(support(&rot_a, &radii_a, ab), support(&rot_b, &radii_b, ab)), dot(ab, r));
    let neg = splat(-0.0);
    let (nx, ny, nz) =
        (lanes(_mm256_xor_pd(ab[0], neg)), lanes(_mm256_xor_pd(ab[1], neg)), lanes(_mm256_xor_pd(ab[2], neg)));
    let (px, py, pz, dp) = (lanes(point[0]), lanes(point[1]), lanes(point[2]), lanes(depth));
    let mut out = [None; 4];
    for l in 0..live {
        if alive & (1 << l) != 0 {
            out[l] =
                Some(ContactGeometry { normal: [nx[l], ny[l], nz[l]], depth: dp[l], point: [px[l], py[l], pz[l]] });
        }
    }
    out
}

/// A lane mask (all bits set in a lane) from `movemask` bits.
#[inline(always)]
unsafe fn mask_of(bits: i32) -> F {
    let b = _mm256_set1_epi64x(bits as i64);
    let sel = _mm256_set_epi64x(8, 4, 2, 1);
    _mm256_castsi256_pd(_mm256_cmpeq_epi64(_mm256_and_si256(b, sel), sel))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collide::contact_ellipsoid_ellipsoid::contact_ellipsoid_ellipsoid;
    use rand::{Rng, SeedableRng};

    /// Lane by lane, the scalar contact's bits, on random pairs near touching (spheres, equal
    /// centers, long thin bodies among them), in groups of 1 to 4.
    #[test]
    fn matches_the_scalar_contact() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
        let mut rng = rand_pcg::Pcg64::seed_from_u64(11);
        let shape = |rng: &mut rand_pcg::Pcg64, k: usize| {
            let radii: V3 = if k % 5 == 0 {
                [0.7; 3]
            } else if k % 7 == 0 {
                [3.0, 0.05, 0.3]
            } else {
                std::array::from_fn(|_| rng.random_range(0.2..2.0))
            };
            let q: [f64; 4] = std::array::from_fn(|_| rng.random_range(-1.0..1.0));
            let s = Shape::new(radii, q);
            let sigma = s.sigma();
            (s, sigma)
        };
        let (mut hits, mut total) = (0, 0);
        for round in 0..20_000 {
            let count = 1 + round % 4;
            type Body = (Shape, [f64; 6]);
            let bodies: Vec<(Body, Body, V3)> = (0..count)
                .map(|l| {
                    let (a, b) = (shape(&mut rng, round + l), shape(&mut rng, round + l + 2));
                    let r: V3 = if (round + l) % 11 == 0 {
                        [0.0; 3]
                    } else {
                        std::array::from_fn(|_| rng.random_range(-3.0..3.0))
                    };
                    (a, b, r)
                })
                .collect();
            let pairs: Vec<Pair> =
                bodies.iter().map(|(a, b, r)| Pair { a: &a.0, sigma_a: &a.1, b: &b.0, sigma_b: &b.1, r: *r }).collect();
            // SAFETY: the CPU has AVX2.
            let got = unsafe { contacts(&pairs) };
            for (l, (a, b, r)) in bodies.iter().enumerate() {
                let want = contact_ellipsoid_ellipsoid(&a.0, &b.0, *r);
                let bits = |g: Option<ContactGeometry>| {
                    g.map(|g| (g.normal.map(f64::to_bits), g.depth.to_bits(), g.point.map(f64::to_bits)))
                };
                assert_eq!(bits(got[l]), bits(want), "round {round}, lane {l}");
                hits += want.is_some() as usize;
                total += 1;
            }
            assert!(got[count..].iter().all(Option::is_none));
        }
        assert!(hits > total / 5 && hits < total * 4 / 5, "{hits} contacts of {total} pairs");
    }
}
