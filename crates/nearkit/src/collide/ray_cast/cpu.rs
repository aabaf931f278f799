//! Ray casts on the CPU: a thread per batch of rays, each ray searching the mesh's tree and
//! then the bodies' (their wide forms, `wide`) depth first, nearer children first, pruning by
//! the nearest hit so far (first hits) or by the last of the `limit` nearest (all hits).

use rayon::prelude::*;

use super::bvh::{BodyBvh, MeshBvh};
use super::heightfield;
use super::instances::ShapeTrees;
use super::intersect::{RayFrame, UnitRay};
use super::wide::{self, Visit};
use super::{Ray, RayHit, RayHits, TaggedHit};
use crate::collide::heightfield::Heightfield;
use crate::collide::instance::Instances;
use crate::collide::world::{ContactKind, World, KIND_BODY};
use crate::error::{Error, Result};
use crate::geometry::morton::MortonFrame;
use crate::runtime::cpu::{order_by_key, prefetch, RowPtr};

/// What a ray can hit: the static mesh's tree and the heightfield (both of the world's
/// mesh layer), and the bodies' tree; and whether to search them with AVX2.
#[derive(Clone, Copy)]
pub(crate) struct Targets<'a> {
    pub mesh: Option<&'a MeshBvh>,
    pub terrain: Option<&'a Heightfield>,
    pub mesh_layer: u32,
    pub bodies: &'a BodyBvh,
    pub instances: &'a Instances,
    pub shapes: &'a ShapeTrees,
    pub avx2: bool,
}

impl<'a> Targets<'a> {
    /// `portable`: the portable code even where the CPU has AVX2 (the same hits).
    pub fn new(
        world: &'a World,
        mesh: Option<&'a MeshBvh>,
        bodies: &'a BodyBvh,
        shapes: &'a ShapeTrees,
        portable: bool,
    ) -> Self {
        #[cfg(target_arch = "x86_64")]
        let avx2 = !portable && std::arch::is_x86_feature_detected!("avx2");
        #[cfg(not(target_arch = "x86_64"))]
        let avx2 = {
            let _ = portable;
            false
        };
        Targets {
            mesh,
            terrain: world.heightfield(),
            mesh_layer: world.mesh_layer(),
            bodies,
            instances: world.instances(),
            shapes,
            avx2,
        }
    }
}

/// Searches the mesh and the heightfield (if the ray's mask meets their layer) and the
/// bodies; compiled for AVX2 where the CPU has it (four boxes a step, the same bits).
#[inline(always)]
pub(crate) fn search_world(r: &RayFrame, w: &Targets, visit: &mut impl Visit) {
    #[cfg(target_arch = "x86_64")]
    if w.avx2 {
        #[target_feature(enable = "avx2")]
        unsafe fn avx2(r: &RayFrame, w: &Targets, visit: &mut impl Visit) {
            search_wide::<true>(r, w, visit)
        }
        // SAFETY: the CPU has AVX2 (`Targets::new` checked).
        return unsafe { avx2(r, w, visit) };
    }
    search_wide::<false>(r, w, visit)
}

/// `AVX2`: compiled where the CPU has it (`search_world`'s AVX2 copy).
#[inline(always)]
fn search_wide<const AVX2: bool>(r: &RayFrame, w: &Targets, visit: &mut impl Visit) {
    if !w.instances.is_empty() {
        super::instances::search(w.instances, w.shapes, r, visit);
    }
    let bodies = w.bodies;
    if r.mask & w.mesh_layer != 0 {
        if let Some(m) = w.mesh {
            wide::search::<AVX2>(&m.wide, r, visit, |s, enter, exit| {
                let [a, b, c] = m.corners[s as usize];
                r.triangle(a, b, c, enter, exit).map(|t| TaggedHit { t, tagged: m.ids[s as usize], at: s })
            });
        }
        if let Some(h) = w.terrain {
            heightfield::search(r, h, visit);
        }
    }
    wide::search::<AVX2>(&bodies.wide, r, visit, |s, enter, exit| {
        let k = s as usize;
        r.ellipsoid(bodies.center[k], &bodies.unit[k], enter, exit).map(|t| TaggedHit {
            t,
            tagged: bodies.ids[k] | KIND_BODY,
            at: s,
        })
    });
}

