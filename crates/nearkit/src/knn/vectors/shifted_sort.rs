//! The shifted-sort approximate kNN (Chan 1997; Li et al. 2012), in any dimension
//! up to 8. Data and queries are scaled into a cube of 2^(b−1) cells per axis (b bits per axis:
//! 21 up to 6-D, so 3-D keys are 63-bit and 6-D keys 126-bit) and keyed on the Morton curve.
//! Copy `j` is shifted along the diagonal by (j·step) mod 2^(b−1) cells, step the odd number
//! nearest 0.618·2^(b−1), so points that a Morton cell boundary splits in one copy meet in
//! another. (Even shifts of 2^(b−1)/S look natural but move only the top bits when S is a
//! power of two: the fine order, where neighbours are found, stays the same. Measured: 4
//! such copies gave the recall of 1.) A query's candidates are the `window`
//! data points on each side of its place in each copy's sorted order; the answer is the k
//! nearest candidates, exact distances, ties by smaller id.
//!
//! Keys are computed in f64 from the working precision on both backends (same operations, no
//! fused multiply-add), so CPU and GPU pick the same candidates and return the same bits.

use crate::error::{Error, Result};
use crate::geometry::morton::morton_nd_bits;
use crate::geometry::real::Real;
use crate::geometry::vectors::{Vectors, MAX_DIM};

/// What an approximate kNN asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShiftedSortOptions {
    /// Neighbours per query.
    pub k: usize,
    /// Shifted copies of the data (1 = plain Morton order).
    pub shifts: usize,
    /// Candidates taken on each side of a query's place in each copy.
    pub window: usize,
}

impl Default for ShiftedSortOptions {
    fn default() -> Self {
        Self { k: 8, shifts: 4, window: 8 }
    }
}

impl ShiftedSortOptions {
    /// Checks the options; returns the effective k (clamped to the data size).
    pub fn check(&self, n_data: usize) -> Result<usize> {
        if self.k == 0 {
            return Err(Error::ZeroK);
        }
        if self.shifts == 0 || self.shifts > 64 {
            return Err(Error::InvalidArgument(format!("shifts must be 1 to 64 (got {})", self.shifts)));
        }
        if self.window == 0 || self.window > 4096 {
            return Err(Error::InvalidArgument(format!("window must be 1 to 4096 (got {})", self.window)));
        }
        Ok(self.k.min(n_data))
    }
}

/// The common scaling of data and queries onto the shifted Morton grids.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShiftFrame {
    pub dim: usize,
    pub lo: [f64; MAX_DIM],
    /// Cells per unit length (one scale for all axes keeps cells cubic).
    pub scale: f64,
    /// Bits per axis of a key.
    pub bits: u32,
    /// Cells between consecutive shifted copies (modulo 2^(b−1)).
    pub step: u32,
}

impl ShiftFrame {
    /// The frame over the union of the data's and the queries' boxes.
    pub fn new<T: Real>(data: &Vectors<T>, queries: &Vectors<T>) -> Self {
        Self::of_bounds(data.dim(), &data.bounds(), &queries.bounds())
    }

    /// The frame over the union of two boxes of `dim` axes, as `(mins, maxes)`.
    pub fn of_bounds(dim: usize, (dl, dh): &(Vec<f64>, Vec<f64>), (ql, qh): &(Vec<f64>, Vec<f64>)) -> Self {
        let mut lo = [0.0; MAX_DIM];
        let mut extent: f64 = 0.0;
        for a in 0..dim {
            lo[a] = dl[a].min(ql[a]);
            extent = extent.max(dh[a].max(qh[a]) - lo[a]);
        }
        let bits = morton_nd_bits(dim);
        let half = (1u64 << (bits - 1)) as f64;
        // Just under `half` cells across, so the largest coordinate stays below the shift range.
        let scale = if extent > 0.0 { half * (1.0 - 1e-9) / extent } else { 0.0 };
        Self { dim, lo, scale, bits, step: ((half * 0.618_033_988_749_895) as u32) | 1 }
    }

    /// The diagonal offset of copy `shift`, in cells.
    #[inline(always)]
    pub fn offset(&self, shift: u32) -> u32 {
        ((shift as u64 * self.step as u64) & ((1u64 << (self.bits - 1)) - 1)) as u32
    }

    /// The cell of coordinate `v` on axis `a` in copy `shift`.
    #[inline(always)]
    pub fn cell(&self, v: f64, a: usize, shift: u32) -> u32 {
        let max = ((1u32 << (self.bits - 1)) - 1) as f64;
        let t = ((v - self.lo[a]) * self.scale).floor().max(0.0).min(max);
        t as u32 + self.offset(shift)
    }

    /// The key of vector `p` in copy `shift`.
    #[inline(always)]
    pub fn key<T: Real>(&self, p: &[T; MAX_DIM], shift: u32) -> u128 {
        let mut cells = [0u32; MAX_DIM];
        for a in 0..self.dim {
            cells[a] = self.cell(p[a].to_f64(), a, shift);
        }
        crate::geometry::morton::morton_nd_128(&cells[..self.dim])
    }
}

/// The candidate range of a query keyed `key`: `window` positions on each side of the first
/// key >= `key`, slid inwards at either end so it still holds 2·window positions.
#[inline(always)]
pub fn window_of(keys: &[u128], key: u128, window: usize) -> (usize, usize) {
    let pos = keys.partition_point(|&k| k < key);
    let lo = pos.saturating_sub(window).min(keys.len().saturating_sub(2 * window));
    (lo, (lo + 2 * window).min(keys.len()))
}

/// Inserts (d2, id) into `best` (ascending by (d2, id), at most `k` long); a candidate
/// already present (met in an earlier copy) is not inserted twice.
#[inline(always)]
pub fn insert_candidate<T: Real>(best: &mut Vec<(T, u32)>, k: usize, d2: T, id: u32) {
    if best.len() == k {
        let (ld, lid) = best[k - 1];
        if d2 > ld || (d2 == ld && id >= lid) {
            return;
        }
    }
    let pos = best.partition_point(|&(d, i)| d < d2 || (d == d2 && i < id));
    if best.get(pos).is_some_and(|&(d, i)| d == d2 && i == id) {
        return;
    }
    if best.len() == k {
        best.pop();
    }
    best.insert(pos, (d2, id));
}
