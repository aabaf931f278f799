//! Nearest neighbours (and the k nearest, `knn_block`) of many queries at once on the CPU: a
//! block of queries consecutive in Morton order walks the tree once, and small groups of them
//! share one list of candidates.
//!
//! A query alone (`search::nearest_hinted`) spends most of its time walking the tree and
//! testing boxes. Here the block's walk collects the runs (small nodes) within a reach of its
//! bounding box; each group of `GROUP` queries keeps, of those runs' points, the ones within
//! the reach of its own box (packed with AVX2 where the CPU has it), and the group's queries,
//! one per lane, then go through the candidates together, each keeping the first in
//! (squared distance, id) order, with no branch.
//!
//! Why it is exact: a point within the reach of a query lies within the reach of the query's
//! group box and of the block box (box distances are lower bounds, in floating point too,
//! since rounding is monotone), so it is a candidate. A best found within the reach is
//! therefore the answer. The reach is a guess (the previous block's farthest answer); a query
//! whose best is farther searches the tree alone, seeded with that best.

use super::search::{nearest_hinted, runs_near_capped, Run, NO_POSITION, RUN_MAX};
use super::MortonTree;
use crate::geometry::points::NO_ID;
use crate::geometry::real::{dist2, Real};

/// Queries per rayon task of a block search: large enough to amortise scheduling, small
/// enough to balance.
pub const QUERY_GRAIN: usize = 2048;
/// Queries (consecutive in Morton order) that walk the tree together.
pub const BLOCK: usize = 256;
/// Points of the runs a block's walk collects (nodes this small are not descended).
pub const RUN: usize = 32;
const _: () = assert!(RUN <= RUN_MAX);
/// Queries that share one list of candidates.
pub const GROUP: usize = 16;
/// Runs a block may collect before its queries are searched one at a time instead.
pub const BLOCK_RUN_CAP: usize = 1024;
/// Candidates a group may gather before its queries are searched one at a time instead.
pub const GROUP_CANDIDATE_CAP: usize = 512;
/// Times a group with too many candidates tries again with a quarter of the reach.
const GATHER_RETRIES: usize = 2;
const LANES: usize = 8;
/// Room for the cap, one more run past it, and a whole lane of packed stores past that.
const SLOTS: usize = GROUP_CANDIDATE_CAP + RUN_MAX + LANES;

/// What [`nearest_block`] reuses from one block to the next.
pub struct NearestScratch<T> {
    runs: Vec<Run<T>>,
    /// The runs' boxes as columns (lo x, y, z, hi x, y, z), padded to whole lanes.
    boxes: [Vec<T>; 6],
    run_d2: Vec<T>,
    /// A group's candidates as columns (`len` of them), padded to whole lanes with infinite
    /// points of id `NO_ID`.
    cand: [Vec<T>; 3],
    cand_id: Vec<u32>,
    len: usize,
}

impl<T: Real> Default for NearestScratch<T> {
    fn default() -> Self {
        Self {
            runs: Vec::new(),
            boxes: Default::default(),
            run_d2: Vec::new(),
            cand: std::array::from_fn(|_| vec![T::INFINITY; SLOTS]),
            cand_id: vec![NO_ID; SLOTS],
            len: 0,
        }
    }
}

/// Squared gap between the intervals `alo..=ahi` and `blo..=bhi` (0 when they overlap).
#[inline(always)]
fn gap2<T: Real>(alo: T, ahi: T, blo: T, bhi: T) -> T {
    let g = (alo - bhi).max(blo - ahi).max(T::ZERO);
    g * g
}

impl<T: Real> NearestScratch<T> {
    fn set_boxes(&mut self) {
        let n = self.runs.len().next_multiple_of(LANES);
        for (c, col) in self.boxes.iter_mut().enumerate() {
            col.clear();
            col.extend(self.runs.iter().map(|r| if c < 3 { r.lo[c] } else { r.hi[c - 3] }));
            col.resize(n, T::INFINITY);
        }
        self.run_d2.resize(n, T::ZERO);
    }

