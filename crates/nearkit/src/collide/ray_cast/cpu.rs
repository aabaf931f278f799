//! Ray casts on the CPU: a thread per batch of rays, each ray searching the mesh's tree and
//! then the bodies' depth first, nearer child first, pruning by the nearest hit so far (first
//! hits) or by the last of the `limit` nearest (all hits).

use rayon::prelude::*;

use super::bvh::{BodyBvh, BvhNode, MeshBvh, EMPTY, LEAF, STACK};
use super::intersect::{RayFrame, UnitRay};
use super::{RayHit, RayHits, TaggedHit};
use crate::collide::world::{World, KIND_BODY};
use crate::error::{Error, Result};
use crate::geometry::morton::MortonFrame;
use crate::runtime::cpu::RowPtr;

/// What a search does at the leaves it reaches.
pub(crate) trait Visit {
    /// Nodes entered beyond this t are skipped.
    fn limit(&self) -> f64;
    /// A hit (already in [0, max_distance]).
    fn hit(&mut self, h: TaggedHit);
}

/// Searches `nodes` for the ray (primitives only of layers meeting its mask); `leaf` tests
/// the primitive at a sorted position, the ray in its box over (enter, exit), and returns its
/// hit.
#[inline(always)]
pub(crate) fn search(
    nodes: &[BvhNode],
    r: &RayFrame,
    visit: &mut impl Visit,
    mut leaf: impl FnMut(u32, f64, f64) -> Option<TaggedHit>,
) {
    if nodes.is_empty() {
        return;
    }
    // Nodes to visit and the t where the ray enters them; only pushed entries are read.
    let mut stack = [std::mem::MaybeUninit::<(u32, f64)>::uninit(); STACK];
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
        let mut inner = [(0u32, 0.0f64); 2];
        let mut found = 0;
        for k in 0..2 {
            let c = node.child[k];
            if c == EMPTY || node.layers[k] & r.mask == 0 {
                continue;
            }
            let (lo, hi) = node.child_box(k);
            let (enter, exit) = r.slab(&lo, &hi);
            if !RayFrame::meets(enter, exit, visit.limit()) {
                continue;
            }
            if c & LEAF != 0 {
                if let Some(h) = leaf(c & !LEAF, enter, exit) {
                    visit.hit(h);
                }
            } else {
                inner[found] = (c, enter);
                found += 1;
            }
        }
        // The nearer child on top.
        if found == 2 && inner[1].1 > inner[0].1 {
            inner.swap(0, 1);
        }
        for &e in &inner[..found] {
            // A tree is at most STACK deep (checked when built), and the stack holds at most
            // one entry per level.
            stack[top].write(e);
            top += 1;
        }
    }
}

/// Searches the mesh (if the ray's mask meets its layer) and the bodies.
#[inline(always)]
pub(crate) fn search_world(
    r: &RayFrame,
    mesh: Option<&MeshBvh>,
    mesh_layer: u32,
    bodies: &BodyBvh,
    visit: &mut impl Visit,
) {
    if let Some(m) = mesh.filter(|_| r.mask & mesh_layer != 0) {
        search(&m.nodes, r, visit, |s, enter, exit| {
            let [a, b, c] = m.corners[s as usize];
            r.triangle(a, b, c, enter, exit).map(|t| TaggedHit { t, tagged: m.ids[s as usize], at: s })
        });
    }
    search(&bodies.nodes, r, visit, |s, enter, exit| {
        let k = s as usize;
        r.ellipsoid(bodies.center[k], &bodies.unit[k], enter, exit).map(|t| TaggedHit {
            t,
            tagged: bodies.ids[k] | KIND_BODY,
            at: s,
        })
    });
}

