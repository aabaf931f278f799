//! `read_points` and `read_mesh`: the command's readers, for Python.

use std::path::PathBuf;

use nearkit::{Points, Real};
use nearkit_io::ReadOptions;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::arrays::{interleave, io_err, matrix};

fn rows<'py, T: Real + numpy::Element>(py: Python<'py>, p: &Points<T>) -> PyResult<Bound<'py, PyAny>> {
    let mut v = vec![T::ZERO; 3 * p.len()];
    interleave([&p.x, &p.y, &p.z], &mut v);
    Ok(matrix(py, v, p.len(), 3)?.into_any())
}

/// An (N, 3) array of `dtype` ("float32" or "float64") from a point file.
#[pyfunction]
#[pyo3(signature = (path, dtype, columns=None))]
pub fn read_points<'py>(
    py: Python<'py>,
    path: PathBuf,
    dtype: &str,
    columns: Option<[String; 3]>,
) -> PyResult<Bound<'py, PyAny>> {
    let opts = ReadOptions { columns };
    match dtype {
        "float32" => rows(py, &py.detach(|| nearkit_io::read_points::<f32>(&path, &opts)).map_err(io_err)?),
        "float64" => rows(py, &py.detach(|| nearkit_io::read_points::<f64>(&path, &opts)).map_err(io_err)?),
        _ => Err(PyValueError::new_err(format!("dtype must be float32 or float64, got {dtype}"))),
    }
}

/// (vertices (V, 3) of `dtype`, faces (F, 3) int64) from a mesh file.
#[pyfunction]
pub fn read_mesh<'py>(py: Python<'py>, path: PathBuf, dtype: &str) -> PyResult<Bound<'py, PyTuple>> {
    macro_rules! read {
        ($t:ty) => {{
            let mesh = py.detach(|| nearkit_io::read_mesh::<$t>(&path)).map_err(io_err)?;
            let f: Vec<i64> = mesh.triangles.iter().flat_map(|t| t.map(i64::from)).collect();
            (rows(py, &mesh.vertices)?, matrix(py, f, mesh.triangles.len(), 3)?).into_pyobject(py)
        }};
    }
    match dtype {
        "float32" => read!(f32),
        "float64" => read!(f64),
        _ => Err(PyValueError::new_err(format!("dtype must be float32 or float64, got {dtype}"))),
    }
}
