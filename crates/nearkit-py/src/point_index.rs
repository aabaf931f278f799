//! `PointIndex`: the library's `PointIndex` in float32 or float64, with the queries scipy's
//! `cKDTree` has (`query`, as ranks of the k nearest; radius queries as compressed rows) and
//! nearkit's own (`nearest`, the kNN graph, closest pairs). Results come as flat vectors turned
//! into numpy arrays without a copy.

use std::sync::OnceLock;

use nearkit::{
    DeviceKnn, Engine, KnnOptions, PairMode, PairsOptions, PointColumns, PointIndex, Points, RadiusOptions, Real, Role,
    Within, NO_ID,
};
use numpy::ndarray::ArrayView2;
use numpy::{PyArray1, PyArray2, PyReadonlyArray1};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyList;
use rayon::prelude::*;

use crate::arrays::{all_columns, blocks, columns, err, matrix, rows_from, vector, Rows};
use crate::cuda_arrays::{knn_rows, CudaKnn, CudaRows};
use crate::engines::{detach_on, engine, parse_device, with_workers, AUTO_CPU_BELOW, CPU_CHUNK};

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

    /// An index of points another library holds in GPU memory: no host copy of them, so no
    /// CPU twin.
    fn on_gpu(engine: &Engine, rows: CudaRows) -> nearkit::Result<Self> {
        let main = crate::cuda_arrays::index_rows(engine, rows)?;
        Ok(Self { data: Points::new(Vec::new(), Vec::new(), Vec::new())?, main, auto: false, cpu: OnceLock::new() })
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
            detach_on(py, index.engine(), || with_workers(workers, range.len(), || f(index, range))).map_err(err)?;
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
        let missing = self.main.len() as i64;
        // Ranks 1..=k (scipy's `k=8`) of a call made in one block: the library's distances
        // are the result as they are, and only the ids are converted (to intp), in one pass.
        let whole_ranks = ranks.iter().enumerate().all(|(j, &r)| r == j + 1);
        if let (Some(q), true) = (q, whole_ranks) {
            if let Some(out) = self.query_on_gpu(py, q, m, opts.max_distance)? {
                return Ok(out);
            }
        }
        let k = ranks.iter().copied().max().unwrap_or(1);
        if let (Some(q), true) = (q, whole_ranks) {
            if self.main.knn_k(nq, &KnnOptions { k, ..opts }).map_err(err)? == m {
                return self.query_into(py, q, m, opts, workers);
            }
        }
        let mut out: Option<(Vec<T>, Vec<i64>)> = None;
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

    /// `query` of ranks 1..=k (all of them there are): the library writes each row straight
    /// into the arrays numpy gets, the ids widened to intp on the way.
    fn query_into(
        &self,
        py: Python<'_>,
        q: ArrayView2<'_, T>,
        k: usize,
        opts: KnnOptions<T>,
        workers: usize,
    ) -> PyResult<(Vec<T>, Vec<i64>)> {
        let nq = q.nrows();
        let missing = self.main.len() as i64;
        let what = "the neighbour lists";
        let (mut d, mut ids) = (
            nearkit::try_big_vec::<T>(nq, k, what).map_err(err)?,
            nearkit::try_big_vec::<i64>(nq, k, what).map_err(err)?,
        );
        let (d_out, ids_out) = (&mut d.spare_capacity_mut()[..nq * k], &mut ids.spare_capacity_mut()[..nq * k]);
        // C-ordered rows and Fortran-ordered columns are read where they are; other layouts
        // are made columns first.
        // SAFETY: an (N, 3) C-ordered array is N rows of three T, and [T; 3] has T's
        // alignment.
        let rows = q.as_slice().map(|flat| unsafe { std::slice::from_raw_parts(flat.as_ptr() as *const [T; 3], nq) });
        let cols = [0, 1, 2].map(|a| q.column(a).to_slice());
        let cols = match cols {
            [Some(x), Some(y), Some(z)] => Some(PointColumns { x, y, z }),
            _ => None,
        };
        self.in_blocks(py, nq, false, workers, |index, range| {
            let places = range.start * k..range.end * k;
            let (ds, is) = (&mut d_out[places.clone()], &mut ids_out[places]);
            let opts = KnnOptions { k, ..opts };
            let id = |id| if id == NO_ID { missing } else { id as i64 };
            match (rows, cols) {
                (Some(rows), _) => index.knn_into_slices(&rows[range.clone()], &opts, ds, is, id),
                (None, Some(c)) => {
                    let part = PointColumns { x: &c.x[range.clone()], y: &c.y[range.clone()], z: &c.z[range.clone()] };
                    index.knn_into_slices(&part, &opts, ds, is, id)
                }
                (None, None) => index.knn_into_slices(&columns(q, range.clone()), &opts, ds, is, id),
            }
            .map_err(|e| rows_from(e, range.start))?;
            Ok(())
        })?;
        // SAFETY: the blocks cover every query, and each wrote its k places.
        unsafe {
            d.set_len(nq * k);
            ids.set_len(nq * k);
        }
        Ok((d, ids))
    }

    /// `query` of ranks 1..=k on a GPU index, the fast way: the rows uploaded as they are and
    /// made columns there, a GPU chunk at a time, the result downloaded straight into the
    /// arrays numpy gets, the ids widened on the way. `None` where it does not apply (a CPU
    /// index, rows that are not contiguous, k beyond the data, coordinates that need scaling):
    /// the general path answers those.
    fn query_on_gpu(
        &self,
        py: Python<'_>,
        q: ArrayView2<'_, T>,
        k: usize,
        max_distance: Option<T>,
    ) -> PyResult<Option<(Vec<T>, Vec<i64>)>> {
        let nq = q.nrows();
        let index = self.for_queries(nq).map_err(err)?;
        let engine = index.engine();
        let Some(rows) = q.as_slice() else { return Ok(None) };
        if !engine.is_cuda() || nq == 0 || k > index.len() {
            return Ok(None);
        }
        let missing = index.len() as i64;
        if k == 1 {
            // Each one's nearest: the nearest-neighbour search, the same bits as k = 1's.
            return detach_on(py, engine, || {
                let (mut d, mut ids) = (nearkit::big_vec(nq), nearkit::big_vec(nq));
                let (ds, is) = (&mut d.spare_capacity_mut()[..nq], &mut ids.spare_capacity_mut()[..nq]);
                index.nearest_rows_into(rows, max_distance, ds, is, |b| if b == NO_ID { missing } else { b as i64 })?;
                // SAFETY: `nearest_rows_into` wrote every row.
                unsafe {
                    d.set_len(nq);
                    ids.set_len(nq);
                }
                Ok(Some((d, ids)))
            })
            .map_err(err);
        }
        let chunk = engine.options().cuda.chunk_points.max(1);
        detach_on(py, engine, || {
            let mut out = DeviceKnn::new(engine, chunk.min(nq), k)?;
            let opts = KnnOptions { max_distance, ..KnnOptions::k(k) };
            let what = "the neighbour lists";
            let (mut d, mut ids) = (nearkit::try_big_vec(nq, k, what)?, nearkit::try_big_vec(nq, k, what)?);
            for start in (0..nq).step_by(chunk) {
                let end = (start + chunk).min(nq);
                // A bad row is named by its place among all the queries.
                let queries =
                    engine.upload_rows(&rows[3 * start..3 * end], Role::Queries).map_err(|e| rows_from(e, start))?;
                match index.knn_device(&queries, &opts, &mut out) {
                    Err(nearkit::Error::Magnitudes { .. }) => return Ok(None),
                    r => r?,
                };
                let ds = &mut d.spare_capacity_mut()[start * k..end * k];
                let is = &mut ids.spare_capacity_mut()[start * k..end * k];
                out.download_i64(engine, (end - start, k), ds, is, missing)?;
            }
            // SAFETY: the chunks' downloads wrote every entry.
            unsafe {
                d.set_len(nq * k);
                ids.set_len(nq * k);
            }
            Ok(Some((d, ids)))
        })
        .map_err(err)
    }

    fn nearest(
        &self,
        py: Python<'_>,
        q: ArrayView2<'_, T>,
        max_distance: Option<T>,
        workers: usize,
    ) -> PyResult<(Vec<T>, Vec<i64>)> {
        // On a GPU, the rows go up as they are and the answers come straight into the result
        // (the k = 1 search gives the same bits as the nearest-neighbour search).
        if let Some(out) = self.query_on_gpu(py, q, 1, max_distance)? {
            return Ok(out);
        }
        let nq = q.nrows();
        let missing = self.main.len() as i64;
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
        let engine = index.engine();
        let pairs = detach_on(py, engine, || {
            // On a GPU, contiguous rows go up as they are, made columns and checked there (no
            // host pass); an index that scales its coordinates takes the general path.
            if let (true, Some(rows), false) = (engine.is_cuda(), a.as_slice(), a.nrows() == 0) {
                let up = engine.upload_rows(rows, Role::A)?;
                match index.closest_pairs_device(&up, &opts) {
                    Err(nearkit::Error::Magnitudes { .. }) => {}
                    r => return r,
                }
            }
            with_workers(workers, a.nrows(), || index.closest_pairs(&all_columns(a), &opts))
        })
        .map_err(err)?;
        Ok((
            pairs.iter().map(|p| p.a as i64).collect(),
            pairs.iter().map(|p| p.b as i64).collect(),
            pairs.iter().map(|p| p.distance).collect(),
        ))
    }

    /// Every indexed point within `r` of each row of `q`, as compressed rows in `order` (with
    /// their distances if `distances`).
    #[allow(clippy::too_many_arguments)]
    fn within(
        &self,
        py: Python<'_>,
        q: ArrayView2<'_, T>,
        r: T,
        order: Order,
        distances: bool,
        max_results: Option<u64>,
        workers: usize,
    ) -> PyResult<Csr<T>> {
        let mut out: Option<Within<T>> = None;
        self.in_blocks(py, q.nrows(), false, workers, |index, range| {
            let so_far = out.as_ref().map_or(0, |w| w.total() as u64);
            // A later block may add only what the earlier ones left of the limit; its error
            // would name that remainder, so it is restated with the caller's limit.
            let opts = order.options(distances, max_results.map(|m| m.saturating_sub(so_far)));
            let found = match (index.engine().is_cuda(), q.as_slice()) {
                // On a GPU, contiguous rows go up as they are (made columns and checked there).
                (true, Some(all)) => {
                    let start = range.start;
                    index.within_rows(&all[3 * start..3 * range.end], r, &opts).map_err(|e| rows_from(e, start))
                }
                _ => index.within(&columns(q, range), r, &opts),
            };
            let mut rows = found.map_err(|e| match (e, max_results) {
                (nearkit::Error::InvalidArgument(m), Some(max)) if so_far > 0 && m.contains("max_results") => {
                    too_many(max)
                }
                (e, _) => e,
            })?;
            order.apply(&mut rows);
            match &mut out {
                None => out = Some(rows),
                Some(all) => append(all, rows)?,
            }
            Ok(())
        })?;
        let rows = out.unwrap_or_default();
        Ok(py.detach(|| with_workers(workers, rows.total(), || Csr::from(rows))))
    }

    /// How many indexed points lie within `r` of each row of `q`.
    fn count_within(&self, py: Python<'_>, q: ArrayView2<'_, T>, r: T, workers: usize) -> PyResult<Vec<i64>> {
        let mut counts = vec![0i64; q.nrows()];
        let all = &mut counts[..];
        self.in_blocks(py, q.nrows(), false, workers, |index, range| {
            let c = match (index.engine().is_cuda(), q.as_slice()) {
                (true, Some(rows)) => index
                    .count_within_rows(&rows[3 * range.start..3 * range.end], r)
                    .map_err(|e| rows_from(e, range.start))?,
                _ => index.count_within(&columns(q, range.clone()), r)?,
            };
            all[range].par_iter_mut().zip(&c).for_each(|(o, &c)| *o = c as i64);
            Ok(())
        })?;
        Ok(counts)
    }

    /// The pairs within `r` of the indexed points (`other` None: each pair once, row `i`
    /// listing `j > i`) or of an indexed point and a point of `other` (row `i` listing the
    /// points of `other`). One call: the library parallelises over the rows itself.
    #[allow(clippy::too_many_arguments)]
    fn pairs_within(
        &self,
        py: Python<'_>,
        other: Option<ArrayView2<'_, T>>,
        r: T,
        order: Order,
        distances: bool,
        max_results: Option<u64>,
        workers: usize,
    ) -> PyResult<Csr<T>> {
        let n = self.main.len();
        // A GPU is worth it for enough points in all, as for closest pairs of two sets.
        let index = self.for_queries(n + other.map_or(0, |o| o.nrows())).map_err(err)?;
        let opts = order.options(distances, max_results);
        detach_on(py, index.engine(), || {
            with_workers(workers, n, || {
                let mut rows = match other {
                    None => index.pairs_within(r, &opts)?,
                    Some(o) => index.pairs_within_other(&all_columns(o), r, &opts)?,
                };
                order.apply(&mut rows);
                Ok(Csr::from(rows))
            })
        })
        .map_err(err)
    }

    /// Each pair of indexed points within `r`, once, as (i, j) with i < j, rows of a flat
    /// vector: ascending by i, then in the index's order (scipy's `query_pairs` as an
    /// ndarray). No distances are computed beyond the test.
    fn query_pairs(&self, py: Python<'_>, r: T, workers: usize) -> PyResult<Vec<i64>> {
        let n = self.main.len();
        let index = self.for_queries(n).map_err(err)?;
        let opts = Order::Index.options(false, None);
        detach_on(py, index.engine(), || with_workers(workers, n, || Ok(pair_rows(&index.pairs_within(r, &opts)?))))
            .map_err(err)
    }
}

