//! Rays against mesh instances: a walk of the instances' tree (`Instances::tree`), then of
//! each crossed instance's shape tree with the ray in the shape's frame, its boxes widened by
//! the margin (`instance::MARGIN`), so that no placed triangle the ray hits is missed; each
//! candidate is tested placed, with the mesh's watertight test. Both walks go nearer node
//! first; a shape's tree is walked in its wide form (four boxes a step, each lane one box's
//! test), which reaches the same leaves as ray_cast.cu's binary walk. The shapes' trees are
//! kept by the ray caster (`ShapeTrees`), as the mesh's is.

use std::sync::{Arc, Weak};

use super::bvh::{BvhNode, MeshBvh, WideNode, EMPTY, LEAF, STACK, WIDTH};
use super::intersect::{degenerate, triangle_box, RayFrame};
use super::wide::Visit;
use super::TaggedHit;
use crate::collide::ellipsoid::V3;
use crate::collide::instance::{Instance, Instances, MeshShape, MARGIN};
use crate::collide::world::KIND_INSTANCE;
use crate::error::Result;

/// Each shape slot's tree (over its non-degenerate triangles, in its own frame), and the shape
/// it was built for.
#[derive(Default)]
pub(crate) struct ShapeTrees {
    trees: Vec<Option<(Weak<MeshShape>, Arc<MeshBvh>)>>,
}

impl ShapeTrees {
    /// Brings the trees up to the world's shapes: a shape kept keeps its tree.
    pub fn update(&mut self, instances: &Instances) -> Result<()> {
        let slots = instances.shape_slots();
        self.trees.resize(slots.len(), None);
        self.trees.truncate(slots.len());
        for (t, slot) in self.trees.iter_mut().zip(slots) {
            match slot {
                None => *t = None,
                Some(shape) => {
                    if t.as_ref().is_none_or(|(w, _)| !std::ptr::eq(w.as_ptr(), Arc::as_ptr(shape))) {
                        *t = Some((Arc::downgrade(shape), Arc::new(MeshBvh::build(&shape.mesh.corners)?)));
                    }
                }
            }
        }
        Ok(())
    }

    /// Each shape slot's tree (`None`: a free slot).
    pub fn slots(&self) -> impl Iterator<Item = Option<&Arc<MeshBvh>>> + '_ {
        self.trees.iter().map(|t| t.as_ref().map(|(_, tree)| tree))
    }

    /// The tree of an instance's shape.
    fn of(&self, inst: &Instance) -> Option<&MeshBvh> {
        let (_, tree) = self.trees.get(inst.placement.shape.0 as usize)?.as_ref()?;
        (!tree.nodes.is_empty()).then_some(&**tree)
    }
}

/// A ray's walk of a binary tree (`nodes`, its leaves naming places in `ids`), nearer nodes
/// first: `crosses(lo, hi, layers, limit)` is a child's interval (enter, exit) when the ray
/// crosses its box within `limit` (`visit.limit()` widened by `slack`), `leaf` gets each
/// crossed leaf's id and interval. A node waiting on the stack whose entry lies past the
/// limit by then is skipped. The order changes how much is searched, never what is found
/// (the visits keep hits by (distance, kind, id, triangle)).
#[inline(always)]
fn walk_near_first<V: Visit>(
    nodes: &[BvhNode],
    ids: &[u32],
    visit: &mut V,
    slack: f64,
    crosses: impl Fn(&[f32; 3], &[f32; 3], u32, f64) -> Option<(f64, f64)>,
    mut leaf: impl FnMut(u32, f64, f64, &mut V),
) {
    if nodes.is_empty() {
        return;
    }
    let mut stack = [std::mem::MaybeUninit::<(u32, f64)>::uninit(); STACK];
    stack[0].write((0, f64::NEG_INFINITY));
    let mut top = 1;
    while top > 0 {
        top -= 1;
        // SAFETY: entries below `top` were written by a push.
        let (i, enter) = unsafe { stack[top].assume_init() };
        if enter > visit.limit() + slack {
            continue;
        }
        let node = &nodes[i as usize];
        let mut inner = [(0u32, 0.0f64); 2];
        let mut found = 0;
        for k in 0..2 {
            let c = node.child[k];
            if c == EMPTY {
                continue;
            }
            let (lo, hi) = node.child_box(k);
            let Some((enter, exit)) = crosses(&lo, &hi, node.layers[k], visit.limit() + slack) else { continue };
            if c & LEAF != 0 {
                leaf(ids[(c & !LEAF) as usize], enter, exit, visit);
            } else {
                inner[found] = (c, enter);
                found += 1;
            }
        }
        if found == 2 && inner[1].1 > inner[0].1 {
            inner.swap(0, 1);
        }
        // The farther pushed first: the nearer is searched first.
        for &e in &inner[..found] {
            stack[top].write(e);
            top += 1;
        }
    }
}