/// The hit with its point and normal (computed for the hits kept only), from its
/// primitive's data at its sorted position in the trees.
pub(crate) fn finish(r: &RayFrame, mesh: Option<&MeshBvh>, bodies: &BodyBvh, h: TaggedHit) -> RayHit {
    let at = h.at as usize;
    // −0 (a box's entry, clamped to) is reported as 0.
    let t = h.t + 0.0;
    let normal = if h.tagged & KIND_BODY != 0 {
        r.ellipsoid_normal(bodies.center[at], &bodies.unit[at], t)
    } else {
        let [a, b, c] = mesh.expect("a hit on the mesh").corners[at];
        r.triangle_normal(a, b, c)
    };
    RayHit { distance: t, kind: h.kind(), id: h.id(), point: r.point(t), normal }
}

/// The nearest hit.
struct First(Option<TaggedHit>, f64);

impl Visit for First {
    #[inline(always)]
    fn limit(&self) -> f64 {
        self.1
    }

    #[inline(always)]
    fn hit(&mut self, h: TaggedHit) {
        if self.0.is_none_or(|b| h.before(&b)) {
            self.0 = Some(h);
            self.1 = h.t;
        }
    }
}

/// The `cap` nearest hits, sorted.
struct Nearest {
    hits: Vec<TaggedHit>,
    cap: usize,
    max: f64,
}

impl Visit for Nearest {
    #[inline(always)]
    fn limit(&self) -> f64 {
        if self.hits.len() < self.cap {
            self.max
        } else {
            self.hits[self.cap - 1].t
        }
    }

    fn hit(&mut self, h: TaggedHit) {
        if self.hits.len() == self.cap && !h.before(&self.hits[self.cap - 1]) {
            return;
        }
        let at = self.hits.partition_point(|x| x.before(&h));
        self.hits.insert(at, h);
        self.hits.truncate(self.cap);
    }
}

/// Batches of fewer rays are cast in the order given.
const REORDER_FROM: usize = 1 << 12;

/// The rays' positions in an order that keeps neighbours together (by the Morton code of
/// their origins), so that consecutive rays on a thread search the same parts of the trees:
/// in a random order most of a search's time went to waiting for nodes from memory. The
/// answers do not depend on the order.
fn coherent_order(rays: &[UnitRay]) -> Vec<u32> {
    let (lo, hi) = rays
        .par_iter()
        .with_min_len(1 << 14)
        .fold(
            || ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]),
            |(lo, hi), r| {
                (std::array::from_fn(|a| lo[a].min(r.origin[a])), std::array::from_fn(|a| hi[a].max(r.origin[a])))
            },
        )
        .reduce(
            || ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]),
            |x, y| (std::array::from_fn(|a| x.0[a].min(y.0[a])), std::array::from_fn(|a| x.1[a].max(y.1[a]))),
        );
    let frame = MortonFrame::<f64>::from_bounds(lo, hi);
    let mut keyed: Vec<(u64, u32)> = rays
        .par_iter()
        .enumerate()
        .map(|(i, r)| (frame.code(r.origin[0], r.origin[1], r.origin[2]), i as u32))
        .collect();
    keyed.par_sort_unstable();
    keyed.into_iter().map(|(_, i)| i).collect()
}

/// `cast` of every ray, in the rays' order, computed in a coherent order (for big batches).
fn cast_all<T: Send + Default>(rays: &[UnitRay], min_len: usize, cast: impl Fn(&UnitRay) -> T + Sync + Send) -> Vec<T> {
    if rays.len() < REORDER_FROM {
        return rays.par_iter().with_min_len(min_len).map(cast).collect();
    }
    let order = coherent_order(rays);
    let mut out: Vec<T> = Vec::with_capacity(rays.len());
    out.resize_with(rays.len(), T::default);
    let dst = RowPtr(out.as_mut_ptr());
    order.par_iter().with_min_len(min_len).for_each(|&i| {
        let v = cast(&rays[i as usize]);
        // SAFETY: `order` is a permutation, so each slot is written by one task only.
        let slot = unsafe { dst.span(i as usize, 1) };
        slot[0] = v;
    });
    out
}

