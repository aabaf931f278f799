//! The CPU's form of a ray-cast tree: the binary tree (`bvh`) collapsed into nodes of four
//! children, whose four boxes a ray tests together, a lane each (AVX2 where the CPU has it).
//!
//! Each lane does the scalar `RayFrame::slab`'s operations on the same f32 boxes, so the
//! intervals, and with them every pruning decision and every hit, are those of the binary
//! tree's search: a wide node only saves the levels in between (half the nodes, a quarter of
//! the stack traffic) and tests four boxes in the time of one.

use super::bvh::{BvhNode, EMPTY, LEAF, STACK};
use super::cpu::Visit;
use super::intersect::RayFrame;
use super::TaggedHit;
use crate::runtime::cpu::prefetch;

/// Children of a wide node.
pub(crate) const WIDTH: usize = 4;

/// A node of four children: their boxes as columns (`lo[axis][k]`), what each is (a node
/// index, `LEAF | position`, or `EMPTY`), and their layer bits. An empty slot has the box
/// (+∞, −∞), which no ray enters, and no layers.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub(crate) struct WideNode {
    lo: [[f32; WIDTH]; 3],
    hi: [[f32; WIDTH]; 3],
    child: [u32; WIDTH],
    layers: [u32; WIDTH],
}

/// A wide search's stack: each node popped pushes at most `WIDTH - 1` more than it takes.
const WIDE_STACK: usize = (WIDTH - 1) * STACK + 1;

/// The binary tree `nodes` (node 0 the root) as wide nodes (node 0 the root; none for an
/// empty tree). Each wide node takes a binary node's children and opens the largest (by
/// surface) of those that are nodes until it has four.
pub(crate) fn collapse(nodes: &[BvhNode]) -> Vec<WideNode> {
    let mut out = Vec::with_capacity(nodes.len() / 2 + 1);
    if !nodes.is_empty() {
        add(nodes, 0, &mut out);
    }
    out
}

/// A child of a binary node: its reference and box, and its layers.
type Slot = (u32, [f32; 3], [f32; 3], u32);

fn half_area(lo: &[f32; 3], hi: &[f32; 3]) -> f64 {
    let d: [f64; 3] = std::array::from_fn(|a| (hi[a] as f64 - lo[a] as f64).max(0.0));
    d[0] * d[1] + d[1] * d[2] + d[2] * d[0]
}

fn children(node: &BvhNode) -> impl Iterator<Item = Slot> + '_ {
    (0..2).filter(|&k| node.child[k] != EMPTY).map(|k| {
        let (lo, hi) = node.child_box(k);
        (node.child[k], lo, hi, node.layers[k])
    })
}

/// Adds the wide node for binary node `i` (and, after it, its subtrees); returns its index.
fn add(nodes: &[BvhNode], i: usize, out: &mut Vec<WideNode>) -> u32 {
    let mut slots: Vec<Slot> = children(&nodes[i]).collect();
    while slots.len() < WIDTH {
        let open = (0..slots.len())
            .filter(|&k| slots[k].0 & LEAF == 0)
            .max_by(|&a, &b| half_area(&slots[a].1, &slots[a].2).total_cmp(&half_area(&slots[b].1, &slots[b].2)));
        let Some(k) = open else { break };
        let node = &nodes[slots[k].0 as usize];
        slots.splice(k..k + 1, children(node));
    }
    let at = out.len();
    out.push(WideNode {
        lo: [[f32::INFINITY; WIDTH]; 3],
        hi: [[f32::NEG_INFINITY; WIDTH]; 3],
        child: [EMPTY; WIDTH],
        layers: [0; WIDTH],
    });
    for (k, &(c, lo, hi, layers)) in slots.iter().enumerate() {
        let c = if c & LEAF != 0 { c } else { add(nodes, c as usize, out) };
        let node = &mut out[at];
        for a in 0..3 {
            node.lo[a][k] = lo[a];
            node.hi[a][k] = hi[a];
        }
        node.child[k] = c;
        node.layers[k] = layers;
    }
    at as u32
}