    /// Every point of the runs within squared distance `reach2` of the box `glo..=ghi`, as
    /// the candidate columns: the runs are tested eight at a time, then their points. False
    /// (the columns then partial) past `GROUP_CANDIDATE_CAP` candidates.
    #[inline(always)]
    fn gather(&mut self, tree: &MortonTree<T>, glo: [T; 3], ghi: [T; 3], reach2: T) -> bool {
        let [lx, ly, lz, hx, hy, hz] = &self.boxes;
        for (j, d) in self.run_d2.iter_mut().enumerate() {
            *d = gap2(glo[0], ghi[0], lx[j], hx[j])
                + gap2(glo[1], ghi[1], ly[j], hy[j])
                + gap2(glo[2], ghi[2], lz[j], hz[j]);
        }
        let mut len = 0;
        for (r, &rd) in self.runs.iter().zip(&self.run_d2) {
            if rd > reach2 {
                continue;
            }
            len = pack(tree, r.s as usize, r.e as usize, glo, ghi, reach2, &mut self.cand, &mut self.cand_id, len);
            if len > GROUP_CANDIDATE_CAP {
                return false;
            }
        }
        self.len = len;
        for slot in len..len.next_multiple_of(LANES) {
            for c in &mut self.cand {
                c[slot] = T::INFINITY;
            }
            self.cand_id[slot] = NO_ID;
        }
        true
    }

