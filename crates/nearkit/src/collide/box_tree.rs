//! A binary radix tree over boxes (Karras 2012, `tree::radix`) on the Morton codes of their
//! centres, each node holding both children's boxes (f32, rounded outwards: a node's box is
//! the union of its children's) and the union of their layer bits. One node is 64 bytes, read
//! in one go by either backend. The ray casts' trees (`ray_cast::bvh`) and the instances'
//! tree (`instance`) are built with it.

use rayon::prelude::*;

use crate::collide::ellipsoid::V3;
use crate::error::{Error, Result};
use crate::geometry::morton::MortonFrame;
use crate::runtime::cpu::RowPtr;
use crate::runtime::cuda::launch::c_struct;
use crate::tree::radix::{radix_topology, sort_by_key};
use crate::tree::CHILD_POINT;

/// A child reference with this bit set is a leaf: the primitive at that sorted position.
pub(crate) const LEAF: u32 = CHILD_POINT;

/// A child reference that names nothing (the one-primitive tree's second child).
pub(crate) const EMPTY: u32 = u32::MAX;

/// The deepest a tree may be: the traversals' stacks hold this many nodes. A radix tree over
/// 64-bit codes (ties broken by 32-bit positions) is at most 97 nodes deep.
pub(crate) const STACK: usize = 128;

c_struct! {
    /// `struct BvhNode` of ray_cast.cu: a node's two children.
    pub(crate) struct BvhNode as "BvhNode" {
        /// Child k's box: lo at `6k..6k + 3`, hi at `6k + 3..6k + 6`.
        bounds: [f32; 12] = "float[12]",
        /// A node index, `LEAF | position`, or `EMPTY`.
        child: [u32; 2] = "u32[2]",
        /// The layer bits of each child's primitives, or-ed.
        layers: [u32; 2] = "u32[2]",
    }
}

impl BvhNode {
    /// Child k's box.
    #[inline(always)]
    pub fn child_box(&self, k: usize) -> ([f32; 3], [f32; 3]) {
        let b = &self.bounds;
        ([b[6 * k], b[6 * k + 1], b[6 * k + 2]], [b[6 * k + 3], b[6 * k + 4], b[6 * k + 5]])
    }
}

/// A box and the layer bits of what it holds.
pub(crate) type Boxed = ([f32; 3], [f32; 3], u32);

pub(crate) fn union(a: &Boxed, b: &Boxed) -> Boxed {
    (std::array::from_fn(|i| a.0[i].min(b.0[i])), std::array::from_fn(|i| a.1[i].max(b.1[i])), a.2 | b.2)
}

/// The tree's nodes (node 0 the root; none for no primitives) and the primitives in the
/// order its leaves name them.
pub(crate) struct Tree {
    pub nodes: Vec<BvhNode>,
    pub order: Vec<u32>,
}

/// Primitives a parallel task takes at least: a few thousand bodies, rebuilt every tick, are
/// cheaper on one thread than spread over many.
pub(crate) const GRAIN: usize = 2048;

/// Ranges of more primitives than this fill their two halves in parallel.
const PARALLEL_RANGE: usize = 1 << 13;