/// The instances in the ray's mask whose boxes it crosses within the visit's limit, each
/// searched for placed triangles it hits (the watertight test on the placed corners,
/// clamped into their box's interval: what a brute force over the placed triangles
/// finds), offered as `KIND_INSTANCE | instance` with the triangle for `at`.
#[inline(always)]
pub(crate) fn search(instances: &Instances, trees: &ShapeTrees, r: &RayFrame, visit: &mut impl Visit) {
    // The instances' tree first: its leaves are the instances whose boxes (f32, rounded
    // outwards) the ray crosses within the limit, in its mask.
    let tree = instances.tree();
    let crosses = |lo: &[f32; 3], hi: &[f32; 3], layers: u32, limit: f64| {
        if layers & r.mask == 0 {
            return None;
        }
        let (enter, exit) = r.slab(lo, hi);
        RayFrame::meets(enter, exit, limit).then_some((enter, exit))
    };
    walk_near_first(&tree.nodes, &tree.order, visit, 0.0, crosses, |k, _, exit, visit| {
        search_instance(instances, trees, instances.live[k as usize], exit, r, visit);
    });
}

/// A ray in a shape's frame (`o + t·u`, `inv`: 1/u or 0), and the margin its boxes are
/// widened by and the slack its intervals are given.
struct ShapeFrame {
    o: V3,
    u: V3,
    inv: V3,
    m: f64,
    slack: f64,
}

impl ShapeFrame {
    /// Each of a wide node's four boxes, widened by m: its entry, and as bits those the ray
    /// crosses within `limit`. Per lane, the operations of one box's test.
    #[inline(always)]
    fn crosses4(&self, node: &WideNode, limit: f64) -> ([f64; WIDTH], u32) {
        let (mut enter, mut exit) = ([f64::NEG_INFINITY; WIDTH], [f64::INFINITY; WIDTH]);
        let mut out = [false; WIDTH];
        for a in 0..3 {
            let (o, inv) = (self.o[a], self.inv[a]);
            let l: [f64; WIDTH] = std::array::from_fn(|k| node.lo[a][k] as f64 - self.m);
            let h: [f64; WIDTH] = std::array::from_fn(|k| node.hi[a][k] as f64 + self.m);
            if self.u[a] == 0.0 {
                for k in 0..WIDTH {
                    out[k] |= o < l[k] || o > h[k];
                }
                continue;
            }
            for k in 0..WIDTH {
                let (t0, t1) = ((l[k] - o) * inv, (h[k] - o) * inv);
                let (near, far) = if inv > 0.0 { (t0, t1) } else { (t1, t0) };
                // Plain compares (no NaN handling to pay for: a NaN t leaves the bound as it
                // was, as `max`/`min` would, and the bounds themselves are never NaN).
                enter[k] = if near > enter[k] { near } else { enter[k] };
                exit[k] = if far < exit[k] { far } else { exit[k] };
            }
        }
        let mut meets = 0u32;
        for k in 0..WIDTH {
            let (e, x) = (enter[k], exit[k]);
            let ok = (node.child[k] != EMPTY) & !out[k] & (e <= x) & (x >= -self.slack) & (e <= limit);
            meets |= u32::from(ok) << k;
        }
        (enter, meets)
    }
}

