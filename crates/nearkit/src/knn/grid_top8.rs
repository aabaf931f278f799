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
use crate::geometry::points::NO_ID;
#[cfg(target_arch = "x86_64")]
use crate::geometry::real::dist2;
use crate::geometry::real::Real;
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
        if let Some((grid, cand, best)) = as_f64(grid, cand, best) {
            let q = q.map(|v| v.to_f64());
            // SAFETY: the CPU has AVX2, and 1 <= k <= 8.
            unsafe { scan(grid, cand, c, e.to_f64(), q, r2.to_f64(), skip, best) };
            return true;
        }
        if let Some((grid, cand, best)) = as_f32(grid, cand, best) {
            let q = q.map(|v| v.to_f64() as f32);
            let (e, r2) = (e.to_f64() as f32, r2.to_f64() as f32);
            // SAFETY: the CPU has AVX2, and 1 <= k <= 8.
            unsafe { scan_f32(grid, cand, c, e, q, r2, skip, best) };
            return true;
        }
    }
    grid.knn_packed(tree, cand, q, r2, skip, best)
}

/// The grid, `cand` and `best` as f64 when T is f64 (for the AVX2 scan).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(clippy::type_complexity)]
fn as_f64<'a, T: Real>(
    grid: &'a CandidateGrid<T>,
    cand: &'a [GridCand<T>],
    best: &'a mut [(T, u32)],
) -> Option<(&'a CandidateGrid<f64>, &'a [GridCand<f64>], &'a mut [(f64, u32)])> {
    if std::any::TypeId::of::<T>() != std::any::TypeId::of::<f64>() {
        return None;
    }
    // SAFETY: T is f64, so these are the same types.
    unsafe {
        Some((
            &*(grid as *const CandidateGrid<T> as *const CandidateGrid<f64>),
            &*(cand as *const [GridCand<T>] as *const [GridCand<f64>]),
            &mut *(best as *mut [(T, u32)] as *mut [(f64, u32)]),
        ))
    }
}

/// The grid, `cand` and `best` as f32 when T is f32 (for the AVX2 scan).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(clippy::type_complexity)]
fn as_f32<'a, T: Real>(
    grid: &'a CandidateGrid<T>,
    cand: &'a [GridCand<T>],
    best: &'a mut [(T, u32)],
) -> Option<(&'a CandidateGrid<f32>, &'a [GridCand<f32>], &'a mut [(f32, u32)])> {
    if std::any::TypeId::of::<T>() != std::any::TypeId::of::<f32>() {
        return None;
    }
    // SAFETY: T is f32, so these are the same types.
    unsafe {
        Some((
            &*(grid as *const CandidateGrid<T> as *const CandidateGrid<f32>),
            &*(cand as *const [GridCand<T>] as *const [GridCand<f32>]),
            &mut *(best as *mut [(T, u32)] as *mut [(f32, u32)]),
        ))
    }
}

/// The slots in f64: squared distances and ids (as i64 lanes, so that a signed compare
/// orders them) of slots 0..4 and 4..8, ascending by (d², id).
#[cfg(target_arch = "x86_64")]
struct Slots {
    d: [__m256d; 2],
    id: [__m256i; 2],
}

#[cfg(target_arch = "x86_64")]
/// Lanes of (d, id) greater than (`dv`, `iv`) in (d², id) order.
#[inline]
#[target_feature(enable = "avx2")]
fn greater(d: __m256d, id: __m256i, dv: __m256d, iv: __m256i) -> __m256d {
    let gt = _mm256_cmp_pd::<_CMP_GT_OQ>(d, dv);
    let eq = _mm256_cmp_pd::<_CMP_EQ_OQ>(d, dv);
    _mm256_or_pd(gt, _mm256_and_pd(eq, _mm256_castsi256_pd(_mm256_cmpgt_epi64(id, iv))))
}

#[cfg(target_arch = "x86_64")]
/// Where `m`: the predecessor where `pm` too, else the new value; elsewhere the old one.
#[inline]
#[target_feature(enable = "avx2")]
fn take(old: __m256d, pred: __m256d, new: __m256d, m: __m256d, pm: __m256d) -> __m256d {
    _mm256_blendv_pd(old, _mm256_blendv_pd(new, pred, pm), m)
}

#[cfg(target_arch = "x86_64")]
impl Slots {
    #[inline]
    #[target_feature(enable = "avx2")]
    fn new(r2: f64) -> Self {
        Self { d: [_mm256_set1_pd(r2); 2], id: [_mm256_set1_epi64x(NO_ID as i64); 2] }
    }

