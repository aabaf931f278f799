//! The CPU collider: each body (in parallel) tests the triangles and the higher-numbered
//! bodies of its candidate lists, which are kept from tick to tick (`candidate_lists`). The
//! numeric work runs four at a time in AVX2 (`*_avx2`, f64 lanes, the scalar code's
//! operations in its order), with the portable scalar code elsewhere.

#[cfg(target_arch = "x86_64")]
mod avx2_f64;
#[cfg(target_arch = "x86_64")]
mod body_shapes_avx2;
pub(crate) mod candidate_lists;
#[cfg(target_arch = "x86_64")]
mod contact_ellipsoid_ellipsoid_avx2;
#[cfg(target_arch = "x86_64")]
mod contact_ellipsoid_triangle_avx2;
#[cfg(target_arch = "x86_64")]
mod passed_triangles_avx2;

use rayon::prelude::*;

use crate::collide::body_grid::BodyFinder;
use crate::collide::box_f32::box_f32;
use crate::collide::contact_ellipsoid_ellipsoid::contact_ellipsoid_ellipsoid;
use crate::collide::contact_ellipsoid_triangle::{contact_ellipsoid_triangle, ContactGeometry};
use crate::collide::ellipsoid::{add, body_box, sub, Shape, V3};
use crate::collide::hash_grid::{boxes_overlap, CellRange, CELL_LIMIT};
use crate::collide::instance::triangle_meets_box;
use crate::collide::sweep_ellipsoid_ellipsoid::sweep_ellipsoid_ellipsoid;
use crate::collide::sweep_ellipsoid_triangle::{sweep_ellipsoid_triangle, SweepHit};
use crate::collide::world::{
    body_error, check_center, layers_meet, ContactKind, InstancePart, PackedContact, Sweep, SweepResult, World,
    ID_BITS, KIND_INSTANCE, NO_ID,
};
use crate::error::Result;
use crate::runtime::cpu::{prefetch, RowPtr};
use candidate_lists::{BodyBox, CandidateLists, PlacedTriangle, ShapeBox, TriangleFilter};

/// Whether the CPU has AVX2.
fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx2");
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Bodies per work unit.
const CHUNK: usize = 64;

/// A chunk's contacts (one sorted run per body, in body order) and its instance contacts'
/// (instance, triangle) pairs (the contacts number them from 0).
type ChunkContacts = (Vec<PackedContact>, Vec<InstancePart>);

/// The listed triangles `tris` whose f32 boxes meet the body's (lo, hi) and whose planes lie
/// within its reach, in `kept` (without branches: about half pass, unpredictably); returns
/// how many. `avx2`: four triangles at a time (`passed_triangles_avx2`, the same triangles).
#[inline(always)]
fn passed_triangles(
    avx2: bool,
    sigma: [f64; 6],
    (lo, hi): ([f32; 3], [f32; 3]),
    c: V3,
    tris: &[u32],
    filter: &[TriangleFilter],
    kept: &mut [u32],
) -> usize {
    #[cfg(target_arch = "x86_64")]
    if avx2 {
        // SAFETY: the caller has seen AVX2 on this CPU.
        return unsafe { passed_triangles_avx2::passed_triangles(sigma, lo, hi, c, tris, filter, kept) };
    }
    let _ = avx2;
    let [xx, yy, zz, xy, xz, yz] = sigma;
    let mut k = 0;
    for &t in tris {
        let f = &filter[t as usize];
        let boxes = (lo[0] <= f.hi[0])
            & (f.lo[0] <= hi[0])
            & (lo[1] <= f.hi[1])
            & (f.lo[1] <= hi[1])
            & (lo[2] <= f.hi[2])
            & (f.lo[2] <= hi[2]);
        // The body reaches h(n) = √(nᵀΣn) from its center along the plane's normal n: farther
        // from the plane, with a margin for rounding, it cannot touch the triangle.
        let [nx, ny, nz, off] = f.plane;
        let d = (nx * c[0] + ny * c[1] + nz * c[2]) - off;
        let reach2 = xx * nx * nx + yy * ny * ny + zz * nz * nz + 2.0 * (xy * nx * ny + xz * nx * nz + yz * ny * nz);
        let e = d.abs() - 1e-9 * (off.abs() + 1.0);
        let far = (e > 0.0) & (e * e > reach2 * (1.0 + 4e-9));
        kept[k] = t;
        k += (boxes & !far) as usize;
    }
    k
}