    /// For each of a group's queries (in lanes: `GROUP` of them, unused lanes anywhere), the
    /// candidate that comes first in (squared distance, id) order, or `(bd, bid)` as given
    /// when none comes before that: each candidate is compared with every query at once.
    #[inline(always)]
    fn first_of_group(&self, qs: &[[T; GROUP]; 3], bd: &mut [T; GROUP], bid: &mut [u32; GROUP]) {
        #[cfg(target_arch = "x86_64")]
        if T::NAME == "f64" && std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: T is f64 (its name says so), so the casts only rename; the CPU has AVX2.
            unsafe {
                let f64s = |v: &[T]| std::slice::from_raw_parts(v.as_ptr() as *const f64, v.len());
                return avx2::first_of_group_f64(
                    self.cand.each_ref().map(|c| f64s(c)),
                    &self.cand_id,
                    self.len,
                    &*(qs as *const [[T; GROUP]; 3] as *const [[f64; GROUP]; 3]),
                    &mut *(bd as *mut [T; GROUP] as *mut [f64; GROUP]),
                    bid,
                );
            }
        }
        let [cx, cy, cz] = &self.cand;
        for j in 0..self.len {
            let (x, y, z, id) = (cx[j], cy[j], cz[j], self.cand_id[j]);
            for l in 0..GROUP {
                let d = dist2(qs[0][l], qs[1][l], qs[2][l], x, y, z);
                let better = (d < bd[l]) | ((d == bd[l]) & (id < bid[l]));
                bd[l] = if better { d } else { bd[l] };
                bid[l] = if better { id } else { bid[l] };
            }
        }
    }

    /// [`Self::knn_of_group`] for k <= 8 where the CPU has AVX2, for the group's first `n`
    /// lanes: each query goes through the candidates alone, its top k in registers
    /// (`runtime::top8`), four candidates' distances at a time checked against its k-th. The
    /// same lists, bit for bit. Returns false (nothing done) elsewhere.
    #[inline(always)]
    fn knn_of_group_top8(
        &self,
        qs: &[[T; GROUP]; 3],
        n: usize,
        skip: &[u32; GROUP],
        k: usize,
        bd: &mut [[T; GROUP]],
        bid: &mut [[u32; GROUP]],
    ) -> bool {
        #[cfg(target_arch = "x86_64")]
        if (1..=8).contains(&k) && std::arch::is_x86_feature_detected!("avx2") {
            let [cx, cy, cz] = &self.cand;
            for l in 0..n {
                let q = [qs[0][l], qs[1][l], qs[2][l]].map(|v| v.to_f64());
                let r2 = bd[k - 1][l].to_f64();
                let mut best = [(0.0f64, NO_ID); 8];
                if T::NAME == "f64" {
                    // SAFETY: T is f64 (its name says so), so the casts only rename; the CPU has
                    // AVX2; the columns are padded to whole lanes past `len`.
                    unsafe {
                        let f64s = |v: &[T]| std::slice::from_raw_parts(v.as_ptr() as *const f64, v.len());
                        avx2::knn_lane_f64(
                            [f64s(cx), f64s(cy), f64s(cz)],
                            &self.cand_id,
                            self.len,
                            q,
                            r2,
                            skip[l],
                            &mut best[..k],
                        );
                    }
                } else if T::NAME == "f32" {
                    let mut best32 = [(0.0f32, NO_ID); 8];
                    // SAFETY: as above, with T = f32.
                    unsafe {
                        let f32s = |v: &[T]| std::slice::from_raw_parts(v.as_ptr() as *const f32, v.len());
                        let q32 = q.map(|v| v as f32);
                        avx2::knn_lane_f32(
                            [f32s(cx), f32s(cy), f32s(cz)],
                            &self.cand_id,
                            self.len,
                            q32,
                            r2 as f32,
                            skip[l],
                            &mut best32[..k],
                        );
                    }
                    for (b, b32) in best.iter_mut().zip(&best32) {
                        *b = (b32.0 as f64, b32.1);
                    }
                } else {
                    return false;
                }
                for r in 0..k {
                    bd[r][l] = T::from_f64(best[r].0);
                    bid[r][l] = best[r].1;
                }
            }
            return true;
        }
        let _ = (qs, n, skip, k, bd, bid);
        false
    }

    /// For each of a group's queries (in lanes), its `k` first candidates in (squared
    /// distance, id) order merged into the sorted lists `bd[rank][lane]`, `bid[rank][lane]`
    /// (filled with `(r2, NO_ID)` to start), a lane's `skip` id left out. A candidate no lane
    /// takes costs one comparison with each lane's k-th; one some lane takes goes down every
    /// lane's list, swapping where it comes first (lanes that do not take it never swap).
    #[inline(always)]
    fn knn_of_group(
        &self,
        qs: &[[T; GROUP]; 3],
        skip: &[u32; GROUP],
        k: usize,
        bd: &mut [[T; GROUP]],
        bid: &mut [[u32; GROUP]],
    ) {
        let [cx, cy, cz] = &self.cand;
        for j in 0..self.len {
            let (x, y, z, id) = (cx[j], cy[j], cz[j], self.cand_id[j]);
            let mut d = [T::ZERO; GROUP];
            let mut take = [false; GROUP];
            for l in 0..GROUP {
                d[l] = dist2(qs[0][l], qs[1][l], qs[2][l], x, y, z);
                let (kd, kid) = (bd[k - 1][l], bid[k - 1][l]);
                take[l] = ((d[l] < kd) | ((d[l] == kd) & (id < kid))) & (id != skip[l]);
            }
            if !take.iter().fold(false, |a, &t| a | t) {
                continue;
            }
            let mut cid = [id; GROUP];
            for (rd, rid) in bd[..k].iter_mut().zip(bid[..k].iter_mut()) {
                for l in 0..GROUP {
                    let swap = take[l] & ((d[l] < rd[l]) | ((d[l] == rd[l]) & (cid[l] < rid[l])));
                    let (od, oid) = (rd[l], rid[l]);
                    rd[l] = if swap { d[l] } else { od };
                    rid[l] = if swap { cid[l] } else { oid };
                    d[l] = if swap { od } else { d[l] };
                    cid[l] = if swap { oid } else { cid[l] };
                }
            }
        }
    }
}