/// The rows' entries as (row, id) pairs, one after another in a flat vector (in parallel).
fn pair_rows<T: Sync>(w: &Within<T>) -> Vec<i64> {
    const CHUNK: usize = 1 << 14;
    let total = w.ids.len();
    // Fresh memory in huge pages where granted: fewer faults for the largest array made.
    let mut out: Vec<i64> = nearkit::big_vec(2 * total);
    out.spare_capacity_mut()[..2 * total].par_chunks_mut(2 * CHUNK).enumerate().for_each(|(c, pairs)| {
        let first = c * CHUNK;
        // The row of entry `first`: the last whose start is at most it.
        let mut row = w.offsets.partition_point(|&o| o as usize <= first) - 1;
        for (k, pair) in pairs.chunks_exact_mut(2).enumerate() {
            let at = first + k;
            while w.offsets[row + 1] as usize <= at {
                row += 1;
            }
            pair[0].write(row as i64);
            pair[1].write(w.ids[at] as i64);
        }
    });
    // SAFETY: the chunks tile the 2 * total values, each written above.
    unsafe { out.set_len(2 * total) };
    out
}

/// The order of a radius query's rows.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    /// By (distance, id): the library's sorted rows.
    Distance,
    /// By id, as scipy's `return_sorted`: the library's unsorted rows, sorted here.
    Id,
    /// The index's own (Morton) order: the cheapest, and the same on every device.
    Index,
}

