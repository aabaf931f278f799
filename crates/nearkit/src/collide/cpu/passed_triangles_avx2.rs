//! `passed_triangles` (the narrow phase's first look at a body's listed triangles) four
//! triangles at once, in AVX2: the f32 box tests of one triangle in one register, the plane
//! tests of four in f64 lanes.
//!
//! Every operation is the scalar code's IEEE operation, in its order and without fused
//! multiply-add, so each triangle passes here exactly where it passes there.

use std::arch::x86_64::*;

use super::avx2_f64::{add, and, gt, ml, sb, splat, F};
use super::candidate_lists::TriangleFilter;

use crate::collide::ellipsoid::V3;

// `box_meets` loads a filter's first 32 bytes as eight f32: lo, hi, then the plane's first value.
const _: () = assert!(std::mem::offset_of!(TriangleFilter, hi) == 12);
const _: () = assert!(std::mem::offset_of!(TriangleFilter, plane) == 24);

/// The body's side of the tests, broadcast once.
struct Body {
    /// (hi, lo) of the body's f32 box: lanes 0–2 compare a triangle's lo with hi, lanes 3–5
    /// its hi with lo (`boxes` of the scalar code).
    bounds: __m256,
    c: [F; 3],
    sigma: [F; 6],
}

/// Whether the triangle's f32 box meets the body's (the scalar `boxes`).
#[inline(always)]
unsafe fn box_meets(body: &Body, f: &TriangleFilter) -> bool {
    // Bytes 0..32 of the filter: lo, hi, then the plane's first value (lanes 6–7, unused).
    let v = _mm256_loadu_ps(f as *const TriangleFilter as *const f32);
    let lo_ok = _mm256_cmp_ps::<_CMP_LE_OQ>(v, body.bounds);
    let hi_ok = _mm256_cmp_ps::<_CMP_GE_OQ>(v, body.bounds);
    let ok = _mm256_blend_ps::<0b0011_1000>(lo_ok, hi_ok);
    _mm256_movemask_ps(ok) & 0x3f == 0x3f
}

/// Which of four triangles lie beyond the body's reach from their planes, as bits (the
/// scalar `far`).
#[inline(always)]
unsafe fn far_bits(body: &Body, f: [&TriangleFilter; 4]) -> i32 {
    // The four planes (nx, ny, nz, off) transposed into a register each.
    let r = [
        _mm256_loadu_pd(f[0].plane.as_ptr()),
        _mm256_loadu_pd(f[1].plane.as_ptr()),
        _mm256_loadu_pd(f[2].plane.as_ptr()),
        _mm256_loadu_pd(f[3].plane.as_ptr()),
    ];
    let (t0, t1) = (_mm256_unpacklo_pd(r[0], r[1]), _mm256_unpackhi_pd(r[0], r[1]));
    let (t2, t3) = (_mm256_unpacklo_pd(r[2], r[3]), _mm256_unpackhi_pd(r[2], r[3]));
    let nx = _mm256_permute2f128_pd::<0x20>(t0, t2);
    let ny = _mm256_permute2f128_pd::<0x20>(t1, t3);
    let nz = _mm256_permute2f128_pd::<0x31>(t0, t2);
    let off = _mm256_permute2f128_pd::<0x31>(t1, t3);
    let [cx, cy, cz] = body.c;
    let d = sb(add(add(ml(nx, cx), ml(ny, cy)), ml(nz, cz)), off);
    let [xx, yy, zz, xy, xz, yz] = body.sigma;
    let diagonal = add(add(ml(ml(xx, nx), nx), ml(ml(yy, ny), ny)), ml(ml(zz, nz), nz));
    let across = add(add(ml(ml(xy, nx), ny), ml(ml(xz, nx), nz)), ml(ml(yz, ny), nz));
    let reach2 = add(diagonal, ml(splat(2.0), across));
    // |v|: the sign bit cleared. (No closures here: they would not inherit AVX2.)
    let sign = splat(-0.0);
    let e = sb(_mm256_andnot_pd(sign, d), ml(splat(1e-9), add(_mm256_andnot_pd(sign, off), splat(1.0))));
    let far = and(gt(e, _mm256_setzero_pd()), gt(ml(e, e), ml(reach2, splat(1.0 + 4e-9))));
    _mm256_movemask_pd(far)
}

/// Four triangles `t` (lanes out of `lanes` only) into `kept` from place `k`, as the scalar
/// loop puts them; returns the new `k`.
#[inline(always)]
unsafe fn group(
    body: &Body,
    filter: &[TriangleFilter],
    t: [u32; 4],
    lanes: i32,
    kept: &mut [u32],
    mut k: usize,
) -> usize {
    let f = [&filter[t[0] as usize], &filter[t[1] as usize], &filter[t[2] as usize], &filter[t[3] as usize]];
    let near = !far_bits(body, f) & lanes;
    for l in 0..4 {
        let pass = box_meets(body, f[l]) & (near >> l & 1 != 0);
        // SAFETY: k is at most the lanes seen so far, fewer than `kept` holds (the caller's).
        *kept.get_unchecked_mut(k) = t[l];
        k += pass as usize;
    }
    k
}