/// Appends the points of sorted positions `s..e` within squared distance `reach2` of the box
/// `glo..=ghi` to the columns from slot `len` on; returns the new length. It may write up to
/// a lane past the new length (the columns have room).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn pack<T: Real>(
    tree: &MortonTree<T>,
    s: usize,
    e: usize,
    glo: [T; 3],
    ghi: [T; 3],
    reach2: T,
    cand: &mut [Vec<T>; 3],
    cand_id: &mut [u32],
    len: usize,
) -> usize {
    #[cfg(target_arch = "x86_64")]
    if T::NAME == "f32" && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: T is f32 (its name says so, and Real has no other 32-bit type), so the
        // casts only rename; the CPU has AVX2 (checked just above).
        return unsafe {
            let col = |v: &[T]| std::slice::from_raw_parts(v.as_ptr() as *const f32, v.len());
            let out = |v: &mut Vec<T>| v.as_mut_ptr() as *mut f32;
            let box32 = |b: [T; 3]| b.map(|v| v.to_f64() as f32);
            avx2::pack_f32(
                [col(&tree.x), col(&tree.y), col(&tree.z)],
                &tree.id,
                s..e,
                box32(glo),
                box32(ghi),
                reach2.to_f64() as f32,
                [out(&mut cand[0]), out(&mut cand[1]), out(&mut cand[2])],
                cand_id.as_mut_ptr(),
                len,
            )
        };
    }
    #[cfg(target_arch = "x86_64")]
    if T::NAME == "f64" && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: as for f32, with T = f64.
        return unsafe {
            let col = |v: &[T]| std::slice::from_raw_parts(v.as_ptr() as *const f64, v.len());
            let out = |v: &mut Vec<T>| v.as_mut_ptr() as *mut f64;
            avx2::pack_f64(
                [col(&tree.x), col(&tree.y), col(&tree.z)],
                &tree.id,
                s..e,
                glo.map(|v| v.to_f64()),
                ghi.map(|v| v.to_f64()),
                reach2.to_f64(),
                [out(&mut cand[0]), out(&mut cand[1]), out(&mut cand[2])],
                cand_id.as_mut_ptr(),
                len,
            )
        };
    }
    let mut k = len;
    for i in s..e {
        let (x, y, z) = (tree.x[i], tree.y[i], tree.z[i]);
        cand[0][k] = x;
        cand[1][k] = y;
        cand[2][k] = z;
        cand_id[k] = tree.id[i];
        let d = gap2(glo[0], ghi[0], x, x) + gap2(glo[1], ghi[1], y, y) + gap2(glo[2], ghi[2], z, z);
        k += usize::from(d <= reach2);
    }
    k
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use crate::runtime::top8::{Slots, Slots32};
    use crate::tree::scan_avx2::{LEFT, LEFT4};

    /// One query's first `best.len()` (1 to 8) candidates in (d², id) order, `skip` left out,
    /// starting from slots of (`r2`, `NO_ID`): four candidates' distances at a time (the same
    /// operations as `dist2`), a quad with none within the k-th slot skipped (a stale bound is
    /// only larger), each other candidate offered to the slots.
    ///
    /// # Safety
    /// The CPU has AVX2; the columns hold `len` candidates, then padding (infinite points, id
    /// `NO_ID`) up to a whole lane.
    #[target_feature(enable = "avx2")]
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn knn_lane_f64(
        cand: [&[f64]; 3],
        cand_id: &[u32],
        len: usize,
        q: [f64; 3],
        r2: f64,
        skip: u32,
        best: &mut [(f64, u32)],
    ) {
        let k = best.len();
        debug_assert!((1..=8).contains(&k) && len.next_multiple_of(4) <= cand_id.len());
        let mut slots = Slots::new(r2);
        let lanes = Slots::lanes(k - 1);
        let mut bound = _mm256_set1_pd(r2);
        let (qx, qy, qz) = (_mm256_set1_pd(q[0]), _mm256_set1_pd(q[1]), _mm256_set1_pd(q[2]));
        let mut j = 0;
        while j < len {
            let at = |c: &[f64]| _mm256_loadu_pd(c.as_ptr().add(j));
            let (dx, dy, dz) =
                (_mm256_sub_pd(qx, at(cand[0])), _mm256_sub_pd(qy, at(cand[1])), _mm256_sub_pd(qz, at(cand[2])));
            let d = _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(dx, dx), _mm256_mul_pd(dy, dy)), _mm256_mul_pd(dz, dz));
            if _mm256_movemask_pd(_mm256_cmp_pd::<_CMP_LE_OQ>(d, bound)) != 0 {
                let mut ds = [0.0; 4];
                _mm256_storeu_pd(ds.as_mut_ptr(), d);
                for (l, &dl) in ds.iter().enumerate() {
                    let id = *cand_id.get_unchecked(j + l);
                    if id != skip {
                        slots.offer(dl, id);
                    }
                }
                bound = slots.d(k - 1, lanes);
            }
            j += 4;
        }
        slots.store(best);
    }

    /// [`knn_lane_f64`] in f32.
    ///
    /// # Safety
    /// As for [`knn_lane_f64`].
    #[target_feature(enable = "avx2")]
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn knn_lane_f32(
        cand: [&[f32]; 3],
        cand_id: &[u32],
        len: usize,
        q: [f32; 3],
        r2: f32,
        skip: u32,
        best: &mut [(f32, u32)],
    ) {
        let k = best.len();
        debug_assert!((1..=8).contains(&k) && len.next_multiple_of(4) <= cand_id.len());
        let mut slots = Slots32::new(r2);
        let mut bound = _mm_set1_ps(r2);
        let (qx, qy, qz) = (_mm_set1_ps(q[0]), _mm_set1_ps(q[1]), _mm_set1_ps(q[2]));
        let mut j = 0;
        while j < len {
            let at = |c: &[f32]| _mm_loadu_ps(c.as_ptr().add(j));
            let (dx, dy, dz) = (_mm_sub_ps(qx, at(cand[0])), _mm_sub_ps(qy, at(cand[1])), _mm_sub_ps(qz, at(cand[2])));
            let d = _mm_add_ps(_mm_add_ps(_mm_mul_ps(dx, dx), _mm_mul_ps(dy, dy)), _mm_mul_ps(dz, dz));
            if _mm_movemask_ps(_mm_cmple_ps(d, bound)) != 0 {
                let mut ds = [0f32; 4];
                _mm_storeu_ps(ds.as_mut_ptr(), d);
                for (l, &dl) in ds.iter().enumerate() {
                    let id = *cand_id.get_unchecked(j + l);
                    if id != skip {
                        slots.offer(dl, id);
                    }
                }
                bound = slots.d(k - 1);
            }
            j += 4;
        }
        slots.store(best);
    }

    /// The f64 `first_of_group`: the sixteen lanes as four registers, their ids widened to
    /// 64 bits beside them (no conversion of masks between lane widths), each candidate
    /// compared with all; the portable loop's operations in each lane, so the same bits.
    ///
    /// # Safety
    /// The CPU has AVX2; the candidate columns hold at least `len` values.
    #[target_feature(enable = "avx2")]
    #[inline]
    pub unsafe fn first_of_group_f64(
        cand: [&[f64]; 3],
        cand_id: &[u32],
        len: usize,
        qs: &[[f64; 16]; 3],
        bd: &mut [f64; 16],
        bid: &mut [u32; 16],
    ) {
        debug_assert!(len <= cand_id.len() && cand.iter().all(|c| len <= c.len()));
        let q: [[__m256d; 4]; 3] =
            std::array::from_fn(|d| std::array::from_fn(|v| _mm256_loadu_pd(qs[d].as_ptr().add(4 * v))));
        let mut best: [__m256d; 4] = std::array::from_fn(|v| _mm256_loadu_pd(bd.as_ptr().add(4 * v)));
        let mut ids: [__m256i; 4] =
            std::array::from_fn(|v| _mm256_cvtepu32_epi64(_mm_loadu_si128(bid.as_ptr().add(4 * v) as *const __m128i)));
        for j in 0..len {
            let c = [0, 1, 2].map(|d| _mm256_set1_pd(*cand[d].get_unchecked(j)));
            let cid = _mm256_set1_epi64x(*cand_id.get_unchecked(j) as i64);
            for v in 0..4 {
                let (dx, dy, dz) =
                    (_mm256_sub_pd(q[0][v], c[0]), _mm256_sub_pd(q[1][v], c[1]), _mm256_sub_pd(q[2][v], c[2]));
                let d =
                    _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(dx, dx), _mm256_mul_pd(dy, dy)), _mm256_mul_pd(dz, dz));
                // Ids are below 2^32, so the signed 64-bit compare is the unsigned one.
                let id_before = _mm256_castsi256_pd(_mm256_cmpgt_epi64(ids[v], cid));
                let better = _mm256_or_pd(
                    _mm256_cmp_pd::<_CMP_LT_OQ>(d, best[v]),
                    _mm256_and_pd(_mm256_cmp_pd::<_CMP_EQ_OQ>(d, best[v]), id_before),
                );
                best[v] = _mm256_blendv_pd(best[v], d, better);
                ids[v] = _mm256_castpd_si256(_mm256_blendv_pd(
                    _mm256_castsi256_pd(ids[v]),
                    _mm256_castsi256_pd(cid),
                    better,
                ));
            }
        }
        let low = _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0);
        for v in 0..4 {
            _mm256_storeu_pd(bd.as_mut_ptr().add(4 * v), best[v]);
            let narrow = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(ids[v], low));
            _mm_storeu_si128(bid.as_mut_ptr().add(4 * v) as *mut __m128i, narrow);
        }
    }

    /// The f64 `pack`: [`pack_f32`] four points at a time; the ids, four u32 in the low half of
    /// a register, are packed with `LEFT` (their lanes are the mask's).
    ///
    /// # Safety
    /// As for [`pack_f32`].
    #[target_feature(enable = "avx2")]
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn pack_f64(
        col: [&[f64]; 3],
        id: &[u32],
        range: std::ops::Range<usize>,
        glo: [f64; 3],
        ghi: [f64; 3],
        reach2: f64,
        out: [*mut f64; 3],
        out_id: *mut u32,
        mut len: usize,
    ) -> usize {
        let n = id.len();
        let zero = _mm256_setzero_pd();
        let r = _mm256_set1_pd(reach2);
        let lo = glo.map(|v| _mm256_set1_pd(v));
        let hi = ghi.map(|v| _mm256_set1_pd(v));
        let mut c = range.start;
        while c < range.end {
            if c + 4 > n {
                for i in c..range.end {
                    let p = [col[0][i], col[1][i], col[2][i]];
                    let g = |d: usize| {
                        let g = (glo[d] - p[d]).max(p[d] - ghi[d]).max(0.0);
                        g * g
                    };
                    for d in 0..3 {
                        *out[d].add(len) = p[d];
                    }
                    *out_id.add(len) = id[i];
                    len += usize::from(g(0) + g(1) + g(2) <= reach2);
                }
                break;
            }
            let v = col.map(|x| _mm256_loadu_pd(x.as_ptr().add(c)));
            let mut d2 = zero;
            for d in 0..3 {
                let g = _mm256_max_pd(_mm256_max_pd(_mm256_sub_pd(lo[d], v[d]), _mm256_sub_pd(v[d], hi[d])), zero);
                d2 = if d == 0 { _mm256_mul_pd(g, g) } else { _mm256_add_pd(d2, _mm256_mul_pd(g, g)) };
            }
            let mut m = _mm256_movemask_pd(_mm256_cmp_pd::<_CMP_LE_OQ>(d2, r)) as u32;
            let valid = range.end - c;
            if valid < 4 {
                m &= (1 << valid) - 1;
            }
            let p = _mm256_loadu_si256(LEFT4[m as usize].as_ptr() as *const __m256i);
            for d in 0..3 {
                let packed = _mm256_permutevar8x32_ps(_mm256_castpd_ps(v[d]), p);
                _mm256_storeu_pd(out[d].add(len), _mm256_castps_pd(packed));
            }
            let ids = _mm256_castsi128_si256(_mm_loadu_si128(id.as_ptr().add(c) as *const __m128i));
            let q = _mm256_loadu_si256(LEFT[m as usize].as_ptr() as *const __m256i);
            let packed = _mm256_permutevar8x32_epi32(ids, q);
            _mm_storeu_si128(out_id.add(len) as *mut __m128i, _mm256_castsi256_si128(packed));
            len += m.count_ones() as usize;
            c += 4;
        }
        len
    }

    /// The f32 `pack`, eight points at a time: the same box distance as the scalar code in
    /// each lane, a mask of those within reach, and one permute per column to pack them.
    ///
    /// # Safety
    /// The CPU must have AVX2; `out` and `out_id` must have room for `len + (e - s) + 8`.
    #[target_feature(enable = "avx2")]
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn pack_f32(
        col: [&[f32]; 3],
        id: &[u32],
        range: std::ops::Range<usize>,
        glo: [f32; 3],
        ghi: [f32; 3],
        reach2: f32,
        out: [*mut f32; 3],
        out_id: *mut u32,
        mut len: usize,
    ) -> usize {
        let n = id.len();
        let zero = _mm256_setzero_ps();
        let r = _mm256_set1_ps(reach2);
        let lo = glo.map(|v| _mm256_set1_ps(v));
        let hi = ghi.map(|v| _mm256_set1_ps(v));
        let mut c = range.start;
        while c < range.end {
            if c + 8 > n {
                // The last points of the tree: one at a time (a load of eight would overrun).
                for i in c..range.end {
                    let p = [col[0][i], col[1][i], col[2][i]];
                    let g = |d: usize| {
                        let g = (glo[d] - p[d]).max(p[d] - ghi[d]).max(0.0);
                        g * g
                    };
                    for d in 0..3 {
                        *out[d].add(len) = p[d];
                    }
                    *out_id.add(len) = id[i];
                    len += usize::from(g(0) + g(1) + g(2) <= reach2);
                }
                break;
            }
            let v = col.map(|x| _mm256_loadu_ps(x.as_ptr().add(c)));
            let mut d2 = zero;
            for d in 0..3 {
                let g = _mm256_max_ps(_mm256_max_ps(_mm256_sub_ps(lo[d], v[d]), _mm256_sub_ps(v[d], hi[d])), zero);
                d2 = if d == 0 { _mm256_mul_ps(g, g) } else { _mm256_add_ps(d2, _mm256_mul_ps(g, g)) };
            }
            let mut m = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_LE_OQ>(d2, r)) as u32;
            let valid = range.end - c;
            if valid < 8 {
                m &= (1 << valid) - 1;
            }
            let p = _mm256_loadu_si256(LEFT[m as usize].as_ptr() as *const __m256i);
            for d in 0..3 {
                _mm256_storeu_ps(out[d].add(len), _mm256_permutevar8x32_ps(v[d], p));
            }
            let ids = _mm256_loadu_si256(id.as_ptr().add(c) as *const __m256i);
            _mm256_storeu_si256(out_id.add(len) as *mut __m256i, _mm256_permutevar8x32_epi32(ids, p));
            len += m.count_ones() as usize;
            c += 8;
        }
        len
    }
}