impl Order {
    fn parse(s: &str) -> PyResult<Self> {
        match s {
            "distance" => Ok(Order::Distance),
            "id" => Ok(Order::Id),
            "index" => Ok(Order::Index),
            _ => Err(PyValueError::new_err(format!("unknown row order '{s}': use distance, id or index"))),
        }
    }

    fn options(self, distances: bool, max_results: Option<u64>) -> RadiusOptions {
        RadiusOptions { sorted: self == Order::Distance, distances, max_results }
    }

    /// Puts rows that came in the index's order in this order (in parallel over rows).
    fn apply<T: Real>(self, w: &mut Within<T>) {
        if self != Order::Id {
            return;
        }
        if w.distances.is_empty() {
            // Ids alone (no distances were asked for).
            let mut rows = Vec::with_capacity(w.rows());
            let mut ids = &mut w.ids[..];
            for o in w.offsets.windows(2) {
                let (row, rest) = std::mem::take(&mut ids).split_at_mut((o[1] - o[0]) as usize);
                ids = rest;
                rows.push(row);
            }
            rows.into_par_iter().with_min_len(64).for_each(|ids| ids.sort_unstable());
            return;
        }
        let mut rows = Vec::with_capacity(w.rows());
        let (mut ids, mut ds) = (&mut w.ids[..], &mut w.distances[..]);
        for o in w.offsets.windows(2) {
            let len = (o[1] - o[0]) as usize;
            let (row_ids, rest_ids) = std::mem::take(&mut ids).split_at_mut(len);
            let (row_ds, rest_ds) = std::mem::take(&mut ds).split_at_mut(len);
            (ids, ds) = (rest_ids, rest_ds);
            rows.push((row_ids, row_ds));
        }
        rows.into_par_iter().with_min_len(64).for_each(|(ids, ds)| {
            if ids.is_sorted() {
                return;
            }
            if ids.len() <= 32 {
                // Most rows are short: sorted in place, with no allocation.
                for k in 1..ids.len() {
                    let (id, d) = (ids[k], ds[k]);
                    let mut at = k;
                    while at > 0 && ids[at - 1] > id {
                        (ids[at], ds[at]) = (ids[at - 1], ds[at - 1]);
                        at -= 1;
                    }
                    (ids[at], ds[at]) = (id, d);
                }
                return;
            }
            // Ids in a row are distinct, so an unstable sort of (id, distance) is by id alone.
            let mut row: Vec<(u32, T)> = ids.iter().copied().zip(ds.iter().copied()).collect();
            row.sort_unstable_by_key(|e| e.0);
            for (k, (id, d)) in row.into_iter().enumerate() {
                (ids[k], ds[k]) = (id, d);
            }
        });
    }
}

