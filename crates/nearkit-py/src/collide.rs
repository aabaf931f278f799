//! The collision world: `World` (a static mesh and ellipsoid bodies, added and moved in
//! bulk from arrays) and `Collider` (its contacts and sweeps on the CPU or a GPU).

use nearkit::collide::{
    scene, Body, BodyId, Collider, ColliderOptions, ContactKind, Heightfield, InstanceId, Overlap, Placement, Ray,
    RayHit, ShapeId, Sweep, World,
};
use nearkit::Engine;
use numpy::{PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use rayon::prelude::*;

use crate::arrays::{err, matrix, vector};
use crate::engines::{detach_on, engine, parse_device};
use crate::mesh_index::mesh_of;

/// Bytes of one contact record; the Python side views them as `nearkit.CONTACT_DTYPE`:
/// body u32 at 0, kind u8 at 4 (`kind_code`), other u32 at 8, depth f32 at 12,
/// normal 3 × f32 at 16, triangle i32 at 28 (-1 for a body), point 3 × f64 at 32.
pub const CONTACT_RECORD_SIZE: usize = 56;

/// A contact's or hit's kind as Python numbers it: 0 a mesh triangle, 1 a body, 2 a
/// heightfield triangle, 3 an instance's triangle (`nearkit.CONTACT_*`).
fn kind_code(kind: ContactKind) -> u8 {
    match kind {
        ContactKind::Triangle => 0,
        ContactKind::Body => 1,
        ContactKind::Heightfield => 2,
        ContactKind::Instance => 3,
    }
}

/// A triangle id for Python: -1 for none (`NO_ID`).
fn triangle_code(t: u32) -> i64 {
    if t == nearkit::NO_ID {
        -1
    } else {
        t as i64
    }
}

/// Row `i` of an (N, C) array as a fixed-size array.
fn row<const C: usize>(a: &numpy::ndarray::ArrayView2<'_, f64>, i: usize) -> [f64; C] {
    std::array::from_fn(|j| a[[i, j]])
}

fn check_rows(what: &str, shape: &[usize], n: usize, cols: usize) -> PyResult<()> {
    if shape[0] != n || shape[1] != cols {
        return Err(PyValueError::new_err(format!(
            "{what} has shape ({}, {}); it must be ({n}, {cols})",
            shape[0], shape[1]
        )));
    }
    Ok(())
}

fn ids_of(ids: &PyReadonlyArray1<'_, u32>) -> Vec<BodyId> {
    ids.as_array().iter().map(|&i| BodyId(i)).collect()
}

/// The native half of `nearkit.World`.
#[pyclass(name = "World", module = "nearkit._native")]
pub struct PyWorld {
    world: World,
}

#[pymethods]
impl PyWorld {
    #[new]
    fn new(cell_size: f64) -> PyResult<Self> {
        Ok(Self { world: World::new(cell_size).map_err(err)? })
    }

    fn set_mesh(&mut self, vertices: PyReadonlyArray2<'_, f64>, faces: PyReadonlyArray2<'_, u32>) -> PyResult<()> {
        let mesh = mesh_of(vertices.as_array(), &faces)?;
        self.world.set_mesh(&mesh).map_err(err)
    }

    /// Sets the terrain, kept as heights: (rows, cols) heights, `spacing` apart, sample (0, 0)
    /// at `origin`.
    fn set_heightfield(&mut self, heights: PyReadonlyArray2<'_, f64>, spacing: f64, origin: [f64; 2]) -> PyResult<()> {
        let (rows, cols) = (heights.shape()[0], heights.shape()[1]);
        let h: Vec<f64> = heights.as_array().iter().copied().collect();
        let terrain = Heightfield::new(h, rows, cols, spacing, origin).map_err(err)?;
        self.world.set_heightfield(terrain).map_err(err)
    }

    /// The heightfield's triangles as an (F, 3, 3) array of corners.
    fn heightfield_triangles<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let Some(h) = self.world.heightfield() else {
            return Ok(numpy::PyArray1::<f64>::zeros(py, 0, false).reshape([0, 3, 3])?.into_any());
        };
        let n = h.triangle_count();
        let flat: Vec<f64> = (0..n as u32).flat_map(|t| h.triangle(t).into_iter().flatten()).collect();
        Ok(numpy::PyArray1::from_vec(py, flat).reshape([n, 3, 3])?.into_any())
    }

    #[getter]
    fn heightfield_triangle_count(&self) -> usize {
        self.world.heightfield().map_or(0, |h| h.triangle_count())
    }

    /// Adds N bodies from (N, 3) centers and radii, (N, 4) quaternions (x, y, z, w) and (N,)
    /// layers and masks; returns their ids. All or none: on a bad body none is added.
    fn add_bodies<'py>(
        &mut self,
        py: Python<'py>,
        centers: PyReadonlyArray2<'_, f64>,
        radii: PyReadonlyArray2<'_, f64>,
        orientations: PyReadonlyArray2<'_, f64>,
        layers: PyReadonlyArray1<'_, u32>,
        masks: PyReadonlyArray1<'_, u32>,
    ) -> PyResult<Bound<'py, numpy::PyArray1<i64>>> {
        let n = centers.shape()[0];
        check_rows("centers", centers.shape(), n, 3)?;
        check_rows("radii", radii.shape(), n, 3)?;
        check_rows("orientations", orientations.shape(), n, 4)?;
        if layers.len() != n || masks.len() != n {
            return Err(PyValueError::new_err(format!(
                "{n} centers, but {} layers and {} masks",
                layers.len(),
                masks.len()
            )));
        }
        let (c, r, q) = (centers.as_array(), radii.as_array(), orientations.as_array());
        let (l, m) = (layers.as_array(), masks.as_array());
        let mut ids = Vec::with_capacity(n);
        for i in 0..n {
            let body = Body::ellipsoid(row(&c, i), row(&r, i), row(&q, i)).with_layers(l[i], m[i]);
            match self.world.add_body(body) {
                Ok(id) => ids.push(id),
                Err(e) => {
                    for &id in &ids {
                        // Just added, so it is there to remove.
                        let _ = self.world.remove_body(id);
                    }
                    return Err(PyValueError::new_err(format!("body {i}: {e}")));
                }
            }
        }
        Ok(vector(py, ids.into_iter().map(|id| id.0 as i64).collect()))
    }

    fn remove_bodies(&mut self, ids: PyReadonlyArray1<'_, u32>) -> PyResult<()> {
        let ids = ids_of(&ids);
        // All or nothing: every id checked before the first is removed.
        let mut seen = std::collections::HashSet::with_capacity(ids.len());
        for &id in &ids {
            let why = if self.world.body(id).is_none() {
                "there is no body"
            } else if !seen.insert(id.0) {
                "twice the body"
            } else {
                continue;
            };
            return Err(PyValueError::new_err(format!("remove_bodies: {why} {}; nothing was removed", id.0)));
        }
        for id in ids {
            self.world.remove_body(id).map_err(err)?;
        }
        Ok(())
    }

    /// New centers, and orientations where given (else each body keeps its own).
    #[pyo3(signature = (ids, centers, orientations=None))]
    fn set_poses(
        &mut self,
        ids: PyReadonlyArray1<'_, u32>,
        centers: PyReadonlyArray2<'_, f64>,
        orientations: Option<PyReadonlyArray2<'_, f64>>,
    ) -> PyResult<()> {
        let ids = ids_of(&ids);
        let n = ids.len();
        check_rows("centers", centers.shape(), n, 3)?;
        let c = centers.as_array();
        let centers: Vec<[f64; 3]> = (0..n).map(|i| row(&c, i)).collect();
        let orientations: Vec<[f64; 4]> = match &orientations {
            Some(q) => {
                check_rows("orientations", q.shape(), n, 4)?;
                let q = q.as_array();
                (0..n).map(|i| row(&q, i)).collect()
            }
            None => {
                let now = &self.world.bodies().orientation;
                // An id with no body keeps the identity orientation here; set_poses then
                // rejects that id with its own error.
                ids.iter().map(|id| now.get(id.0 as usize).copied().unwrap_or([0.0, 0.0, 0.0, 1.0])).collect()
            }
        };
        self.world.set_poses(&ids, &centers, &orientations).map_err(err)
    }

    fn set_layers(
        &mut self,
        ids: PyReadonlyArray1<'_, u32>,
        layers: PyReadonlyArray1<'_, u32>,
        masks: PyReadonlyArray1<'_, u32>,
    ) -> PyResult<()> {
        let (l, m) = (layers.as_array(), masks.as_array());
        for (i, id) in ids_of(&ids).into_iter().enumerate() {
            self.world.set_layers(id, l[i], m[i]).map_err(err)?;
        }
        Ok(())
    }

    /// The living bodies as arrays: ids, centers, radii, orientations, layers, masks.
    fn bodies<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let b = self.world.bodies();
        let alive: Vec<usize> = (0..b.len()).filter(|&i| b.alive[i]).collect();
        let n = alive.len();
        let flat = |v: &Vec<[f64; 3]>| alive.iter().flat_map(|&i| v[i]).collect::<Vec<f64>>();
        let d = PyDict::new(py);
        d.set_item("ids", vector(py, alive.iter().map(|&i| i as i64).collect()))?;
        d.set_item("centers", matrix(py, flat(&b.center), n, 3)?)?;
        d.set_item("radii", matrix(py, flat(&b.radii), n, 3)?)?;
        d.set_item("orientations", matrix(py, alive.iter().flat_map(|&i| b.orientation[i]).collect(), n, 4)?)?;
        d.set_item("layers", vector(py, alive.iter().map(|&i| b.layer[i]).collect()))?;
        d.set_item("masks", vector(py, alive.iter().map(|&i| b.mask[i]).collect()))?;
        Ok(d)
    }

    /// The static mesh's triangles as an (F, 3, 3) array of corners.
    fn triangles<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let n = self.world.triangle_count();
        let flat: Vec<f64> =
            (0..n).flat_map(|t| self.world.triangle(t).unwrap_or_default().into_iter().flatten()).collect();
        Ok(numpy::PyArray1::from_vec(py, flat).reshape([n, 3, 3])?.into_any())
    }

    /// Adds a shape (a mesh in its own frame) that instances place; returns its id.
    fn add_shape(&mut self, vertices: PyReadonlyArray2<'_, f64>, faces: PyReadonlyArray2<'_, u32>) -> PyResult<u32> {
        let mesh = mesh_of(vertices.as_array(), &faces)?;
        Ok(self.world.add_shape(&mesh).map_err(err)?.0)
    }

    fn remove_shape(&mut self, shape: u32) -> PyResult<()> {
        self.world.remove_shape(ShapeId(shape)).map_err(err)
    }

    /// Places N shapes: (N,) shape ids, (N, 3) positions, (N, 4) quaternions, (N,) layers;
    /// returns their ids. All or none.
    fn add_instances<'py>(
        &mut self,
        py: Python<'py>,
        shapes: PyReadonlyArray1<'_, u32>,
        positions: PyReadonlyArray2<'_, f64>,
        orientations: PyReadonlyArray2<'_, f64>,
        layers: PyReadonlyArray1<'_, u32>,
    ) -> PyResult<Bound<'py, numpy::PyArray1<i64>>> {
        let n = shapes.len();
        check_rows("positions", positions.shape(), n, 3)?;
        check_rows("orientations", orientations.shape(), n, 4)?;
        if layers.len() != n {
            return Err(PyValueError::new_err(format!("{n} shapes, but {} layers", layers.len())));
        }
        let (s, p, q, l) = (shapes.as_array(), positions.as_array(), orientations.as_array(), layers.as_array());
        let placements: Vec<Placement> =
            (0..n).map(|i| Placement::new(ShapeId(s[i]), row(&p, i), row(&q, i)).with_layer(l[i])).collect();
        let ids = self.world.add_instances(&placements).map_err(err)?;
        Ok(vector(py, ids.into_iter().map(|id| id.0 as i64).collect()))
    }

    /// New positions, and orientations where given, of instances `ids` (one rebuild of the
    /// top level; all or none).
    #[pyo3(signature = (ids, positions, orientations=None))]
    fn set_instances(
        &mut self,
        ids: PyReadonlyArray1<'_, u32>,
        positions: PyReadonlyArray2<'_, f64>,
        orientations: Option<PyReadonlyArray2<'_, f64>>,
    ) -> PyResult<()> {
        let ids: Vec<InstanceId> = ids.as_array().iter().map(|&i| InstanceId(i)).collect();
        let n = ids.len();
        check_rows("positions", positions.shape(), n, 3)?;
        let p = positions.as_array();
        let q = match &orientations {
            Some(q) => {
                check_rows("orientations", q.shape(), n, 4)?;
                Some(q.as_array())
            }
            None => None,
        };
        let placements = (0..n)
            .map(|i| {
                let now = self
                    .world
                    .instance(ids[i])
                    .ok_or_else(|| PyValueError::new_err(format!("there is no instance {}", ids[i].0)))?;
                Ok(Placement {
                    position: row(&p, i),
                    orientation: q.as_ref().map_or(now.orientation, |q| row(q, i)),
                    ..now
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        self.world.set_instances(&ids, &placements).map_err(err)
    }

    fn remove_instances(&mut self, ids: PyReadonlyArray1<'_, u32>) -> PyResult<()> {
        for &i in ids.as_array().iter() {
            self.world.remove_instance(InstanceId(i)).map_err(err)?;
        }
        Ok(())
    }

    /// The instances as arrays: ids, shapes, positions, orientations, layers.
    fn instances<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let placed: Vec<(u32, Placement)> =
            self.world.instance_ids().into_iter().map(|id| (id.0, self.world.instance(id).expect("listed"))).collect();
        let n = placed.len();
        let d = PyDict::new(py);
        d.set_item("ids", vector(py, placed.iter().map(|p| p.0 as i64).collect()))?;
        d.set_item("shapes", vector(py, placed.iter().map(|p| p.1.shape.0 as i64).collect()))?;
        d.set_item("positions", matrix(py, placed.iter().flat_map(|p| p.1.position).collect(), n, 3)?)?;
        d.set_item("orientations", matrix(py, placed.iter().flat_map(|p| p.1.orientation).collect(), n, 4)?)?;
        d.set_item("layers", vector(py, placed.iter().map(|p| p.1.layer).collect()))?;
        Ok(d)
    }

    /// Instance `id`'s triangles, placed, as an (F, 3, 3) array of corners.
    fn instance_triangles<'py>(&self, py: Python<'py>, id: u32) -> PyResult<Bound<'py, PyAny>> {
        let p = self
            .world
            .instance(InstanceId(id))
            .ok_or_else(|| PyValueError::new_err(format!("there is no instance {id}")))?;
        let n = self.world.shape_triangle_count(p.shape).map_err(err)?;
        let flat: Vec<f64> = (0..n)
            .flat_map(|t| self.world.instance_triangle(InstanceId(id), t).unwrap_or_default().into_iter().flatten())
            .collect();
        Ok(numpy::PyArray1::from_vec(py, flat).reshape([n, 3, 3])?.into_any())
    }

    #[getter]
    fn instance_count(&self) -> usize {
        self.world.instance_count()
    }

    #[getter]
    fn body_count(&self) -> usize {
        self.world.body_count()
    }

    #[getter]
    fn triangle_count(&self) -> usize {
        self.world.triangle_count()
    }

    #[getter]
    fn cell_size(&self) -> f64 {
        self.world.cell_size()
    }

    #[getter]
    fn mesh_layer(&self) -> u32 {
        self.world.mesh_layer()
    }

    #[setter]
    fn set_mesh_layer(&mut self, layer: u32) {
        self.world.set_mesh_layer(layer)
    }
}

