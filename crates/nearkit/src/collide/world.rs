//! The collision world: a static triangle mesh and moving ellipsoid bodies, kept as structure
//! of arrays that both colliders read (the CPU directly, CUDA by uploading what changed).

use std::collections::BTreeSet;
use std::sync::Arc;

use super::contact_ellipsoid_triangle::ContactGeometry;
pub(crate) use super::ellipsoid::check_pose;
use super::ellipsoid::{Shape, V3};
use super::heightfield::Heightfield;
use super::instance::{InstanceId, Instances, Placement, ShapeId};
pub(crate) use super::static_mesh::StaticMesh;
use crate::error::{Error, Result};
use crate::geometry::mesh::Mesh;

/// A handle to a body; ids of removed bodies are reused, lowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BodyId(pub u32);

/// An ellipsoid body. `orientation` is a quaternion (x, y, z, w) turning the body's axes
/// into the world's; `radii` are along the body's axes. A body collides with another when
/// each one's `layer` bits meet the other's `mask`, and with the mesh when its mask meets the
/// world's mesh layer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Body {
    /// The center, in world coordinates.
    pub center: V3,
    /// Semi-axes along the body's own x, y and z.
    pub radii: V3,
    /// Quaternion (x, y, z, w); need not be of unit length.
    pub orientation: [f64; 4],
    /// Used by [`World::integrate`] only.
    pub velocity: V3,
    /// The layer bits this body is in (default 1).
    pub layer: u32,
    /// The layers this body collides with (default all).
    pub mask: u32,
}

impl Body {
    /// A sphere of `radius` at `center`.
    pub fn sphere(center: V3, radius: f64) -> Self {
        Self::ellipsoid(center, [radius; 3], [0.0, 0.0, 0.0, 1.0])
    }

    /// An ellipsoid of semi-axes `radii`, turned by `orientation`, at `center`.
    pub fn ellipsoid(center: V3, radii: V3, orientation: [f64; 4]) -> Self {
        Body { center, radii, orientation, velocity: [0.0; 3], layer: 1, mask: u32::MAX }
    }

    /// The same body in `layer`, colliding with the layers of `mask`.
    pub fn with_layers(self, layer: u32, mask: u32) -> Self {
        Body { layer, mask, ..self }
    }
}

/// Whether bodies with these layers and masks collide.
#[inline(always)]
pub(crate) fn layers_meet(layer_a: u32, mask_a: u32, layer_b: u32, mask_b: u32) -> bool {
    (layer_a & mask_b) != 0 && (layer_b & mask_a) != 0
}

/// The bodies as structure of arrays, slot `i` holding `BodyId(i)` (see [`Body`] for the
/// fields); removed bodies' slots are not `alive` until reused.
#[derive(Clone, Debug, Default)]
pub struct Bodies {
    /// Centers.
    pub center: Vec<V3>,
    /// Quaternions (x, y, z, w).
    pub orientation: Vec<[f64; 4]>,
    /// Velocities (for [`World::integrate`]).
    pub velocity: Vec<V3>,
    /// Semi-axes.
    pub radii: Vec<V3>,
    /// Layer bits.
    pub layer: Vec<u32>,
    /// Layers collided with.
    pub mask: Vec<u32>,
    /// Whether the slot holds a body.
    pub alive: Vec<bool>,
}

impl Bodies {
    /// Slots, alive or not.
    pub fn len(&self) -> usize {
        self.center.len()
    }

    /// Whether there are no slots.
    pub fn is_empty(&self) -> bool {
        self.center.is_empty()
    }

    /// The layer bits of the bodies there are, joined (0: no bodies): a query whose mask
    /// misses them all need not look for bodies.
    pub(crate) fn layers_present(&self) -> u32 {
        self.alive.iter().zip(&self.layer).filter(|(a, _)| **a).fold(0, |acc, (_, l)| acc | l)
    }

    pub(crate) fn shape(&self, i: usize) -> Shape {
        Shape::new(self.radii[i], self.orientation[i])
    }
}

