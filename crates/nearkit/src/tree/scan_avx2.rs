//! The radius scan's inner steps in AVX2 (`search::scan_runs`, `count_runs`): which runs'
//! boxes lie near a query, and eight points at a time, those within r, left-packed without
//! branches (with the tables the block search's packing uses too).

use std::arch::x86_64::*;

/// `LEFT[m]`: the lanes set in mask `m`, in order (then zeros): the permutation that packs
/// those lanes to the left (`_mm256_permutevar8x32_*`).
pub(crate) static LEFT: [[u32; 8]; 256] = {
    let mut t = [[0u32; 8]; 256];
    let mut m = 0;
    while m < 256 {
        let (mut k, mut l) = (0, 0);
        while l < 8 {
            if m & (1 << l) != 0 {
                t[m][k] = l as u32;
                k += 1;
            }
            l += 1;
        }
        m += 1;
    }
    t
};

/// `LEFT4[m]`: for mask `m` of four 64-bit lanes, the 32-bit lanes that pack them to the
/// left (two per 64-bit lane), then zeros.
pub(crate) static LEFT4: [[u32; 8]; 16] = {
    let mut t = [[0u32; 8]; 16];
    let mut m = 0;
    while m < 16 {
        let (mut k, mut l) = (0, 0);
        while l < 4 {
            if m & (1 << l) != 0 {
                t[m][2 * k] = 2 * l as u32;
                t[m][2 * k + 1] = 2 * l as u32 + 1;
                k += 1;
            }
            l += 1;
        }
        m += 1;
    }
    t
};

/// The lanes of `lanes` whose id (at `ids + w`) is at least `first_id` (unsigned).
#[target_feature(enable = "avx2,popcnt")]
#[inline]
unsafe fn ids_from(ids: &[u32], w: usize, first_id: u32) -> (__m256i, u32) {
    let v = _mm256_loadu_si256(ids.as_ptr().add(w) as *const __m256i);
    let ok = _mm256_cmpeq_epi32(_mm256_max_epu32(v, _mm256_set1_epi32(first_id as i32)), v);
    (v, _mm256_movemask_ps(_mm256_castsi256_ps(ok)) as u32)
}

/// The points `w..w + 8` of the columns `x`, `y`, `z` among `lanes` that lie within `r2` of
/// `q` and whose id is at least `first_id`: their squared distances (each lane the scalar
/// `dist2`'s operations in its order, no fused multiply-add, so the bits are the same; with
/// `D2` only) and ids left-packed at `d_out` and `id_out` (eight slots of each are written
/// whatever the count); returns how many. Without branches on the data.
///
/// # Safety
/// The CPU has AVX2 and POPCNT; `w + 8` is at most each column's length; `id_out`, and with
/// `D2` `d_out`, have room for eight values.
#[target_feature(enable = "avx2,popcnt")]
#[inline]
#[allow(clippy::too_many_arguments)]
pub unsafe fn keep_f64<const D2: bool>(
    [x, y, z]: [&[f64]; 3],
    ids: &[u32],
    w: usize,
    lanes: u32,
    q: [f64; 3],
    r2: f64,
    first_id: u32,
    d_out: *mut f64,
    id_out: *mut u32,
) -> usize {
    let (qx, qy, qz, r) = (_mm256_set1_pd(q[0]), _mm256_set1_pd(q[1]), _mm256_set1_pd(q[2]), _mm256_set1_pd(r2));
    let d2 = |at: usize| {
        let dx = _mm256_sub_pd(qx, _mm256_loadu_pd(x.as_ptr().add(at)));
        let dy = _mm256_sub_pd(qy, _mm256_loadu_pd(y.as_ptr().add(at)));
        let dz = _mm256_sub_pd(qz, _mm256_loadu_pd(z.as_ptr().add(at)));
        _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(dx, dx), _mm256_mul_pd(dy, dy)), _mm256_mul_pd(dz, dz))
    };
    let (lo, hi) = (d2(w), d2(w + 4));
    let near = _mm256_movemask_pd(_mm256_cmp_pd::<_CMP_LE_OQ>(lo, r)) as u32
        | (_mm256_movemask_pd(_mm256_cmp_pd::<_CMP_LE_OQ>(hi, r)) as u32) << 4;
    let (v, ok) = ids_from(ids, w, first_id);
    let keep = near & ok & lanes;
    let pack = |m: u32| _mm256_loadu_si256(LEFT4[m as usize].as_ptr() as *const __m256i);
    if D2 {
        let (m0, m1) = (keep & 15, keep >> 4);
        let n0 = m0.count_ones() as usize;
        _mm256_storeu_pd(d_out, _mm256_castps_pd(_mm256_permutevar8x32_ps(_mm256_castpd_ps(lo), pack(m0))));
        _mm256_storeu_pd(d_out.add(n0), _mm256_castps_pd(_mm256_permutevar8x32_ps(_mm256_castpd_ps(hi), pack(m1))));
    }
    let p = _mm256_loadu_si256(LEFT[keep as usize].as_ptr() as *const __m256i);
    _mm256_storeu_si256(id_out as *mut __m256i, _mm256_permutevar8x32_epi32(v, p));
    keep.count_ones() as usize
}

