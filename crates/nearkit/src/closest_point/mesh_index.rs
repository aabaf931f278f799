//! `MeshIndex`: a triangle mesh indexed once, on the CPU or a GPU, for closest-point and
//! signed-distance queries.

use std::sync::OnceLock;

use super::bvh::{TriangleBvh, WideBvh};
use super::cuda::{DeviceClosestPoints, DeviceTriangleBvh};
use super::signed_distance::PseudoNormals;
use super::{rounding_slack, ClosestPointOptions, ClosestPoints};
use crate::device::{Device, Engine};
use crate::error::{Error, Result, Role};
use crate::geometry::mesh::Mesh;
use crate::geometry::points::Points;
use crate::geometry::radius2;
use crate::geometry::real::Real;
use crate::geometry::scale::Scale;
use crate::runtime::cuda::DevicePoints;
use crate::runtime::profile::Phases;

/// A triangle mesh indexed for exact closest-point queries: per query the nearest triangle
/// (ties to the smaller id), distance, point and barycentric coordinates, bitwise the same on
/// every device; and signed distances (negative inside) for closed meshes.
///
/// ```
/// use nearkit::{ClosestPointOptions, Device, Mesh, MeshIndex, Points};
/// let sphere = Mesh::<f64>::uv_sphere(16, 32, 1.0, [0.0; 3]);
/// let index = MeshIndex::build(&sphere, Device::Cpu).unwrap();
/// let queries = Points::from_rows(&[[0.0, 0.0, 3.0], [0.0, 0.0, 0.0]]);
///
/// let cp = index.closest_points(&queries, &ClosestPointOptions::default()).unwrap();
/// assert!((cp.distance[0] - 2.0).abs() < 1e-9); // the pole is a vertex
///
/// let sd = index.signed_distances(&queries, &ClosestPointOptions::default()).unwrap();
/// assert!(sd[0] > 0.0 && sd[1] < 0.0); // outside, inside
/// ```
pub struct MeshIndex<T: Real> {
    engine: Engine,
    mesh: Mesh<T>,
    /// What the index multiplies coordinates by (see `geometry::magnitude`): 2^0 unless the
    /// mesh is tiny or huge.
    scale: Scale,
    /// The mesh as the index holds it, where scaled.
    scaled: Option<Mesh<T>>,
    /// The largest |coordinate| of the mesh, unscaled.
    mesh_max: f64,
    /// The (scaled) mesh's box.
    bounds: ([T; 3], [T; 3]),
    index: Index<T>,
    /// Made on the first signed query (it also checks that the mesh is closed).
    normals: OnceLock<PseudoNormals>,
}

enum Index<T> {
    Cpu { bvh: TriangleBvh<T>, wide: Option<WideBvh<f32>> },
    Cuda(DeviceTriangleBvh<T>),
}

impl<T: Real> MeshIndex<T> {
    /// Indexes `mesh` for queries on the engine's device. Degenerate triangles are allowed.
    pub fn new(mesh: &Mesh<T>, engine: &Engine) -> Result<Self> {
        let mut phases = Phases::new("mesh index", engine.options().profile);
        let magnitudes = mesh.validate()?;
        let scale = Scale::for_mesh::<T>(magnitudes);
        let scaled = (!scale.is_identity()).then(|| scale.mesh(mesh).into_owned());
        let held = scaled.as_ref().unwrap_or(mesh);
        let bounds = held.vertices.bounds();
        phases.mark("checked, box");
        let index = match engine.gpu() {
            None => {
                let bvh = TriangleBvh::build(held);
                // f32 queries are searched by packets over the tree collapsed to 8 children.
                let wide = (&bvh as &dyn std::any::Any).downcast_ref::<TriangleBvh<f32>>().and_then(WideBvh::of);
                Index::Cpu { bvh, wide }
            }
            Some(gpu) => {
                let _busy = gpu.lock();
                Index::Cuda(DeviceTriangleBvh::build(gpu, held, bounds.0, bounds.1, &mut phases)?)
            }
        };
        phases.mark("built");
        phases.report();
        Ok(Self {
            engine: engine.clone(),
            mesh: mesh.clone(),
            scale,
            scaled,
            mesh_max: magnitudes.max,
            bounds,
            index,
            normals: OnceLock::new(),
        })
    }

    /// Indexes `mesh` on `device` (see [`Engine::open`]).
    pub fn build(mesh: &Mesh<T>, device: Device) -> Result<Self> {
        Self::new(mesh, &Engine::open(device)?)
    }

    /// The indexed mesh.
    pub fn mesh(&self) -> &Mesh<T> {
        &self.mesh
    }

    /// The engine the index lives on.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Each query's closest point on the mesh; with a `max_distance`, queries with no triangle
    /// within it get `NO_ID`, an infinite distance and NaN point and barycentrics.
    pub fn closest_points(&self, queries: &Points<T>, opts: &ClosestPointOptions<T>) -> Result<ClosestPoints<T>> {
        let mut phases = Phases::new("closest points", self.engine.options().profile);
        let (queries, query_max) = self.scaled_queries(queries)?;
        phases.mark("queries checked");
        let mut found = self.search(&queries, query_max, opts, &mut phases)?;
        self.scale.undo_all(&mut found.distance);
        for c in [&mut found.point.x, &mut found.point.y, &mut found.point.z] {
            self.scale.undo_all(c);
        }
        phases.mark("unscaled");
        phases.report();
        Ok(found)
    }