/// Bumped on every change a collider must upload; colliders compare them with what they
/// hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Versions {
    pub mesh: u64,
    pub poses: u64,
    pub shapes: u64,
    pub instances: u64,
}

/// A static triangle mesh and ellipsoid bodies: what a [`Collider`](crate::collide::Collider)
/// finds the contacts of. Coordinates are f64, in metres by convention.
pub struct World {
    /// Unique in the process: tells colliders apart the worlds they are handed.
    id: u64,
    cell_size: f64,
    mesh_layer: u32,
    mesh: Option<Arc<StaticMesh>>,
    heightfield: Option<Arc<Heightfield>>,
    instances: Instances,
    bodies: Bodies,
    free: BTreeSet<u32>,
    versions: Versions,
}

impl World {
    /// An empty world with cubic grid cells of `cell_size` (1 m suits human-sized bodies). Cells should
    /// be about the size of a body: much smaller makes big bodies enter many cells.
    pub fn new(cell_size: f64) -> Result<Self> {
        if !(cell_size.is_finite() && cell_size > 0.0) {
            return Err(Error::InvalidArgument(format!("cell size must be a positive number, got {cell_size}")));
        }
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Ok(World {
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            cell_size,
            mesh_layer: 1,
            mesh: None,
            heightfield: None,
            instances: Instances::new(cell_size),
            bodies: Bodies::default(),
            free: BTreeSet::new(),
            versions: Versions::default(),
        })
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The grid's cell size.
    pub fn cell_size(&self) -> f64 {
        self.cell_size
    }

    /// Sets the static mesh (degenerate triangles are allowed; they collide as segments).
    pub fn set_mesh(&mut self, mesh: &Mesh<f64>) -> Result<()> {
        self.mesh = Some(Arc::new(StaticMesh::new(mesh, self.cell_size)?));
        self.versions.mesh += 1;
        Ok(())
    }

    pub(crate) fn mesh(&self) -> Option<&Arc<StaticMesh>> {
        self.mesh.as_ref()
    }

    /// Sets the terrain, kept as its heights (its contacts are of kind
    /// [`ContactKind::Heightfield`]); it may sit beside a mesh. Its samples must lie within
    /// the grid's range.
    pub fn set_heightfield(&mut self, heightfield: Heightfield) -> Result<()> {
        let (rows, cols) = (heightfield.rows(), heightfield.cols());
        for corner in [heightfield.vertex(0, 0), heightfield.vertex(rows - 1, cols - 1)] {
            super::hash_grid::CellRange::of_box(corner, corner, self.cell_size)?;
        }
        self.heightfield = Some(Arc::new(heightfield));
        self.versions.mesh += 1;
        Ok(())
    }

    /// The terrain, if one is set.
    pub fn heightfield(&self) -> Option<&Heightfield> {
        self.heightfield.as_deref()
    }

    /// The terrain as shared (whose identity tells a kept device copy apart).
    pub(crate) fn heightfield_shared(&self) -> Option<&Arc<Heightfield>> {
        self.heightfield.as_ref()
    }

    /// Adds a shape: a mesh in its own frame, which instances place in the world (it is
    /// gridded and treed once, however many instances place it).
    ///
    /// ```
    /// use nearkit::collide::{Body, Collider, ContactKind, Placement, World};
    /// use nearkit::{Mesh, Points};
    /// let mut world = World::new(1.0).unwrap();
    /// let tile = Mesh {
    ///     vertices: Points::from_rows(&[[-1.0, -1.0, 0.0], [1.0, -1.0, 0.0], [0.0, 1.0, 0.0]]),
    ///     triangles: vec![[0, 1, 2]],
    /// };
    /// let shape = world.add_shape(&tile).unwrap();
    /// // Turned a quarter about x, at (5, 0, 0): the tile stands in the plane y = 0.
    /// let h = std::f64::consts::FRAC_1_SQRT_2;
    /// let wall = world.add_instance(Placement::new(shape, [5.0, 0.0, 0.0], [h, 0.0, 0.0, h])).unwrap();
    /// world.add_body(Body::sphere([5.0, 0.25, 0.0], 0.5)).unwrap();
    /// let contacts = Collider::cpu().contacts(&world).unwrap();
    /// assert_eq!((contacts[0].kind, contacts[0].other, contacts[0].triangle), (ContactKind::Instance, wall.0, 0));
    /// assert!((contacts[0].depth - 0.25).abs() < 1e-6);
    /// ```
    pub fn add_shape(&mut self, mesh: &Mesh<f64>) -> Result<ShapeId> {
        self.instances.add_shape(mesh)
    }

    /// Removes a shape no instance places (an error names an instance that does).
    pub fn remove_shape(&mut self, id: ShapeId) -> Result<()> {
        self.instances.remove_shape(id)
    }

    /// The triangles of a shape; an error if there is no such shape.
    pub fn shape_triangle_count(&self, id: ShapeId) -> Result<usize> {
        self.instances.shape_triangles(id)
    }

    /// Places a shape; only the instances' top-level grid is rebuilt. An error if the shape
    /// does not exist, the pose is not finite or the placed shape lies beyond the grid's range.
    pub fn add_instance(&mut self, placement: Placement) -> Result<InstanceId> {
        Ok(self.add_instances(&[placement])?[0])
    }

    /// Places many shapes at once (one rebuild of the top level, where one at a time would
    /// rebuild it for each); on a bad placement (named) none is placed.
    pub fn add_instances(&mut self, placements: &[Placement]) -> Result<Vec<InstanceId>> {
        let ids = self.instances.add(placements)?;
        self.versions.instances += 1;
        Ok(ids)
    }

    /// Moves (or re-layers, or re-shapes) one instance.
    pub fn set_instance(&mut self, id: InstanceId, placement: Placement) -> Result<()> {
        self.set_instances(&[id], &[placement])
    }

    /// New placements for many instances at once (one rebuild of the top level); on a bad id
    /// or placement nothing changes.
    pub fn set_instances(&mut self, ids: &[InstanceId], placements: &[Placement]) -> Result<()> {
        self.instances.set(ids, placements)?;
        self.versions.instances += 1;
        Ok(())
    }

    /// Removes an instance; its id is free for reuse.
    pub fn remove_instance(&mut self, id: InstanceId) -> Result<()> {
        self.instances.remove(id)?;
        self.versions.instances += 1;
        Ok(())
    }

    /// Where instance `id` is, if it exists.
    pub fn instance(&self, id: InstanceId) -> Option<Placement> {
        self.instances.get(id).map(|i| i.placement)
    }

    /// Instances placed.
    pub fn instance_count(&self) -> usize {
        self.instances.len()
    }

    /// The ids of the instances placed, ascending.
    pub fn instance_ids(&self) -> Vec<InstanceId> {
        self.instances.ids().map(InstanceId).collect()
    }

    /// Triangle `t` of instance `id`'s shape, placed: the corners every query tests.
    pub fn instance_triangle(&self, id: InstanceId, t: usize) -> Option<[V3; 3]> {
        let inst = self.instances.get(id)?;
        (t < inst.shape.mesh.corners.len()).then(|| inst.corners(t as u32))
    }

    pub(crate) fn instances(&self) -> &Instances {
        &self.instances
    }

    /// Triangles of the static mesh (0 without one).
    pub fn triangle_count(&self) -> usize {
        self.mesh.as_ref().map_or(0, |m| m.corners.len())
    }

    /// The corners of triangle `t` of the static mesh.
    pub fn triangle(&self, t: usize) -> Option<[V3; 3]> {
        self.mesh.as_ref().and_then(|m| m.corners.get(t).copied())
    }

    /// The layer bits of the mesh and the heightfield (default 1): bodies whose mask meets them
    /// collide with them.
    pub fn set_mesh_layer(&mut self, layer: u32) {
        self.mesh_layer = layer;
    }

    /// The layer bits of the mesh.
    pub fn mesh_layer(&self) -> u32 {
        self.mesh_layer
    }

    /// Every body slot, as structure of arrays.
    pub fn bodies(&self) -> &Bodies {
        &self.bodies
    }

    pub(crate) fn versions(&self) -> Versions {
        self.versions
    }

    /// Bodies alive.
    pub fn body_count(&self) -> usize {
        self.bodies.alive.iter().filter(|&&a| a).count()
    }

    /// Adds a body (reusing the lowest free id); an error if its pose or radii are not usable.
    pub fn add_body(&mut self, body: Body) -> Result<BodyId> {
        check_pose(body.center, body.orientation)?;
        if !body.radii.iter().all(|r| r.is_finite() && *r > 0.0) {
            return Err(Error::InvalidArgument(format!("body radii {:?} must be positive numbers", body.radii)));
        }
        self.check_in_grid(body.center, body.radii, body.orientation)?;
        if !body.velocity.iter().all(|v| v.is_finite()) {
            return Err(Error::InvalidArgument(format!("body velocity {:?} is not finite", body.velocity)));
        }
        let b = &mut self.bodies;
        let id = match self.free.pop_first() {
            Some(i) => {
                let i = i as usize;
                b.center[i] = body.center;
                b.orientation[i] = body.orientation;
                b.velocity[i] = body.velocity;
                b.radii[i] = body.radii;
                b.layer[i] = body.layer;
                b.mask[i] = body.mask;
                b.alive[i] = true;
                i
            }
            None => {
                if b.len() >= u32::MAX as usize / 4 {
                    return Err(Error::InvalidArgument("too many bodies".into()));
                }
                b.center.push(body.center);
                b.orientation.push(body.orientation);
                b.velocity.push(body.velocity);
                b.radii.push(body.radii);
                b.layer.push(body.layer);
                b.mask.push(body.mask);
                b.alive.push(true);
                b.len() - 1
            }
        };
        self.versions.poses += 1;
        self.versions.shapes += 1;
        Ok(BodyId(id as u32))
    }

    fn slot(&self, id: BodyId) -> Result<usize> {
        let i = id.0 as usize;
        if i < self.bodies.len() && self.bodies.alive[i] {
            Ok(i)
        } else {
            Err(Error::InvalidArgument(format!("there is no body {}", id.0)))
        }
    }

    /// Removes a body; its id is free for reuse.
    pub fn remove_body(&mut self, id: BodyId) -> Result<()> {
        let i = self.slot(id)?;
        self.bodies.alive[i] = false;
        self.free.insert(i as u32);
        self.versions.shapes += 1;
        Ok(())
    }

    /// Body `id`, if alive.
    pub fn body(&self, id: BodyId) -> Option<Body> {
        let i = self.slot(id).ok()?;
        let b = &self.bodies;
        Some(Body {
            center: b.center[i],
            radii: b.radii[i],
            orientation: b.orientation[i],
            velocity: b.velocity[i],
            layer: b.layer[i],
            mask: b.mask[i],
        })
    }

    /// Moves and turns one body.
    pub fn set_pose(&mut self, id: BodyId, center: V3, orientation: [f64; 4]) -> Result<()> {
        check_pose(center, orientation)?;
        let i = self.slot(id)?;
        self.check_in_grid(center, self.bodies.radii[i], orientation)?;
        self.bodies.center[i] = center;
        self.bodies.orientation[i] = orientation;
        self.versions.poses += 1;
        Ok(())
    }

    /// The per-tick batch update: new centers and orientations for many bodies at once; on a
    /// bad pose or id nothing changes.
    pub fn set_poses(&mut self, ids: &[BodyId], centers: &[V3], orientations: &[[f64; 4]]) -> Result<()> {
        if ids.len() != centers.len() || ids.len() != orientations.len() {
            return Err(Error::InvalidArgument(format!(
                "set_poses got {} ids, {} centers and {} orientations",
                ids.len(),
                centers.len(),
                orientations.len()
            )));
        }
        // All or nothing: every pose is checked before any is written.
        for ((&id, &c), &q) in ids.iter().zip(centers).zip(orientations) {
            check_pose(c, q)?;
            let i = self.slot(id)?;
            self.check_in_grid(c, self.bodies.radii[i], q).map_err(|e| body_error(i, e))?;
        }
        for ((&id, &c), &q) in ids.iter().zip(centers).zip(orientations) {
            let i = id.0 as usize;
            self.bodies.center[i] = c;
            self.bodies.orientation[i] = q;
        }
        self.versions.poses += 1;
        Ok(())
    }

    /// The velocity [`World::integrate`] moves the body by.
    pub fn set_velocity(&mut self, id: BodyId, velocity: V3) -> Result<()> {
        if !velocity.iter().all(|v| v.is_finite()) {
            return Err(Error::InvalidArgument(format!("velocity {velocity:?} is not finite")));
        }
        let i = self.slot(id)?;
        self.bodies.velocity[i] = velocity;
        Ok(())
    }

    /// The body's layer and the layers it collides with.
    pub fn set_layers(&mut self, id: BodyId, layer: u32, mask: u32) -> Result<()> {
        let i = self.slot(id)?;
        self.bodies.layer[i] = layer;
        self.bodies.mask[i] = mask;
        self.versions.shapes += 1;
        Ok(())
    }

    /// An error where a body of `radii` at (`center`, `orientation`) would reach beyond the
    /// grid's range of cells (a tick would refuse it).
    fn check_in_grid(&self, center: V3, radii: V3, orientation: [f64; 4]) -> Result<()> {
        let reach = radii[0].max(radii[1]).max(radii[2]);
        let surely_inside = (super::hash_grid::CELL_LIMIT - 2) as f64 * self.cell_size;
        if center.iter().all(|c| c.abs() + reach < surely_inside) {
            return Ok(());
        }
        let (lo, hi) = super::ellipsoid::body_box(&Shape::new(radii, orientation), center);
        super::hash_grid::CellRange::of_box(lo, hi, self.cell_size).map(|_| ())
    }

    /// Moves every body by its velocity over `dt` seconds. An error, with no body moved,
    /// when `dt` is not finite or a body would leave the grid's range (or its center
    /// overflow): the error names the first such body.
    pub fn integrate(&mut self, dt: f64) -> Result<()> {
        if !dt.is_finite() {
            return Err(Error::InvalidArgument(format!("dt must be a finite number, got {dt}")));
        }
        let b = &self.bodies;
        let moved = |i: usize| {
            let (c, v) = (b.center[i], b.velocity[i]);
            [c[0] + v[0] * dt, c[1] + v[1] * dt, c[2] + v[2] * dt]
        };
        for i in (0..b.len()).filter(|&i| b.alive[i]) {
            let c = moved(i);
            check_center(i, c)?;
            self.check_in_grid(c, b.radii[i], b.orientation[i]).map_err(|e| body_error(i, e))?;
        }
        let centers: Vec<V3> = (0..b.len()).map(moved).collect();
        self.bodies.center = centers;
        self.versions.poses += 1;
        Ok(())
    }

    /// Direct access to centers and orientations for a bulk update; the caller keeps them
    /// finite (the colliders check).
    pub fn poses_mut(&mut self) -> (&mut [V3], &mut [[f64; 4]]) {
        self.versions.poses += 1;
        (&mut self.bodies.center, &mut self.bodies.orientation)
    }
}

/// What a contact's `other` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ContactKind {
    /// A triangle of the static mesh.
    Triangle,
    /// A triangle of the heightfield (`Heightfield` says how they are numbered).
    Heightfield,
    /// Another body.
    Body,
    /// A triangle of an instance (`other` the instance, `triangle` its shape's triangle).
    Instance,
}