/// The four boxes' intervals (enter, exit) for the ray: `RayFrame::slab` in each lane.
#[inline(always)]
fn slab4(r: &RayFrame, node: &WideNode) -> ([f64; WIDTH], [f64; WIDTH]) {
    let mut enter = [f64::NEG_INFINITY; WIDTH];
    let mut exit = [f64::INFINITY; WIDTH];
    let mut out = [false; WIDTH];
    for a in 0..3 {
        let o = r.origin[a];
        let (lo, hi) = (node.lo[a].map(|v| v as f64), node.hi[a].map(|v| v as f64));
        if r.dir[a] == 0.0 {
            for k in 0..WIDTH {
                out[k] |= o < lo[k] || o > hi[k];
            }
            continue;
        }
        let inv = r.inv[a];
        let t0: [f64; WIDTH] = std::array::from_fn(|k| (lo[k] - o) * inv);
        let t1: [f64; WIDTH] = std::array::from_fn(|k| (hi[k] - o) * inv);
        let (near, far) = if inv > 0.0 { (t0, t1) } else { (t1, t0) };
        for k in 0..WIDTH {
            enter[k] = if near[k] > enter[k] { near[k] } else { enter[k] };
            exit[k] = if far[k] < exit[k] { far[k] } else { exit[k] };
        }
    }
    for k in 0..WIDTH {
        if out[k] {
            (enter[k], exit[k]) = (f64::INFINITY, f64::NEG_INFINITY);
        }
    }
    (enter, exit)
}