/// Bodies `first..first + shapes.len()`: each live one's shape, box and Σ (`None` for empty
/// slots). An error when a center is not finite or a box lies beyond the world's grid.
fn body_shapes(
    world: &World,
    avx2: bool,
    first: usize,
    shapes: &mut [Option<Shape>],
    boxes: &mut [Option<BodyBox>],
    sigma: &mut [[f64; 6]],
) -> Result<()> {
    let b = world.bodies();
    let cell_size = world.cell_size();
    // Coordinates this small are surely inside the grid's range; others get the exact check.
    let surely_inside = (CELL_LIMIT - 2) as f64 * cell_size;
    let scalar = |i: usize| -> ShapeBox {
        let s = b.shape(i);
        let bx = body_box(&s, b.center[i]);
        let sg = s.sigma();
        (s, bx, sg)
    };
    let mut k = 0;
    while k < shapes.len() {
        let m = (shapes.len() - k).min(4);
        let ids = first + k..first + k + m;
        for i in ids.clone() {
            if b.alive[i] {
                check_center(i, b.center[i])?;
            }
        }
        let mut made: [Option<ShapeBox>; 4] = [None; 4];
        #[cfg(not(target_arch = "x86_64"))]
        let _ = avx2;
        #[cfg(target_arch = "x86_64")]
        if avx2 && m == 4 && ids.clone().all(|i| b.alive[i]) {
            let i = ids.start;
            let at = |v: &[V3]| [v[i], v[i + 1], v[i + 2], v[i + 3]];
            let q = [b.orientation[i], b.orientation[i + 1], b.orientation[i + 2], b.orientation[i + 3]];
            // SAFETY: the CPU has AVX2.
            made = unsafe { body_shapes_avx2::shapes(&at(&b.radii), &q, &at(&b.center)) }.map(Some);
        }
        for (j, i) in ids.enumerate() {
            if made[j].is_none() && b.alive[i] {
                made[j] = Some(scalar(i));
            }
            let slot = k + j;
            (shapes[slot], boxes[slot]) = (None, None);
            if let Some((s, (lo, hi), sg)) = made[j] {
                // The world's grid must hold the box (as on the GPU), though the lists grid
                // their own way.
                if !lo.iter().chain(&hi).all(|x| x.abs() < surely_inside) {
                    CellRange::of_box(lo, hi, cell_size).map_err(|e| body_error(i, e))?;
                }
                (shapes[slot], boxes[slot], sigma[slot]) = (Some(s), Some((lo, hi)), sg);
            }
        }
        k += m;
    }
    Ok(())
}

/// What a tick's narrow phase reads.
struct Tick<'a> {
    world: &'a World,
    /// Whether the AVX2 code runs.
    avx2: bool,
    shapes: &'a [Option<Shape>],
    boxes: &'a [Option<BodyBox>],
    sigma: &'a [[f64; 6]],
    lists: &'a CandidateLists,
}

/// A body pair that passed the box test, and their contact if any.
type BodyPair = (u32, u32, Option<ContactGeometry>);

/// Buffers a chunk of bodies reuses.
#[derive(Default)]
struct Scratch {
    kept: Vec<u32>,
    pairs: Vec<BodyPair>,
    terrain: TerrainScratch,
    placed: PlacedScratch,
}

/// A body's candidate triangles of instances: (instance, triangle) and placed corners.
#[derive(Default)]
struct PlacedScratch {
    found: Vec<PlacedTriangle>,
    corners: Vec<[V3; 3]>,
    order: Vec<u32>,
}

/// A body's candidate triangles of the heightfield: ids and corners, and 0, 1, 2, … (their
/// places in `corners`, as the AVX2 code takes them).
#[derive(Default)]
struct TerrainScratch {
    ids: Vec<u32>,
    corners: Vec<[V3; 3]>,
    order: Vec<u32>,
}