impl ContactKind {
    /// `triangle`, `heightfield` or `body`.
    pub fn name(self) -> &'static str {
        match self {
            ContactKind::Triangle => "triangle",
            ContactKind::Heightfield => "heightfield",
            ContactKind::Body => "body",
            ContactKind::Instance => "instance",
        }
    }

    /// The kind's bits in a packed id (`PackedContact::other`).
    #[inline(always)]
    pub(crate) fn tag(self) -> u32 {
        match self {
            ContactKind::Triangle => 0,
            ContactKind::Heightfield => KIND_HEIGHTFIELD,
            ContactKind::Body => KIND_BODY,
            ContactKind::Instance => KIND_INSTANCE,
        }
    }

    /// The kind of a packed id.
    #[inline(always)]
    pub(crate) fn of_tagged(other: u32) -> Self {
        match other >> 30 {
            0 => ContactKind::Triangle,
            1 => ContactKind::Heightfield,
            2 => ContactKind::Body,
            _ => ContactKind::Instance,
        }
    }
}

/// One overlap. For two bodies it is reported once, with `body` the smaller id. `normal`
/// (unit) moves `body` out of `other`, by `depth`; `point` is in world coordinates.
///
/// The narrow phase runs in f64; normal, depth and the point's offset from the body's center
/// are then rounded to f32 (halving what a GPU sends back), so the point keeps sub-micrometre
/// precision anywhere in a world of any size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Contact {
    /// The body (its `BodyId`).
    pub body: u32,
    /// What `other` is.
    pub kind: ContactKind,
    /// The triangle's id, the other body's id, or the instance's id.
    pub other: u32,
    /// The triangle touched in its own mesh: `other` for the static mesh and the
    /// heightfield, the shape's triangle for an instance, [`NO_ID`] for a body.
    pub triangle: u32,
    /// Unit normal that moves `body` out.
    pub normal: [f32; 3],
    /// How far `body` must move along `normal`.
    pub depth: f32,
    /// The contact point, in world coordinates.
    pub point: V3,
}

