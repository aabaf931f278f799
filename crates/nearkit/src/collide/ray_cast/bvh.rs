//! The trees ray casts search: `box_tree`'s radix trees over the primitives' boxes (a
//! leaf's box is the one its primitive's test uses). `MeshBvh` is built once per mesh (over its non-degenerate
//! triangles); `BodyBvh` per call (over the live bodies). The CPU searches each in its wide
//! form (`WideNode`, nodes of four children collapsed from the binary ones).

use rayon::prelude::*;

use super::intersect::{body_box_f32, degenerate, triangle_box};
pub(crate) use crate::collide::box_tree::{build, union, Boxed, BvhNode, EMPTY, GRAIN, LEAF, STACK};
use crate::collide::ellipsoid::{Shape, V3};
use crate::collide::world::{check_center, Bodies, World};
use crate::error::Result;

/// Children of a node of the CPU's form of a tree (searched by `wide`).
pub(crate) const WIDTH: usize = 4;

/// A node of four children: their boxes as columns (`lo[axis][k]`), what each is (a node
/// index, `LEAF | position`, or `EMPTY`), and their layer bits. An empty slot has the box
/// (+∞, −∞), which no ray enters, and no layers.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub(crate) struct WideNode {
    pub lo: [[f32; WIDTH]; 3],
    pub hi: [[f32; WIDTH]; 3],
    pub child: [u32; WIDTH],
    pub layers: [u32; WIDTH],
}

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

/// The static mesh's tree: its non-degenerate triangles, in the leaves' order.
pub(crate) struct MeshBvh {
    pub nodes: Vec<BvhNode>,
    /// The same tree in nodes of four (the CPU's search).
    pub wide: Vec<WideNode>,
    /// The corners of the triangle at each sorted position.
    pub corners: Vec<[V3; 3]>,
    /// Its index in the mesh.
    pub ids: Vec<u32>,
}

impl MeshBvh {
    /// The tree of a mesh's triangles (degenerate ones left out: they are never hit).
    pub fn build(corners: &[[V3; 3]]) -> Result<Self> {
        let kept: Vec<u32> =
            (0..corners.len() as u32).into_par_iter().filter(|&t| !degenerate(&corners[t as usize])).collect();
        let third = 1.0 / 3.0;
        let centers: Vec<V3> = kept
            .par_iter()
            .map(|&t| {
                let c = &corners[t as usize];
                std::array::from_fn(|a| (c[0][a] + c[1][a] + c[2][a]) * third)
            })
            .collect();
        let boxes: Vec<Boxed> = kept
            .par_iter()
            .map(|&t| {
                let (lo, hi) = triangle_box(&corners[t as usize]);
                (lo, hi, u32::MAX)
            })
            .collect();
        let tree = build(&centers, &boxes)?;
        let ids: Vec<u32> = tree.order.iter().map(|&k| kept[k as usize]).collect();
        Ok(MeshBvh {
            wide: collapse(&tree.nodes),
            nodes: tree.nodes,
            corners: ids.iter().map(|&t| corners[t as usize]).collect(),
            ids,
        })
    }
}

/// The live bodies' tree, made per call: each body's centre and unit-ball map, in the
/// leaves' order.
pub(crate) struct BodyBvh {
    pub nodes: Vec<BvhNode>,
    /// The same tree in nodes of four (the CPU's search).
    pub wide: Vec<WideNode>,
    pub center: Vec<V3>,
    /// S⁻¹·Rᵀ of each body (`Shape::unit`).
    pub unit: Vec<[[f64; 3]; 3]>,
    /// Its id.
    pub ids: Vec<u32>,
}

/// Body `i`'s shape, and its box (as its tests use it) with its layer: what a leaf holds.
fn leaf(b: &Bodies, i: usize) -> (Shape, Boxed) {
    let s = b.shape(i);
    let (lo, hi) = body_box_f32(&s, b.center[i]);
    (s, (lo, hi, b.layer[i]))
}