impl Tick<'_> {
    /// The contacts of bodies `chunk`, one sorted run per body: for each body, its listed
    /// triangles (ascending), then its listed higher-numbered bodies (ascending).
    fn chunk_contacts(&self, chunk: std::ops::Range<u32>, scratch: &mut Scratch) -> ChunkContacts {
        let b = self.world.bodies();
        // The chunk's body pairs first, so that the pair test fills its four lanes from
        // several bodies (a body has about one pair past the box test).
        let pairs = &mut scratch.pairs;
        pairs.clear();
        for i in chunk.clone() {
            let iu = i as usize;
            if i + 4 < chunk.end {
                prefetch(self.lists.bodies[iu + 4].as_ptr(), 1);
            }
            let Some((lo, hi)) = &self.boxes[iu] else { continue };
            for &o in &self.lists.bodies[iu] {
                let ou = o as usize;
                if o <= i || !layers_meet(b.layer[iu], b.mask[iu], b.layer[ou], b.mask[ou]) {
                    continue;
                }
                if matches!(&self.boxes[ou], Some((olo, ohi)) if boxes_overlap(lo, hi, olo, ohi)) {
                    pairs.push((i, o, None));
                }
            }
        }
        self.pair_contacts(pairs);
        // Room for a typical chunk up front (a body touches a few triangles and bodies).
        let mut found = Vec::with_capacity(8 * chunk.len());
        let mut parts = Vec::new();
        let mut next_pair = 0;
        for i in chunk.clone() {
            if i + 2 < chunk.end {
                // Each list is its own allocation: ask for them two bodies ahead.
                let ahead = i as usize + 2;
                prefetch(self.lists.triangles[ahead].as_ptr(), 1);
                prefetch(self.lists.bodies[ahead].as_ptr(), 1);
            }
            if i + 1 < chunk.end {
                self.prefetch_triangles(i as usize + 1);
            }
            self.triangle_contacts(i as usize, &mut scratch.kept, &mut found);
            self.heightfield_contacts(i as usize, &mut scratch.terrain, &mut found);
            let body_start = found.len();
            while next_pair < pairs.len() && pairs[next_pair].0 == i {
                if let (_, o, Some(g)) = &pairs[next_pair] {
                    found.push(PackedContact::new(i, ContactKind::Body, *o, g));
                }
                next_pair += 1;
            }
            found[body_start..].sort_unstable_by_key(|p| p.other);
            self.instance_contacts(i as usize, &mut scratch.placed, &mut found, &mut parts);
        }
        (found, parts)
    }

    /// Body `i`'s contacts with the instances' triangles under its box, in (instance,
    /// triangle) order, their pairs appended to `parts`.
    fn instance_contacts(
        &self,
        i: usize,
        scratch: &mut PlacedScratch,
        out: &mut Vec<PackedContact>,
        parts: &mut Vec<InstancePart>,
    ) {
        let (Some(me), Some((lo, hi))) = (&self.shapes[i], &self.boxes[i]) else { return };
        match self.lists.instance_parts(i, self.world.bodies().mask[i]) {
            // The listed triangles under the body's box: what a fresh search offers, or more
            // (the exact tests decide).
            Some(listed) => {
                scratch.found.clear();
                scratch.found.extend(listed.iter().filter(|(_, c)| triangle_meets_box(c, lo, hi)).copied());
                placed_contacts(self.world, i, me, self.avx2, scratch, out, parts)
            }
            None => body_instance_contacts(self.world, i, me, lo, hi, self.avx2, scratch, out, parts),
        }
    }

    /// Each pair's contact.
    fn pair_contacts(&self, pairs: &mut [BodyPair]) {
        let centers = &self.world.bodies().center;
        let shape = |i: u32| self.shapes[i as usize].as_ref().expect("bodies with boxes have shapes");
        #[cfg(target_arch = "x86_64")]
        if self.avx2 {
            use contact_ellipsoid_ellipsoid_avx2::{contacts, Pair};
            for group in pairs.chunks_mut(4) {
                let lanes: [Pair; 4] = std::array::from_fn(|l| {
                    let (i, o, _) = group[l.min(group.len() - 1)];
                    Pair {
                        a: shape(i),
                        sigma_a: &self.sigma[i as usize],
                        b: shape(o),
                        sigma_b: &self.sigma[o as usize],
                        r: sub(centers[o as usize], centers[i as usize]),
                    }
                });
                // SAFETY: the CPU has AVX2.
                let found = unsafe { contacts(&lanes[..group.len()]) };
                for (p, g) in group.iter_mut().zip(found) {
                    p.2 = g;
                }
            }
            return;
        }
        for (i, o, g) in pairs {
            *g = contact_ellipsoid_ellipsoid(shape(*i), shape(*o), sub(centers[*o as usize], centers[*i as usize]));
        }
    }

    /// Body `i`'s contacts with its listed triangles, in their order.
    fn triangle_contacts(&self, i: usize, kept: &mut Vec<u32>, out: &mut Vec<PackedContact>) {
        let b = self.world.bodies();
        let (Some(me), Some((lo, hi))) = (&self.shapes[i], &self.boxes[i]) else { return };
        let Some(m) = self.world.mesh().filter(|_| b.mask[i] & self.world.mesh_layer() != 0) else { return };
        let c = b.center[i];
        let lists = self.lists;
        let tris = &lists.triangles[i];
        kept.resize(kept.len().max(tris.len().next_multiple_of(4)), 0);
        let n = passed_triangles(self.avx2, self.sigma[i], box_f32(lo, hi), c, tris, &lists.triangle_filter, kept);
        let kept = &kept[..n];
        #[cfg(target_arch = "x86_64")]
        if self.avx2 {
            // SAFETY: the CPU has AVX2.
            return unsafe {
                contact_ellipsoid_triangle_avx2::triangle_contacts(me, c, kept, &m.corners, |t, g| {
                    out.push(PackedContact::new(i as u32, ContactKind::Triangle, t, &g))
                })
            };
        }
        for &t in kept {
            let corners = m.corners[t as usize].map(|p| sub(p, c));
            if let Some(g) = contact_ellipsoid_triangle(me, corners) {
                out.push(PackedContact::new(i as u32, ContactKind::Triangle, t, &g));
            }
        }
    }

    /// Body `i`'s contacts with the heightfield's triangles under its box, ascending.
    fn heightfield_contacts(&self, i: usize, scratch: &mut TerrainScratch, out: &mut Vec<PackedContact>) {
        let b = self.world.bodies();
        let (Some(me), Some((lo, hi))) = (&self.shapes[i], &self.boxes[i]) else { return };
        let Some(h) = self.world.heightfield().filter(|_| b.mask[i] & self.world.mesh_layer() != 0) else { return };
        let c = b.center[i];
        let TerrainScratch { ids, corners, order } = scratch;
        ids.clear();
        corners.clear();
        h.overlapping(lo, hi, |t, tri| {
            ids.push(t);
            corners.push(tri);
        });
        let mut found = |k: u32, g: ContactGeometry| {
            out.push(PackedContact::new(i as u32, ContactKind::Heightfield, ids[k as usize], &g))
        };
        #[cfg(target_arch = "x86_64")]
        if self.avx2 {
            while order.len() < corners.len() {
                order.push(order.len() as u32);
            }
            // SAFETY: the CPU has AVX2.
            return unsafe {
                contact_ellipsoid_triangle_avx2::triangle_contacts(me, c, &order[..corners.len()], corners, found)
            };
        }
        let _ = order;
        for (k, tri) in corners.iter().enumerate() {
            if let Some(g) = contact_ellipsoid_triangle(me, tri.map(|p| sub(p, c))) {
                found(k as u32, g);
            }
        }
    }

    /// Asks for what body `i`'s triangle tests will read (its listed triangles lie in random
    /// places of a mesh larger than the cache), a body ahead.
    #[inline(always)]
    fn prefetch_triangles(&self, i: usize) {
        if let Some(m) = self.world.mesh() {
            for &t in &self.lists.triangles[i] {
                prefetch(&self.lists.triangle_filter[t as usize], 1);
                prefetch((&m.corners[t as usize] as *const [V3; 3]).cast::<[f64; 9]>(), 1);
            }
        }
    }
}

