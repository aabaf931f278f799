//! The exact kNN index for vectors of any dimension up to 8: the data sorted on the Morton
//! curve (`morton_nd_128`), cut into leaves of `VECTOR_LEAF` consecutive vectors, and a
//! complete binary tree of boxes over the leaves (heap layout: node 1 is the root, node i has
//! children 2i and 2i+1, the leaves are nodes L..2L). Built on the CPU; the CUDA backend
//! uploads it as is. (3-D points have the faster `MortonTree`.)

use rayon::prelude::*;

use crate::geometry::morton::{morton_nd_128, morton_nd_bits};
use crate::geometry::real::Real;
use crate::geometry::vectors::{Vectors, MAX_DIM};

/// Vectors per leaf.
pub const VECTOR_LEAF: usize = 8;

#[derive(Clone, Debug, PartialEq)]
pub struct VectorTree<T> {
    /// `ids[p]`: the data id of the vector at sorted position `p`.
    pub ids: Vec<u32>,
    /// The vectors in sorted order, one column per axis.
    pub cols: Vec<Vec<T>>,
    /// Leaves, a power of two (empty leaves pad the last level).
    pub leaves: usize,
    /// Node boxes per axis, indexed by heap node (entry 0 unused); empty nodes have lo = +inf
    /// and hi = -inf, so their lower bound is infinite.
    pub lo: Vec<Vec<T>>,
    pub hi: Vec<Vec<T>>,
}

impl<T: Real> VectorTree<T> {
    pub fn build(data: &Vectors<T>) -> Self {
        let (dim, n) = (data.dim(), data.len());
        let (lo, hi) = data.bounds();
        let bits = morton_nd_bits(dim);
        let extent = (0..dim).map(|a| hi[a] - lo[a]).fold(0.0, f64::max);
        let cells = ((1u64 << bits) - 1) as f64;
        let scale = if extent > 0.0 { cells / extent } else { 0.0 };
        let mut keyed: Vec<(u128, u32)> = (0..n)
            .into_par_iter()
            .map(|i| {
                let mut c = [0u32; MAX_DIM];
                for a in 0..dim {
                    c[a] = ((data.cols[a][i].to_f64() - lo[a]) * scale).floor().clamp(0.0, cells) as u32;
                }
                (morton_nd_128(&c[..dim]), i as u32)
            })
            .collect();
        keyed.par_sort_unstable();
        let ids: Vec<u32> = keyed.iter().map(|&(_, i)| i).collect();
        let cols: Vec<Vec<T>> = data.cols.iter().map(|c| ids.iter().map(|&i| c[i as usize]).collect()).collect();
        let leaves = n.div_ceil(VECTOR_LEAF).next_power_of_two();
        let mut blo = vec![vec![T::INFINITY; 2 * leaves]; dim];
        let mut bhi = vec![vec![-T::INFINITY; 2 * leaves]; dim];
        for a in 0..dim {
            for l in 0..leaves {
                for p in (l * VECTOR_LEAF).min(n)..((l + 1) * VECTOR_LEAF).min(n) {
                    blo[a][leaves + l] = blo[a][leaves + l].min(cols[a][p]);
                    bhi[a][leaves + l] = bhi[a][leaves + l].max(cols[a][p]);
                }
            }
            for i in (1..leaves).rev() {
                blo[a][i] = blo[a][2 * i].min(blo[a][2 * i + 1]);
                bhi[a][i] = bhi[a][2 * i].max(bhi[a][2 * i + 1]);
            }
        }
        Self { ids, cols, leaves, lo: blo, hi: bhi }
    }

    #[inline]
    pub fn dim(&self) -> usize {
        self.cols.len()
    }

    #[inline]
    #[allow(clippy::len_without_is_empty)] // a tree holds at least one vector
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// A lower bound of the squared distance from `q` to every vector in node `i`'s box.
    /// Per axis the gap to the box is never larger than the gap to a vector inside it (rounding
    /// is monotone), so the bound holds for the computed distances too.
    #[inline(always)]
    pub fn lower_bound(&self, i: usize, q: &[T; MAX_DIM]) -> T {
        let mut s = T::ZERO;
        for a in 0..self.dim() {
            let g = (self.lo[a][i] - q[a]).max(q[a] - self.hi[a][i]).max(T::ZERO);
            s = s + g * g;
        }
        s
    }
}
