//! `PointIndex`: the library's `PointIndex` in float32 or float64, with the queries scipy's
//! `cKDTree` has (`query`, as ranks of the k nearest) and nearkit's own (`nearest`, the kNN
//! graph, closest pairs). Results come as flat vectors turned into numpy arrays without a copy.

use std::sync::OnceLock;

use nearkit::{Engine, KnnOptions, PairMode, PairsOptions, PointIndex, Points, Real, NO_ID};
use numpy::ndarray::ArrayView2;
use numpy::{PyArray1, PyArray2};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use rayon::prelude::*;

use crate::arrays::{all_columns, blocks, columns, err, matrix, vector, Rows};
use crate::engines::{engine, parse_device, with_workers, AUTO_CPU_BELOW, CPU_CHUNK};

/// An index on the device asked for, and for `auto` on a GPU a CPU twin for small calls.
struct Placed<T: Real> {
    data: Points<T>,
    main: PointIndex<T>,
    auto: bool,
    cpu: OnceLock<PointIndex<T>>,
}

impl<T: Real> Placed<T> {
    fn new(data: Points<T>, engine: &Engine, auto: bool) -> nearkit::Result<Self> {
        let main = PointIndex::new(&data, engine)?;
        Ok(Self { data, main, auto, cpu: OnceLock::new() })
    }

    /// The index a call of `queries` queries runs on; the CPU twin is built on first need.
    fn for_queries(&self, queries: usize) -> nearkit::Result<&PointIndex<T>> {
        if !(self.auto && self.main.engine().is_cuda() && queries < AUTO_CPU_BELOW) {
            return Ok(&self.main);
        }
        if let Some(twin) = self.cpu.get() {
            return Ok(twin);
        }
        let twin = PointIndex::new(&self.data, &Engine::cpu())?;
        Ok(self.cpu.get_or_init(|| twin))
    }

    /// Queries a block at a time: each block in parallel with the GIL released, then a check
    /// for Ctrl-C.
    /// A kNN graph (`whole`) cannot be split: its queries must be the data itself.
    fn in_blocks(
        &self,
        py: Python<'_>,
        n: usize,
        whole: bool,
        workers: usize,
        mut f: impl FnMut(&PointIndex<T>, std::ops::Range<usize>) -> nearkit::Result<()> + Send,
    ) -> PyResult<()> {
        let index = self.for_queries(n).map_err(err)?;
        // The GPU path streams its own chunks; one call keeps its copies overlapped.
        let chunk = if whole || index.engine().is_cuda() { n.max(1) } else { CPU_CHUNK };
        for range in blocks(n, chunk) {
            let last = range.end == n;
            py.detach(|| with_workers(workers, range.len(), || f(index, range))).map_err(err)?;
            if !last {
                py.check_signals()?;
            }
        }
        Ok(())
    }

    /// Each query's neighbours of the given 1-based `ranks` (distances, ids): `inf` and `n`
    /// where there is none (beyond the max distance, or rank > n). No queries: the kNN graph
    /// of the data (`opts.exclude_self`).
    fn query(
        &self,
        py: Python<'_>,
        q: Option<ArrayView2<'_, T>>,
        ranks: &[usize],
        opts: KnnOptions<T>,
        workers: usize,
    ) -> PyResult<(Vec<T>, Vec<i64>)> {
        let nq = q.map_or(self.data.len(), |q| q.nrows());
        let m = ranks.len();
        let missing = self.data.len() as i64;
        // Ranks 1..=k (scipy's `k=8`) of a call made in one block: the library's distances
        // are the result as they are, and only the ids are converted (to intp), in one pass.
        let whole_ranks = ranks.iter().enumerate().all(|(j, &r)| r == j + 1);
        let mut out: Option<(Vec<T>, Vec<i64>)> = None;
        let k = ranks.iter().copied().max().unwrap_or(1);
        self.in_blocks(py, nq, q.is_none(), workers, |index, range| {
            let points = q.map(|q| columns(q, range.clone()));
            let knn = index.knn(points.as_ref().unwrap_or(&self.data), &KnnOptions { k, ..opts })?;
            if whole_ranks && knn.k == m && range == (0..nq) {
                let ids = knn.ids.par_iter().with_min_len(1 << 14);
                let ids = ids.map(|&id| if id == NO_ID { missing } else { id as i64 }).collect();
                out = Some((knn.distances, ids));
                return Ok(());
            }
            let (d_all, ids_all) = out.get_or_insert_with(|| (vec![T::ZERO; nq * m], vec![0i64; nq * m]));
            let rows = range.start * m..range.end * m;
            d_all[rows.clone()]
                .par_chunks_mut(m.max(1))
                .zip(ids_all[rows].par_chunks_mut(m.max(1)))
                .enumerate()
                .for_each(|(r, (d_row, id_row))| {
                    for (j, &rank) in ranks.iter().enumerate() {
                        let col = rank - 1;
                        let at = r * knn.k + col;
                        (d_row[j], id_row[j]) = match knn.ids.get(at) {
                            Some(&id) if col < knn.k && id != NO_ID => (knn.distances[at], id as i64),
                            _ => (T::INFINITY, missing),
                        };
                    }
                });
            Ok(())
        })?;
        Ok(out.unwrap_or_default())
    }

