//! `MortonTree`: the spatial index both backends build and search, in one layout.
//!
//! The points of B are sorted by their 63-bit Morton code (ties by id), cut into leaves of
//! `leaf_size` consecutive points, and an implicit complete binary tree is laid over the
//! leaves: node 1 is the root, node `i` has children `2i` and `2i+1`, and nodes
//! `leaf_base..2*leaf_base` are the leaves. Each node stores its bounding box and the smallest
//! point id under it; the id lets a search prune subtrees on exact distance ties too, which
//! keeps duplicate-heavy inputs fast while still returning the smallest id.
//!
//! Because the tree follows the data (sorted order), not a fixed grid, clustered and
//! surface data get boxes as tight as uniform data do.

use rayon::prelude::*;

use crate::morton::MortonFrame;
use crate::points::Points;
use crate::real::Real;

/// Points per leaf. Small enough for tight boxes, large enough to amortise a box test.
pub const DEFAULT_LEAF_SIZE: u32 = 16;

/// Id stored where there is no point (empty leaves, "no neighbour found").
pub const NO_ID: u32 = u32::MAX;

#[derive(Clone, Debug)]
pub struct MortonTree<T> {
    pub frame: MortonFrame<T>,
    pub leaf_size: u32,
    /// Number of leaf slots, a power of two; leaf `j` is node `leaf_base + j`.
    pub leaf_base: u32,
    /// Sorted Morton codes of the points.
    pub keys: Vec<u64>,
    /// The points in sorted order, and their original ids.
    pub x: Vec<T>,
    pub y: Vec<T>,
    pub z: Vec<T>,
    pub id: Vec<u32>,
    /// Node boxes (index 0 unused); empty nodes have `lo = +inf`, `hi = -inf`.
    pub lo: [Vec<T>; 3],
    pub hi: [Vec<T>; 3],
    /// Smallest original id in each node (`NO_ID` when empty).
    pub min_id: Vec<u32>,
}

/// Number of leaf slots for `n` points: the power of two at or above `ceil(n / leaf_size)`.
pub fn leaf_base_for(n: usize, leaf_size: u32) -> u32 {
    let leaves = n.div_ceil(leaf_size as usize).max(1);
    leaves.next_power_of_two() as u32
}

impl<T: Real> MortonTree<T> {
    pub fn len(&self) -> usize {
        self.x.len()
    }

    pub fn is_empty(&self) -> bool {
        self.x.is_empty()
    }

    /// Point range `[start, end)` of leaf `j` (empty past the last point).
    #[inline(always)]
    pub fn leaf_range(&self, j: u32) -> (usize, usize) {
        let n = self.x.len();
        let start = (j as usize * self.leaf_size as usize).min(n);
        let end = (start + self.leaf_size as usize).min(n);
        (start, end)
    }

    /// Builds the tree on the CPU (rayon). The CUDA backend builds the identical layout.
    pub fn build(points: &Points<T>, leaf_size: u32) -> Self {
        assert!(leaf_size >= 1);
        let n = points.len();
        let (lo, hi) = parallel_bounds(points);
        let frame = MortonFrame::from_bounds(lo, hi);

        let mut order: Vec<(u64, u32)> = (0..n)
            .into_par_iter()
            .map(|i| (frame.code(points.x[i], points.y[i], points.z[i]), i as u32))
            .collect();
        order.par_sort_unstable();

        let keys: Vec<u64> = order.par_iter().map(|o| o.0).collect();
        let id: Vec<u32> = order.par_iter().map(|o| o.1).collect();
        let gather = |col: &Vec<T>| -> Vec<T> { id.par_iter().map(|&i| col[i as usize]).collect() };
        let (x, y, z) = (gather(&points.x), gather(&points.y), gather(&points.z));

        let leaf_base = leaf_base_for(n, leaf_size);
        let nodes = 2 * leaf_base as usize;
        let mut tree = MortonTree {
            frame,
            leaf_size,
            leaf_base,
            keys,
            x,
            y,
            z,
            id,
            lo: [vec![T::INFINITY; nodes], vec![T::INFINITY; nodes], vec![T::INFINITY; nodes]],
            hi: [vec![-T::INFINITY; nodes], vec![-T::INFINITY; nodes], vec![-T::INFINITY; nodes]],
            min_id: vec![NO_ID; nodes],
        };
        tree.fill_leaf_boxes();
        tree.fill_internal_boxes();
        tree
    }

    fn fill_leaf_boxes(&mut self) {
        let base = self.leaf_base as usize;
        let boxes: Vec<([T; 3], [T; 3], u32)> = (0..base as u32)
            .into_par_iter()
            .map(|j| {
                let (s, e) = self.leaf_range(j);
                let mut lo = [T::INFINITY; 3];
                let mut hi = [-T::INFINITY; 3];
                let mut mid = NO_ID;
                for i in s..e {
                    let p = [self.x[i], self.y[i], self.z[i]];
                    for d in 0..3 {
                        lo[d] = lo[d].min(p[d]);
                        hi[d] = hi[d].max(p[d]);
                    }
                    mid = mid.min(self.id[i]);
                }
                (lo, hi, mid)
            })
            .collect();
        for (j, (lo, hi, mid)) in boxes.into_iter().enumerate() {
            for d in 0..3 {
                self.lo[d][base + j] = lo[d];
                self.hi[d][base + j] = hi[d];
            }
            self.min_id[base + j] = mid;
        }
    }

    fn fill_internal_boxes(&mut self) {
        let mut level_start = self.leaf_base as usize / 2;
        while level_start >= 1 {
            for node in level_start..2 * level_start {
                let (l, r) = (2 * node, 2 * node + 1);
                for d in 0..3 {
                    self.lo[d][node] = self.lo[d][l].min(self.lo[d][r]);
                    self.hi[d][node] = self.hi[d][l].max(self.hi[d][r]);
                }
                self.min_id[node] = self.min_id[l].min(self.min_id[r]);
            }
            level_start /= 2;
        }
    }

    /// Squared distance from `q` to node `node`'s box, a lower bound of the squared distance
    /// to every point inside it *in floating point*: rounding is monotone, so each clamped
    /// gap is at most the corresponding coordinate difference of any point in the box.
    #[inline(always)]
    pub fn box_dist2(&self, node: usize, q: [T; 3]) -> T {
        let gap = |d: usize| {
            let below = self.lo[d][node] - q[d];
            let above = q[d] - self.hi[d][node];
            below.max(above).max(T::ZERO)
        };
        let (gx, gy, gz) = (gap(0), gap(1), gap(2));
        gx * gx + gy * gy + gz * gz
    }
}

/// Bounds of a point set, computed in parallel.
pub fn parallel_bounds<T: Real>(p: &Points<T>) -> ([T; 3], [T; 3]) {
    let col = |c: &Vec<T>| {
        c.par_iter()
            .fold(
                || (T::INFINITY, -T::INFINITY),
                |(lo, hi), &v| (lo.min(v), hi.max(v)),
            )
            .reduce(
                || (T::INFINITY, -T::INFINITY),
                |a, b| (a.0.min(b.0), a.1.max(b.1)),
            )
    };
    let (x, y, z) = (col(&p.x), col(&p.y), col(&p.z));
    ([x.0, y.0, z.0], [x.1, y.1, z.1])
}