/// The CPU collider: its buffers and candidate lists are kept between ticks, so a steady
/// world allocates almost nothing per tick and re-lists only the bodies that left their fat
/// boxes (`candidate_lists`).
#[derive(Default)]
pub(crate) struct CpuCollider {
    /// Whether the AVX2 code runs (the CPU has it, and the options allow it).
    avx2: bool,
    /// Phase times on stderr, every tick.
    profile: bool,
    packed: Vec<PackedContact>,
    shapes: Vec<Option<Shape>>,
    boxes: Vec<Option<BodyBox>>,
    /// Each body's Σ (`Shape::sigma`), for the reach along a plane's normal.
    sigma: Vec<[f64; 6]>,
    lists: CandidateLists,
    /// The tick's instance contacts' (instance, triangle) pairs.
    parts: Vec<InstancePart>,
}

impl CpuCollider {
    /// `portable`: run the portable code even where the CPU has AVX2 (the same contacts, bit
    /// for bit).
    pub fn new(portable: bool, profile: bool) -> Self {
        Self { avx2: !portable && has_avx2(), profile, ..Self::default() }
    }

    /// Every contact of the world, sorted by (body, kind, other), and the instance contacts'
    /// (instance, triangle) pairs.
    pub fn contacts(&mut self, world: &World) -> Result<(&[PackedContact], &[InstancePart])> {
        let b = world.bodies();
        let n = b.len();
        let t0 = std::time::Instant::now();
        self.shapes.resize(n, None);
        self.boxes.resize(n, None);
        self.sigma.resize(n, [0.0; 6]);
        const SHAPE_CHUNK: usize = 256;
        self.shapes
            .par_chunks_mut(SHAPE_CHUNK)
            .zip(self.boxes.par_chunks_mut(SHAPE_CHUNK))
            .zip(self.sigma.par_chunks_mut(SHAPE_CHUNK))
            .enumerate()
            .try_for_each(|(c, ((shapes, boxes), sigma))| {
                body_shapes(world, self.avx2, c * SHAPE_CHUNK, shapes, boxes, sigma)
            })?;
        let t1 = t0.elapsed();
        self.lists.update(world, &self.boxes)?;
        let t2 = t0.elapsed();
        let tick = Tick {
            world,
            avx2: self.avx2,
            shapes: &self.shapes,
            boxes: &self.boxes,
            sigma: &self.sigma,
            lists: &self.lists,
        };
        // Each chunk of bodies: their contacts, one sorted run per body.
        let mut chunks: Vec<ChunkContacts> = (0..n.div_ceil(CHUNK))
            .into_par_iter()
            .map_init(Scratch::default, |scratch, c| {
                tick.chunk_contacts((c * CHUNK) as u32..(n.min((c + 1) * CHUNK)) as u32, scratch)
            })
            .collect();
        let t3 = t0.elapsed();
        // Instance contacts number their pairs within their chunk: from 0 of all, in order.
        self.parts.clear();
        for (found, parts) in &mut chunks {
            if !parts.is_empty() {
                let base = self.parts.len() as u32;
                for c in found.iter_mut().filter(|c| c.other >= KIND_INSTANCE) {
                    c.other = KIND_INSTANCE | ((c.other & ID_BITS) + base);
                }
                self.parts.append(parts);
            }
        }
        // The chunks hold consecutive bodies, in order, each body's run in its place: the
        // contacts in body order are the chunks' lists one after the other.
        let (mut start, mut total) = (Vec::with_capacity(chunks.len()), 0);
        for (found, _) in &chunks {
            start.push(total);
            total += found.len();
        }
        let out = &mut self.packed;
        out.clear();
        out.reserve(total);
        let dst = RowPtr(out.as_mut_ptr());
        chunks.par_iter().zip(&start).for_each(|((found, _), &at)| {
            // SAFETY: [at, at + found.len()) lies within the reserved capacity and is written by
            // this chunk only.
            unsafe { dst.copy_from(at, found) };
        });
        // SAFETY: the chunks wrote all of [0, total).
        unsafe { out.set_len(total) };
        if self.profile {
            eprintln!(
                "profile cpu collider: boxes {t1:?}, lists {:?} ({} re-listed; {} triangles, {} bodies listed), narrow {:?}, \
                 gather {:?}",
                t2 - t1,
                self.lists.relisted,
                self.lists.triangles.iter().map(Vec::len).sum::<usize>(),
                self.lists.bodies.iter().map(Vec::len).sum::<usize>(),
                t3 - t2,
                t0.elapsed() - t3
            );
        }
        Ok((&self.packed, &self.parts))
    }
}