    fn nearest(
        &self,
        py: Python<'_>,
        q: ArrayView2<'_, T>,
        max_distance: Option<T>,
        workers: usize,
    ) -> PyResult<(Vec<T>, Vec<i64>)> {
        let nq = q.nrows();
        let missing = self.data.len() as i64;
        let (mut d, mut ids) = (vec![T::ZERO; nq], vec![0i64; nq]);
        let (d_all, ids_all) = (&mut d[..], &mut ids[..]);
        self.in_blocks(py, nq, false, workers, |index, range| {
            let nn = index.nearest(&columns(q, range.clone()), max_distance)?;
            d_all[range.clone()].copy_from_slice(&nn.distance);
            ids_all[range]
                .par_iter_mut()
                .zip(&nn.b)
                .for_each(|(o, &b)| *o = if b == NO_ID { missing } else { b as i64 });
            Ok(())
        })?;
        Ok((d, ids))
    }

    fn closest_pairs(
        &self,
        py: Python<'_>,
        a: ArrayView2<'_, T>,
        opts: PairsOptions<T>,
        workers: usize,
    ) -> PyResult<(Vec<i64>, Vec<i64>, Vec<T>)> {
        // One call: the k best are chosen over every A at once.
        let index = self.for_queries(a.nrows()).map_err(err)?;
        let pairs = py
            .detach(|| with_workers(workers, a.nrows(), || index.closest_pairs(&all_columns(a), &opts)))
            .map_err(err)?;
        Ok((
            pairs.iter().map(|p| p.a as i64).collect(),
            pairs.iter().map(|p| p.b as i64).collect(),
            pairs.iter().map(|p| p.distance).collect(),
        ))
    }
}

enum Index {
    F32(Placed<f32>),
    F64(Placed<f64>),
}

/// Runs `$body` with `$p` the index and `$q` the query rows of the index's precision.
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

/// The native half of `nearkit.PointIndex` (see `python/nearkit/_points.py`).
#[pyclass(frozen, name = "PointIndex", module = "nearkit._native")]
pub struct PyPointIndex {
    index: Index,
}

type Query<'py, T> = (Bound<'py, PyArray2<T>>, Bound<'py, PyArray2<i64>>);

#[pymethods]
impl PyPointIndex {
    #[new]
    fn new(py: Python<'_>, data: &Bound<'_, PyAny>, device: &str) -> PyResult<Self> {
        let device = parse_device(device)?;
        let auto = device == nearkit::Device::Auto;
        let engine = engine(py, device)?;
        let index = match Rows::extract(data, "data", 3)? {
            Rows::F32(a) => {
                let v = a.as_array();
                Index::F32(py.detach(|| Placed::new(all_columns(v), &engine, auto)).map_err(err)?)
            }
            Rows::F64(a) => {
                let v = a.as_array();
                Index::F64(py.detach(|| Placed::new(all_columns(v), &engine, auto)).map_err(err)?)
            }
        };
        Ok(Self { index })
    }