/// Each ray's nearest hit.
pub(crate) fn first_hits(
    world: &World,
    mesh: Option<&MeshBvh>,
    bodies: &BodyBvh,
    rays: &[UnitRay],
) -> Vec<Option<RayHit>> {
    let layer = world.mesh_layer();
    cast_all(rays, 256, |u| {
        let r = RayFrame::new(u);
        let mut v = First(None, r.max_distance);
        search_world(&r, mesh, layer, bodies, &mut v);
        v.0.map(|h| finish(&r, mesh, bodies, h))
    })
}

/// Each ray's `limit` nearest hits, as rows.
pub(crate) fn all_hits(
    world: &World,
    mesh: Option<&MeshBvh>,
    bodies: &BodyBvh,
    rays: &[UnitRay],
    limit: usize,
) -> Result<RayHits> {
    let layer = world.mesh_layer();
    let rows: Vec<Vec<RayHit>> = cast_all(rays, 64, |u| {
        if limit == 0 {
            return Vec::new();
        }
        let r = RayFrame::new(u);
        let mut v = Nearest { hits: Vec::new(), cap: limit, max: r.max_distance };
        search_world(&r, mesh, layer, bodies, &mut v);
        v.hits.into_iter().map(|h| finish(&r, mesh, bodies, h)).collect()
    });
    let mut offsets = Vec::with_capacity(rows.len() + 1);
    offsets.push(0usize);
    for row in &rows {
        offsets.push(offsets.last().expect("one at least") + row.len());
    }
    let total = *offsets.last().expect("one at least");
    let mut hits = Vec::new();
    hits.try_reserve_exact(total).map_err(|_| Error::OutOfMemory(format!("{total} ray hits")))?;
    hits.extend(rows.into_iter().flatten());
    Ok(RayHits { offsets, hits })
}

/// Every hit of one ray, sorted by (distance, kind, id): each triangle and live body tested
/// in turn with the tests (boxes included) the searches use. What the tests compare with.
#[cfg(feature = "test-hooks")]
pub(crate) fn brute_force(world: &World, ray: &super::Ray) -> Result<Vec<RayHit>> {
    use super::intersect::{body_box_f32, degenerate, triangle_box};
    let u = super::intersect::UnitRay::new(ray).map_err(|m| super::ray_error(0, m))?;
    let r = RayFrame::new(&u);
    let mut hits = Vec::new();
    if r.mask & world.mesh_layer() != 0 {
        for t in 0..world.triangle_count() {
            let c = world.triangle(t).expect("in range");
            if degenerate(&c) {
                continue;
            }
            let (lo, hi) = triangle_box(&c);
            let (enter, exit) = r.slab(&lo, &hi);
            if RayFrame::meets(enter, exit, r.max_distance) {
                if let Some(h) = r.triangle(c[0], c[1], c[2], enter, exit) {
                    hits.push(TaggedHit { t: h, tagged: t as u32, at: 0 });
                }
            }
        }
    }
    let b = world.bodies();
    for i in 0..b.len() {
        if !b.alive[i] || b.layer[i] & r.mask == 0 {
            continue;
        }
        let s = b.shape(i);
        let (lo, hi) = body_box_f32(&s, b.center[i]);
        let (enter, exit) = r.slab(&lo, &hi);
        if RayFrame::meets(enter, exit, r.max_distance) {
            if let Some(h) = r.ellipsoid(b.center[i], &s.unit, enter, exit) {
                hits.push(TaggedHit { t: h, tagged: i as u32 | KIND_BODY, at: 0 });
            }
        }
    }
    // By `before`, where −0 and 0 are the same distance (both are reported as 0).
    hits.sort_by(|a, b| if a.before(b) { std::cmp::Ordering::Less } else { std::cmp::Ordering::Greater });
    Ok(hits
        .into_iter()
        .map(|h| {
            let t = h.t + 0.0;
            let normal = if h.tagged & KIND_BODY != 0 {
                let i = h.id() as usize;
                r.ellipsoid_normal(b.center[i], &b.shape(i).unit, t)
            } else {
                let [p, q, s] = world.triangle(h.id() as usize).expect("in range");
                r.triangle_normal(p, q, s)
            };
            RayHit { distance: t, kind: h.kind(), id: h.id(), point: r.point(t), normal }
        })
        .collect())
}
