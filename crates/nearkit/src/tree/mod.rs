//! `MortonTree`: the index of a 3-D point set that closest pairs and kNN search, built in one
//! layout by both backends (`cuda` builds it on the device; `search` walks it on the CPU).
//!
//! The points of B are sorted by their 63-bit Morton code (ties by id) and a binary radix
//! tree (Karras 2012) is built over the sorted codes: every internal node splits its range at
//! the highest bit where the codes differ, so each node is a true Morton cell (an adaptive
//! octree, binarised) whatever the distribution: clustered and surface data get cells as
//! tight as uniform data. A node of at most `leaf_size` points is scanned directly.
//!
//! Each internal node stores its bounding box and the smallest point id under it; the id lets
//! a search prune subtrees on exact distance ties too, which keeps duplicate-heavy inputs fast
//! while still returning the smallest id.
//!
//! Layout (structure of arrays, identical on the GPU): internal node `i` (0 is the root; there
//! are `n - 1`) covers sorted points `min(i, other_end[i])..=max(i, other_end[i])`; its
//! children are `left[i]`, `right[i]`, internal nodes unless `CHILD_POINT` is set, in which
//! case the rest is the index of a sorted point.

pub(crate) mod cuda;
pub(crate) mod nearest_block;
pub(crate) mod radix;
#[cfg(target_arch = "x86_64")]
pub(crate) mod scan_avx2;
pub(crate) mod search;

use rayon::prelude::*;

use crate::geometry::morton::MortonFrame;
use crate::geometry::points::Points;
use crate::geometry::real::Real;
use crate::runtime::cpu::{big_collect, big_vec};

/// Nodes with at most this many points are scanned rather than descended.
pub const DEFAULT_LEAF_SIZE: u32 = 8;

/// Marks a child that is a single sorted point rather than an internal node.
pub const CHILD_POINT: u32 = 1 << 31;

/// Top bits of a Morton code that index `MortonTree::key_table`.
pub const TABLE_BITS: u32 = 16;

impl<T: Real> MortonTree<T> {
    /// Indices of `a` in Morton order in the tree's frame: queries in this order walk
    /// neighbouring parts of the tree one after another. Only the codes' top 32 bits (about
    /// 10 per axis) decide, ties by index: a finer order would not make the walks more coherent.
    pub fn morton_order(&self, a: &Points<T>) -> Vec<u32> {
        // Cells of about one query each are order enough: the key's top 22 bits (two passes
        // of the sort) for up to a million queries, all 32 (three) past that.
        let bits = if a.len() <= 1 << 20 { 22 } else { 32 };
        crate::runtime::cpu::order_by_key_top(a.len(), bits, |i| self.morton_key(a.get(i)))
    }

    /// The key `morton_order` sorts by: the top 32 bits of `q`'s Morton code in the tree's frame.
    #[inline(always)]
    pub fn morton_key(&self, q: [T; 3]) -> u32 {
        (self.frame.code(q[0], q[1], q[2]) >> 31) as u32
    }
}

/// The most points a tree can hold (child indices keep one bit for `CHILD_POINT`).
pub const MAX_TREE_POINTS: usize = (CHILD_POINT - 1) as usize;

#[derive(Clone, Debug, PartialEq)]
pub struct MortonTree<T> {
    pub frame: MortonFrame<T>,
    pub leaf_size: u32,
    /// `key_table[b]` = first sorted position whose Morton code's top `TABLE_BITS` bits are
    /// at least `b` (`2^TABLE_BITS + 1` entries), so finding a code's place (as the GPU's
    /// top-k bound does) needs only a short search.
    pub key_table: Vec<u32>,
    /// The points in sorted order, and their original ids.
    pub x: Vec<T>,
    pub y: Vec<T>,
    pub z: Vec<T>,
    pub id: Vec<u32>,
    /// Internal nodes (`n - 1` of them).
    pub left: Vec<u32>,
    pub right: Vec<u32>,
    pub other_end: Vec<u32>,
    pub lo: [Vec<T>; 3],
    pub hi: [Vec<T>; 3],
    pub min_id: Vec<u32>,
}

