//! `TriangleBvh`: the index of a mesh's triangles for closest-point queries. Triangles are
//! sorted on the Morton curve of their centroids, cut into leaves of `TRIANGLE_LEAF`
//! consecutive triangles, and a complete binary tree of boxes is built over the leaves (heap
//! layout: node 1 is the root, node i has children 2i and 2i+1, leaves are nodes L..2L), as
//! `VectorTree` does for vectors. Corners are stored per sorted triangle, structure of arrays.

use rayon::prelude::*;

use crate::mesh::Mesh;
use crate::morton::MortonFrame;
use crate::real::Real;

/// Triangles per leaf.
pub const TRIANGLE_LEAF: usize = 4;

#[derive(Clone, Debug, PartialEq)]
pub struct TriangleBvh<T> {
    /// `ids[s]`: the mesh triangle at sorted position `s`.
    pub ids: Vec<u32>,
    /// `corners[k][axis][s]`: corner k (0, 1, 2) of sorted triangle s.
    pub corners: [[Vec<T>; 3]; 3],
    /// Leaves, a power of two.
    pub leaves: usize,
    /// Node boxes per axis, by heap node (entry 0 unused; empty nodes lo = +inf, hi = -inf).
    pub lo: [Vec<T>; 3],
    pub hi: [Vec<T>; 3],
}

impl<T: Real> TriangleBvh<T> {
    /// The index of `mesh`, which must have been validated (`Mesh::validate`).
    pub fn build(mesh: &Mesh<T>) -> Self {
        let n = mesh.triangles.len();
        let (lo, hi) = mesh.vertices.bounds();
        let frame = MortonFrame::from_bounds(lo, hi);
        let third = T::from_f64(1.0 / 3.0);
        let mut keyed: Vec<(u64, u32)> = (0..n)
            .into_par_iter()
            .map(|t| {
                let c = mesh.corners(t);
                let m = |a: usize| (c[0][a] + c[1][a] + c[2][a]) * third;
                (frame.code(m(0), m(1), m(2)), t as u32)
            })
            .collect();
        keyed.par_sort_unstable();
        let ids: Vec<u32> = keyed.into_iter().map(|(_, t)| t).collect();
        let corners: [[Vec<T>; 3]; 3] = std::array::from_fn(|k| {
            std::array::from_fn(|a| ids.iter().map(|&t| mesh.corners(t as usize)[k][a]).collect())
        });
        let leaves = n.div_ceil(TRIANGLE_LEAF).next_power_of_two();
        let mut blo: [Vec<T>; 3] = std::array::from_fn(|_| vec![T::INFINITY; 2 * leaves]);
        let mut bhi: [Vec<T>; 3] = std::array::from_fn(|_| vec![-T::INFINITY; 2 * leaves]);
        for a in 0..3 {
            for l in 0..leaves {
                for s in (l * TRIANGLE_LEAF).min(n)..((l + 1) * TRIANGLE_LEAF).min(n) {
                    for k in 0..3 {
                        blo[a][leaves + l] = blo[a][leaves + l].min(corners[k][a][s]);
                        bhi[a][leaves + l] = bhi[a][leaves + l].max(corners[k][a][s]);
                    }
                }
            }
            for i in (1..leaves).rev() {
                blo[a][i] = blo[a][2 * i].min(blo[a][2 * i + 1]);
                bhi[a][i] = bhi[a][2 * i].max(bhi[a][2 * i + 1]);
            }
        }
        Self { ids, corners, leaves, lo: blo, hi: bhi }
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Corners of the triangle at sorted position `s`.
    #[inline(always)]
    pub fn triangle(&self, s: usize) -> [[T; 3]; 3] {
        std::array::from_fn(|k| [self.corners[k][0][s], self.corners[k][1][s], self.corners[k][2][s]])
    }

    /// A lower bound of the squared distance from `q` to node `i`'s box.
    #[inline(always)]
    pub fn lower_bound(&self, i: usize, q: [T; 3]) -> T {
        let mut s = T::ZERO;
        for a in 0..3 {
            let g = (self.lo[a][i] - q[a]).max(q[a] - self.hi[a][i]).max(T::ZERO);
            s = s + g * g;
        }
        s
    }
}