/// Whether every run a walk can give (at most `run` or a leaf's points) fits the candidate
/// slots past the cap, which the packing writes to without bounds checks.
#[inline(always)]
fn fits_slots<T: Real>(tree: &MortonTree<T>, run: usize) -> bool {
    run.max(tree.leaf_size as usize) <= RUN_MAX
}

/// A group's queries in lanes, and its candidates gathered within `reach2` of its box (a
/// poor guess that gives too many is cut to a quarter, twice at most: it came after queries
/// far from the data). Returns the lanes, whether there are candidates, and their reach.
#[inline(always)]
fn group_candidates<T: Real>(
    tree: &MortonTree<T>,
    s: &mut NearestScratch<T>,
    group: &[([T; 3], u32)],
    grouped: bool,
    reach2: T,
) -> ([[T; GROUP]; 3], bool, T) {
    let (mut glo, mut ghi) = ([T::INFINITY; 3], [-T::INFINITY; 3]);
    let mut qs = [[T::ZERO; GROUP]; 3];
    for (l, (q, _)) in group.iter().enumerate() {
        for d in 0..3 {
            glo[d] = glo[d].min(q[d]);
            ghi[d] = ghi[d].max(q[d]);
            qs[d][l] = q[d];
        }
    }
    let mut reach_g2 = reach2;
    let mut gathered = grouped && s.gather(tree, glo, ghi, reach_g2);
    for _ in 0..GATHER_RETRIES {
        if gathered || !grouped {
            break;
        }
        reach_g2 = reach_g2 * T::from_f64(0.25);
        gathered = s.gather(tree, glo, ghi, reach_g2);
    }
    (qs, gathered, reach_g2)
}

