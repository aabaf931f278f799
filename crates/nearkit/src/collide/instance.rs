//! Meshes placed many times: a shape is a mesh in its own frame, gridded once (ray casts keep
//! a tree of it too, `ray_cast::instances`); an instance places a shape with a position and
//! a rotation. Adding, moving or removing instances rebuilds only the top level, a tree over
//! the instances' world boxes (`box_tree`).
//!
//! An instance's triangle is, by definition, its shape's corners placed by
//! [`Instance::place`] (R·v + p in f64, no fused multiply-add): the narrow phases test those
//! world corners exactly as they test the static mesh's, so the results are those of a brute
//! force over every placed triangle. The shape's own grid and tree only pick candidates, in
//! the shape's frame, with boxes widened by a margin far above the rounding of the
//! transforms, so that no triangle the world test would keep is missed.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::box_f32::box_f32;
use super::box_tree::{self, Boxed, Tree};
use super::ellipsoid::check_pose;
use super::ellipsoid::{rotation, times, transpose_times, V3};
use super::hash_grid::{boxes_overlap, CellRange};
use super::static_mesh::StaticMesh;
use crate::error::{Error, Result};
use crate::geometry::mesh::Mesh;

/// A handle to a shape (a mesh that instances place); ids of removed shapes are reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ShapeId(pub u32);

/// A handle to an instance (a shape placed in the world); ids of removed instances are
/// reused, lowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InstanceId(pub u32);

/// Where an instance is: its shape, placed at `position` turned by `orientation`, in `layer`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Placement {
    /// The shape placed.
    pub shape: ShapeId,
    /// Where the shape's origin goes, in world coordinates.
    pub position: V3,
    /// Quaternion (x, y, z, w) turning the shape's axes into the world's; need not be of unit
    /// length.
    pub orientation: [f64; 4],
    /// The layer bits of its triangles (default 1): a body collides with them when its mask
    /// meets them, a query when its mask does.
    pub layer: u32,
}

impl Placement {
    /// `shape` at `position`, turned by `orientation`, in layer 1.
    pub fn new(shape: ShapeId, position: V3, orientation: [f64; 4]) -> Self {
        Placement { shape, position, orientation, layer: 1 }
    }

    /// The same placement in `layer`.
    pub fn with_layer(self, layer: u32) -> Self {
        Placement { layer, ..self }
    }
}

/// A shape: its mesh in its own frame, gridded at the world's cell size (ray casts keep its
/// tree, `ray_cast::instances`).
pub(crate) struct MeshShape {
    pub mesh: StaticMesh,
    /// The box of its corners.
    pub lo: V3,
    pub hi: V3,
    /// The largest magnitude of a corner's coordinate.
    pub reach: f64,
}

/// Relative widening of the boxes the shapes' frames are searched with: far above the
/// rounding of a transform (a few 2^-53), far below anything that costs time.
pub(crate) const MARGIN: f64 = 1e-9;

/// Shapes of this many triangles or fewer are scanned, not walked by their grid, for a box.
pub(crate) const SCAN_BELOW: usize = 32;

/// A placed shape, with its rotation matrix and a world box holding every placed corner.
#[derive(Clone)]
pub(crate) struct Instance {
    pub placement: Placement,
    /// World = rot · shape + position (row-major).
    pub rot: [[f64; 3]; 3],
    pub shape: Arc<MeshShape>,
    pub lo: V3,
    pub hi: V3,
}

impl Instance {
    fn new(placement: Placement, shape: Arc<MeshShape>) -> Self {
        let rot = rotation(placement.orientation);
        let p = placement.position;
        // The shape's box turned: center R·c + p, half extents |R|·h; widened by the margin.
        let c: V3 = std::array::from_fn(|a| 0.5 * (shape.lo[a] + shape.hi[a]));
        let h: V3 = std::array::from_fn(|a| 0.5 * (shape.hi[a] - shape.lo[a]));
        let wc = times(&rot, c);
        let m = MARGIN * (shape.reach + p.iter().fold(0.0f64, |x, v| x.max(v.abs())) + 1e-300);
        let lo = std::array::from_fn(|a| {
            let e = rot[a][0].abs() * h[0] + rot[a][1].abs() * h[1] + rot[a][2].abs() * h[2];
            wc[a] + p[a] - e - m
        });
        let hi = std::array::from_fn(|a| {
            let e = rot[a][0].abs() * h[0] + rot[a][1].abs() * h[1] + rot[a][2].abs() * h[2];
            wc[a] + p[a] + e + m
        });
        Instance { placement, rot, shape, lo, hi }
    }