impl Contact {
    /// The contact of `body` (centered at `center`) from the narrow phase's geometry.
    /// `triangle` is read for an instance only (see [`Contact::triangle`]).
    #[cfg(feature = "test-hooks")]
    pub(crate) fn new(
        body: u32,
        kind: ContactKind,
        other: u32,
        triangle: u32,
        center: V3,
        g: &ContactGeometry,
    ) -> Self {
        let p = PackedContact::new(body, kind, other, g);
        Contact::from_parts(body, kind, other, triangle, center, p.normal, p.depth, p.offset)
    }

    /// As `new`, from the rounded parts (how the CUDA collider's results arrive).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(crate) fn from_parts(
        body: u32,
        kind: ContactKind,
        other: u32,
        triangle: u32,
        center: V3,
        normal: [f32; 3],
        depth: f32,
        offset: [f32; 3],
    ) -> Self {
        let point = [center[0] + offset[0] as f64, center[1] + offset[1] as f64, center[2] + offset[2] as f64];
        let triangle = match kind {
            ContactKind::Triangle | ContactKind::Heightfield => other,
            ContactKind::Body => NO_ID,
            ContactKind::Instance => triangle,
        };
        Contact { body, kind, other, triangle, normal, depth, point }
    }

    /// (body, kind, other, triangle): the order contacts come in.
    pub fn order_key(&self) -> (u32, ContactKind, u32, u32) {
        (self.body, self.kind, self.other, self.triangle)
    }
}