/// Each query of `block`'s nearest point within squared radius `r2` (inclusive), into `out`
/// as (squared distance, id), or `(r2, NO_ID)` when there is none: the same answers as
/// [`nearest_hinted`], for queries consecutive in Morton order, with `reach2` the guess of
/// how far their answers lie (see the module's comment).
#[inline(always)]
pub fn nearest_block<T: Real>(
    tree: &MortonTree<T>,
    block: &[([T; 3], u32)],
    r2: T,
    reach2: T,
    run: usize,
    s: &mut NearestScratch<T>,
    out: &mut [(T, u32)],
) {
    let reach2 = if reach2 < r2 { reach2 } else { r2 };
    let grouped = fits_slots(tree, run) && runs_near_capped(tree, block, reach2, run, BLOCK_RUN_CAP, &mut s.runs);
    if grouped {
        s.set_boxes();
    }
    for (group, out) in block.chunks(GROUP).zip(out.chunks_mut(GROUP)) {
        let (qs, gathered, reach_g2) = group_candidates(tree, s, group, grouped, reach2);
        let (mut bd, mut bid) = ([r2; GROUP], [NO_ID; GROUP]);
        if gathered {
            s.first_of_group(&qs, &mut bd, &mut bid);
        }
        for (l, (&(q, _), o)) in group.iter().zip(out.iter_mut()).enumerate() {
            let (mut bd, mut bid) = (bd[l], bid[l]);
            if !gathered || (reach_g2 < r2 && bd > reach_g2) {
                let (d, id, _) = nearest_hinted(tree, q, bd, bid, NO_POSITION);
                (bd, bid) = (d, id);
            }
            *o = (bd, bid);
        }
    }
}