/// The hit with its point and normal (computed for the hits kept only), from its
/// primitive's data at its sorted position in the trees (a heightfield's: its triangle).
pub(crate) fn finish(r: &RayFrame, w: &Targets, h: TaggedHit) -> RayHit {
    let at = h.at as usize;
    // −0 (a box's entry, clamped to) is reported as 0.
    let t = h.t + 0.0;
    let normal = match h.kind() {
        ContactKind::Body => r.ellipsoid_normal(w.bodies.center[at], &w.bodies.unit[at], t),
        ContactKind::Heightfield => {
            let [a, b, c] = w.terrain.expect("a hit on the heightfield").triangle(h.at);
            r.triangle_normal(a, b, c)
        }
        ContactKind::Triangle => {
            let [a, b, c] = w.mesh.expect("a hit on the mesh").corners[at];
            r.triangle_normal(a, b, c)
        }
        ContactKind::Instance => {
            let inst = w.instances.slots()[h.id() as usize].as_ref().expect("a hit on a live instance");
            let [a, b, c] = inst.corners(h.at);
            r.triangle_normal(a, b, c)
        }
    };
    RayHit { distance: t, kind: h.kind(), id: h.id(), triangle: h.triangle(), point: r.point(t), normal }
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

/// Rays are cast in a coherent order only where what they search (the trees' nodes, the
/// heightfield's heights) takes more than this: smaller scenes stay in the caches whatever
/// the order, and reading the rays and writing their hits in a scattered order then costs
/// more than it saves (BENCHMARKS "Session 52").
const REORDER_ABOVE_BYTES: usize = 8 << 20;

impl Targets<'_> {
    /// Whether a big batch is worth casting in a coherent order.
    fn reorder(&self) -> bool {
        let wide = std::mem::size_of::<super::bvh::WideNode>();
        let mesh = self.mesh.map_or(0, |m| m.wide.len() * wide);
        let terrain = self.terrain.map_or(0, |h| std::mem::size_of_val(h.heights()));
        let shapes: usize = self.shapes.slots().flatten().map(|t| t.nodes.len()).sum::<usize>()
            * std::mem::size_of::<super::bvh::BvhNode>();
        mesh + terrain + shapes + self.bodies.wide.len() * wide > REORDER_ABOVE_BYTES
    }
}

/// The rays' positions in an order that keeps neighbours together (by the Morton code of
/// their origins), so that consecutive rays on a thread search the same parts of the trees:
/// in a random order most of a search's time went to waiting for nodes from memory. The
/// answers do not depend on the order.
fn coherent_order(rays: &[Ray]) -> Vec<u32> {
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
    order_by_key(rays.len(), |i| {
        let o = rays[i].origin;
        (frame.code(o[0], o[1], o[2]) >> 31) as u32
    })
}

/// `cast` of every ray (made unit: the rays were checked), in the rays' order, computed in a
/// coherent order (for big batches).
fn cast_all<T: Send + Default>(
    rays: &[Ray],
    min_len: usize,
    reorder: bool,
    cast: impl Fn(&UnitRay) -> T + Sync + Send,
) -> Vec<T> {
    let mut out = Vec::new();
    cast_all_into(rays, min_len, reorder, &mut out, cast);
    out
}

/// [`cast_all`] into `out` (cleared first, its memory reused); `reorder`: big batches in a
/// coherent order.
fn cast_all_into<T: Send + Default>(
    rays: &[Ray],
    min_len: usize,
    reorder: bool,
    out: &mut Vec<T>,
    cast: impl Fn(&UnitRay) -> T + Sync + Send,
) {
    let unit = |r: &Ray| UnitRay::new(r).expect("rays are checked before they are cast");
    out.clear();
    if !reorder || rays.len() < REORDER_FROM {
        out.par_extend(rays.par_iter().with_min_len(min_len).map(|r| cast(&unit(r))));
        return;
    }
    let order = coherent_order(rays);
    out.resize_with(rays.len(), T::default);
    let dst = RowPtr(out.as_mut_ptr());
    // The rays (and their slots) are read in random places: each asks for those of the ray
    // `AHEAD` of it, so that the misses overlap the searches.
    const AHEAD: usize = 8;
    order.par_chunks(min_len).for_each(|chunk| {
        for (j, &i) in chunk.iter().enumerate() {
            if let Some(&a) = chunk.get(j + AHEAD) {
                prefetch(rays.as_ptr().wrapping_add(a as usize), 1);
                dst.prefetch(a as usize);
            }
            let v = cast(&unit(&rays[i as usize]));
            // SAFETY: `order` is a permutation, so each slot is written by one task only.
            let slot = unsafe { dst.span(i as usize, 1) };
            slot[0] = v;
        }
    });
}