/// A contact as both colliders produce it (36 bytes, what a GPU sends back): `other` carries
/// the kind in its top two bits (`KIND_BODY`, `KIND_HEIGHTFIELD`, both: `KIND_INSTANCE`), so
/// sorting a body's contacts by it gives (kind, other) order; the point is an offset from the
/// body's center. An instance's contact holds, for its id, an index into the tick's
/// (instance, triangle) pairs (`InstancePart`), numbered in (body, instance, triangle) order.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct PackedContact {
    pub body: u32,
    pub other: u32,
    pub normal: [f32; 3],
    pub depth: f32,
    pub offset: [f32; 3],
}

/// The bit of `PackedContact::other` that marks a body.
pub(crate) const KIND_BODY: u32 = 0x8000_0000;
/// The bit of `PackedContact::other` that marks a heightfield's triangle.
pub(crate) const KIND_HEIGHTFIELD: u32 = 0x4000_0000;
/// The bits of `PackedContact::other` that mark an instance's triangle (both kinds' bits).
pub(crate) const KIND_INSTANCE: u32 = 0xc000_0000;
/// The bits of `PackedContact::other` that hold the id.
pub(crate) const ID_BITS: u32 = 0x3fff_ffff;

impl PackedContact {
    #[inline]
    pub fn new(body: u32, kind: ContactKind, other: u32, g: &ContactGeometry) -> Self {
        PackedContact {
            body,
            other: other | kind.tag(),
            normal: g.normal.map(|v| v as f32),
            depth: g.depth as f32,
            offset: g.point.map(|v| v as f32),
        }
    }