/// Largest k [`knn_block`] serves (each lane's list lives in the group's arrays; a candidate
/// that goes down a list costs k steps).
pub const BLOCK_MAX_K: usize = 16;

/// Each query of `block`'s `k` (at most `BLOCK_MAX_K`) nearest points within squared radius
/// `r2`, ascending by (squared distance, id), into `out` (`k` per query, `(r2, NO_ID)` where
/// there are fewer), the point whose id is the query's own left out when `skip_self`: the
/// same rows as [`search::knn`](super::search::knn), through the block search of
/// [`nearest_block`]. A list whose k-th lies past the reach is searched again alone. Returns
/// the largest squared k-th distance of a full list (a guess of the next block's reach).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn knn_block<T: Real>(
    tree: &MortonTree<T>,
    block: &[([T; 3], u32)],
    k: usize,
    r2: T,
    reach2: T,
    run: usize,
    skip_self: bool,
    s: &mut NearestScratch<T>,
    buf: &mut Vec<(T, u32)>,
    out: &mut [(T, u32)],
) -> T {
    debug_assert!((1..=BLOCK_MAX_K).contains(&k));
    let reach2 = if reach2 < r2 { reach2 } else { r2 };
    let grouped = fits_slots(tree, run) && runs_near_capped(tree, block, reach2, run, BLOCK_RUN_CAP, &mut s.runs);
    if grouped {
        s.set_boxes();
    }
    let mut far = T::ZERO;
    for (group, out) in block.chunks(GROUP).zip(out.chunks_mut(GROUP * k)) {
        let (qs, gathered, reach_g2) = group_candidates(tree, s, group, grouped, reach2);
        let mut skip = [NO_ID; GROUP];
        if skip_self {
            for (l, &(_, id)) in group.iter().enumerate() {
                skip[l] = id;
            }
        }
        let mut bd = [[r2; GROUP]; BLOCK_MAX_K];
        let mut bid = [[NO_ID; GROUP]; BLOCK_MAX_K];
        if gathered && !s.knn_of_group_top8(&qs, group.len(), &skip, k, &mut bd, &mut bid) {
            s.knn_of_group(&qs, &skip, k, &mut bd, &mut bid);
        }
        for (l, (&(q, _), row)) in group.iter().zip(out.chunks_mut(k)).enumerate() {
            let (kd, kid) = (bd[k - 1][l], bid[k - 1][l]);
            if !gathered || (reach_g2 < r2 && (kd > reach_g2 || kid == NO_ID)) {
                super::search::knn(tree, q, k, r2, skip[l], buf);
                for (r, slot) in row.iter_mut().enumerate() {
                    *slot = buf.get(r).copied().unwrap_or((r2, NO_ID));
                }
            } else {
                for (r, slot) in row.iter_mut().enumerate() {
                    *slot = (bd[r][l], bid[r][l]);
                }
            }
            let (kd, kid) = row[k - 1];
            if kid != NO_ID && kd > far {
                far = kd;
            }
        }
    }
    far
}
