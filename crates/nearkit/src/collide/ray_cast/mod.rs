//! Batched ray casts against a collision world: each ray's first hit, or all its hits in
//! order, on the static mesh, the heightfield, the instances and the bodies, exact and bit
//! for bit the same on the CPU and CUDA.
//!
//! - A ray is `origin + t·u` for t in [0, `max_distance`], u its direction made unit (on the
//!   host, before either backend sees it), so t is a distance in world units. It meets the
//!   static mesh and the heightfield when `mask & world.mesh_layer() != 0`, and a body when
//!   `mask & body.layer != 0`.
//! - Triangles: a watertight test (Woop, Benthin and Wald 2013) in f64, no fused
//!   multiply-add: two triangles facing the ray leave no gap along their shared edge (a ray
//!   grazing a fold of the surface seen edge-on may pass it). Degenerate triangles (corners
//!   collinear: (b − a) × (c − a) = 0 in f64) are never hit; nor is a triangle by a ray in
//!   its plane. Bodies: the ray in the body's frame, where it is the unit ball; a ray that
//!   starts inside (or on) a body hits it at t = 0, with the normal −u.
//! - Acceleration (`bvh`): a binary radix tree over the Morton codes of the primitives'
//!   centres, each node holding its two children's boxes in f32, rounded outwards. The
//!   mesh's tree is built once per mesh and kept by the collider; the bodies' is built per
//!   call, over the live bodies. Every hit is clamped into the interval where the ray is in
//!   its primitive's own box, and a box's interval only grows with the box (rounding is
//!   monotone), so pruning a node can never lose a hit: the answers are those of a brute
//!   force over every primitive, with the same tests (`intersect`).
//! - The heightfield has no tree: a ray walks the grid's squares under it (`heightfield`).
//! - `cpu` and `cuda` (with `ray_cast.cu`) traverse the same trees, a ray at a time; neither
//!   the order of traversal nor the order of the rays (the CPU casts big batches in the Morton
//!   order of their origins) changes the answers.

pub(crate) mod bvh;
pub(crate) mod cpu;
pub(crate) mod cuda;
pub(crate) mod heightfield;
pub(crate) mod instances;
pub(crate) mod intersect;
pub(crate) mod wide;

use std::sync::{Arc, Weak};

use crate::collide::ellipsoid::V3;
use crate::collide::world::{ContactKind, StaticMesh, Versions, World, ID_BITS};
use crate::error::{Error, Result};
use crate::runtime::cuda::Gpu;

use bvh::MeshBvh;
use intersect::UnitRay;

/// A ray: the points `origin + t·direction/|direction|` for t from 0 to `max_distance`, so
/// distances are in world units whatever the direction's length. It hits the static mesh's
/// triangles, the heightfield's and the bodies.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ray {
    /// Where it starts, in world coordinates.
    pub origin: V3,
    /// Which way it goes; any finite, nonzero length. It is made unit first (components
    /// below 2^-1022 of its length count as 0).
    pub direction: V3,
    /// How far it reaches: 0 or more, `f64::INFINITY` for no limit.
    pub max_distance: f64,
    /// The layers it hits: the static mesh and the heightfield when
    /// `mask & world.mesh_layer() != 0`, a body when
    /// `mask & body.layer != 0`.
    pub mask: u32,
}

impl Ray {
    /// A ray from `origin` along `direction` up to `max_distance`, hitting every layer.
    pub fn new(origin: V3, direction: V3, max_distance: f64) -> Self {
        Ray { origin, direction, max_distance, mask: u32::MAX }
    }

    /// The same ray, hitting only the layers of `mask`.
    pub fn with_mask(self, mask: u32) -> Self {
        Ray { mask, ..self }
    }
}