    #[inline]
    pub fn kind(&self) -> ContactKind {
        ContactKind::of_tagged(self.other)
    }

    /// The full contact, its point placed by the body's center (an instance's pair from
    /// `parts`).
    #[inline]
    pub fn unpack(&self, centers: &[V3], parts: &[InstancePart]) -> Contact {
        let c = centers[self.body as usize];
        let kind = self.kind();
        let (other, triangle) = match kind {
            ContactKind::Instance => {
                let [i, t] = parts[(self.other & ID_BITS) as usize];
                (i, t)
            }
            _ => (self.other & ID_BITS, 0),
        };
        Contact::from_parts(self.body, kind, other, triangle, c, self.normal, self.depth, self.offset)
    }
}

/// An instance's contact's (instance, triangle).
pub(crate) type InstancePart = [u32; 2];

/// What a contact, a hit or an overlap names when there is nothing to name (a body's
/// `triangle`; the C API's `NK_NO_ID`).
pub use crate::geometry::points::NO_ID;

/// A tick's contacts, sorted by (body, kind, other): a view of the collider's own buffer
/// (valid until its next tick), unpacked on access.
#[derive(Clone, Copy)]
pub struct Contacts<'a> {
    packed: &'a [PackedContact],
    parts: &'a [InstancePart],
    centers: &'a [V3],
}