    /// Takes (d, id) in if it is less than the last slot.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn offer(&mut self, d: f64, id: u32) {
        let (dv, iv) = (_mm256_set1_pd(d), _mm256_set1_epi64x(id as i64));
        let ([lo, hi], [ilo, ihi]) = (self.d, self.id);
        // Each slot's predecessor (the candidate itself before slot 0): (x, 0, 1, 2) and
        // (3, 4, 5, 6).
        let plo = _mm256_blend_pd::<1>(_mm256_permute4x64_pd::<0b10_01_00_00>(lo), dv);
        let phi = _mm256_blend_pd::<1>(
            _mm256_permute4x64_pd::<0b10_01_00_00>(hi),
            _mm256_permute4x64_pd::<0b11_11_11_11>(lo),
        );
        let pilo = _mm256_blend_epi32::<0b11>(_mm256_permute4x64_epi64::<0b10_01_00_00>(ilo), iv);
        let pihi = _mm256_blend_epi32::<0b11>(
            _mm256_permute4x64_epi64::<0b10_01_00_00>(ihi),
            _mm256_permute4x64_epi64::<0b11_11_11_11>(ilo),
        );
        // A slot greater than the candidate moves: it takes its predecessor where that is
        // greater too, else the candidate. (The slots ascend, so those are a suffix.)
        let (mlo, mhi) = (greater(lo, ilo, dv, iv), greater(hi, ihi, dv, iv));
        let (pmlo, pmhi) = (greater(plo, pilo, dv, iv), greater(phi, pihi, dv, iv));
        let (ci, cs) = (_mm256_castsi256_pd, _mm256_castpd_si256);
        self.d = [take(lo, plo, dv, mlo, pmlo), take(hi, phi, dv, mhi, pmhi)];
        self.id = [cs(take(ci(ilo), ci(pilo), ci(iv), mlo, pmlo)), cs(take(ci(ihi), ci(pihi), ci(iv), mhi, pmhi))];
    }

    /// Slot `j`'s squared distance in every lane (`lanes`: `Slots::lanes(j)`).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn d(&self, j: usize, lanes: __m256i) -> __m256d {
        let reg = if j < 4 { self.d[0] } else { self.d[1] };
        _mm256_castps_pd(_mm256_permutevar8x32_ps(_mm256_castpd_ps(reg), lanes))
    }

    /// The 32-bit lanes that bring slot `j`'s f64 lane to every lane.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn lanes(j: usize) -> __m256i {
        let l = (2 * (j % 4)) as i32;
        _mm256_setr_epi32(l, l + 1, l, l + 1, l, l + 1, l, l + 1)
    }

    /// The first `best.len()` slots into `best`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn store(&self, best: &mut [(f64, u32)]) {
        let (mut d, mut id) = ([0.0; 8], [0i64; 8]);
        // SAFETY: four lanes a store, into arrays of eight.
        unsafe {
            _mm256_storeu_pd(d.as_mut_ptr(), self.d[0]);
            _mm256_storeu_pd(d.as_mut_ptr().add(4), self.d[1]);
            _mm256_storeu_si256(id.as_mut_ptr() as *mut __m256i, self.id[0]);
            _mm256_storeu_si256(id.as_mut_ptr().add(4) as *mut __m256i, self.id[1]);
        }
        for (j, b) in best.iter_mut().enumerate() {
            *b = (d[j], id[j] as u32);
        }
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
/// The slots in f32: eight squared distances in one register, and their ids with the top bit
/// flipped (so that a signed compare orders them as unsigned).
struct Slots32 {
    d: __m256,
    id: __m256i,
}

#[cfg(target_arch = "x86_64")]
const FLIP: u32 = 0x8000_0000;

#[cfg(target_arch = "x86_64")]
/// Lanes of (d, id) greater than (`dv`, `iv`) in (d², id) order (ids flipped).
#[inline]
#[target_feature(enable = "avx2")]
fn greater32(d: __m256, id: __m256i, dv: __m256, iv: __m256i) -> __m256 {
    let gt = _mm256_cmp_ps::<_CMP_GT_OQ>(d, dv);
    let eq = _mm256_cmp_ps::<_CMP_EQ_OQ>(d, dv);
    _mm256_or_ps(gt, _mm256_and_ps(eq, _mm256_castsi256_ps(_mm256_cmpgt_epi32(id, iv))))
}

#[cfg(target_arch = "x86_64")]
impl Slots32 {
    #[inline]
    #[target_feature(enable = "avx2")]
    fn new(r2: f32) -> Self {
        Self { d: _mm256_set1_ps(r2), id: _mm256_set1_epi32((NO_ID ^ FLIP) as i32) }
    }

    /// Takes (d, id) in if it is less than the last slot (as `Slots::offer`).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn offer(&mut self, d: f32, id: u32) {
        let (dv, iv) = (_mm256_set1_ps(d), _mm256_set1_epi32((id ^ FLIP) as i32));
        let up = _mm256_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6);
        let pd = _mm256_blend_ps::<1>(_mm256_permutevar8x32_ps(self.d, up), dv);
        let pi = _mm256_blend_epi32::<1>(_mm256_permutevar8x32_epi32(self.id, up), iv);
        let m = greater32(self.d, self.id, dv, iv);
        let pm = greater32(pd, pi, dv, iv);
        self.d = _mm256_blendv_ps(self.d, _mm256_blendv_ps(dv, pd, pm), m);
        let (ci, cs) = (_mm256_castsi256_ps, _mm256_castps_si256);
        self.id = cs(_mm256_blendv_ps(ci(self.id), _mm256_blendv_ps(ci(iv), ci(pi), pm), m));
    }

    /// Slot `j`'s squared distance in four lanes.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn d(&self, j: usize) -> __m128 {
        _mm256_castps256_ps128(_mm256_permutevar8x32_ps(self.d, _mm256_set1_epi32(j as i32)))
    }

    /// The first `best.len()` slots into `best`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn store(&self, best: &mut [(f32, u32)]) {
        let (mut d, mut id) = ([0.0; 8], [0u32; 8]);
        // SAFETY: eight lanes into arrays of eight.
        unsafe {
            _mm256_storeu_ps(d.as_mut_ptr(), self.d);
            _mm256_storeu_si256(id.as_mut_ptr() as *mut __m256i, self.id);
        }
        for (j, b) in best.iter_mut().enumerate() {
            *b = (d[j], id[j] ^ FLIP);
        }
    }
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