/// Where a ray meets a triangle of the static mesh or of the heightfield, or a body.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RayHit {
    /// Distance from the ray's origin, in world units (0 for a ray that starts inside a body).
    pub distance: f64,
    /// What was hit.
    pub kind: ContactKind,
    /// The triangle's index in the mesh or in the heightfield, the body's id, or the
    /// instance's.
    pub id: u32,
    /// The triangle hit in its own mesh (as [`Contact::triangle`](crate::collide::Contact):
    /// `id` for the mesh and the heightfield, the shape's triangle for an instance,
    /// [`NO_ID`](crate::NO_ID) for a body).
    pub triangle: u32,
    /// The hit point, `origin + distance·unit direction`.
    pub point: V3,
    /// The unit surface normal there, facing the ray (`normal · direction ≤ 0`): a triangle's
    /// plane normal, or the body's outward normal; −direction for a ray starting inside a body.
    pub normal: V3,
}

impl RayHit {
    /// (distance, kind, id, triangle): the order hits come in (at equal distances the mesh's
    /// triangles, then the heightfield's, then bodies, then instances; then smaller ids).
    pub fn order_key(&self) -> (f64, ContactKind, u32, u32) {
        (self.distance, self.kind, self.id, self.triangle)
    }
}

/// Every ray's hits, in rows: ray `i`'s are `hits[offsets[i]..offsets[i + 1]]`, sorted by
/// (distance, kind, id) and cut at the limit asked for.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RayHits {
    /// `rays + 1` row starts.
    pub offsets: Vec<usize>,
    /// The hits, row after row.
    pub hits: Vec<RayHit>,
}

impl RayHits {
    /// How many rays (rows).
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Whether there are no rays.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Ray `i`'s hits, nearest first.
    pub fn row(&self, i: usize) -> &[RayHit] {
        &self.hits[self.offsets[i]..self.offsets[i + 1]]
    }
}

/// A hit as both backends find it: the distance and the id, tagged with its kind's bits
/// (so (distance, tagged id) orders hits by (distance, kind, id)), and where its primitive
/// lies in its tree (to finish the hits kept; an instance's: the shape's triangle, which
/// breaks ties between one instance's triangles).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct TaggedHit {
    pub t: f64,
    pub tagged: u32,
    pub at: u32,
}

impl TaggedHit {
    /// Whether this hit comes before `other`.
    #[inline(always)]
    pub fn before(&self, other: &TaggedHit) -> bool {
        self.t < other.t
            || (self.t == other.t
                && (self.tagged < other.tagged || (self.tagged == other.tagged && self.at < other.at)))
    }

    pub fn kind(&self) -> ContactKind {
        ContactKind::of_tagged(self.tagged)
    }

    pub fn id(&self) -> u32 {
        self.tagged & ID_BITS
    }

    /// `RayHit::triangle`, from the id of the triangle a mesh hit names.
    pub fn triangle(&self) -> u32 {
        match self.kind() {
            ContactKind::Body => crate::NO_ID,
            ContactKind::Instance => self.at,
            _ => self.id(),
        }
    }
}

/// An error naming the first ray that cannot be made unit (`UnitRay::new`), if any.
pub(crate) fn check_rays(rays: &[Ray]) -> Result<()> {
    match crate::runtime::cpu::first_where(rays, |r| UnitRay::check(r).is_err()) {
        Some(i) => Err(ray_error(i, UnitRay::check(&rays[i]).expect_err("a bad ray"))),
        None => Ok(()),
    }
}

pub(crate) fn ray_error(i: usize, m: String) -> Error {
    Error::InvalidArgument(format!("ray {i}: {m}"))
}

/// Refits of the bodies' tree in a row (bodies moved, nothing else changed) before it is
/// built afresh: a refitted tree loosens as bodies move away from where it was built.
const REFITS: u32 = 16;

/// The mesh's tree, built for one mesh (by identity: the world's `Arc`, held weakly so that
/// its address is not reused while the tree is kept).
pub(crate) struct CachedMeshBvh {
    pub mesh: Weak<StaticMesh>,
    pub bvh: Arc<MeshBvh>,
}

/// What a collider keeps for ray casts: the mesh's tree (rebuilt when the world's mesh
/// changes) and, on a GPU, its device copy and buffers.
pub(crate) struct RayCaster {
    mesh: Option<CachedMeshBvh>,
    /// The bodies' tree, the world (id and versions) it was made for, and the times it was
    /// refitted since it was built: a world whose bodies did not change since the last call
    /// is not searched afresh, and one whose bodies only moved is refitted.
    bodies: Option<((u64, Versions), Arc<bvh::BodyBvh>, u32)>,
    cuda: Option<Box<cuda::CudaRayCaster>>,
    /// The trees of the world's shapes (for its instances).
    shapes: instances::ShapeTrees,
    /// CPU: the portable code even where the CPU has AVX2.
    portable: bool,
}