/// Length of the common prefix of keys `i` and `j` (indices break ties between equal keys);
/// -1 when `j` is out of range. Karras's δ.
#[inline(always)]
pub fn common_prefix(keys: &[u64], i: usize, j: i64) -> i32 {
    if j < 0 || j >= keys.len() as i64 {
        return -1;
    }
    let (a, b) = (keys[i], keys[j as usize]);
    if a == b {
        64 + ((i as u32) ^ (j as u32)).leading_zeros() as i32
    } else {
        (a ^ b).leading_zeros() as i32
    }
}

/// Karras's construction of internal node `i`: (left child, right child, other end). The
/// GPU builds each node this way (`tree_build.cu`); the CPU's linear build
/// (`radix::radix_tree_bottom_up`) is tested against it.
#[cfg(test)]
pub fn radix_node(keys: &[u64], i: usize) -> (u32, u32, u32) {
    let ii = i as i64;
    let d: i64 = if common_prefix(keys, i, ii + 1) > common_prefix(keys, i, ii - 1) { 1 } else { -1 };
    let dmin = common_prefix(keys, i, ii - d);
    let mut lmax: i64 = 2;
    while common_prefix(keys, i, ii + lmax * d) > dmin {
        lmax *= 2;
    }
    let mut l: i64 = 0;
    let mut t = lmax / 2;
    while t >= 1 {
        if common_prefix(keys, i, ii + (l + t) * d) > dmin {
            l += t;
        }
        t /= 2;
    }
    let j = ii + l * d;
    let dnode = common_prefix(keys, i, j);
    let mut s: i64 = 0;
    let mut t = l;
    loop {
        t = (t + 1) / 2;
        if common_prefix(keys, i, ii + (s + t) * d) > dnode {
            s += t;
        }
        if t <= 1 {
            break;
        }
    }
    let split = ii + s * d + d.min(0);
    let (first, last) = (ii.min(j), ii.max(j));
    let left = if first == split { split as u32 | CHILD_POINT } else { split as u32 };
    let right = if last == split + 1 { (split + 1) as u32 | CHILD_POINT } else { (split + 1) as u32 };
    (left, right, j as u32)
}

impl<T: Real> MortonTree<T> {
    #[allow(clippy::len_without_is_empty)] // a tree holds at least one point
    pub fn len(&self) -> usize {
        self.x.len()
    }

    /// Sorted-point range `[start, end)` of internal node `i`.
    #[inline(always)]
    pub fn range(&self, i: usize) -> (usize, usize) {
        let j = self.other_end[i] as usize;
        (i.min(j), i.max(j) + 1)
    }