/// `passed_triangles` of the scalar code: the same triangles, in the same order, in `kept`
/// (which holds at least `tris.len()` rounded up to a multiple of 4 values); returns how many.
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn passed_triangles(
    sigma: [f64; 6],
    lo: [f32; 3],
    hi: [f32; 3],
    c: V3,
    tris: &[u32],
    filter: &[TriangleFilter],
    kept: &mut [u32],
) -> usize {
    let body = Body {
        bounds: _mm256_setr_ps(hi[0], hi[1], hi[2], lo[0], lo[1], lo[2], 0.0, 0.0),
        c: [splat(c[0]), splat(c[1]), splat(c[2])],
        sigma: [splat(sigma[0]), splat(sigma[1]), splat(sigma[2]), splat(sigma[3]), splat(sigma[4]), splat(sigma[5])],
    };
    assert!(kept.len() >= tris.len().next_multiple_of(4));
    let mut k = 0;
    let mut groups = tris.chunks_exact(4);
    for g in &mut groups {
        k = group(&body, filter, [g[0], g[1], g[2], g[3]], 0b1111, kept, k);
    }
    let rest = groups.remainder();
    if !rest.is_empty() {
        // The missing lanes repeat the last triangle and pass nothing (no loop over 1–3).
        let at = |l: usize| rest[l.min(rest.len() - 1)];
        k = group(&body, filter, [at(0), at(1), at(2), at(3)], (1 << rest.len()) - 1, kept, k);
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// The scalar code's triangles, in its order, for lists of every length up to 13 (each
    /// remainder of a group of four), boxes that touch the body's exactly on a side, and
    /// planes whose distance from the center is at or about the body's reach, or within the
    /// test's margin for rounding.
    #[test]
    fn passes_the_triangles_the_scalar_code_passes() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
        let mut rng = rand_pcg::Pcg64::seed_from_u64(26);
        let mut passed = 0;
        for round in 0..20_000 {
            let c: V3 = std::array::from_fn(|_| rng.random_range(-100.0..100.0));
            let r = rng.random_range(0.1..2.0);
            let (lo, hi) = ([0, 1, 2].map(|a| (c[a] - r) as f32), [0, 1, 2].map(|a| (c[a] + r) as f32));
            let s = rng.random_range(0.01..4.0);
            let sigma = [s, s * 1.5, s * 0.5, 0.1 * s, -0.2 * s, 0.05 * s];
            let filter: Vec<TriangleFilter> = (0..16)
                .map(|_| {
                    let mut f = TriangleFilter::default();
                    for a in 0..3 {
                        let (l, h) = (rng.random_range(-3.0..3.0), rng.random_range(0.0..2.0));
                        f.lo[a] = (c[a] + l) as f32;
                        f.hi[a] = f.lo[a] + h as f32;
                        // A side exactly on the body's box now and then.
                        match rng.random_range(0..8) {
                            0 => f.hi[a] = lo[a],
                            1 => f.lo[a] = hi[a],
                            _ => {}
                        }
                    }
                    let n: V3 = std::array::from_fn(|_| rng.random_range(-1.0..1.0));
                    let len = (n[0] * n[0] + n[1] * n[1] + n[2] * n[2]).sqrt();
                    let n = n.map(|v| v / len);
                    let [xx, yy, zz, xy, xz, yz] = sigma;
                    let (nx, ny, nz) = (n[0], n[1], n[2]);
                    let reach = (xx * nx * nx
                        + yy * ny * ny
                        + zz * nz * nz
                        + 2.0 * (xy * nx * ny + xz * nx * nz + yz * ny * nz))
                        .sqrt();
                    let d = reach * rng.random_range(0.0..2.0) * if rng.random::<bool>() { 1.0 } else { -1.0 };
                    let nc = n[0] * c[0] + n[1] * c[1] + n[2] * c[2];
                    let d = match round % 5 {
                        0 => reach,
                        // Within the rounding margin: e² between reach²(1 + 3e-9) and reach²(1 + 4e-9).
                        1 => reach * (1.0 + 1.75e-9) + 1e-9 * ((nc - reach).abs() + 1.0),
                        _ => d,
                    };
                    let off = nc - d;
                    f.plane = [n[0], n[1], n[2], off];
                    f
                })
                .collect();
            let len = round % 14;
            let tris: Vec<u32> = (0..len).map(|_| rng.random_range(0..16)).collect();
            let mut want = vec![0; 16];
            let n = crate::collide::cpu::passed_triangles(false, sigma, (lo, hi), c, &tris, &filter, &mut want);
            let mut got = vec![0; 16];
            // SAFETY: the CPU has AVX2; `got` holds len rounded up to four.
            let m = unsafe { passed_triangles(sigma, lo, hi, c, &tris, &filter, &mut got) };
            assert_eq!(&got[..m], &want[..n], "round {round}");
            passed += n;
        }
        // Neither all nor none pass: both sides of each test were seen.
        assert!(passed > 10_000 && passed < 20_000 * 13 / 2 * 9 / 10, "{passed} passed");
    }
}