/// [`keep_f64`] in f32.
///
/// # Safety
/// As for [`keep_f64`].
#[target_feature(enable = "avx2,popcnt")]
#[inline]
#[allow(clippy::too_many_arguments)]
pub unsafe fn keep_f32<const D2: bool>(
    [x, y, z]: [&[f32]; 3],
    ids: &[u32],
    w: usize,
    lanes: u32,
    q: [f32; 3],
    r2: f32,
    first_id: u32,
    d_out: *mut f32,
    id_out: *mut u32,
) -> usize {
    let dx = _mm256_sub_ps(_mm256_set1_ps(q[0]), _mm256_loadu_ps(x.as_ptr().add(w)));
    let dy = _mm256_sub_ps(_mm256_set1_ps(q[1]), _mm256_loadu_ps(y.as_ptr().add(w)));
    let dz = _mm256_sub_ps(_mm256_set1_ps(q[2]), _mm256_loadu_ps(z.as_ptr().add(w)));
    let d2 = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(dx, dx), _mm256_mul_ps(dy, dy)), _mm256_mul_ps(dz, dz));
    let near = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_LE_OQ>(d2, _mm256_set1_ps(r2))) as u32;
    let (v, ok) = ids_from(ids, w, first_id);
    let keep = near & ok & lanes;
    let p = _mm256_loadu_si256(LEFT[keep as usize].as_ptr() as *const __m256i);
    if D2 {
        _mm256_storeu_ps(d_out, _mm256_permutevar8x32_ps(d2, p));
    }
    _mm256_storeu_si256(id_out as *mut __m256i, _mm256_permutevar8x32_epi32(v, p));
    keep.count_ones() as usize
}

/// How many of the points `w..w + 8` among `lanes` lie within `r2` of `q` (as [`keep_f64`]).
///
/// # Safety
/// As for [`keep_f64`].
#[target_feature(enable = "avx2,popcnt")]
#[inline]
pub unsafe fn count_f64([x, y, z]: [&[f64]; 3], w: usize, lanes: u32, q: [f64; 3], r2: f64) -> u32 {
    let (qx, qy, qz, r) = (_mm256_set1_pd(q[0]), _mm256_set1_pd(q[1]), _mm256_set1_pd(q[2]), _mm256_set1_pd(r2));
    let mut near = 0;
    for h in 0..2 {
        let at = w + 4 * h;
        let dx = _mm256_sub_pd(qx, _mm256_loadu_pd(x.as_ptr().add(at)));
        let dy = _mm256_sub_pd(qy, _mm256_loadu_pd(y.as_ptr().add(at)));
        let dz = _mm256_sub_pd(qz, _mm256_loadu_pd(z.as_ptr().add(at)));
        let d2 = _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(dx, dx), _mm256_mul_pd(dy, dy)), _mm256_mul_pd(dz, dz));
        near |= (_mm256_movemask_pd(_mm256_cmp_pd::<_CMP_LE_OQ>(d2, r)) as u32) << (4 * h);
    }
    (near & lanes).count_ones()
}

