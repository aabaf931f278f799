//! Rays against mesh instances: a walk of the instances' tree (`Instances::tree`), then of
//! each crossed instance's shape tree with the ray in the shape's frame, its boxes widened by
//! the margin (`instance::MARGIN`), so that no placed triangle the ray hits is missed; each
//! candidate is tested placed, with the mesh's watertight test. The shapes' trees are kept by
//! the ray caster (`ShapeTrees`), as the mesh's is.

use std::sync::{Arc, Weak};

use super::bvh::{BvhNode, MeshBvh, EMPTY, LEAF, STACK};
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
    let mut stack = [(0u32, f64::NEG_INFINITY); STACK];
    let mut top = 1;
    while top > 0 {
        top -= 1;
        let (i, enter) = stack[top];
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
            stack[top] = e;
            top += 1;
        }
    }
}

/// The instances in the ray's mask whose boxes it crosses within the visit's limit, each
/// searched for placed triangles it hits (the watertight test on the placed corners,
/// clamped into their box's interval: what a brute force over the placed triangles
/// finds), offered as `KIND_INSTANCE | instance` with the triangle for `at`.
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

/// Instance `i`'s placed triangles a ray hits (see `ray_search`); `exit`: where the ray
/// leaves the instance's box.
fn search_instance(instances: &Instances, trees: &ShapeTrees, i: u32, exit: f64, r: &RayFrame, visit: &mut impl Visit) {
    {
        let inst = instances.slots()[i as usize].as_ref().expect("live");
        let Some(bvh) = trees.of(inst) else { return };
        if bvh.nodes.is_empty() {
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
        // The box widened by m crossed at all within `limit` (the visit's limit plus the
        // slack), in the shape's frame.
        let slack = m * 4.0;
        let crosses = |lo: &[f32; 3], hi: &[f32; 3], _: u32, limit: f64| {
            let (mut enter, mut exit) = (f64::NEG_INFINITY, f64::INFINITY);
            for a in 0..3 {
                let (l, h) = (lo[a] as f64 - m, hi[a] as f64 + m);
                if u[a] == 0.0 {
                    if o[a] < l || o[a] > h {
                        return None;
                    }
                    continue;
                }
                let (t0, t1) = ((l - o[a]) * inv[a], (h - o[a]) * inv[a]);
                let (near, far) = if inv[a] > 0.0 { (t0, t1) } else { (t1, t0) };
                enter = enter.max(near);
                exit = exit.min(far);
            }
            (enter <= exit && exit >= -slack && enter <= limit).then_some((enter, exit))
        };
        walk_near_first(&bvh.nodes, &bvh.ids, visit, slack, crosses, |t, _, _, visit| {
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