/// `walk_near_first` over a shape's wide tree (`MeshBvh::wide`): `leaf` gets the triangle of
/// each leaf whose widened box the ray crosses within the visit's limit plus the slack.
#[inline(always)]
fn walk_wide_near_first<V: Visit>(
    nodes: &[WideNode],
    ids: &[u32],
    visit: &mut V,
    f: &ShapeFrame,
    mut leaf: impl FnMut(u32, &mut V),
) {
    if nodes.is_empty() {
        return;
    }
    // Uninitialized: a search of a small shape reads a few entries of a long stack.
    let mut stack = [std::mem::MaybeUninit::<(u32, f64)>::uninit(); (WIDTH - 1) * STACK + 1];
    stack[0].write((0, f64::NEG_INFINITY));
    let mut top = 1;
    while top > 0 {
        top -= 1;
        // SAFETY: entries below `top` were written by a push.
        let (i, enter) = unsafe { stack[top].assume_init() };
        if enter > visit.limit() + f.slack {
            continue;
        }
        let node = &nodes[i as usize];
        let (enter, mut meets) = f.crosses4(node, visit.limit() + f.slack);
        let mut inner = [(0u32, 0.0f64); WIDTH];
        let mut found = 0;
        while meets != 0 {
            let k = meets.trailing_zeros() as usize;
            meets &= meets - 1;
            let c = node.child[k];
            if c & LEAF != 0 {
                leaf(ids[(c & !LEAF) as usize], visit);
            } else {
                inner[found] = (c, enter[k]);
                found += 1;
            }
        }
        // The farthest pushed first: the nearest is searched first.
        let inner = &mut inner[..found];
        inner.sort_unstable_by(|a, b| b.1.total_cmp(&a.1));
        for &e in inner.iter() {
            // A wide tree is no deeper than its binary tree, and a node popped adds at most
            // WIDTH - 1 entries.
            stack[top].write(e);
            top += 1;
        }
    }
}

/// Instance `i`'s placed triangles a ray hits (see `ray_search`); `exit`: where the ray
/// leaves the instance's box.
#[inline(always)]
fn search_instance(instances: &Instances, trees: &ShapeTrees, i: u32, exit: f64, r: &RayFrame, visit: &mut impl Visit) {
    {
        let inst = instances.slots()[i as usize].as_ref().expect("live");
        let Some(bvh) = trees.of(inst) else { return };
        if bvh.wide.is_empty() {
            return;
        }
        // The ray in the shape's frame, searched with boxes widened by the margin.
        let p = &inst.placement.position;
        let d: V3 = std::array::from_fn(|a| r.origin[a] - p[a]);
        let o = inst.local_dir(d);
        let u = inst.local_dir(r.dir);
        let inv: V3 = u.map(|v| if v != 0.0 { 1.0 / v } else { 0.0 });
        let big = |v: &V3| v.iter().fold(0.0f64, |x, y| x.max(y.abs()));
        let reach = exit.min(r.max_distance).max(0.0);
        let m = MARGIN * (big(&d) + reach + big(p) + inst.shape.reach + 1e-300);
        // Each box widened by m crossed at all within the visit's limit plus the slack, in
        // the shape's frame: the shape's tree in nodes of four, a box a lane (the binary
        // tree's boxes and tests, ray_cast.cu's `ray_crosses`, so the same leaves are reached).
        let slack = m * 4.0;
        let frame = ShapeFrame { o, u, inv, m, slack };
        walk_wide_near_first(&bvh.wide, &bvh.ids, visit, &frame, |t, visit| {
            let c = inst.corners(t);
            if !degenerate(&c) {
                let (lo, hi) = triangle_box(&c);
                let (enter, exit) = r.slab(&lo, &hi);
                if RayFrame::meets(enter, exit, r.max_distance) {
                    if let Some(t_hit) = r.triangle(c[0], c[1], c[2], enter, exit) {
                        visit.hit(TaggedHit { t: t_hit, tagged: KIND_INSTANCE | i, at: t });
                    }
                }
            }
        });
    }
}
