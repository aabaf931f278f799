//! `ShardedIndex`: nearkit's index cut across several GPUs, from numpy rows in one piece or
//! many (a Dask array's chunks) to numpy arrays.

use numpy::{PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use nearkit::{big_vec, Device, Engine, Real, ShardedIndex, NO_ID};

use crate::arrays::{err, vector};
use crate::engines::{detach_on_all, engine};

enum Index {
    F32(ShardedIndex<f32>),
    F64(ShardedIndex<f64>),
}

/// Rows of every piece (C-contiguous (n, 3) arrays of `T`, which the Python side makes sure of).
fn pieces<'py, T: Real + numpy::Element>(arrays: &'py [PyReadonlyArray2<'py, T>]) -> PyResult<Vec<&'py [T]>> {
    arrays
        .iter()
        .map(|a| {
            a.as_slice().map_err(|_| {
                PyTypeError::new_err(format!(
                    "rows must be C-contiguous (n, 3) arrays: got shape {:?}, strides {:?}",
                    a.shape(),
                    a.strides()
                ))
            })
        })
        .collect()
}

#[pyclass(name = "ShardedIndex", module = "nearkit._native")]
pub struct PyShardedIndex {
    index: Index,
    engines: Vec<Engine>,
}

#[pymethods]
impl PyShardedIndex {
    /// Indexes the rows of `pieces` (one after another; all float32 or all float64) across
    /// GPUs `devices`.
    #[new]
    fn new(py: Python<'_>, pieces: Vec<Bound<'_, PyAny>>, devices: Vec<usize>) -> PyResult<Self> {
        let f32s = pieces.iter().map(|p| p.extract::<PyReadonlyArray2<'_, f32>>()).collect::<PyResult<Vec<_>>>();
        let f64s = pieces.iter().map(|p| p.extract::<PyReadonlyArray2<'_, f64>>()).collect::<PyResult<Vec<_>>>();
        let (r32, r64) = match (&f32s, &f64s) {
            (Ok(a), _) => (Some(self::pieces(a)?), None),
            (_, Ok(a)) => (None, Some(self::pieces(a)?)),
            _ => return Err(PyTypeError::new_err("data must be float32 or float64 (n, 3) arrays, all of one dtype")),
        };
        let engines = devices.iter().map(|&d| engine(py, Device::Cuda(d))).collect::<PyResult<Vec<_>>>()?;
        let index = match (r32, r64) {
            (Some(rows), _) => {
                Index::F32(detach_on_all(py, &engines, || ShardedIndex::from_rows(&rows, &engines)).map_err(err)?)
            }
            (_, Some(rows)) => {
                Index::F64(detach_on_all(py, &engines, || ShardedIndex::from_rows(&rows, &engines)).map_err(err)?)
            }
            _ => unreachable!("one of the two"),
        };
        Ok(Self { index, engines })
    }

    /// Indexed points.
    #[getter]
    fn n(&self) -> usize {
        match &self.index {
            Index::F32(i) => i.len(),
            Index::F64(i) => i.len(),
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

    /// The GPUs it spans, as `cuda:N (name, sm_XY)`.
    #[getter]
    fn devices(&self) -> Vec<String> {
        self.engines.iter().map(Engine::describe).collect()
    }

    /// Each row's nearest indexed point over the rows of `pieces` (the index's dtype), one
    /// after another: (distances, ids), ids `n` where none lies within `max_distance`.
    #[pyo3(signature = (pieces, max_distance))]
    fn nearest<'py>(
        &self,
        py: Python<'py>,
        pieces: Vec<Bound<'py, PyAny>>,
        max_distance: Option<f64>,
    ) -> PyResult<Bound<'py, pyo3::types::PyTuple>> {
        match &self.index {
            Index::F32(i) => nearest(py, i, &self.engines, &pieces, max_distance),
            Index::F64(i) => nearest(py, i, &self.engines, &pieces, max_distance),
        }
    }
}

fn nearest<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    index: &ShardedIndex<T>,
    engines: &[Engine],
    pieces: &[Bound<'py, PyAny>],
    max_distance: Option<f64>,
) -> PyResult<Bound<'py, pyo3::types::PyTuple>> {
    let arrays = pieces
        .iter()
        .map(|p| p.extract::<PyReadonlyArray2<'py, T>>())
        .collect::<PyResult<Vec<_>>>()
        .map_err(|_| PyTypeError::new_err(format!("queries must be {} (n, 3) arrays", T::NAME)))?;
    let rows = self::pieces(&arrays)?;
    let n: usize = rows.iter().map(|r| r.len() / 3).sum();
    let missing = index.len() as i64;
    let (mut d, mut ids) = (big_vec::<T>(n), big_vec::<i64>(n));
    detach_on_all(py, engines, || {
        let (ds, is) = (&mut d.spare_capacity_mut()[..n], &mut ids.spare_capacity_mut()[..n]);
        index.nearest_rows_into(&rows, max_distance.map(T::from_f64), ds, is, |b| {
            if b == NO_ID {
                missing
            } else {
                b as i64
            }
        })
    })
    .map_err(err)?;
    // SAFETY: `nearest_rows_into` wrote every row.
    unsafe {
        d.set_len(n);
        ids.set_len(n);
    }
    (vector(py, d), vector(py, ids)).into_pyobject(py)
}