/// A heightfield terrain as a mesh: (vertices (R·C, 3), faces (F, 3)); vertex (r, c) is at
/// (c · spacing, r · spacing, heights[r, c]).
#[pyfunction]
pub fn heightfield_mesh<'py>(
    py: Python<'py>,
    heights: PyReadonlyArray2<'_, f64>,
    spacing: f64,
) -> PyResult<Bound<'py, PyTuple>> {
    let (rows, cols) = (heights.shape()[0], heights.shape()[1]);
    if rows < 2 || cols < 2 {
        return Err(PyValueError::new_err(format!(
            "heights has shape ({rows}, {cols}); a heightfield needs at least 2 × 2"
        )));
    }
    if !(spacing.is_finite() && spacing > 0.0) {
        return Err(PyValueError::new_err(format!("spacing must be a positive number, got {spacing}")));
    }
    let h: Vec<f64> = heights.as_array().iter().copied().collect();
    if let Some(i) = h.iter().position(|v| !v.is_finite()) {
        return Err(PyValueError::new_err(format!(
            "heights[{}, {}] is {}: heights must be finite numbers",
            i / cols,
            i % cols,
            h[i]
        )));
    }
    let mesh = scene::heightfield(&h, rows, cols, spacing);
    let nv = mesh.vertices.len();
    let mut v = vec![0.0; 3 * nv];
    let p = &mesh.vertices;
    crate::arrays::interleave([&p.x, &p.y, &p.z], &mut v);
    let f: Vec<i64> = mesh.triangles.iter().flat_map(|t| t.map(i64::from)).collect();
    let nf = mesh.triangles.len();
    (matrix(py, v, nv, 3)?, matrix(py, f, nf, 3)?).into_pyobject(py)
}

