//! The best eight (squared distance, id) pairs of a search, ascending, held in AVX2
//! registers: a candidate is compared with every slot at once and each slot greater than it
//! moves down a lane, with no branch on where it lands. The kNN grid's cell scan
//! (`knn::grid_top8`) and the block search (`tree::nearest_block`) keep their top k here.

use std::arch::x86_64::*;

use crate::geometry::points::NO_ID;

/// The slots in f64: squared distances and ids (as i64 lanes, so that a signed compare
/// orders them) of slots 0..4 and 4..8, ascending by (d², id).
pub(crate) struct Slots {
    d: [__m256d; 2],
    id: [__m256i; 2],
}

/// Lanes of (d, id) greater than (`dv`, `iv`) in (d², id) order.
#[inline]
#[target_feature(enable = "avx2")]
fn greater(d: __m256d, id: __m256i, dv: __m256d, iv: __m256i) -> __m256d {
    let gt = _mm256_cmp_pd::<_CMP_GT_OQ>(d, dv);
    let eq = _mm256_cmp_pd::<_CMP_EQ_OQ>(d, dv);
    _mm256_or_pd(gt, _mm256_and_pd(eq, _mm256_castsi256_pd(_mm256_cmpgt_epi64(id, iv))))
}

/// Where `m`: the predecessor where `pm` too, else the new value; elsewhere the old one.
#[inline]
#[target_feature(enable = "avx2")]
fn take(old: __m256d, pred: __m256d, new: __m256d, m: __m256d, pm: __m256d) -> __m256d {
    _mm256_blendv_pd(old, _mm256_blendv_pd(new, pred, pm), m)
}

impl Slots {
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn new(r2: f64) -> Self {
        Self { d: [_mm256_set1_pd(r2); 2], id: [_mm256_set1_epi64x(NO_ID as i64); 2] }
    }

    /// Takes (d, id) in if it is less than the last slot.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn offer(&mut self, d: f64, id: u32) {
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
    pub(crate) fn d(&self, j: usize, lanes: __m256i) -> __m256d {
        let reg = if j < 4 { self.d[0] } else { self.d[1] };
        _mm256_castps_pd(_mm256_permutevar8x32_ps(_mm256_castpd_ps(reg), lanes))
    }

    /// The 32-bit lanes that bring slot `j`'s f64 lane to every lane.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn lanes(j: usize) -> __m256i {
        let l = (2 * (j % 4)) as i32;
        _mm256_setr_epi32(l, l + 1, l, l + 1, l, l + 1, l, l + 1)
    }

    /// The first `best.len()` slots into `best`.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn store(&self, best: &mut [(f64, u32)]) {
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

/// The slots in f32: eight squared distances in one register, and their ids with the top bit
/// flipped (so that a signed compare orders them as unsigned).
pub(crate) struct Slots32 {
    d: __m256,
    id: __m256i,
}

const FLIP: u32 = 0x8000_0000;

/// Lanes of (d, id) greater than (`dv`, `iv`) in (d², id) order (ids flipped).
#[inline]
#[target_feature(enable = "avx2")]
fn greater32(d: __m256, id: __m256i, dv: __m256, iv: __m256i) -> __m256 {
    let gt = _mm256_cmp_ps::<_CMP_GT_OQ>(d, dv);
    let eq = _mm256_cmp_ps::<_CMP_EQ_OQ>(d, dv);
    _mm256_or_ps(gt, _mm256_and_ps(eq, _mm256_castsi256_ps(_mm256_cmpgt_epi32(id, iv))))
}

impl Slots32 {
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn new(r2: f32) -> Self {
        Self { d: _mm256_set1_ps(r2), id: _mm256_set1_epi32((NO_ID ^ FLIP) as i32) }
    }

    /// Takes (d, id) in if it is less than the last slot (as `Slots::offer`).
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn offer(&mut self, d: f32, id: u32) {
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
    pub(crate) fn d(&self, j: usize) -> __m128 {
        _mm256_castps256_ps128(_mm256_permutevar8x32_ps(self.d, _mm256_set1_epi32(j as i32)))
    }

    /// The first `best.len()` slots into `best`.
    #[inline]
    #[target_feature(enable = "avx2")]
    pub(crate) fn store(&self, best: &mut [(f32, u32)]) {
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