/// The ray's search of a wide tree (primitives only of layers meeting its mask): `leaf`
/// tests the primitive at a sorted position, the ray in its box over (enter, exit), and
/// returns its hit. Depth first, nearer children first; `visit` keeps what it keeps by
/// (distance, kind, id), whatever order the hits come in.
#[inline(always)]
pub(crate) fn search(
    nodes: &[WideNode],
    r: &RayFrame,
    visit: &mut impl Visit,
    mut leaf: impl FnMut(u32, f64, f64) -> Option<TaggedHit>,
) {
    if nodes.is_empty() {
        return;
    }
    let mut stack = [std::mem::MaybeUninit::<(u32, f64)>::uninit(); WIDE_STACK];
    stack[0].write((0, f64::NEG_INFINITY));
    let mut top = 1;
    while top > 0 {
        top -= 1;
        // SAFETY: entries below `top` were written by a push.
        let (i, enter) = unsafe { stack[top].assume_init() };
        if enter > visit.limit() {
            continue;
        }
        let node = &nodes[i as usize];
        let (enter, exit) = slab4(r, node);
        // The children the ray meets within the limit, as bits, without a branch per child.
        let limit = visit.limit();
        let mut meets = 0u32;
        for k in 0..WIDTH {
            let c = node.child[k];
            let ok = (c != EMPTY) & (node.layers[k] & r.mask != 0) & RayFrame::meets(enter[k], exit[k], limit);
            meets |= u32::from(ok) << k;
        }
        let mut inner = [(0u32, 0.0f64); WIDTH];
        let mut found = 0;
        while meets != 0 {
            let k = meets.trailing_zeros() as usize;
            meets &= meets - 1;
            let c = node.child[k];
            if c & LEAF != 0 {
                // A hit found here may lower the limit below the next child's entry: that
                // child's test is then in vain, but finds nothing the visit keeps.
                if let Some(h) = leaf(c & !LEAF, enter[k], exit[k]) {
                    visit.hit(h);
                }
            } else {
                prefetch(nodes.as_ptr().wrapping_add(c as usize) as *const u8, std::mem::size_of::<WideNode>());
                inner[found] = (c, enter[k]);
                found += 1;
            }
        }
        // Farthest pushed first, so the nearest is searched first.
        let inner = &mut inner[..found];
        for j in 1..inner.len() {
            let mut m = j;
            while m > 0 && inner[m].1 > inner[m - 1].1 {
                inner.swap(m, m - 1);
                m -= 1;
            }
        }
        for &e in inner.iter() {
            // A wide tree is no deeper than its binary tree (at most STACK), and a node popped
            // adds at most WIDTH - 1 entries.
            stack[top].write(e);
            top += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collide::ray_cast::intersect::UnitRay;
    use crate::collide::ray_cast::Ray;
    use rand::{Rng, SeedableRng};

    fn random_box(g: &mut rand_pcg::Pcg64) -> ([f32; 3], [f32; 3]) {
        let a: [f32; 3] = std::array::from_fn(|_| g.random_range(-4.0..4.0));
        let b: [f32; 3] = std::array::from_fn(|_| g.random_range(-4.0..4.0));
        (std::array::from_fn(|i| a[i].min(b[i])), std::array::from_fn(|i| a[i].max(b[i])))
    }

    #[test]
    fn four_lanes_give_the_scalar_intervals() {
        let mut g = rand_pcg::Pcg64::seed_from_u64(7);
        for n in 0..20_000 {
            // Directions along axes and planes too (zero components), and origins on faces.
            let mut d: [f64; 3] = std::array::from_fn(|_| g.random_range(-1.0..1.0));
            for c in &mut d {
                if g.random_range(0..4) == 0 {
                    *c = 0.0;
                }
            }
            if d == [0.0; 3] {
                d[n % 3] = 1.0;
            }
            let mut node = WideNode {
                lo: [[f32::INFINITY; WIDTH]; 3],
                hi: [[f32::NEG_INFINITY; WIDTH]; 3],
                child: [EMPTY; WIDTH],
                layers: [0; WIDTH],
            };
            let boxes: Vec<_> = (0..WIDTH - n % 2).map(|_| random_box(&mut g)).collect();
            for (k, (lo, hi)) in boxes.iter().enumerate() {
                for a in 0..3 {
                    node.lo[a][k] = lo[a];
                    node.hi[a][k] = hi[a];
                }
            }
            let mut o: [f64; 3] = std::array::from_fn(|_| g.random_range(-6.0..6.0));
            if n % 5 == 0 {
                o[n % 3] = boxes[0].0[n % 3] as f64;
            }
            let r = RayFrame::new(&UnitRay::new(&Ray::new(o, d, f64::INFINITY)).unwrap());
            let (enter, exit) = slab4(&r, &node);
            for k in 0..WIDTH {
                let (lo, hi) = ([0, 1, 2].map(|a| node.lo[a][k]), [0, 1, 2].map(|a| node.hi[a][k]));
                let (e, x) = r.slab(&lo, &hi);
                assert_eq!((enter[k].to_bits(), exit[k].to_bits()), (e.to_bits(), x.to_bits()), "ray {n}, box {k}");
                if k >= boxes.len() {
                    assert!(!RayFrame::meets(enter[k], exit[k], f64::INFINITY), "an empty slot is never met");
                }
            }
        }
    }

    #[test]
    fn collapsing_keeps_every_leaf_once_under_its_boxes() {
        let mut g = rand_pcg::Pcg64::seed_from_u64(8);
        for n in [1usize, 2, 3, 5, 17, 1000] {
            let corners: Vec<[[f64; 3]; 3]> = (0..n)
                .map(|_| {
                    let c: [f64; 3] = std::array::from_fn(|_| g.random_range(-50.0..50.0));
                    std::array::from_fn(|_| std::array::from_fn(|a| c[a] + g.random_range(-1.0..1.0)))
                })
                .collect();
            let bvh = super::super::bvh::MeshBvh::build(&corners).unwrap();
            let mut seen = vec![0u32; bvh.corners.len()];
            // Every child's box holds the boxes below it.
            fn walk(nodes: &[WideNode], i: usize, lo: [f32; 3], hi: [f32; 3], seen: &mut [u32]) {
                let node = &nodes[i];
                for k in 0..WIDTH {
                    let c = node.child[k];
                    if c == EMPTY {
                        continue;
                    }
                    let (clo, chi) = ([0, 1, 2].map(|a| node.lo[a][k]), [0, 1, 2].map(|a| node.hi[a][k]));
                    assert!((0..3).all(|a| lo[a] <= clo[a] && chi[a] <= hi[a]));
                    if c & LEAF != 0 {
                        seen[(c & !LEAF) as usize] += 1;
                    } else {
                        walk(nodes, c as usize, clo, chi, seen);
                    }
                }
            }
            walk(&bvh.wide, 0, [f32::NEG_INFINITY; 3], [f32::INFINITY; 3], &mut seen);
            assert!(seen.iter().all(|&s| s == 1), "{n} triangles: each leaf once");
            assert!(bvh.wide.len() <= bvh.nodes.len().max(1));
        }
    }
}