    /// A shape point in world coordinates: R·v + p, in this order of operations (the
    /// definition of a placed triangle).
    #[inline(always)]
    pub fn place(&self, v: V3) -> V3 {
        let r = &self.rot;
        let p = &self.placement.position;
        [
            (r[0][0] * v[0] + r[0][1] * v[1] + r[0][2] * v[2]) + p[0],
            (r[1][0] * v[0] + r[1][1] * v[1] + r[1][2] * v[2]) + p[1],
            (r[2][0] * v[0] + r[2][1] * v[1] + r[2][2] * v[2]) + p[2],
        ]
    }

    /// Triangle `t` of the shape, placed.
    #[inline(always)]
    pub fn corners(&self, t: u32) -> [V3; 3] {
        self.shape.mesh.corners[t as usize].map(|v| self.place(v))
    }

    /// Rᵀ·d: a world offset in the shape's axes.
    #[inline(always)]
    pub fn local_dir(&self, d: V3) -> V3 {
        transpose_times(&self.rot, d)
    }

    /// A box in the shape's frame holding the preimage of the world box [lo, hi] (widened by
    /// the margin), cut to the shape's own box; `None` when they do not meet.
    fn local_box(&self, lo: &V3, hi: &V3) -> Option<(V3, V3)> {
        let p = &self.placement.position;
        let d: V3 = std::array::from_fn(|a| 0.5 * (lo[a] + hi[a]) - p[a]);
        let h: V3 = std::array::from_fn(|a| 0.5 * (hi[a] - lo[a]));
        let c = self.local_dir(d);
        let r = &self.rot;
        let big = |v: &V3| v.iter().fold(0.0f64, |x, y| x.max(y.abs()));
        let m = MARGIN * (big(&d) + big(&h) + big(p) + self.shape.reach + 1e-300);
        let s = &self.shape;
        let mut llo = [0.0; 3];
        let mut lhi = [0.0; 3];
        for a in 0..3 {
            let e = r[0][a].abs() * h[0] + r[1][a].abs() * h[1] + r[2][a].abs() * h[2] + m;
            llo[a] = (c[a] - e).max(s.lo[a]);
            lhi[a] = (c[a] + e).min(s.hi[a]);
            if !(llo[a] <= lhi[a]) {
                return None;
            }
        }
        Some((llo, lhi))
    }
}

/// Whether placed triangle `corners` has a box meeting [lo, hi] (the test every backend and
/// the brute force apply before a narrow phase).
#[inline(always)]
pub(crate) fn triangle_meets_box(corners: &[V3; 3], lo: &V3, hi: &V3) -> bool {
    (0..3).all(|a| {
        let tlo = corners[0][a].min(corners[1][a]).min(corners[2][a]);
        let thi = corners[0][a].max(corners[1][a]).max(corners[2][a]);
        lo[a] <= thi && tlo <= hi[a]
    })
}

/// The world's shapes and instances, and the grid over the instances' boxes.
pub(crate) struct Instances {
    cell_size: f64,
    shapes: Vec<Option<Arc<MeshShape>>>,
    placed: Vec<Option<Instance>>,
    free_shapes: BTreeSet<u32>,
    free: BTreeSet<u32>,
    /// The live instances, and their boxes, as the grid numbers them.
    pub live: Vec<u32>,
    pub lo: Vec<V3>,
    pub hi: Vec<V3>,
    /// The boxes in a tree (`bvh::Tree`: its leaves name places in `live`), for box queries
    /// and rays (instances may crowd and overlap, where a grid's cells would hold many).
    rays: Tree,
}

impl Instances {
    pub fn new(cell_size: f64) -> Self {
        Instances {
            cell_size,
            shapes: Vec::new(),
            placed: Vec::new(),
            free_shapes: BTreeSet::new(),
            free: BTreeSet::new(),
            live: Vec::new(),
            lo: Vec::new(),
            hi: Vec::new(),
            rays: Tree { nodes: Vec::new(), order: Vec::new() },
        }
    }

    /// Whether any instance is placed.
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// Instances placed.
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// The shape slots (`None`: free).
    pub fn shape_slots(&self) -> &[Option<Arc<MeshShape>>] {
        &self.shapes
    }

    /// The tree over the live instances' boxes.
    pub fn tree(&self) -> &Tree {
        &self.rays
    }