    /// Builds the tree on the CPU (rayon). The CUDA backend builds the identical layout.
    pub fn build(points: &Points<T>, leaf_size: u32) -> Self {
        assert!(leaf_size >= 1);
        let n = points.len();
        assert!(n <= MAX_TREE_POINTS, "at most {MAX_TREE_POINTS} points per tree");
        let (lo, hi) = points.bounds();
        let frame = MortonFrame::from_bounds(lo, hi);

        let keyed: Vec<(u64, u32)> =
            big_collect((0..n).into_par_iter().map(|i| (frame.code(points.x[i], points.y[i], points.z[i]), i as u32)));
        let (keyed, key_table) = radix::sort_by_key(keyed);
        let codes: Vec<u64> = big_collect(keyed.par_iter().map(|o| o.0));
        let id: Vec<u32> = big_collect(keyed.par_iter().map(|o| o.1));
        drop(keyed);
        let gather = |col: &Vec<T>| -> Vec<T> { big_collect(id.par_iter().map(|&i| col[i as usize])) };
        let (x, y, z) = (gather(&points.x), gather(&points.y), gather(&points.z));
        let internal = n.saturating_sub(1);
        // The node arrays are written once each by the build below, every slot of them.
        let mut tree = MortonTree {
            frame,
            leaf_size,
            key_table,
            x,
            y,
            z,
            id,
            left: big_vec(internal),
            right: big_vec(internal),
            other_end: big_vec(internal),
            lo: [big_vec(internal), big_vec(internal), big_vec(internal)],
            hi: [big_vec(internal), big_vec(internal), big_vec(internal)],
            min_id: big_vec(internal),
        };
        let out = NodeOut::new(&mut tree);
        let (x, y, z, id) = (&tree.x, &tree.y, &tree.z, &tree.id);
        let point = |p: usize| ([x[p], y[p], z[p]], [x[p], y[p], z[p]], id[p]);
        // Each node once its children are done: its topology, box and smallest id.
        radix::radix_tree_bottom_up(&codes, |v| {
            // SAFETY: a child's slot was written before (children are visited first, and
            // across threads only before a rayon join); `v.node` is written by this call alone.
            unsafe {
                let child = |c: u32| {
                    if c & CHILD_POINT != 0 {
                        point((c & !CHILD_POINT) as usize)
                    } else {
                        out.read(c as usize)
                    }
                };
                let ((la, ha, ma), (lb, hb, mb)) = (child(v.left), child(v.right));
                let lo = [la[0].min(lb[0]), la[1].min(lb[1]), la[2].min(lb[2])];
                let hi = [ha[0].max(hb[0]), ha[1].max(hb[1]), ha[2].max(hb[2])];
                out.write(v.node, (v.left, v.right, v.other_end()), (lo, hi, ma.min(mb)));
            }
        });
        drop(codes);
        // SAFETY: the bottom-up build wrote every internal node's slot in every array.
        unsafe {
            for v in [&mut tree.left, &mut tree.right, &mut tree.other_end, &mut tree.min_id] {
                v.set_len(internal);
            }
            for v in tree.lo.iter_mut().chain(tree.hi.iter_mut()) {
                v.set_len(internal);
            }
        }
        tree
    }

    /// Squared distance from `q` to internal node `node`'s box: a lower bound, *in floating
    /// point*, of the squared distance to every point inside (rounding is monotone, so each
    /// clamped gap is at most the corresponding coordinate difference of any inside point).
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

/// Raw views of the node columns, written by the parallel build: each node slot is written
/// exactly once, and read (as a child) only after.
struct NodeOut<T> {
    left: *mut u32,
    right: *mut u32,
    other_end: *mut u32,
    lo: [*mut T; 3],
    hi: [*mut T; 3],
    min_id: *mut u32,
}
// SAFETY: tasks write disjoint slots and read only slots written before them (see build).
unsafe impl<T: Send> Send for NodeOut<T> {}
unsafe impl<T: Send> Sync for NodeOut<T> {}

impl<T: Copy> NodeOut<T> {
    fn new(tree: &mut MortonTree<T>) -> Self {
        let [l0, l1, l2] = &mut tree.lo;
        let [h0, h1, h2] = &mut tree.hi;
        Self {
            left: tree.left.as_mut_ptr(),
            right: tree.right.as_mut_ptr(),
            other_end: tree.other_end.as_mut_ptr(),
            lo: [l0.as_mut_ptr(), l1.as_mut_ptr(), l2.as_mut_ptr()],
            hi: [h0.as_mut_ptr(), h1.as_mut_ptr(), h2.as_mut_ptr()],
            min_id: tree.min_id.as_mut_ptr(),
        }
    }

    /// # Safety
    /// `node` < n - 1, and its box was written before.
    #[inline(always)]
    unsafe fn read(&self, node: usize) -> ([T; 3], [T; 3], u32) {
        let lo = std::array::from_fn(|d| *self.lo[d].add(node));
        let hi = std::array::from_fn(|d| *self.hi[d].add(node));
        (lo, hi, *self.min_id.add(node))
    }