/// The native half of `nearkit.Collider`. Unsendable: a CUDA collider keeps CUDA graphs,
/// which cudarc does not let cross threads, so it stays on the thread that made it.
#[pyclass(unsendable, name = "Collider", module = "nearkit._native")]
pub struct PyCollider {
    collider: Collider,
    engine: Engine,
    device: String,
}

/// A value that is not `Send`, handed to `Python::detach`, which runs its closure on the
/// calling thread: the value never leaves the thread that owns it.
struct SameThread<T>(T);
// SAFETY: only used for `Python::detach` closures, which run on the current thread.
unsafe impl<T> Send for SameThread<T> {}

impl<T> SameThread<T> {
    /// (A method, so that a closure captures the wrapper, not the field inside it.)
    fn into_inner(self) -> T {
        self.0
    }
}

impl PyCollider {
    fn open(py: Python<'_>, device: &str) -> PyResult<(Collider, Engine)> {
        let engine = engine(py, parse_device(device)?)?;
        Ok((Collider::new(&engine, &ColliderOptions::default()).map_err(err)?, engine))
    }
}

#[pymethods]
impl PyCollider {
    #[new]
    fn new(py: Python<'_>, device: &str) -> PyResult<Self> {
        let (collider, engine) = Self::open(py, device)?;
        Ok(Self { collider, engine, device: device.to_owned() })
    }

