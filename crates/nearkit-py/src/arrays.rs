//! numpy arrays to the library's types and back, and the library's errors as Python
//! exceptions.
//!
//! The library keeps points as three columns (`Points`), numpy as (N, 3) rows. The kNN
//! query on the CPU reads C-ordered rows in place (`nearkit::QueryPoints`); other inputs are
//! transposed once (in parallel; a Fortran-order array is three plain copies), and every
//! (N, 3) result is interleaved back.

use std::ops::Range;

use nearkit::{Points, Real};
use numpy::ndarray::{s, ArrayView2};
use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyMemoryError, PyOSError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use rayon::prelude::*;

/// Rows copied per parallel task.
const BLOCK: usize = 1 << 14;

/// A library error as the Python exception for it: bad input is a `ValueError`, a GPU that
/// failed or is missing a `RuntimeError`. The message is the library's, which says what to do.
pub fn err(e: nearkit::Error) -> PyErr {
    match e {
        nearkit::Error::CudaUnavailable(_) | nearkit::Error::Cuda(_) => PyRuntimeError::new_err(e.to_string()),
        nearkit::Error::OutOfMemory(_) => PyMemoryError::new_err(e.to_string()),
        _ => PyValueError::new_err(e.to_string()),
    }
}

/// A file error (it names the file, and the line or row) as an `OSError`; the command's
/// option named in a hint becomes the Python argument.
pub fn io_err(e: nearkit_io::IoError) -> PyErr {
    PyOSError::new_err(e.to_string().replace("--precision f64", "dtype=float64"))
}

/// An error about a part of the rows that starts at row `start`, naming the bad row by its
/// place among all of them.
pub fn rows_from(e: nearkit::Error, start: usize) -> nearkit::Error {
    match e {
        nearkit::Error::NonFinite { role, index, axis, value } => {
            nearkit::Error::NonFinite { role, index: index + start, axis, value }
        }
        e => e,
    }
}

/// An (N, 3) array of float32 or float64, borrowed read-only from numpy.
pub enum Rows<'py> {
    F32(PyReadonlyArray2<'py, f32>),
    F64(PyReadonlyArray2<'py, f64>),
}

impl<'py> Rows<'py> {
    /// `obj` as (N, `cols`) rows; `what` names it in errors. The Python side has already
    /// converted other dtypes, so anything else is a `TypeError`.
    pub fn extract(obj: &Bound<'py, PyAny>, what: &str, cols: usize) -> PyResult<Self> {
        let rows = if let Ok(a) = obj.extract::<PyReadonlyArray2<'py, f32>>() {
            Rows::F32(a)
        } else if let Ok(a) = obj.extract::<PyReadonlyArray2<'py, f64>>() {
            Rows::F64(a)
        } else {
            return Err(PyTypeError::new_err(format!("{what} must be a 2-D float32 or float64 numpy array")));
        };
        let shape = match &rows {
            Rows::F32(a) => a.shape().to_vec(),
            Rows::F64(a) => a.shape().to_vec(),
        };
        if shape[1] != cols {
            return Err(PyValueError::new_err(format!(
                "{what} has shape ({}, {}); it must be (N, {cols})",
                shape[0], shape[1]
            )));
        }
        Ok(rows)
    }
}

/// Rows `range` of an (N, 3) view as columns, copied in parallel.
pub fn columns<T: Real>(view: ArrayView2<'_, T>, range: Range<usize>) -> Points<T> {
    let v = view.slice(s![range, ..]);
    let n = v.nrows();
    let mut p = Points { x: vec![T::ZERO; n], y: vec![T::ZERO; n], z: vec![T::ZERO; n] };
    if let Some(flat) = v.as_slice() {
        // C order: x y z x y z ...
        p.x.par_chunks_mut(BLOCK)
            .zip(p.y.par_chunks_mut(BLOCK))
            .zip(p.z.par_chunks_mut(BLOCK))
            .zip(flat.par_chunks(3 * BLOCK))
            .for_each(|(((x, y), z), rows)| {
                for (i, r) in rows.chunks_exact(3).enumerate() {
                    x[i] = r[0];
                    y[i] = r[1];
                    z[i] = r[2];
                }
            });
        return p;
    }
    for (axis, out) in [&mut p.x, &mut p.y, &mut p.z].into_iter().enumerate() {
        let col = v.column(axis);
        match col.as_slice() {
            // Fortran order: each column is contiguous.
            Some(c) => out.par_chunks_mut(BLOCK).zip(c.par_chunks(BLOCK)).for_each(|(o, c)| o.copy_from_slice(c)),
            // Any other strides (a slice of a bigger array, a transposed view, ...).
            None => out.par_chunks_mut(BLOCK).enumerate().for_each(|(b, o)| {
                for (i, slot) in o.iter_mut().enumerate() {
                    *slot = col[b * BLOCK + i];
                }
            }),
        }
    }
    p
}

/// Every row of an (N, 3) view as columns.
pub fn all_columns<T: Real>(view: ArrayView2<'_, T>) -> Points<T> {
    let n = view.nrows();
    columns(view, 0..n)
}

/// Three columns into rows `out[3 i..3 i + 3]`, in parallel (`out` holds 3 × len values).
pub fn interleave<T: Real>([x, y, z]: [&[T]; 3], out: &mut [T]) {
    out.par_chunks_mut(3 * BLOCK).enumerate().for_each(|(b, rows)| {
        let base = b * BLOCK;
        for (i, r) in rows.chunks_exact_mut(3).enumerate() {
            r.copy_from_slice(&[x[base + i], y[base + i], z[base + i]]);
        }
    });
}

/// A flat vector as an (n, cols) numpy array, without a copy.
pub fn matrix<'py, T: numpy::Element>(
    py: Python<'py>,
    v: Vec<T>,
    n: usize,
    cols: usize,
) -> PyResult<Bound<'py, numpy::PyArray2<T>>> {
    PyArray1::from_vec(py, v).reshape([n, cols])
}

/// A vector as a 1-D numpy array, without a copy.
pub fn vector<T: numpy::Element>(py: Python<'_>, v: Vec<T>) -> Bound<'_, PyArray1<T>> {
    PyArray1::from_vec(py, v)
}

/// Blocks of `chunk` rows of `0..n`.
pub fn blocks(n: usize, chunk: usize) -> impl Iterator<Item = Range<usize>> {
    let chunk = chunk.max(1);
    (0..n.div_ceil(chunk)).map(move |b| b * chunk..(b * chunk + chunk).min(n))
}