impl BodyBvh {
    /// The tree of `world`'s live bodies; an error naming a body whose centre is not finite.
    pub fn build(world: &World) -> Result<Self> {
        let b = world.bodies();
        let live: Vec<u32> =
            (0..b.len() as u32).into_par_iter().with_min_len(GRAIN).filter(|&i| b.alive[i as usize]).collect();
        live.par_iter().with_min_len(4096).try_for_each(|&i| check_center(i as usize, b.center[i as usize]))?;
        let (shapes, boxes): (Vec<Shape>, Vec<Boxed>) =
            live.par_iter().with_min_len(GRAIN).map(|&i| leaf(b, i as usize)).unzip();
        let centers: Vec<V3> = live.iter().map(|&i| b.center[i as usize]).collect();
        let tree = build(&centers, &boxes)?;
        Ok(BodyBvh {
            wide: collapse(&tree.nodes),
            nodes: tree.nodes,
            center: tree.order.iter().map(|&k| centers[k as usize]).collect(),
            unit: tree.order.iter().map(|&k| shapes[k as usize].unit).collect(),
            ids: tree.order.iter().map(|&k| live[k as usize]).collect(),
        })
    }
}

impl BodyBvh {
    /// This tree over `world`'s bodies in their present poses: the same bodies, shapes and
    /// layers as when it was built (the caller knows), each leaf's centre, unit-ball map and
    /// box afresh, each node's boxes the union of its children's. A tree refitted as bodies
    /// move loosens (searches enter more boxes), but never loses a hit: its boxes still hold
    /// what is below them.
    pub fn refit(&self, world: &World) -> Result<Self> {
        let b = world.bodies();
        self.ids.par_iter().with_min_len(4096).try_for_each(|&i| check_center(i as usize, b.center[i as usize]))?;
        let (unit, boxes): (Vec<[[f64; 3]; 3]>, Vec<Boxed>) = self
            .ids
            .par_iter()
            .with_min_len(GRAIN)
            .map(|&i| {
                let (s, boxed) = leaf(b, i as usize);
                (s.unit, boxed)
            })
            .unzip();
        let mut nodes = self.nodes.clone();
        if !nodes.is_empty() {
            refit_binary(&mut nodes, 0, &boxes);
        }
        let mut wide = self.wide.clone();
        if !wide.is_empty() {
            refit_wide(&mut wide, 0, &boxes);
        }
        Ok(BodyBvh {
            nodes,
            wide,
            center: self.ids.iter().map(|&i| b.center[i as usize]).collect(),
            unit,
            ids: self.ids.clone(),
        })
    }
}

/// Node `i`'s children's boxes from `leaves` (by sorted position) upwards; its box.
fn refit_binary(nodes: &mut [BvhNode], i: usize, leaves: &[Boxed]) -> Boxed {
    let mut all = ([f32::INFINITY; 3], [f32::NEG_INFINITY; 3], 0);
    for k in 0..2 {
        let c = nodes[i].child[k];
        if c == EMPTY {
            continue;
        }
        let b = if c & LEAF != 0 { leaves[(c & !LEAF) as usize] } else { refit_binary(nodes, c as usize, leaves) };
        let node = &mut nodes[i];
        node.bounds[6 * k..6 * k + 3].copy_from_slice(&b.0);
        node.bounds[6 * k + 3..6 * k + 6].copy_from_slice(&b.1);
        node.layers[k] = b.2;
        all = union(&all, &b);
    }
    all
}

/// The same for a wide node.
fn refit_wide(nodes: &mut [WideNode], i: usize, leaves: &[Boxed]) -> Boxed {
    let mut all = ([f32::INFINITY; 3], [f32::NEG_INFINITY; 3], 0);
    for k in 0..WIDTH {
        let c = nodes[i].child[k];
        if c == EMPTY {
            continue;
        }
        let b = if c & LEAF != 0 { leaves[(c & !LEAF) as usize] } else { refit_wide(nodes, c as usize, leaves) };
        let node = &mut nodes[i];
        for a in 0..3 {
            node.lo[a][k] = b.0[a];
            node.hi[a][k] = b.1[a];
        }
        node.layers[k] = b.2;
        all = union(&all, &b);
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

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
            let bvh = MeshBvh::build(&corners).unwrap();
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