impl<'a> Contacts<'a> {
    pub(crate) fn new(packed: &'a [PackedContact], parts: &'a [InstancePart], world: &'a World) -> Self {
        Contacts { packed, parts, centers: &world.bodies().center }
    }

    /// How many contacts.
    pub fn len(&self) -> usize {
        self.packed.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.packed.is_empty()
    }

    /// Contact `i`.
    pub fn get(&self, i: usize) -> Contact {
        self.packed[i].unpack(self.centers, self.parts)
    }

    /// Every contact, in order.
    pub fn iter(&self) -> impl Iterator<Item = Contact> + 'a {
        let (centers, parts) = (self.centers, self.parts);
        self.packed.iter().map(move |p| p.unpack(centers, parts))
    }

    /// Every contact, unpacked into a vector.
    pub fn to_vec(&self) -> Vec<Contact> {
        self.iter().collect()
    }

    /// How many contacts of this kind.
    pub fn count(&self, kind: ContactKind) -> usize {
        self.packed.iter().filter(|p| p.kind() == kind).count()
    }
}

/// A swept query (a shape cast): a body of this shape moving from `from` to `to`, against the
/// static mesh, the heightfield and the bodies. It meets the mesh and the heightfield when
/// `mask` meets the world's mesh layer, and a body when `mask` meets the body's layer (the
/// body's own mask is not asked); `ignore` names a body it passes through (the one it stands
/// for, say).
///
/// ```
/// use nearkit::collide::{BodyId, Sweep};
/// let s = Sweep::sphere(0.5, [0.0, 0.0, 1.0], [4.0, 0.0, 1.0]).with_mask(0b10).ignoring(BodyId(7));
/// assert_eq!((s.mask, s.ignore), (0b10, Some(BodyId(7))));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sweep {
    /// The body's semi-axes.
    pub radii: V3,
    /// Its quaternion (x, y, z, w), the same all the way.
    pub orientation: [f64; 4],
    /// Its center at the start.
    pub from: V3,
    /// Its center at the end.
    pub to: V3,
    /// The layers it meets (default all).
    pub mask: u32,
    /// A body it does not meet (default none).
    pub ignore: Option<BodyId>,
}