    /// Indexed points.
    #[getter]
    fn n(&self) -> usize {
        match &self.index {
            Index::F32(p) => p.data.len(),
            Index::F64(p) => p.data.len(),
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

    /// What the index runs on (`cpu (N threads)` or the GPU).
    #[getter]
    fn device(&self) -> String {
        match &self.index {
            Index::F32(p) => p.main.engine().describe(),
            Index::F64(p) => p.main.engine().describe(),
        }
    }

    /// Neighbours of 1-based `ranks` for each row of `x`: (distances, ids), each (N, len(ranks)).
    #[pyo3(signature = (x, ranks, max_distance, workers))]
    fn query<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        ranks: Vec<usize>,
        max_distance: Option<f64>,
        workers: usize,
    ) -> PyResult<Bound<'py, pyo3::types::PyTuple>> {
        let rows = Rows::extract(x, "x", 3)?;
        let m = ranks.len();
        with_rows!(self, rows, |p, q| {
            let opts = KnnOptions { max_distance: max_distance.map(Real::from_f64), ..KnnOptions::k(1) };
            let (d, ids) = p.query(py, Some(q), &ranks, opts, workers)?;
            let out: Query<'py, _> = (matrix(py, d, q.nrows(), m)?, matrix(py, ids, q.nrows(), m)?);
            out.into_pyobject(py)
        })
    }

    /// Each data point's neighbours of 1-based `ranks`, itself left out: (distances, ids).
    #[pyo3(signature = (ranks, max_distance, workers))]
    fn knn_graph<'py>(
        &self,
        py: Python<'py>,
        ranks: Vec<usize>,
        max_distance: Option<f64>,
        workers: usize,
    ) -> PyResult<Bound<'py, pyo3::types::PyTuple>> {
        let m = ranks.len();
        macro_rules! graph {
            ($p:expr) => {{
                let p = $p;
                let n = p.data.len();
                let opts = KnnOptions {
                    max_distance: max_distance.map(Real::from_f64),
                    exclude_self: true,
                    ..KnnOptions::k(1)
                };
                let (d, ids) = p.query(py, None, &ranks, opts, workers)?;
                (matrix(py, d, n, m)?, matrix(py, ids, n, m)?).into_pyobject(py)
            }};
        }
        match &self.index {
            Index::F32(p) => graph!(p),
            Index::F64(p) => graph!(p),
        }
    }

    /// Benchmarks only: seconds of each of `repeats` calls of the library's own kNN on `x`
    /// (columns prepared beforehand, nothing converted), the same call `query` makes. The
    /// binding's overhead is `query`'s time less this.
    #[pyo3(signature = (x, k, repeats))]
    fn _library_knn_seconds(
        &self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        k: usize,
        repeats: usize,
    ) -> PyResult<Vec<f64>> {
        let rows = Rows::extract(x, "x", 3)?;
        with_rows!(self, rows, |p, q| {
            let points = all_columns(q);
            let index = p.for_queries(points.len()).map_err(err)?;
            py.detach(|| {
                (0..repeats)
                    .map(|_| {
                        let start = std::time::Instant::now();
                        index.knn(&points, &KnnOptions::k(k)).map(|_| start.elapsed().as_secs_f64())
                    })
                    .collect::<nearkit::Result<Vec<f64>>>()
            })
            .map_err(err)
        })
    }

    /// Each row of `x`'s nearest indexed point: (distances, ids), each (N,).
    #[pyo3(signature = (x, max_distance, workers))]
    fn nearest<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        max_distance: Option<f64>,
        workers: usize,
    ) -> PyResult<Bound<'py, pyo3::types::PyTuple>> {
        let rows = Rows::extract(x, "x", 3)?;
        with_rows!(self, rows, |p, q| {
            let (d, ids) = p.nearest(py, q, max_distance.map(Real::from_f64), workers)?;
            (vector(py, d), vector(py, ids)).into_pyobject(py)
        })
    }

    /// The k closest pairs (a row of `a`, an indexed point): (a ids, b ids, distances).
    #[pyo3(signature = (a, k, mode, max_distance, workers))]
    fn closest_pairs<'py>(
        &self,
        py: Python<'py>,
        a: &Bound<'py, PyAny>,
        k: usize,
        mode: &str,
        max_distance: Option<f64>,
        workers: usize,
    ) -> PyResult<Bound<'py, pyo3::types::PyTuple>> {
        let mode: PairMode = mode.parse().map_err(err)?;
        let rows = Rows::extract(a, "a", 3)?;
        with_rows!(self, rows, |p, q| {
            let opts = PairsOptions { k, mode, max_distance: max_distance.map(Real::from_f64) };
            let (ia, ib, d) = p.closest_pairs(py, q, opts, workers)?;
            let out: (Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<_>>) =
                (vector(py, ia), vector(py, ib), vector(py, d));
            out.into_pyobject(py)
        })
    }
}