/// What a radius query over several blocks reports when the blocks together pass the limit.
fn too_many(max: u64) -> nearkit::Error {
    nearkit::Error::InvalidArgument(format!(
        "the result holds more than max_results = {max} neighbours: use a smaller radius, fewer queries, counts \
         only, or a larger limit"
    ))
}

/// Appends a later block's rows to `all` (an `OutOfMemory` error, not an abort, when they do
/// not fit).
fn append<T: Real>(all: &mut Within<T>, block: Within<T>) -> nearkit::Result<()> {
    let total = all.total() + block.total();
    let oom = |_| nearkit::Error::OutOfMemory(format!("the rows of {total} neighbours do not fit in memory"));
    all.ids.try_reserve(block.total()).map_err(oom)?;
    all.distances.try_reserve(block.distances.len()).map_err(oom)?;
    let base = all.total() as u64;
    all.offsets.pop();
    all.offsets.extend(block.offsets.iter().map(|&o| o + base));
    all.ids.extend_from_slice(&block.ids);
    all.distances.extend_from_slice(&block.distances);
    Ok(())
}

/// Radius-query rows as the package returns them: int64 offsets (rows + 1) and ids (numpy's
/// index type), the distances as they are.
struct Csr<T> {
    offsets: Vec<i64>,
    ids: Vec<i64>,
    distances: Vec<T>,
}

