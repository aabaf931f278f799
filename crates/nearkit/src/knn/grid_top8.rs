//! The grid's cell scan with a top k of at most 8 held in AVX2 registers (f64 and f32).
//!
//! `TopK` moves a new entry up its slots one compare at a time, and where it stops is what
//! the data says: about one wrongly guessed branch per entry taken, and one more for the
//! entries refused. Here the eight slots are compared with the candidate at once and every
//! slot greater than it moves down a lane (the candidate taking the first one's place), with
//! no branch on the outcome; a refused candidate changes nothing. The slots are the same
//! (d², id) pairs in the same order as `TopK`'s, and the distances the same operations as
//! `dist2`, so the answer is the same bits.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

#[cfg(target_arch = "x86_64")]
use super::grid::{tiny, BUCKETS, MARGIN};
use super::grid::{CandidateGrid, GridCand};
#[cfg(target_arch = "x86_64")]
use crate::geometry::real::dist2;
use crate::geometry::real::Real;
#[cfg(target_arch = "x86_64")]
use crate::runtime::top8::{Slots, Slots32};
use crate::tree::MortonTree;

/// [`CandidateGrid::knn_packed`] (the same answer), with the top k in AVX2 registers where
/// the CPU has AVX2 and k <= 8.
#[inline]
pub fn knn_packed<T: Real>(
    grid: &CandidateGrid<T>,
    tree: &MortonTree<T>,
    cand: &[GridCand<T>],
    q: [T; 3],
    r2: T,
    skip: u32,
    best: &mut [(T, u32)],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if (1..=8).contains(&best.len()) && std::is_x86_feature_detected!("avx2") {
        let Some((c, e)) = grid.frame.locate_in(tree, q) else {
            return false;
        };
        if let Some((grid, cand, best)) = as_precision::<T, f64>(grid, cand, best) {
            let q = q.map(|v| v.to_f64());
            // SAFETY: the CPU has AVX2, and 1 <= k <= 8.
            unsafe { scan(grid, cand, c, e.to_f64(), q, r2.to_f64(), skip, best) };
            return true;
        }
        if let Some((grid, cand, best)) = as_precision::<T, f32>(grid, cand, best) {
            let q = q.map(|v| v.to_f64() as f32);
            let (e, r2) = (e.to_f64() as f32, r2.to_f64() as f32);
            // SAFETY: the CPU has AVX2, and 1 <= k <= 8.
            unsafe { scan_f32(grid, cand, c, e, q, r2, skip, best) };
            return true;
        }
    }
    grid.knn_packed(tree, cand, q, r2, skip, best)
}

/// The grid, `cand` and `best` as `U`'s when T is U: the AVX2 scans are written per type.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(clippy::type_complexity)]
fn as_precision<'a, T: Real, U: Real>(
    grid: &'a CandidateGrid<T>,
    cand: &'a [GridCand<T>],
    best: &'a mut [(T, u32)],
) -> Option<(&'a CandidateGrid<U>, &'a [GridCand<U>], &'a mut [(U, u32)])> {
    if std::any::TypeId::of::<T>() != std::any::TypeId::of::<U>() {
        return None;
    }
    // SAFETY: T is U, so these are the same types.
    unsafe {
        Some((
            &*(grid as *const CandidateGrid<T> as *const CandidateGrid<U>),
            &*(cand as *const [GridCand<T>] as *const [GridCand<U>]),
            &mut *(best as *mut [(T, u32)] as *mut [(U, u32)]),
        ))
    }
}