    /// The device asked for.
    #[getter]
    fn device(&self) -> &str {
        &self.device
    }

    /// Moves the collider to another device; the next tick runs there, with the same contacts.
    #[setter]
    fn set_device(&mut self, py: Python<'_>, device: &str) -> PyResult<()> {
        (self.collider, self.engine) = Self::open(py, device)?;
        self.device = device.to_owned();
        Ok(())
    }

    /// What the collider runs on.
    fn describe(&self) -> String {
        self.collider.describe()
    }

    fn is_cuda(&self) -> bool {
        self.collider.is_cuda()
    }

    /// One tick: every contact, sorted by (body, kind, other), as packed records.
    fn contacts<'py>(&mut self, py: Python<'py>, world: PyRef<'py, PyWorld>) -> PyResult<Bound<'py, PyAny>> {
        let (collider, world, engine) = (SameThread(&mut self.collider), &world.world, &self.engine);
        let bytes = detach_on(py, engine, move || -> nearkit::Result<Vec<u8>> {
            let collider = collider.into_inner();
            let contacts = collider.contacts_packed(world)?;
            let mut bytes = vec![0u8; contacts.len() * CONTACT_RECORD_SIZE];
            bytes.par_chunks_mut(CONTACT_RECORD_SIZE).enumerate().for_each(|(i, r)| {
                let c = contacts.get(i);
                r[0..4].copy_from_slice(&c.body.to_ne_bytes());
                r[4] = kind_code(c.kind);
                r[8..12].copy_from_slice(&c.other.to_ne_bytes());
                r[12..16].copy_from_slice(&c.depth.to_ne_bytes());
                r[28..32].copy_from_slice(&(triangle_code(c.triangle) as i32).to_ne_bytes());
                for a in 0..3 {
                    r[16 + 4 * a..20 + 4 * a].copy_from_slice(&c.normal[a].to_ne_bytes());
                    r[32 + 8 * a..40 + 8 * a].copy_from_slice(&c.point[a].to_ne_bytes());
                }
            });
            Ok(bytes)
        })
        .map_err(err)?;
        Ok(vector(py, bytes).into_any())
    }