    /// The queries checked, and scaled as the mesh is; and their largest magnitude, scaled.
    fn scaled_queries<'a>(&self, queries: &'a Points<T>) -> Result<(std::borrow::Cow<'a, Points<T>>, T)> {
        let m = queries.validate(Role::Queries)?;
        self.scale.check_mesh_queries::<T>(self.mesh_max, m)?;
        // Scaling by a power of two keeps the order of magnitudes: the largest stays largest.
        Ok((self.scale.points(queries), self.scale.apply(T::from_f64(m.max))))
    }

    /// The search, in the index's (scaled) coordinates.
    fn search(
        &self,
        queries: &Points<T>,
        query_max: T,
        opts: &ClosestPointOptions<T>,
        phases: &mut Phases,
    ) -> Result<ClosestPoints<T>> {
        let r2 = radius2(self.scale.max_distance(opts.max_distance)?)?;
        let slack = rounding_slack(self.bounds.0, self.bounds.1, query_max);
        match &self.index {
            Index::Cpu { bvh, wide } => {
                Ok(super::cpu::closest_points(bvh, wide.as_ref(), self.bounds, queries, r2, slack))
            }
            Index::Cuda(bvh) => {
                let gpu = self.engine.need_gpu("")?;
                let _busy = gpu.lock();
                super::cuda::closest_points_host(gpu, bvh, queries, r2, slack, phases)
            }
        }
    }

    /// The mesh in the index's coordinates.
    fn held(&self) -> &Mesh<T> {
        self.scaled.as_ref().unwrap_or(&self.mesh)
    }

    /// Each query's signed distance to the closed mesh: negative inside, by the
    /// angle-weighted pseudo-normal of the closest feature. An error if the mesh is not closed
    /// and consistently oriented.
    pub fn signed_distances(&self, queries: &Points<T>, opts: &ClosestPointOptions<T>) -> Result<Vec<T>> {
        let normals = self.normals()?;
        let (queries, query_max) = self.scaled_queries(queries)?;
        let found = self.search(&queries, query_max, opts, &mut Phases::new("", false))?;
        let mut signed = normals.sign(self.held(), &queries, &found);
        self.scale.undo_all(&mut signed);
        Ok(signed)
    }

    /// [`MeshIndex::signed_distances`] from a result of [`MeshIndex::closest_points`] for the
    /// same queries (no second search).
    pub fn signs_of(&self, queries: &Points<T>, found: &ClosestPoints<T>) -> Result<Vec<T>> {
        if found.triangle.len() != queries.len() {
            return Err(Error::InvalidArgument(format!(
                "{} closest points for {} queries: give the result of these queries",
                found.triangle.len(),
                queries.len()
            )));
        }
        let normals = self.normals()?;
        if self.scale.is_identity() {
            return Ok(normals.sign(&self.mesh, queries, found));
        }
        // The sign is found in the index's coordinates; the distances it signs are the caller's.
        let (queries, _) = self.scaled_queries(queries)?;
        let point = self.scale.points(&found.point).into_owned();
        Ok(normals.sign(self.held(), &queries, &ClosestPoints { point, ..found.clone() }))
    }

    /// [`MeshIndex::closest_points`] of queries in GPU memory, results left there (`out` must
    /// hold as many queries).
    pub fn closest_points_device(
        &self,
        queries: &DevicePoints<T>,
        opts: &ClosestPointOptions<T>,
        out: &mut DeviceClosestPoints<T>,
    ) -> Result<()> {
        let Index::Cuda(bvh) = &self.index else {
            return Err(Error::InvalidArgument("queries in GPU memory need an index built on a CUDA engine".into()));
        };
        if out.len() < queries.len() {
            return Err(Error::InvalidArgument(format!(
                "the result buffer holds {} queries; this query has {}",
                out.len(),
                queries.len()
            )));
        }
        if !self.scale.is_identity() {
            return Err(Error::Magnitudes {
                role: Role::Vertices,
                detail: "this mesh is scaled by a power of two inside the index (its coordinates are far from 1), \
                         which queries in GPU memory cannot be: give the queries from host memory"
                    .into(),
            });
        }
        if let Some(m) = queries.magnitudes {
            self.scale.check_mesh_queries::<T>(self.mesh_max, m)?;
        }
        let gpu = self.engine.need_gpu("")?;
        let (lo, hi) = self.bounds;
        let r2 = radius2(opts.max_distance)?;
        let queries_box = queries.bounds.expect("points uploaded by Engine::upload carry their box");
        let query_max =
            queries_box.0.iter().chain(&queries_box.1).fold(T::ZERO, |m, &v| m.max(T::from_f64(v.to_f64().abs())));
        let slack = rounding_slack(lo, hi, query_max);
        let _busy = gpu.lock();
        super::cuda::closest_points_resident(gpu, bvh, queries, r2, slack, out)
    }

    fn normals(&self) -> Result<&PseudoNormals> {
        if let Some(n) = self.normals.get() {
            return Ok(n);
        }
        let n = PseudoNormals::new(self.held())?;
        Ok(self.normals.get_or_init(|| n))
    }
}

impl<T: Real> DeviceClosestPoints<T> {
    /// Room for `len` queries' closest points on the engine's GPU.
    pub fn new(engine: &Engine, len: usize) -> Result<Self> {
        Self::alloc(engine.need_gpu("a closest-point result in GPU memory")?, len)
    }

    /// Copies the result to the host.
    pub fn to_host(&self, engine: &Engine) -> Result<ClosestPoints<T>> {
        self.download(engine.need_gpu("")?)
    }
}