impl<T: Real> From<Within<T>> for Csr<T> {
    fn from(w: Within<T>) -> Self {
        // u64 to i64 reuses the vector in place; the ids need a wider one.
        let mut offsets: Vec<i64> = w.offsets.into_iter().map(|o| o as i64).collect();
        if offsets.is_empty() {
            offsets.push(0);
        }
        let mut ids = nearkit::big_vec(w.ids.len());
        ids.par_extend(w.ids.par_iter().with_min_len(1 << 14).map(|&id| id as i64));
        Self { offsets, ids, distances: w.distances }
    }
}

/// Each row of compressed rows as a list of Python ints, in a 1-D object array (scipy's
/// `query_ball_point` result).
#[pyfunction]
pub fn row_lists<'py>(
    py: Python<'py>,
    offsets: PyReadonlyArray1<'py, i64>,
    ids: PyReadonlyArray1<'py, i64>,
) -> PyResult<Bound<'py, PyArray1<Py<PyAny>>>> {
    let (offsets, ids) = (offsets.as_slice()?, ids.as_slice()?);
    let bad = || PyValueError::new_err("offsets must rise from 0 to len(ids)");
    if offsets.first().is_some_and(|&o| o != 0) || offsets.last().is_some_and(|&o| o as usize != ids.len()) {
        return Err(bad());
    }
    // A million new lists would set the cyclic garbage collector off again and again (each
    // pass walking every list made so far): it waits until they are all made. Lists of ints
    // form no cycles.
    let gc = py.import("gc")?;
    let was_on = gc.call_method0("isenabled")?.is_truthy()?;
    if was_on {
        gc.call_method0("disable")?;
    }
    let lists = offsets
        .windows(2)
        .map(|o| {
            let row = ids.get(o[0] as usize..o[1] as usize).ok_or_else(bad)?;
            Ok(PyList::new(py, row)?.into_any().unbind())
        })
        .collect::<PyResult<Vec<_>>>();
    if was_on {
        gc.call_method0("enable")?;
    }
    Ok(PyArray1::from_vec(py, lists?))
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