/// Body `i`'s (shape `me`, box [lo, hi]) contacts with the instances' triangles, in
/// (instance, triangle) order: each packed with `KIND_INSTANCE` and the index of its pair in
/// `parts` (where it is appended).
#[allow(clippy::too_many_arguments)]
fn body_instance_contacts(
    world: &World,
    i: usize,
    me: &Shape,
    lo: &V3,
    hi: &V3,
    avx2: bool,
    scratch: &mut PlacedScratch,
    out: &mut Vec<PackedContact>,
    parts: &mut Vec<InstancePart>,
) {
    let instances = world.instances();
    if instances.is_empty() {
        return;
    }
    let c = world.bodies().center[i];
    let found = &mut scratch.found;
    found.clear();
    // The box lies in the grid's range: the body's box was checked.
    let reach = me.radii[0].max(me.radii[1]).max(me.radii[2]);
    instances
        .overlapping_near(lo, hi, world.bodies().mask[i], Some((c, reach)), |inst, t, tri| found.push(([inst, t], tri)))
        .expect("a body's box lies in the grid's range");
    found.sort_unstable_by_key(|f| f.0);
    placed_contacts(world, i, me, avx2, scratch, out, parts)
}

/// Body `i`'s (shape `me`) contacts with the placed triangles in `scratch.found`, in their
/// order ((instance, triangle)).
fn placed_contacts(
    world: &World,
    i: usize,
    me: &Shape,
    avx2: bool,
    scratch: &mut PlacedScratch,
    out: &mut Vec<PackedContact>,
    parts: &mut Vec<InstancePart>,
) {
    let c = world.bodies().center[i];
    let PlacedScratch { found, corners, order } = scratch;
    if found.is_empty() {
        return;
    }
    corners.clear();
    corners.extend(found.iter().map(|f| f.1));
    let mut emit = |k: u32, g: ContactGeometry| {
        out.push(PackedContact::new(i as u32, ContactKind::Instance, parts.len() as u32, &g));
        parts.push(found[k as usize].0);
    };
    #[cfg(target_arch = "x86_64")]
    if avx2 {
        while order.len() < corners.len() {
            order.push(order.len() as u32);
        }
        // SAFETY: the CPU has AVX2.
        return unsafe {
            contact_ellipsoid_triangle_avx2::triangle_contacts(me, c, &order[..corners.len()], corners, emit)
        };
    }
    let _ = (avx2, &order);
    for (k, tri) in corners.iter().enumerate() {
        if let Some(g) = contact_ellipsoid_triangle(me, tri.map(|p| sub(p, c))) {
            emit(k as u32, g);
        }
    }
}

