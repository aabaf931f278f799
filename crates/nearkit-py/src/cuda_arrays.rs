//! Arrays in GPU memory from other libraries (CuPy, PyTorch, anything with
//! `__cuda_array_interface__`), used in place: points are read on the device
//! (`Engine::import_rows`), and results stay there, handed back without a copy as objects
//! that expose `__cuda_array_interface__` themselves. The Python side (`_cuda.py`) reads the
//! interface of the caller's array and wraps the results in the caller's library.

use nearkit::{DeviceKnn, DevicePoints, Engine, KnnOptions, PointIndex, Real, Role};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Rows in GPU memory as the Python side describes them: the address of row 0, the number of
/// rows, and the strides of a row and of a coordinate, in elements.
#[derive(Clone, Copy)]
pub struct CudaRows {
    pub address: u64,
    pub len: usize,
    pub strides: (isize, isize),
}

impl CudaRows {
    /// Copied into columns on the engine's GPU and checked.
    pub fn import<T: Real>(self, engine: &Engine, role: Role) -> nearkit::Result<DevicePoints<T>> {
        // SAFETY: the Python side took the address, length and strides from the array's
        // `__cuda_array_interface__` and holds the array for the call; the library refuses
        // addresses that are not memory of the engine's GPU.
        unsafe { engine.import_rows::<T>(self.address, self.len, self.strides, role) }
    }
}

/// An index of points in GPU memory.
pub fn index_rows<T: Real>(engine: &Engine, rows: CudaRows) -> nearkit::Result<PointIndex<T>> {
    let points = rows.import::<T>(engine, Role::Data)?;
    PointIndex::from_device(&points, engine)
}

/// The `k` nearest of each row (`k` at most the index's size), left in GPU memory.
pub fn knn_rows<T: Real>(
    index: &PointIndex<T>,
    rows: CudaRows,
    k: usize,
    max_distance: Option<T>,
    exclude_self: bool,
) -> nearkit::Result<CudaKnn> {
    let engine = index.engine();
    let queries = rows.import::<T>(engine, Role::Queries)?;
    let opts = KnnOptions { k, max_distance, exclude_self, ..KnnOptions::k(k) };
    let mut out = DeviceKnn::<T>::new(engine, rows.len, k)?;
    let k = index.knn_device(&queries, &opts, &mut out)?;
    // Results are complete before another library's streams read them.
    engine.synchronize()?;
    let (ids, distances) = out.addresses();
    Ok(CudaKnn { engine: engine.clone(), rows: rows.len, k, ids, distances, real: T::NAME, _owner: Box::new(out) })
}

/// A kNN result in GPU memory: ids (`int32` here; `u32` with `NO_ID`, which reads as -1) and
/// distances, each (rows, k). Other libraries read them in place through
/// [`CudaKnn::interfaces`]; the memory lives as long as this object does.
#[pyclass(frozen, name = "CudaKnn", module = "nearkit._native")]
pub struct CudaKnn {
    engine: Engine,
    rows: usize,
    k: usize,
    ids: u64,
    distances: u64,
    real: &'static str,
    _owner: Box<dyn Send + Sync>,
}

impl Drop for CudaKnn {
    fn drop(&mut self) {
        // Another library may still have work queued that reads this memory: let it finish
        // before the memory goes back to the pool.
        let _ = self.engine.synchronize_device();
    }
}

#[pymethods]
impl CudaKnn {
    /// The k of each row.
    #[getter]
    fn k(&self) -> usize {
        self.k
    }

    /// `(ids, distances)` as `__cuda_array_interface__` dicts (version 3).
    fn interfaces<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyDict>)> {
        let dict = |address: u64, typestr: &str| -> PyResult<Bound<'py, PyDict>> {
            let d = PyDict::new(py);
            d.set_item("shape", (self.rows, self.k))?;
            d.set_item("typestr", typestr)?;
            d.set_item("data", (address, false))?;
            d.set_item("version", 3)?;
            d.set_item("strides", py.None())?;
            // Written and waited for: nothing to synchronise with.
            d.set_item("stream", py.None())?;
            Ok(d)
        };
        let real = if self.real == "f32" { "<f4" } else { "<f8" };
        Ok((dict(self.ids, "<i4")?, dict(self.distances, real)?))
    }
}