    /// Each sweep's first hit on the mesh, the heightfield or a body: (hit, toi, other,
    /// point, normal, kind); a miss has toi inf, other and kind -1, point and normal NaN.
    /// `ignore`: a body each sweep passes through, or -1.
    fn sweeps<'py>(
        &mut self,
        py: Python<'py>,
        world: PyRef<'py, PyWorld>,
        starts: PyReadonlyArray2<'_, f64>,
        ends: PyReadonlyArray2<'_, f64>,
        radii: PyReadonlyArray2<'_, f64>,
        orientations: PyReadonlyArray2<'_, f64>,
        masks: PyReadonlyArray1<'_, u32>,
        ignore: PyReadonlyArray1<'_, i64>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let n = starts.shape()[0];
        if masks.len() != n || ignore.len() != n {
            return Err(PyValueError::new_err(format!(
                "{n} sweeps, but {} masks and {} bodies to ignore",
                masks.len(),
                ignore.len()
            )));
        }
        check_rows("starts", starts.shape(), n, 3)?;
        check_rows("ends", ends.shape(), n, 3)?;
        check_rows("radii", radii.shape(), n, 3)?;
        check_rows("orientations", orientations.shape(), n, 4)?;
        let (s, e, r, q) = (starts.as_array(), ends.as_array(), radii.as_array(), orientations.as_array());
        let (m, ig) = (masks.as_array(), ignore.as_array());
        let sweeps: Vec<Sweep> = (0..n)
            .map(|i| {
                let sweep = Sweep::new(row(&r, i), row(&q, i), row(&s, i), row(&e, i)).with_mask(m[i]);
                match ig[i] {
                    id if id < 0 => Ok(sweep),
                    id if id < u32::MAX as i64 => Ok(sweep.ignoring(BodyId(id as u32))),
                    id => Err(PyValueError::new_err(format!("sweep {i}: ignore = {id} is not a body id"))),
                }
            })
            .collect::<PyResult<_>>()?;
        let (collider, world, engine) = (SameThread(&mut self.collider), &world.world, &self.engine);
        let hits = detach_on(py, engine, move || {
            let collider = collider.into_inner();
            collider.sweeps(world, &sweeps)
        })
        .map_err(err)?;
        let hit: Vec<bool> = hits.iter().map(Option::is_some).collect();
        let toi: Vec<f64> = hits.iter().map(|h| h.map_or(f64::INFINITY, |h| h.toi)).collect();
        let other: Vec<i64> = hits.iter().map(|h| h.map_or(-1, |h| h.other as i64)).collect();
        let kind: Vec<i8> = hits.iter().map(|h| h.map_or(-1, |h| kind_code(h.kind) as i8)).collect();
        let triangle: Vec<i64> = hits.iter().map(|h| h.map_or(-1, |h| triangle_code(h.triangle))).collect();
        let point: Vec<f64> = hits.iter().flat_map(|h| h.map_or([f64::NAN; 3], |h| h.point)).collect();
        let normal: Vec<f64> = hits.iter().flat_map(|h| h.map_or([f64::NAN; 3], |h| h.normal)).collect();
        let (point, normal) = (matrix(py, point, n, 3)?, matrix(py, normal, n, 3)?);
        (vector(py, hit), vector(py, toi), vector(py, other), point, normal, vector(py, kind), vector(py, triangle))
            .into_pyobject(py)
    }

    /// Each query's overlaps: (offsets (n + 1), kinds u8, ids, totals), rows sorted by
    /// (kind, id) and cut at `limit`. `boxes`: the queries are boxes of half extents `radii`
    /// (else ellipsoids).
    fn overlaps<'py>(
        &mut self,
        py: Python<'py>,
        world: PyRef<'py, PyWorld>,
        centers: PyReadonlyArray2<'_, f64>,
        radii: PyReadonlyArray2<'_, f64>,
        orientations: PyReadonlyArray2<'_, f64>,
        masks: PyReadonlyArray1<'_, u32>,
        limit: usize,
        boxes: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let n = centers.shape()[0];
        check_rows("centers", centers.shape(), n, 3)?;
        check_rows("radii", radii.shape(), n, 3)?;
        check_rows("orientations", orientations.shape(), n, 4)?;
        if masks.len() != n {
            return Err(PyValueError::new_err(format!("masks has {} entries for {n} queries", masks.len())));
        }
        let (c, r, q, m) = (centers.as_array(), radii.as_array(), orientations.as_array(), masks.as_array());
        let queries: Vec<Overlap> = (0..n)
            .map(|i| {
                let make = if boxes { Overlap::cuboid } else { Overlap::ellipsoid };
                make(row(&c, i), row(&r, i), row(&q, i)).with_mask(m[i])
            })
            .collect();
        let (collider, world, engine) = (SameThread(&mut self.collider), &world.world, &self.engine);
        let found = detach_on(py, engine, move || {
            let collider = collider.into_inner();
            collider.overlaps(world, &queries, limit)
        })
        .map_err(err)?;
        let offsets: Vec<i64> = found.offsets.iter().map(|&o| o as i64).collect();
        let kinds: Vec<u8> = found.kinds.iter().map(|&k| kind_code(k)).collect();
        let ids: Vec<i64> = found.ids.iter().map(|&i| i as i64).collect();
        let total: Vec<i64> = found.total.iter().map(|&t| t as i64).collect();
        let triangles: Vec<i64> = found.triangles.iter().map(|&t| triangle_code(t)).collect();
        (vector(py, offsets), vector(py, kinds), vector(py, ids), vector(py, total), vector(py, triangles))
            .into_pyobject(py)
    }

    /// Each ray's hits: (offsets (n + 1), distance, kind u8, id, point (h, 3), normal (h, 3)),
    /// rows sorted by (distance, kind, id); `limit` 0 asks for the first hit only.
    #[allow(clippy::type_complexity)]
    fn ray_casts<'py>(
        &mut self,
        py: Python<'py>,
        world: PyRef<'py, PyWorld>,
        origins: PyReadonlyArray2<'_, f64>,
        directions: PyReadonlyArray2<'_, f64>,
        max_distance: numpy::PyReadonlyArray1<'_, f64>,
        masks: PyReadonlyArray1<'_, u32>,
        limit: usize,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let n = origins.shape()[0];
        check_rows("origins", origins.shape(), n, 3)?;
        check_rows("directions", directions.shape(), n, 3)?;
        if max_distance.len() != n || masks.len() != n {
            return Err(PyValueError::new_err(format!(
                "max_distance has {} entries and masks {} for {n} rays",
                max_distance.len(),
                masks.len()
            )));
        }
        let (o, d, m, k) = (origins.as_array(), directions.as_array(), max_distance.as_array(), masks.as_array());
        let rays: Vec<Ray> = (0..n)
            .into_par_iter()
            .with_min_len(1 << 12)
            .map(|i| Ray { origin: row(&o, i), direction: row(&d, i), max_distance: m[i], mask: k[i] })
            .collect();
        let (collider, world, engine) = (SameThread(&mut self.collider), &world.world, &self.engine);
        let found = detach_on(py, engine, move || -> nearkit::Result<(Vec<usize>, Vec<RayHit>)> {
            let collider = collider.into_inner();
            if limit == 0 {
                let first = collider.ray_casts(world, &rays)?;
                let mut offsets = Vec::with_capacity(n + 1);
                offsets.push(0);
                for h in &first {
                    offsets.push(offsets.last().expect("one at least") + usize::from(h.is_some()));
                }
                let hits: Vec<RayHit> = first.par_iter().with_min_len(1 << 12).filter_map(|h| *h).collect();
                Ok((offsets, hits))
            } else {
                let all = collider.ray_casts_all(world, &rays, limit)?;
                Ok((all.offsets, all.hits))
            }
        })
        .map_err(err)?;
        let (offsets, hits) = found;
        let h = hits.len();
        // The columns, each in parallel (a million rays' worth is tens of MB).
        let offsets: Vec<i64> = offsets.par_iter().with_min_len(1 << 14).map(|&v| v as i64).collect();
        let distance: Vec<f64> = hits.par_iter().with_min_len(1 << 12).map(|x| x.distance).collect();
        let kind: Vec<u8> = hits.par_iter().with_min_len(1 << 12).map(|x| kind_code(x.kind)).collect();
        let id: Vec<i64> = hits.par_iter().with_min_len(1 << 12).map(|x| x.id as i64).collect();
        let triangle: Vec<i64> = hits.par_iter().with_min_len(1 << 12).map(|x| triangle_code(x.triangle)).collect();
        let point: Vec<f64> = hits.par_iter().with_min_len(1 << 12).flat_map_iter(|x| x.point).collect();
        let normal: Vec<f64> = hits.par_iter().with_min_len(1 << 12).flat_map_iter(|x| x.normal).collect();
        let (point, normal) = (matrix(py, point, h, 3)?, matrix(py, normal, h, 3)?);
        (
            vector(py, offsets),
            vector(py, distance),
            vector(py, kind),
            vector(py, id),
            point,
            normal,
            vector(py, triangle),
        )
            .into_pyobject(py)
    }
}