/// Each ray's nearest hit, into `out` (its memory reused).
pub(crate) fn first_hits_into(
    world: &World,
    mesh: Option<&MeshBvh>,
    bodies: &BodyBvh,
    shapes: &ShapeTrees,
    rays: &[Ray],
    portable: bool,
    out: &mut Vec<Option<RayHit>>,
) {
    let w = Targets::new(world, mesh, bodies, shapes, portable);
    cast_all_into(rays, 256, w.reorder(), out, |u| {
        let r = RayFrame::new(u);
        let mut v = First(None, r.max_distance);
        search_world(&r, &w, &mut v);
        v.0.map(|h| finish(&r, &w, h))
    })
}

/// Each ray's `limit` nearest hits, as rows.
pub(crate) fn all_hits(
    world: &World,
    mesh: Option<&MeshBvh>,
    bodies: &BodyBvh,
    shapes: &ShapeTrees,
    rays: &[Ray],
    limit: usize,
    portable: bool,
) -> Result<RayHits> {
    let w = Targets::new(world, mesh, bodies, shapes, portable);
    let rows: Vec<Vec<RayHit>> = cast_all(rays, 64, w.reorder(), |u| {
        if limit == 0 {
            return Vec::new();
        }
        let r = RayFrame::new(u);
        let mut v = Nearest { hits: Vec::new(), cap: limit, max: r.max_distance };
        search_world(&r, &w, &mut v);
        v.hits.into_iter().map(|h| finish(&r, &w, h)).collect()
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
    use crate::collide::ellipsoid::V3;
    use crate::collide::world::{KIND_HEIGHTFIELD, KIND_INSTANCE};
    let u = super::intersect::UnitRay::new(ray).map_err(|m| super::ray_error(0, m))?;
    let r = RayFrame::new(&u);
    let mut hits = Vec::new();
    // A triangle's hit, tested as the searches test it (its box first).
    let mut test = |c: [V3; 3], tagged: u32, at: u32| {
        if degenerate(&c) {
            return;
        }
        let (lo, hi) = triangle_box(&c);
        let (enter, exit) = r.slab(&lo, &hi);
        if RayFrame::meets(enter, exit, r.max_distance) {
            if let Some(t) = r.triangle(c[0], c[1], c[2], enter, exit) {
                hits.push(TaggedHit { t, tagged, at });
            }
        }
    };
    if r.mask & world.mesh_layer() != 0 {
        for t in 0..world.triangle_count() {
            test(world.triangle(t).expect("in range"), t as u32, 0);
        }
        if let Some(h) = world.heightfield() {
            for t in 0..h.triangle_count() as u32 {
                test(h.triangle(t), t | KIND_HEIGHTFIELD, t);
            }
        }
    }
    // Instances: every placed triangle whose shape's triangle is not degenerate either.
    for (i, inst) in world.instances().slots().iter().enumerate() {
        let Some(inst) = inst.as_ref().filter(|x| x.placement.layer & r.mask != 0) else { continue };
        for (t, local) in inst.shape.mesh.corners.iter().enumerate() {
            if !degenerate(local) {
                test(inst.corners(t as u32), KIND_INSTANCE | i as u32, t as u32);
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
            let [p, q, s] = match h.kind() {
                ContactKind::Body => {
                    let i = h.id() as usize;
                    let normal = r.ellipsoid_normal(b.center[i], &b.shape(i).unit, t);
                    return RayHit {
                        distance: t,
                        kind: h.kind(),
                        id: h.id(),
                        triangle: h.triangle(),
                        point: r.point(t),
                        normal,
                    };
                }
                ContactKind::Heightfield => world.heightfield().expect("a heightfield hit").triangle(h.at),
                ContactKind::Triangle => world.triangle(h.id() as usize).expect("in range"),
                ContactKind::Instance => {
                    world.instance_triangle(crate::collide::InstanceId(h.id()), h.at as usize).expect("in range")
                }
            };
            let normal = r.triangle_normal(p, q, s);
            RayHit { distance: t, kind: h.kind(), id: h.id(), triangle: h.triangle(), point: r.point(t), normal }
        })
        .collect())
}
