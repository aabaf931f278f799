//! `MeshIndex`: closest points and signed distances on a triangle mesh, in float32 or float64.

use std::ops::Range;
use std::sync::OnceLock;

use nearkit::{ClosestPointOptions, Engine, Mesh, MeshIndex, Real, NO_ID};
use numpy::ndarray::ArrayView2;
use numpy::{PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use rayon::prelude::*;

use crate::arrays::{all_columns, blocks, columns, err, interleave, matrix, vector, Rows};
use crate::engines::{detach_on, engine, parse_device, with_workers, AUTO_CPU_BELOW, CPU_CHUNK};

/// An index on the device asked for, and for `auto` on a GPU a CPU twin for small calls.
struct Placed<T: Real> {
    main: MeshIndex<T>,
    auto: bool,
    cpu: OnceLock<MeshIndex<T>>,
}

/// One block's closest points, in rows.
struct Found<T> {
    distance: Vec<T>,
    point: Vec<T>,
    triangle: Vec<i64>,
    bary: Vec<T>,
}

impl<T: Real> Placed<T> {
    fn for_queries(&self, queries: usize) -> nearkit::Result<&MeshIndex<T>> {
        if !(self.auto && self.main.engine().is_cuda() && queries < AUTO_CPU_BELOW) {
            return Ok(&self.main);
        }
        if let Some(twin) = self.cpu.get() {
            return Ok(twin);
        }
        let twin = MeshIndex::new(self.main.mesh(), &Engine::cpu())?;
        Ok(self.cpu.get_or_init(|| twin))
    }

    /// Runs `f` on blocks of the queries with the GIL released, checking for Ctrl-C between.
    fn in_blocks(
        &self,
        py: Python<'_>,
        n: usize,
        workers: usize,
        mut f: impl FnMut(&MeshIndex<T>, Range<usize>) -> nearkit::Result<()> + Send,
    ) -> PyResult<()> {
        let index = self.for_queries(n).map_err(err)?;
        let chunk = if index.engine().is_cuda() { n.max(1) } else { CPU_CHUNK };
        for range in blocks(n, chunk) {
            let last = range.end == n;
            detach_on(py, index.engine(), || with_workers(workers, range.len(), || f(index, range))).map_err(err)?;
            if !last {
                py.check_signals()?;
            }
        }
        Ok(())
    }

    fn closest(
        &self,
        py: Python<'_>,
        q: ArrayView2<'_, T>,
        opts: ClosestPointOptions<T>,
        workers: usize,
    ) -> PyResult<Found<T>> {
        let n = q.nrows();
        let missing = self.main.mesh().triangles.len() as i64;
        let mut out = Found {
            distance: vec![T::ZERO; n],
            point: vec![T::ZERO; 3 * n],
            triangle: vec![0; n],
            bary: vec![T::ZERO; 3 * n],
        };
        let o = &mut out;
        self.in_blocks(py, n, workers, |index, range| {
            let cp = index.closest_points(&columns(q, range.clone()), &opts)?;
            o.distance[range.clone()].copy_from_slice(&cp.distance);
            let (pt, [u, v, w]) = (&cp.point, &cp.bary);
            interleave([&pt.x, &pt.y, &pt.z], &mut o.point[3 * range.start..3 * range.end]);
            interleave([u, v, w], &mut o.bary[3 * range.start..3 * range.end]);
            o.triangle[range]
                .par_iter_mut()
                .zip(&cp.triangle)
                .for_each(|(t, &c)| *t = if c == NO_ID { missing } else { c as i64 });
            Ok(())
        })?;
        Ok(out)
    }

    fn signed(
        &self,
        py: Python<'_>,
        q: ArrayView2<'_, T>,
        opts: ClosestPointOptions<T>,
        workers: usize,
    ) -> PyResult<Vec<T>> {
        let mut out = vec![T::ZERO; q.nrows()];
        let o = &mut out[..];
        self.in_blocks(py, q.nrows(), workers, |index, range| {
            let sd = index.signed_distances(&columns(q, range.clone()), &opts)?;
            o[range].copy_from_slice(&sd);
            Ok(())
        })?;
        Ok(out)
    }
}

enum Index {
    F32(Placed<f32>),
    F64(Placed<f64>),
}

macro_rules! with_rows {
    ($self:expr, $rows:expr, |$p:ident, $q:ident| $body:expr) => {
        match (&$self.index, $rows) {
            (Index::F32($p), Rows::F32(a)) => {
                let $q = a.as_array();
                $body
            }
            (Index::F64($p), Rows::F64(a)) => {
                let $q = a.as_array();
                $body
            }
            _ => Err(PyTypeError::new_err("queries must have the index's dtype (the nearkit package converts them)")),
        }
    };
}

/// The mesh a vertex array and an (F, 3) uint32 face array make.
pub fn mesh_of<T: Real>(vertices: ArrayView2<'_, T>, faces: &PyReadonlyArray2<'_, u32>) -> PyResult<Mesh<T>> {
    if faces.shape()[1] != 3 {
        return Err(PyValueError::new_err(format!(
            "faces has shape ({}, {}); it must be (F, 3): three vertex indices per triangle",
            faces.shape()[0],
            faces.shape()[1]
        )));
    }
    let f = faces.as_array();
    let triangles = (0..f.nrows()).map(|t| [f[[t, 0]], f[[t, 1]], f[[t, 2]]]).collect();
    Ok(Mesh { vertices: all_columns(vertices), triangles })
}

/// The native half of `nearkit.MeshIndex` (see `python/nearkit/_mesh.py`).
#[pyclass(frozen, name = "MeshIndex", module = "nearkit._native")]
pub struct PyMeshIndex {
    index: Index,
}

#[pymethods]
impl PyMeshIndex {
    #[new]
    fn new(
        py: Python<'_>,
        vertices: &Bound<'_, PyAny>,
        faces: PyReadonlyArray2<'_, u32>,
        device: &str,
    ) -> PyResult<Self> {
        let device = parse_device(device)?;
        let auto = device == nearkit::Device::Auto;
        let engine = engine(py, device)?;
        macro_rules! build {
            ($a:expr, $variant:ident) => {{
                let mesh = mesh_of($a.as_array(), &faces)?;
                let main = detach_on(py, &engine, || MeshIndex::new(&mesh, &engine)).map_err(err)?;
                Index::$variant(Placed { main, auto, cpu: OnceLock::new() })
            }};
        }
        let index = match Rows::extract(vertices, "vertices", 3)? {
            Rows::F32(a) => build!(a, F32),
            Rows::F64(a) => build!(a, F64),
        };
        Ok(Self { index })
    }

    /// Triangles.
    #[getter]
    fn n_faces(&self) -> usize {
        match &self.index {
            Index::F32(p) => p.main.mesh().triangles.len(),
            Index::F64(p) => p.main.mesh().triangles.len(),
        }
    }

    /// `float32` or `float64`.
    #[getter]
    fn dtype(&self) -> &'static str {
        match &self.index {
            Index::F32(_) => "float32",
            Index::F64(_) => "float64",
        }
    }

    /// What the index runs on.
    #[getter]
    fn device(&self) -> String {
        match &self.index {
            Index::F32(p) => p.main.engine().describe(),
            Index::F64(p) => p.main.engine().describe(),
        }
    }

    /// (distance (N,), point (N, 3), triangle (N,), barycentric (N, 3)).
    #[pyo3(signature = (x, max_distance, workers))]
    fn closest_point<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        max_distance: Option<f64>,
        workers: usize,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let rows = Rows::extract(x, "x", 3)?;
        with_rows!(self, rows, |p, q| {
            let n = q.nrows();
            let opts = ClosestPointOptions { max_distance: max_distance.map(Real::from_f64) };
            let f = p.closest(py, q, opts, workers)?;
            (vector(py, f.distance), matrix(py, f.point, n, 3)?, vector(py, f.triangle), matrix(py, f.bary, n, 3)?)
                .into_pyobject(py)
        })
    }

    /// Signed distances (N,), negative inside.
    #[pyo3(signature = (x, max_distance, workers))]
    fn signed_distance<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        max_distance: Option<f64>,
        workers: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let rows = Rows::extract(x, "x", 3)?;
        with_rows!(self, rows, |p, q| {
            let opts = ClosestPointOptions { max_distance: max_distance.map(Real::from_f64) };
            Ok(vector(py, p.signed(py, q, opts, workers)?).into_any())
        })
    }
}