/// An error about sweep `i`, naming it.
pub(crate) fn sweep_error(i: usize, e: crate::error::Error) -> crate::error::Error {
    match e {
        crate::error::Error::InvalidArgument(m) => crate::error::Error::InvalidArgument(format!("sweep {i}: {m}")),
        e => e,
    }
}

/// Each sweep's first contact with the mesh, the heightfield, a body or an instance (`None`:
/// it moves freely).
pub(crate) fn sweeps(world: &World, sweeps: &[Sweep]) -> Result<Vec<Option<SweepResult>>> {
    let cell_size = world.cell_size();
    for (i, s) in sweeps.iter().enumerate() {
        s.check(cell_size).map_err(|e| sweep_error(i, e))?;
    }
    let (mesh, terrain, mesh_layer) = (world.mesh(), world.heightfield(), world.mesh_layer());
    let b = world.bodies();
    let body_layers = b.layers_present();
    let instances = world.instances();
    if mesh.is_none() && terrain.is_none() && body_layers == 0 && instances.is_empty() {
        return Ok(vec![None; sweeps.len()]);
    }
    let bodies = if sweeps.iter().any(|s| s.mask & body_layers != 0) {
        // A grid's cells about as wide as the sweeps' boxes: each then walks a few cells (any
        // cell size finds the same bodies).
        let mut widest: Vec<f64> = sweeps
            .iter()
            .map(|s| {
                let (lo, hi) = s.bounds();
                (0..3).map(|a| hi[a] - lo[a]).fold(0.0, f64::max)
            })
            .collect();
        let middle = widest.len() / 2;
        let median = *widest.select_nth_unstable_by(middle, f64::total_cmp).1;
        Some(BodyFinder::new(world, sweeps.len(), median.clamp(cell_size, 4.0 * cell_size))?)
    } else {
        None
    };
    sweeps
        .par_iter()
        .enumerate()
        .map(|(i, s)| {
            let shape = Shape::new(s.radii, s.orientation);
            let (lo, hi) = s.bounds();
            let motion = sub(s.to, s.from);
            // The best hit, with its tagged id and triangle: ties go to the smaller tag, which
            // puts the mesh before the heightfield before bodies before instances.
            let mut best: Option<(SweepHit, u64)> = None;
            let mut offer = |h: SweepHit, tagged: u32, triangle: u32| {
                let key = (tagged as u64) << 32 | triangle as u64;
                if best.is_none_or(|(b, bk)| h.toi < b.toi || (h.toi == b.toi && key < bk)) {
                    best = Some((h, key));
                }
            };
            if s.mask & mesh_layer != 0 {
                if let Some(m) = mesh {
                    m.grid.overlapping(&lo, &hi, &m.lo, &m.hi, |t| {
                        if let Some(h) =
                            sweep_ellipsoid_triangle(&shape, m.corners[t as usize].map(|p| sub(p, s.from)), motion)
                        {
                            offer(h, t, t);
                        }
                    })?;
                }
                if let Some(hf) = terrain {
                    hf.overlapping(&lo, &hi, |t, corners| {
                        if let Some(h) = sweep_ellipsoid_triangle(&shape, corners.map(|p| sub(p, s.from)), motion) {
                            offer(h, ContactKind::Heightfield.tag() | t, t);
                        }
                    });
                }
            }
            instances
                .overlapping(&lo, &hi, s.mask, |inst, t, corners| {
                    if let Some(h) = sweep_ellipsoid_triangle(&shape, corners.map(|p| sub(p, s.from)), motion) {
                        offer(h, ContactKind::Instance.tag() | inst, t);
                    }
                })
                .map_err(|e| sweep_error(i, e))?;
            if let Some(grid) = bodies.as_ref().filter(|_| s.mask & body_layers != 0) {
                let ignore = s.ignore.map(|id| id.0 as usize);
                grid.overlapping(&lo, &hi, |o| {
                    if s.mask & b.layer[o] != 0 && Some(o) != ignore {
                        if let Some(h) =
                            sweep_ellipsoid_ellipsoid(&shape, &b.shape(o), sub(b.center[o], s.from), motion)
                        {
                            offer(h, ContactKind::Body.tag() | o as u32, NO_ID);
                        }
                    }
                })
                .map_err(|e| sweep_error(i, e))?;
            }
            Ok(best.map(|(h, key)| {
                let tagged = (key >> 32) as u32;
                SweepResult {
                    toi: h.toi,
                    kind: ContactKind::of_tagged(tagged),
                    other: tagged & ID_BITS,
                    triangle: key as u32,
                    point: add(s.from, h.point),
                    normal: h.normal,
                }
            }))
        })
        .collect()
}
