//! What `nearkit.dask` does to every row of its inputs, done in parallel with the GIL
//! released: cutting a chunk into the cells of a k-d split (a stable counting sort by cell),
//! and finding the rows inside a box. In numpy these were most of a GPU join's time.

use numpy::ndarray::ArrayView2;
use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rayon::prelude::*;

use crate::arrays::Rows;

/// Rows per parallel task.
const BLOCK: usize = 1 << 15;

/// The cell of a row: down the splits in heap order, right where the coordinate is >= the
/// split value (compared in f64, as numpy compares a float32 with a float64).
fn cell_of(row: [f64; 3], axes: &[usize], values: &[f64], depth: u32) -> usize {
    let mut node = 0usize;
    for _ in 0..depth {
        let right = row[axes[node]] >= values[node];
        node = 2 * node + 1 + usize::from(right);
    }
    node - ((1usize << depth) - 1)
}

fn row<T: Copy + Into<f64>>(v: &ArrayView2<'_, T>, i: usize) -> [f64; 3] {
    [v[[i, 0]].into(), v[[i, 1]].into(), v[[i, 2]].into()]
}

/// (order, bounds, rows in that order): a stable sort of the rows by cell; cell `c` holds
/// `order[bounds[c]..bounds[c + 1]]`.
fn sort_by_cell<T: Copy + Into<f64> + Send + Sync + numpy::Element>(
    v: ArrayView2<'_, T>,
    axes: &[usize],
    values: &[f64],
    depth: u32,
) -> (Vec<i64>, Vec<i64>, Vec<T>) {
    let n = v.nrows();
    let cells = 1usize << depth;
    let blocks = n.div_ceil(BLOCK);
    // Each row's cell, and each block's count per cell.
    let mut cell = vec![0u32; n];
    let counts: Vec<Vec<usize>> = cell
        .par_chunks_mut(BLOCK)
        .enumerate()
        .map(|(b, out)| {
            let mut count = vec![0usize; cells];
            for (j, c) in out.iter_mut().enumerate() {
                let k = cell_of(row(&v, b * BLOCK + j), axes, values, depth);
                *c = k as u32;
                count[k] += 1;
            }
            count
        })
        .collect();
    // Where each block's rows of each cell start: cells in order, blocks in order within.
    let mut starts = vec![vec![0usize; cells]; blocks];
    let mut bounds = vec![0i64; cells + 1];
    let mut at = 0usize;
    for c in 0..cells {
        bounds[c] = at as i64;
        for b in 0..blocks {
            starts[b][c] = at;
            at += counts[b][c];
        }
    }
    bounds[cells] = at as i64;
    let mut order = vec![0i64; n];
    let mut sorted = vec![v[[0, 0]]; 3 * n];
    let (o_ptr, s_ptr) = (SendPtr(order.as_mut_ptr()), SendPtr(sorted.as_mut_ptr()));
    cell.par_chunks(BLOCK).zip(starts.into_par_iter()).enumerate().for_each(|(b, (cells_of, mut next))| {
        for (j, &c) in cells_of.iter().enumerate() {
            let i = b * BLOCK + j;
            let to = next[c as usize];
            next[c as usize] += 1;
            // SAFETY: every block writes its own slots (from its starts), each once.
            unsafe {
                o_ptr.get().add(to).write(i as i64);
                for a in 0..3 {
                    s_ptr.get().add(3 * to + a).write(v[[i, a]]);
                }
            }
        }
    });
    (order, bounds, sorted)
}

struct SendPtr<T>(*mut T);
impl<T> SendPtr<T> {
    fn get(&self) -> *mut T {
        self.0
    }
}
// SAFETY: tasks write disjoint slots; the buffers outlive the parallel loop.
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}

/// The rows of `points` ((n, 3) float32 or float64) sorted by their cell of the k-d split
/// (`axes`, `values` in heap order, `depth` levels): `(order, bounds, sorted rows)`, stable
/// (a cell's rows in their original order).
#[pyfunction]
pub fn sort_by_cells<'py>(
    py: Python<'py>,
    points: &Bound<'py, PyAny>,
    axes: PyReadonlyArray1<'py, i64>,
    values: PyReadonlyArray1<'py, f64>,
    depth: u32,
) -> PyResult<Bound<'py, pyo3::types::PyTuple>> {
    let (axes, values) = (axes.as_slice()?, values.as_slice()?);
    if depth > 16
        || axes.len() < (1 << depth) - 1
        || values.len() < axes.len()
        || axes.iter().any(|&a| !(0..3).contains(&a))
    {
        return Err(PyValueError::new_err("the splits do not make a tree of that depth"));
    }
    let axes: Vec<usize> = axes.iter().map(|&a| a as usize).collect();
    let values = values.to_vec();
    macro_rules! go {
        ($a:expr) => {{
            let v = $a.as_array();
            let n = v.nrows();
            let (order, bounds, sorted) = if n == 0 {
                (Vec::new(), vec![0i64; (1 << depth) + 1], Vec::new())
            } else {
                py.detach(|| sort_by_cell(v, &axes, &values, depth))
            };
            let sorted = PyArray1::from_vec(py, sorted).reshape([n, 3])?;
            (PyArray1::from_vec(py, order), PyArray1::from_vec(py, bounds), sorted).into_pyobject(py)
        }};
    }
    match Rows::extract(points, "points", 3)? {
        Rows::F32(a) => go!(a),
        Rows::F64(a) => go!(a),
    }
}

/// Which rows of `points` lie in the closed box `lo..=hi` (compared in f64): their indices,
/// ascending.
#[pyfunction]
pub fn rows_in_box<'py>(
    py: Python<'py>,
    points: &Bound<'py, PyAny>,
    lo: [f64; 3],
    hi: [f64; 3],
) -> PyResult<Bound<'py, PyArray1<i64>>> {
    fn inside<T: Copy + Into<f64> + Sync>(v: ArrayView2<'_, T>, lo: [f64; 3], hi: [f64; 3]) -> Vec<i64> {
        let n = v.nrows();
        let parts: Vec<Vec<i64>> = (0..n.div_ceil(BLOCK))
            .into_par_iter()
            .map(|b| {
                (b * BLOCK..((b + 1) * BLOCK).min(n))
                    .filter(|&i| {
                        let r = row(&v, i);
                        (0..3).all(|a| r[a] >= lo[a] && r[a] <= hi[a])
                    })
                    .map(|i| i as i64)
                    .collect()
            })
            .collect();
        parts.concat()
    }
    let found = match Rows::extract(points, "points", 3)? {
        Rows::F32(a) => {
            let v = a.as_array();
            py.detach(|| inside(v, lo, hi))
        }
        Rows::F64(a) => {
            let v = a.as_array();
            py.detach(|| inside(v, lo, hi))
        }
    };
    Ok(PyArray1::from_vec(py, found))
}