    /// The live instances' ids, ascending.
    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.live.iter().copied()
    }

    /// The instance slots (`None`: free).
    pub fn slots(&self) -> &[Option<Instance>] {
        &self.placed
    }

    pub fn add_shape(&mut self, mesh: &Mesh<f64>) -> Result<ShapeId> {
        let mesh = StaticMesh::new(mesh, self.cell_size)?;
        let lo: V3 = std::array::from_fn(|a| mesh.lo.iter().fold(f64::INFINITY, |x, v| x.min(v[a])));
        let hi: V3 = std::array::from_fn(|a| mesh.hi.iter().fold(f64::NEG_INFINITY, |x, v| x.max(v[a])));
        let reach = lo.iter().chain(&hi).fold(0.0f64, |x, v| x.max(v.abs()));
        let shape = Arc::new(MeshShape { mesh, lo, hi, reach });
        Ok(ShapeId(match self.free_shapes.pop_first() {
            Some(i) => {
                self.shapes[i as usize] = Some(shape);
                i
            }
            None => {
                self.shapes.push(Some(shape));
                self.shapes.len() as u32 - 1
            }
        }))
    }

    fn shape(&self, id: ShapeId) -> Result<&Arc<MeshShape>> {
        self.shapes
            .get(id.0 as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| Error::InvalidArgument(format!("there is no shape {}", id.0)))
    }

    /// The triangles of a shape (an error if there is none).
    pub fn shape_triangles(&self, id: ShapeId) -> Result<usize> {
        Ok(self.shape(id)?.mesh.corners.len())
    }

    pub fn remove_shape(&mut self, id: ShapeId) -> Result<()> {
        self.shape(id)?;
        if let Some(i) =
            self.live.iter().find(|&&i| self.placed[i as usize].as_ref().is_some_and(|x| x.placement.shape == id))
        {
            return Err(Error::InvalidArgument(format!(
                "shape {} is placed by instance {i}: remove its instances first",
                id.0
            )));
        }
        self.shapes[id.0 as usize] = None;
        self.free_shapes.insert(id.0);
        Ok(())
    }

    /// The instance for `placement`, checked (its pose, its shape, its box within the grid).
    fn make(&self, placement: Placement) -> Result<Instance> {
        let p = placement.position;
        if !p.iter().all(|v| v.is_finite()) {
            return Err(Error::InvalidArgument(format!("instance position {p:?} is not finite")));
        }
        check_pose(p, placement.orientation)?;
        let shape = self.shape(placement.shape)?.clone();
        let inst = Instance::new(placement, shape);
        CellRange::of_box(inst.lo, inst.hi, self.cell_size)?;
        Ok(inst)
    }

    /// Places many shapes at once (one rebuild of the top level); on a bad placement none is
    /// placed.
    pub fn add(&mut self, placements: &[Placement]) -> Result<Vec<InstanceId>> {
        let made = placements
            .iter()
            .enumerate()
            .map(|(k, &p)| {
                self.make(p).map_err(|e| match e {
                    Error::InvalidArgument(m) if placements.len() > 1 => {
                        Error::InvalidArgument(format!("placement {k}: {m}"))
                    }
                    e => e,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        if self.live.len() + made.len() > 1 << 30 {
            return Err(Error::InvalidArgument("too many instances (2^30 at most)".into()));
        }
        let ids = made
            .into_iter()
            .map(|inst| {
                InstanceId(match self.free.pop_first() {
                    Some(i) => {
                        self.placed[i as usize] = Some(inst);
                        i
                    }
                    None => {
                        self.placed.push(Some(inst));
                        self.placed.len() as u32 - 1
                    }
                })
            })
            .collect();
        self.regrid()?;
        Ok(ids)
    }

    fn slot(&self, id: InstanceId) -> Result<usize> {
        match self.placed.get(id.0 as usize) {
            Some(Some(_)) => Ok(id.0 as usize),
            _ => Err(Error::InvalidArgument(format!("there is no instance {}", id.0))),
        }
    }

    pub fn get(&self, id: InstanceId) -> Option<&Instance> {
        self.placed.get(id.0 as usize).and_then(Option::as_ref)
    }

    pub fn remove(&mut self, id: InstanceId) -> Result<()> {
        let i = self.slot(id)?;
        self.placed[i] = None;
        self.free.insert(i as u32);
        self.regrid()
    }

    /// New placements for many instances at once; on a bad one nothing changes.
    pub fn set(&mut self, ids: &[InstanceId], placements: &[Placement]) -> Result<()> {
        if ids.len() != placements.len() {
            return Err(Error::InvalidArgument(format!(
                "got {} instance ids and {} placements",
                ids.len(),
                placements.len()
            )));
        }
        let made = ids
            .iter()
            .zip(placements)
            .map(|(&id, &p)| {
                let i = self.slot(id)?;
                self.make(p).map(|inst| (i, inst)).map_err(|e| match e {
                    Error::InvalidArgument(m) => Error::InvalidArgument(format!("instance {}: {m}", id.0)),
                    e => e,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        for (i, inst) in made {
            self.placed[i] = Some(inst);
        }
        self.regrid()
    }

    /// The top level afresh: the live instances' boxes, gridded.
    fn regrid(&mut self) -> Result<()> {
        self.live = (0..self.placed.len() as u32).filter(|&i| self.placed[i as usize].is_some()).collect();
        self.lo = self.live.iter().map(|&i| self.placed[i as usize].as_ref().expect("live").lo).collect();
        self.hi = self.live.iter().map(|&i| self.placed[i as usize].as_ref().expect("live").hi).collect();
        let centers: Vec<V3> =
            self.lo.iter().zip(&self.hi).map(|(l, h)| std::array::from_fn(|a| 0.5 * (l[a] + h[a]))).collect();
        let boxes: Vec<Boxed> = self
            .live
            .iter()
            .zip(self.lo.iter().zip(&self.hi))
            .map(|(&i, (l, h))| {
                let (lo, hi) = box_f32(l, h);
                (lo, hi, self.placed[i as usize].as_ref().expect("live").placement.layer)
            })
            .collect();
        self.rays = box_tree::build(&centers, &boxes)?;
        Ok(())
    }

    /// Offers `f` every placed triangle (instance, triangle, world corners) of an instance in
    /// `mask` whose box meets [lo, hi] (`triangle_meets_box`), each once, in no set order.
    /// An error when the box lies beyond the grid's range.
    pub fn overlapping(&self, lo: &V3, hi: &V3, mask: u32, f: impl FnMut(u32, u32, [V3; 3])) -> Result<()> {
        self.overlapping_near(lo, hi, mask, None, f)
    }

    /// `overlapping`, less the triangles whose planes lie farther than `radius` from
    /// `center` (a body's bounding sphere: they cannot touch it), tested in the shape's frame
    /// before the corners are placed.
    pub fn overlapping_near(
        &self,
        lo: &V3,
        hi: &V3,
        mask: u32,
        sphere: Option<(V3, f64)>,
        mut f: impl FnMut(u32, u32, [V3; 3]),
    ) -> Result<()> {
        if self.live.is_empty() {
            return Ok(());
        }
        let mut err = Ok(());
        self.boxes_meeting(lo, hi, mask, |k| {
            let i = self.live[k as usize];
            let inst = self.placed[i as usize].as_ref().expect("live");
            if err.is_err() {
                return;
            }
            let Some((llo, lhi)) = inst.local_box(lo, hi) else { return };
            let m = &inst.shape.mesh;
            // The sphere in the shape's frame, its radius widened by the margin.
            let near = sphere.map(|(c, r)| {
                let p = &inst.placement.position;
                let d: V3 = std::array::from_fn(|a| c[a] - p[a]);
                let big = d.iter().chain(p).fold(0.0f64, |x, v| x.max(v.abs()));
                (inst.local_dir(d), r + MARGIN * (big + r + inst.shape.reach + 1e-300))
            });
            let mut offer = |t: u32| {
                if let Some((c, r)) = near {
                    let [nx, ny, nz, off] = m.plane[t as usize];
                    if ((nx * c[0] + ny * c[1] + nz * c[2]) - off).abs() > r {
                        return;
                    }
                }
                let c = inst.corners(t);
                if triangle_meets_box(&c, lo, hi) {
                    f(i, t, c);
                }
            };
            if m.corners.len() <= SCAN_BELOW {
                // A small shape's triangles are tested one by one: cheaper than its grid's walk.
                for t in 0..m.corners.len() {
                    if boxes_overlap(&llo, &lhi, &m.lo[t], &m.hi[t]) {
                        offer(t as u32);
                    }
                }
            } else {
                err = m.grid.overlapping(&llo, &lhi, &m.lo, &m.hi, offer);
            }
        });
        err
    }

    /// The places in `live` of the instances in `mask` whose boxes (f32, rounded outwards)
    /// meet [lo, hi], each once: a walk of the instances' tree (instances may crowd, and
    /// overlap each other, where a grid's cells would hold many).
    fn boxes_meeting(&self, lo: &V3, hi: &V3, mask: u32, mut f: impl FnMut(u32)) {
        box_tree::walk(&self.rays.nodes, &self.rays.order, |blo, bhi, layers, leaf| {
            let meets = layers & mask != 0 && (0..3).all(|a| lo[a] <= bhi[a] as f64 && blo[a] as f64 <= hi[a]);
            if let (true, Some(k)) = (meets, leaf) {
                f(k);
            }
            meets
        });
    }
}