/// The tree over primitives with these centres and (boxes, layers).
pub(crate) fn build(centers: &[V3], boxes: &[Boxed]) -> Result<Tree> {
    let n = centers.len();
    if n >= LEAF as usize {
        return Err(Error::InvalidArgument(format!("{n} primitives: ray casts take fewer than 2^31")));
    }
    if n == 0 {
        return Ok(Tree { nodes: Vec::new(), order: Vec::new() });
    }
    let (lo, hi) = centers
        .par_iter()
        .with_min_len(1 << 14)
        .fold(
            || ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]),
            |(lo, hi), c| (std::array::from_fn(|a| lo[a].min(c[a])), std::array::from_fn(|a| hi[a].max(c[a]))),
        )
        .reduce(
            || ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]),
            |x, y| (std::array::from_fn(|a| x.0[a].min(y.0[a])), std::array::from_fn(|a| x.1[a].max(y.1[a]))),
        );
    let frame = MortonFrame::<f64>::from_bounds(lo, hi);
    let keyed: Vec<(u64, u32)> = centers
        .par_iter()
        .with_min_len(GRAIN)
        .enumerate()
        .map(|(i, c)| (frame.code(c[0], c[1], c[2]), i as u32))
        .collect();
    let (keyed, _) = sort_by_key(keyed);
    let keys: Vec<u64> = keyed.iter().map(|k| k.0).collect();
    let order: Vec<u32> = keyed.iter().map(|k| k.1).collect();
    if n == 1 {
        let (lo, hi, layers) = boxes[0];
        let mut bounds = [0.0f32; 12];
        bounds[..3].copy_from_slice(&lo);
        bounds[3..6].copy_from_slice(&hi);
        return Ok(Tree { nodes: vec![BvhNode { bounds, child: [LEAF, EMPTY], layers: [layers, 0] }], order });
    }
    let (left, right, other_end) = radix_topology(&keys);
    let mut nodes = vec![BvhNode { bounds: [0.0; 12], child: [EMPTY; 2], layers: [0; 2] }; n - 1];
    let out = RowPtr(nodes.as_mut_ptr());
    let cx = Fill { left: &left, right: &right, other_end: &other_end, order: &order, boxes, out: &out };
    let depth = cx.fill(0).1;
    if depth > STACK {
        return Err(Error::InvalidArgument(format!("a ray-cast tree {depth} deep (the stack holds {STACK})")));
    }
    Ok(Tree { nodes, order })
}

/// What filling the nodes' boxes reads and writes.
struct Fill<'a> {
    left: &'a [u32],
    right: &'a [u32],
    other_end: &'a [u32],
    order: &'a [u32],
    boxes: &'a [Boxed],
    out: &'a RowPtr<BvhNode>,
}

impl Fill<'_> {
    /// Writes node `i` (and its subtree); its box and layers, and its depth.
    fn fill(&self, i: usize) -> (Boxed, usize) {
        let (l, r, j) = (self.left[i], self.right[i], self.other_end[i]);
        let big = (j as usize).abs_diff(i) + 1 > PARALLEL_RANGE;
        let child = |c: u32| -> (Boxed, usize) {
            if c & CHILD_POINT != 0 {
                (self.boxes[self.order[(c & !CHILD_POINT) as usize] as usize], 0)
            } else {
                self.fill(c as usize)
            }
        };
        let ((a, da), (b, db)) = if big { rayon::join(|| child(l), || child(r)) } else { (child(l), child(r)) };
        let mut bounds = [0.0f32; 12];
        for (k, x) in [&a, &b].into_iter().enumerate() {
            bounds[6 * k..6 * k + 3].copy_from_slice(&x.0);
            bounds[6 * k + 3..6 * k + 6].copy_from_slice(&x.1);
        }
        let leaf = |c: u32| if c & CHILD_POINT != 0 { LEAF | (c & !CHILD_POINT) } else { c };
        let node = BvhNode { bounds, child: [leaf(l), leaf(r)], layers: [a.2, b.2] };
        // SAFETY: node i is written by this call only (each node has one parent).
        let slot = unsafe { self.out.span(i, 1) };
        slot[0] = node;
        (union(&a, &b), 1 + da.max(db))
    }
}

/// Walks a tree (`nodes`, its leaves naming places in `ids`) depth first: `child(lo, hi,
/// layers, leaf)` is asked of each child, with `leaf` the id of a leaf's primitive (`None` for
/// a node); the walk goes into a node when it answers true.
#[inline(always)]
pub(crate) fn walk(
    nodes: &[BvhNode],
    ids: &[u32],
    mut child: impl FnMut(&[f32; 3], &[f32; 3], u32, Option<u32>) -> bool,
) {
    if nodes.is_empty() {
        return;
    }
    let mut stack = [0u32; STACK];
    let mut top = 1;
    while top > 0 {
        top -= 1;
        let node = &nodes[stack[top] as usize];
        for k in 0..2 {
            let c = node.child[k];
            if c == EMPTY {
                continue;
            }
            let (lo, hi) = node.child_box(k);
            if c & LEAF != 0 {
                child(&lo, &hi, node.layers[k], Some(ids[(c & !LEAF) as usize]));
            } else if child(&lo, &hi, node.layers[k], None) {
                stack[top] = c;
                top += 1;
            }
        }
    }
}