    /// # Safety
    /// `node` < n - 1, and no one else writes or reads it meanwhile.
    #[inline(always)]
    unsafe fn write(&self, node: usize, (l, r, o): (u32, u32, u32), (lo, hi, m): ([T; 3], [T; 3], u32)) {
        *self.left.add(node) = l;
        *self.right.add(node) = r;
        *self.other_end.add(node) = o;
        for d in 0..3 {
            *self.lo[d].add(node) = lo[d];
            *self.hi[d].add(node) = hi[d];
        }
        *self.min_id.add(node) = m;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every internal node's range is the union of its children's, and splits are sound.
    fn check_topology(keys: &[u64]) {
        let n = keys.len();
        let mut covered = vec![0u32; n];
        for i in 0..n.saturating_sub(1) {
            let (l, r, j) = radix_node(keys, i);
            let (s, e) = (i.min(j as usize), i.max(j as usize));
            let span = |c: u32| -> (usize, usize) {
                if c & CHILD_POINT != 0 {
                    let p = (c & !CHILD_POINT) as usize;
                    (p, p)
                } else {
                    let (_, _, jj) = radix_node(keys, c as usize);
                    (c.min(jj) as usize, c.max(jj) as usize)
                }
            };
            let (ls, le) = span(l);
            let (rs, re) = span(r);
            assert_eq!((ls, re), (s, e), "node {i}");
            assert_eq!(le + 1, rs, "node {i}");
            if l & CHILD_POINT != 0 {
                covered[(l & !CHILD_POINT) as usize] += 1;
            }
            if r & CHILD_POINT != 0 {
                covered[(r & !CHILD_POINT) as usize] += 1;
            }
        }
        if n > 1 {
            assert!(covered.iter().all(|&c| c == 1), "each point is the child of exactly one node");
        }
    }

    /// The build against its definition: Karras's nodes over the sorted codes, each box the
    /// exact bounds of its range's points, each `min_id` its smallest id.
    #[test]
    fn build_matches_its_definition() {
        use crate::generate::{generate, Distribution};
        for (dist, count) in [
            (Distribution::Uniform, 150_000),
            (Distribution::Clustered, 90_000),
            (Distribution::Duplicates, 70_000),
            (Distribution::Plane, 1_000),
            (Distribution::UniformInt, 2),
        ] {
            let p = generate::<f32>(dist, count, 1000.0, 7);
            let t = MortonTree::build(&p, DEFAULT_LEAF_SIZE);
            let codes: Vec<u64> = (0..count).map(|i| t.frame.code(t.x[i], t.y[i], t.z[i])).collect();
            assert!(codes.windows(2).zip(t.id.windows(2)).all(|(c, i)| (c[0], i[0]) < (c[1], i[1])), "{dist:?}: order");
            for b in 0..=(1u64 << TABLE_BITS) {
                assert_eq!(t.key_table[b as usize] as usize, codes.partition_point(|&c| c < (b << (63 - TABLE_BITS))));
            }
            for i in 0..count - 1 {
                assert_eq!((t.left[i], t.right[i], t.other_end[i]), radix_node(&codes, i), "{dist:?}: node {i}");
                let (s, e) = t.range(i);
                let lo = [&t.x, &t.y, &t.z].map(|c| c[s..e].iter().fold(f32::INFINITY, |a, &v| a.min(v)));
                let hi = [&t.x, &t.y, &t.z].map(|c| c[s..e].iter().fold(f32::NEG_INFINITY, |a, &v| a.max(v)));
                assert_eq!(lo, [t.lo[0][i], t.lo[1][i], t.lo[2][i]], "{dist:?}: node {i}");
                assert_eq!(hi, [t.hi[0][i], t.hi[1][i], t.hi[2][i]], "{dist:?}: node {i}");
                assert_eq!(t.min_id[i], *t.id[s..e].iter().min().unwrap(), "{dist:?}: node {i}");
            }
        }
    }

    #[test]
    fn radix_tree_topology_is_sound() {
        check_topology(&[5]);
        check_topology(&[1, 2]);
        check_topology(&[7, 7, 7, 7, 7]);
        check_topology(&[0, 1, 1, 1, 4, 5, 5, 9, 12, 12, 12, 13]);
        let mut s = 1u64;
        let mut keys: Vec<u64> = (0..5000)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
                (s >> 40) % 3000
            })
            .collect();
        keys.sort();
        check_topology(&keys);
    }
}