/// [`count_f64`] in f32.
///
/// # Safety
/// As for [`keep_f64`].
#[target_feature(enable = "avx2,popcnt")]
#[inline]
pub unsafe fn count_f32([x, y, z]: [&[f32]; 3], w: usize, lanes: u32, q: [f32; 3], r2: f32) -> u32 {
    let dx = _mm256_sub_ps(_mm256_set1_ps(q[0]), _mm256_loadu_ps(x.as_ptr().add(w)));
    let dy = _mm256_sub_ps(_mm256_set1_ps(q[1]), _mm256_loadu_ps(y.as_ptr().add(w)));
    let dz = _mm256_sub_ps(_mm256_set1_ps(q[2]), _mm256_loadu_ps(z.as_ptr().add(w)));
    let d2 = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(dx, dx), _mm256_mul_ps(dy, dy)), _mm256_mul_ps(dz, dz));
    (_mm256_movemask_ps(_mm256_cmp_ps::<_CMP_LE_OQ>(d2, _mm256_set1_ps(r2))) as u32 & lanes).count_ones()
}

/// A bit for each of the boxes `lo..=hi` (columns of a multiple of 4 boxes) whose squared
/// distance from `q` (as `box_box_dist2` computes it for a point) is at most `r2`, in the words of `near`.
///
/// # Safety
/// The CPU has AVX2 and POPCNT; every column holds `near.len() * 64` boxes at least.
#[target_feature(enable = "avx2,popcnt")]
#[inline]
pub unsafe fn boxes_near_f64(lo: [&[f64]; 3], hi: [&[f64]; 3], q: [f64; 3], r2: f64, near: &mut [u64]) {
    let (r, zero) = (_mm256_set1_pd(r2), _mm256_setzero_pd());
    let qs = q.map(|v| _mm256_set1_pd(v));
    for (word, bits) in near.iter_mut().enumerate() {
        let mut out = 0u64;
        for k in 0..16 {
            let at = word * 64 + 4 * k;
            let mut d2 = zero;
            for d in 0..3 {
                let below = _mm256_sub_pd(_mm256_loadu_pd(lo[d].as_ptr().add(at)), qs[d]);
                let above = _mm256_sub_pd(qs[d], _mm256_loadu_pd(hi[d].as_ptr().add(at)));
                let g = _mm256_max_pd(_mm256_max_pd(below, above), zero);
                d2 = if d == 0 { _mm256_mul_pd(g, g) } else { _mm256_add_pd(d2, _mm256_mul_pd(g, g)) };
            }
            out |= (_mm256_movemask_pd(_mm256_cmp_pd::<_CMP_LE_OQ>(d2, r)) as u64) << (4 * k);
        }
        *bits = out;
    }
}

/// [`boxes_near_f64`] in f32.
///
/// # Safety
/// As for [`boxes_near_f64`].
#[target_feature(enable = "avx2,popcnt")]
#[inline]
pub unsafe fn boxes_near_f32(lo: [&[f32]; 3], hi: [&[f32]; 3], q: [f32; 3], r2: f32, near: &mut [u64]) {
    let (r, zero) = (_mm256_set1_ps(r2), _mm256_setzero_ps());
    let qs = q.map(|v| _mm256_set1_ps(v));
    for (word, bits) in near.iter_mut().enumerate() {
        let mut out = 0u64;
        for k in 0..8 {
            let at = word * 64 + 8 * k;
            let mut d2 = zero;
            for d in 0..3 {
                let below = _mm256_sub_ps(_mm256_loadu_ps(lo[d].as_ptr().add(at)), qs[d]);
                let above = _mm256_sub_ps(qs[d], _mm256_loadu_ps(hi[d].as_ptr().add(at)));
                let g = _mm256_max_ps(_mm256_max_ps(below, above), zero);
                d2 = if d == 0 { _mm256_mul_ps(g, g) } else { _mm256_add_ps(d2, _mm256_mul_ps(g, g)) };
            }
            out |= (_mm256_movemask_ps(_mm256_cmp_ps::<_CMP_LE_OQ>(d2, r)) as u64) << (8 * k);
        }
        *bits = out;
    }
}