/// The first thing a sweep touches: at `from + toi·(to − from)`. On equal times the mesh comes
/// first, then the heightfield, then bodies, then instances, then the smaller id and triangle
/// (as for rays). `point` is in world coordinates.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SweepResult {
    /// Time of impact, 0 to 1 along the sweep.
    pub toi: f64,
    /// What was touched: a triangle of the mesh ([`ContactKind::Triangle`]) or of the
    /// heightfield, or a body.
    pub kind: ContactKind,
    /// The triangle's, the body's or the instance's id.
    pub other: u32,
    /// The triangle touched in its own mesh (as [`Contact::triangle`]; [`NO_ID`] for a body).
    pub triangle: u32,
    /// Where, in world coordinates.
    pub point: V3,
    /// The unit normal there that pushes the sweeping body back: the triangle's facing it, or
    /// the direction from the body touched.
    pub normal: V3,
}

impl Sweep {
    /// A body of `radii`, turned by `orientation`, moving from `from` to `to`; it meets every
    /// layer.
    pub fn new(radii: V3, orientation: [f64; 4], from: V3, to: V3) -> Self {
        Sweep { radii, orientation, from, to, mask: u32::MAX, ignore: None }
    }

    /// A sphere of `radius` moving from `from` to `to`.
    pub fn sphere(radius: f64, from: V3, to: V3) -> Self {
        Self::new([radius; 3], [0.0, 0.0, 0.0, 1.0], from, to)
    }

    /// The same sweep, meeting only the layers of `mask`.
    pub fn with_mask(self, mask: u32) -> Self {
        Sweep { mask, ..self }
    }

    /// The same sweep, passing through `body`.
    pub fn ignoring(self, body: BodyId) -> Self {
        Sweep { ignore: Some(body), ..self }
    }

    /// Checks the sweep, and that its box fits the grid of cells of `cell_size`
    /// (`hash_grid::query_cells`).
    pub(crate) fn check(&self, cell_size: f64) -> Result<()> {
        check_pose(self.from, self.orientation)?;
        check_pose(self.to, self.orientation)?;
        if !self.radii.iter().all(|r| r.is_finite() && *r > 0.0) {
            return Err(Error::InvalidArgument(format!("sweep radii {:?} must be positive numbers", self.radii)));
        }
        let (lo, hi) = self.bounds();
        super::hash_grid::query_cells(lo, hi, cell_size)?;
        Ok(())
    }

    /// The box the sweep moves through: its body's box at the start and at the end, joined.
    pub(crate) fn bounds(&self) -> (V3, V3) {
        let shape = Shape::new(self.radii, self.orientation);
        let (lo0, hi0) = super::ellipsoid::body_box(&shape, self.from);
        let (lo1, hi1) = super::ellipsoid::body_box(&shape, self.to);
        (std::array::from_fn(|a| lo0[a].min(lo1[a])), std::array::from_fn(|a| hi0[a].max(hi1[a])))
    }
}

/// Checks a body's center is finite (`body` names it in the error).
pub(crate) fn check_center(body: usize, c: V3) -> Result<()> {
    if c.iter().all(|v| v.is_finite()) {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!("body {body}: its center {c:?} is not finite")))
    }
}

/// An error about one body, naming it (the CUDA collider's errors name the body too).
pub(crate) fn body_error(i: usize, e: Error) -> Error {
    match e {
        Error::InvalidArgument(m) => Error::InvalidArgument(format!("body {i}: {m}")),
        e => e,
    }
}