impl RayCaster {
    /// A ray caster on the CPU (`portable`: without AVX2 even where the CPU has it; the
    /// same hits), or on `gpu`.
    pub fn new(gpu: Option<&Arc<Gpu>>, portable: bool) -> Self {
        let cuda = gpu.map(|g| Box::new(cuda::CudaRayCaster::new(g.clone())));
        RayCaster { mesh: None, bodies: None, cuda, shapes: instances::ShapeTrees::default(), portable }
    }

    /// The same caster, printing each GPU batch's phase times to stderr.
    pub fn with_profile(mut self, profile: bool) -> Self {
        if let Some(c) = &mut self.cuda {
            c.profile = profile;
        }
        self
    }

    /// The tree of `world`'s mesh (`None` without one), built if the mesh changed.
    fn mesh_bvh(&mut self, world: &World) -> Result<Option<Arc<MeshBvh>>> {
        let Some(mesh) = world.mesh() else {
            self.mesh = None;
            return Ok(None);
        };
        if let Some(c) = &self.mesh {
            if std::ptr::eq(c.mesh.as_ptr(), Arc::as_ptr(mesh)) {
                return Ok(Some(c.bvh.clone()));
            }
        }
        let bvh = Arc::new(MeshBvh::build(&mesh.corners)?);
        self.mesh = Some(CachedMeshBvh { mesh: Arc::downgrade(mesh), bvh: bvh.clone() });
        Ok(Some(bvh))
    }

    /// The tree of `world`'s live bodies: the last one if they did not change since the
    /// last call, refitted if they only moved (up to `REFITS` times in a row), else built.
    fn body_bvh(&mut self, world: &World) -> Result<Arc<bvh::BodyBvh>> {
        let key = (world.id(), world.versions());
        if let Some((k, b, n)) = self.bodies.take() {
            if k == key {
                self.bodies = Some((k, b.clone(), n));
                return Ok(b);
            }
            if k.0 == key.0 && k.1.shapes == key.1.shapes && n < REFITS {
                let b = Arc::new(b.refit(world)?);
                self.bodies = Some((key, b.clone(), n + 1));
                return Ok(b);
            }
        }
        let b = Arc::new(bvh::BodyBvh::build(world)?);
        self.bodies = Some((key, b.clone(), 0));
        Ok(b)
    }

    /// Each ray's first hit into `out` (see [`crate::collide::Collider::ray_casts_into`]).
    pub fn first_hits_into(&mut self, world: &World, rays: &[Ray], out: &mut Vec<Option<RayHit>>) -> Result<()> {
        check_rays(rays)?;
        let mesh = self.mesh_bvh(world)?;
        let bodies = self.body_bvh(world)?;
        self.shapes.update(world.instances())?;
        let shapes = &self.shapes;
        match &mut self.cuda {
            None => {
                cpu::first_hits_into(world, mesh.as_deref(), &bodies, shapes, rays, self.portable, out);
                Ok(())
            }
            Some(c) => c.first_hits_into(world, mesh.as_ref(), &bodies, shapes, rays, out),
        }
    }

    /// Each ray's hits, nearest first, at most `limit` a ray (see
    /// [`crate::collide::Collider::ray_casts_all`]).
    pub fn all_hits(&mut self, world: &World, rays: &[Ray], limit: usize) -> Result<RayHits> {
        if self.cuda.is_none() {
            check_rays(rays)?;
        }
        let mesh = self.mesh_bvh(world)?;
        let bodies = self.body_bvh(world)?;
        self.shapes.update(world.instances())?;
        let shapes = &self.shapes;
        match &mut self.cuda {
            None => cpu::all_hits(world, mesh.as_deref(), &bodies, shapes, rays, limit, self.portable),
            Some(c) => c.all_hits(world, mesh.as_ref(), &bodies, shapes, rays, limit),
        }
    }
}