#[cfg(target_arch = "x86_64")]
/// `CandidateGrid::scan` of cell `c` for a query `q` at `e` from its centre, over the packed
/// records, with `best.len()` (at most 8) slots: `best` as `knn_packed` fills it.
///
/// # Safety
/// The CPU must have AVX2, and `best.len()` must be 1..=8.
#[target_feature(enable = "avx2")]
unsafe fn scan(
    grid: &CandidateGrid<f64>,
    cand: &[GridCand<f64>],
    c: usize,
    e: f64,
    q: [f64; 3],
    r2: f64,
    skip: u32,
    best: &mut [(f64, u32)],
) {
    let k = best.len();
    debug_assert!((1..=8).contains(&k));
    let mut slots = Slots::new(r2);
    let lanes = Slots::lanes(k - 1);
    // The k-th slot's distance: the bucket test's bound, and the filter's (as of the last
    // time a candidate passed; a stale bound is only larger, and the slots decide exactly).
    let mut bound = _mm256_set1_pd(r2);
    let (m, tiny) = (1.0 + MARGIN, tiny::<f64>());
    let (qx, qy, qz) = (_mm256_set1_pd(q[0]), _mm256_set1_pd(q[1]), _mm256_set1_pd(q[2]));
    for b in c * BUCKETS..(c + 1) * BUCKETS {
        let floor = grid.floor[b];
        let g = floor - e;
        let g2 = g * g;
        if g > 0.0 && g2 > tiny && g2 > _mm256_cvtsd_f64(bound) * m {
            // As in `scan`: past a non-empty bucket ruled out, none can help.
            if floor == f64::INFINITY {
                continue;
            }
            break;
        }
        let run = &cand[grid.start[b] as usize..grid.start[b + 1] as usize];
        let mut quads = run.chunks_exact(4);
        for quad in &mut quads {
            // Four records' distances at once (lanes: records 0, 2, 1, 3): the same
            // operations as `dist2`, so the same values.
            // SAFETY: each load reads a record's x and y.
            let xy = |j: usize| unsafe { _mm_loadu_pd(quad[j].p.as_ptr()) };
            let (t01, t23) = (_mm256_set_m128d(xy(1), xy(0)), _mm256_set_m128d(xy(3), xy(2)));
            let (x, y) = (_mm256_unpacklo_pd(t01, t23), _mm256_unpackhi_pd(t01, t23));
            let z = _mm256_setr_pd(quad[0].p[2], quad[2].p[2], quad[1].p[2], quad[3].p[2]);
            let (dx, dy, dz) = (_mm256_sub_pd(qx, x), _mm256_sub_pd(qy, y), _mm256_sub_pd(qz, z));
            let d = _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(dx, dx), _mm256_mul_pd(dy, dy)), _mm256_mul_pd(dz, dz));
            if _mm256_movemask_pd(_mm256_cmp_pd::<_CMP_LE_OQ>(d, bound)) == 0 {
                continue;
            }
            let mut ds = [0.0; 4];
            // SAFETY: four f64 into four.
            unsafe { _mm256_storeu_pd(ds.as_mut_ptr(), d) };
            // All four go to the slots (one that does not belong changes nothing).
            for (lane, j) in [0, 2, 1, 3].into_iter().enumerate() {
                if quad[j].id != skip {
                    slots.offer(ds[lane], quad[j].id);
                }
            }
            bound = slots.d(k - 1, lanes);
        }
        for r in quads.remainder() {
            if r.id != skip {
                slots.offer(dist2(q[0], q[1], q[2], r.p[0], r.p[1], r.p[2]), r.id);
            }
        }
        bound = slots.d(k - 1, lanes);
    }
    slots.store(best);
}

#[cfg(target_arch = "x86_64")]
/// `scan` in f32. Four records' distances are taken at once (the same operations as
/// `dist2`, so the same values), then offered one by one.
///
/// # Safety
/// The CPU must have AVX2, and `best.len()` must be 1..=8.
#[target_feature(enable = "avx2")]
unsafe fn scan_f32(
    grid: &CandidateGrid<f32>,
    cand: &[GridCand<f32>],
    c: usize,
    e: f32,
    q: [f32; 3],
    r2: f32,
    skip: u32,
    best: &mut [(f32, u32)],
) {
    let k = best.len();
    debug_assert!((1..=8).contains(&k));
    let mut slots = Slots32::new(r2);
    // As in `scan`: the k-th slot's distance, for the bucket test and the filter.
    let mut bound = _mm_set1_ps(r2);
    let (m, tiny) = ((1.0 + MARGIN) as f32, tiny::<f32>());
    let (qx, qy, qz) = (_mm_set1_ps(q[0]), _mm_set1_ps(q[1]), _mm_set1_ps(q[2]));
    for b in c * BUCKETS..(c + 1) * BUCKETS {
        let floor = grid.floor[b];
        let g = floor - e;
        let g2 = g * g;
        if g > 0.0 && g2 > tiny && g2 > _mm_cvtss_f32(bound) * m {
            if floor == f32::INFINITY {
                continue;
            }
            break;
        }
        let run = &cand[grid.start[b] as usize..grid.start[b + 1] as usize];
        let mut quads = run.chunks_exact(4);
        for quad in &mut quads {
            let p = quad.as_ptr() as *const f32;
            // SAFETY: four records of four f32 each.
            let (r0, r1, r2, r3) =
                unsafe { (_mm_loadu_ps(p), _mm_loadu_ps(p.add(4)), _mm_loadu_ps(p.add(8)), _mm_loadu_ps(p.add(12))) };
            // Transpose four (x, y, z, id) records into x, y and z lanes.
            let (t0, t1) = (_mm_unpacklo_ps(r0, r1), _mm_unpacklo_ps(r2, r3));
            let (t2, t3) = (_mm_unpackhi_ps(r0, r1), _mm_unpackhi_ps(r2, r3));
            let dx = _mm_sub_ps(qx, _mm_movelh_ps(t0, t1));
            let dy = _mm_sub_ps(qy, _mm_movehl_ps(t1, t0));
            let dz = _mm_sub_ps(qz, _mm_movelh_ps(t2, t3));
            let d = _mm_add_ps(_mm_add_ps(_mm_mul_ps(dx, dx), _mm_mul_ps(dy, dy)), _mm_mul_ps(dz, dz));
            if _mm_movemask_ps(_mm_cmple_ps(d, bound)) == 0 {
                continue;
            }
            let mut ds = [0f32; 4];
            // SAFETY: four f32 into four.
            unsafe { _mm_storeu_ps(ds.as_mut_ptr(), d) };
            for (r, &d) in quad.iter().zip(&ds) {
                if r.id != skip {
                    slots.offer(d, r.id);
                }
            }
            bound = slots.d(k - 1);
        }
        for r in quads.remainder() {
            if r.id != skip {
                slots.offer(dist2(q[0], q[1], q[2], r.p[0], r.p[1], r.p[2]), r.id);
            }
        }
        bound = slots.d(k - 1);
    }
    slots.store(best);
}