impl PyPointIndex {
    fn engine(&self) -> &Engine {
        match &self.index {
            Index::F32(p) => p.main.engine(),
            Index::F64(p) => p.main.engine(),
        }
    }
}

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
                Index::F32(detach_on(py, &engine, || Placed::new(all_columns(v), &engine, auto)).map_err(err)?)
            }
            Rows::F64(a) => {
                let v = a.as_array();
                Index::F64(detach_on(py, &engine, || Placed::new(all_columns(v), &engine, auto)).map_err(err)?)
            }
        };
        Ok(Self { index })
    }

    /// An index of `len` rows at `address` in GPU memory (strides in elements), of `dtype`,
    /// on `device` (the array's GPU).
    #[staticmethod]
    #[pyo3(signature = (address, len, strides, dtype, device))]
    fn from_cuda(
        py: Python<'_>,
        address: u64,
        len: usize,
        strides: (isize, isize),
        dtype: &str,
        device: &str,
    ) -> PyResult<Self> {
        let engine = engine(py, parse_device(device)?)?;
        let rows = CudaRows { address, len, strides };
        let index = match dtype {
            "float32" => Index::F32(detach_on(py, &engine, || Placed::on_gpu(&engine, rows)).map_err(err)?),
            "float64" => Index::F64(detach_on(py, &engine, || Placed::on_gpu(&engine, rows)).map_err(err)?),
            _ => return Err(PyTypeError::new_err(format!("dtype {dtype}: float32 or float64 only"))),
        };
        Ok(Self { index })
    }

    /// The `k` nearest of `len` rows at `address` in GPU memory (the index's dtype), left
    /// there (`exclude_self`: the rows are the data, each leaving itself out).
    #[pyo3(signature = (address, len, strides, k, max_distance, exclude_self))]
    fn query_cuda(
        &self,
        py: Python<'_>,
        address: u64,
        len: usize,
        strides: (isize, isize),
        k: usize,
        max_distance: Option<f64>,
        exclude_self: bool,
    ) -> PyResult<CudaKnn> {
        let rows = CudaRows { address, len, strides };
        detach_on(py, self.engine(), || match &self.index {
            Index::F32(p) => knn_rows(&p.main, rows, k, max_distance.map(Real::from_f64), exclude_self),
            Index::F64(p) => knn_rows(&p.main, rows, k, max_distance.map(Real::from_f64), exclude_self),
        })
        .map_err(err)
    }

    /// Indexed points.
    #[getter]
    fn n(&self) -> usize {
        match &self.index {
            Index::F32(p) => p.main.len(),
            Index::F64(p) => p.main.len(),
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
                if n != p.main.len() {
                    return Err(PyTypeError::new_err("the data are in GPU memory: their kNN graph is computed there"));
                }
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
            detach_on(py, index.engine(), || {
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

    /// Every indexed point within `r` of each row of `x`, as compressed rows in `order`
    /// (`distance`, `id` or `index`): (offsets, ids, distances); the distances empty unless
    /// `distances`.
    #[pyo3(signature = (x, r, order, max_results, workers, distances = true))]
    fn within<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        r: f64,
        order: &str,
        max_results: Option<u64>,
        workers: usize,
        distances: bool,
    ) -> PyResult<Bound<'py, pyo3::types::PyTuple>> {
        let order = Order::parse(order)?;
        let rows = Rows::extract(x, "x", 3)?;
        with_rows!(self, rows, |p, q| {
            let c = p.within(py, q, Real::from_f64(r), order, distances, max_results, workers)?;
            (vector(py, c.offsets), vector(py, c.ids), vector(py, c.distances)).into_pyobject(py)
        })
    }

    /// How many indexed points lie within `r` of each row of `x`.
    #[pyo3(signature = (x, r, workers))]
    fn count_within<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        r: f64,
        workers: usize,
    ) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let rows = Rows::extract(x, "x", 3)?;
        with_rows!(self, rows, |p, q| Ok(vector(py, p.count_within(py, q, Real::from_f64(r), workers)?)))
    }

    /// The pairs within `r`: of the indexed points (`other` None; row i lists j > i), or of
    /// an indexed point and a row of `other`. (offsets, ids, distances); the distances empty
    /// unless `distances`.
    #[pyo3(signature = (other, r, order, max_results, workers, distances = true))]
    #[allow(clippy::too_many_arguments)]
    fn pairs_within<'py>(
        &self,
        py: Python<'py>,
        other: Option<&Bound<'py, PyAny>>,
        r: f64,
        order: &str,
        max_results: Option<u64>,
        workers: usize,
        distances: bool,
    ) -> PyResult<Bound<'py, pyo3::types::PyTuple>> {
        let order = Order::parse(order)?;
        macro_rules! pairs {
            ($p:expr, $other:expr) => {{
                let c = $p.pairs_within(py, $other, Real::from_f64(r), order, distances, max_results, workers)?;
                (vector(py, c.offsets), vector(py, c.ids), vector(py, c.distances)).into_pyobject(py)
            }};
        }
        match other {
            Some(o) => {
                let rows = Rows::extract(o, "other", 3)?;
                with_rows!(self, rows, |p, q| pairs!(p, Some(q)))
            }
            None => match &self.index {
                Index::F32(p) => pairs!(p, None),
                Index::F64(p) => pairs!(p, None),
            },
        }
    }

    /// Each pair of indexed points within `r`, once, as an (n_pairs, 2) int64 array of (i, j)
    /// with i < j.
    fn query_pairs<'py>(&self, py: Python<'py>, r: f64, workers: usize) -> PyResult<Bound<'py, PyArray2<i64>>> {
        let pairs = match &self.index {
            Index::F32(p) => p.query_pairs(py, Real::from_f64(r), workers)?,
            Index::F64(p) => p.query_pairs(py, Real::from_f64(r), workers)?,
        };
        let n = pairs.len() / 2;
        matrix(py, pairs, n, 2)
    }
}
