//! Exact k-nearest neighbours on the device: through the candidate grid (candidate_grid.cu),
//! queries in grid-cell order, or by the tree search of knn.cu, queries in Morton order.

use std::mem::MaybeUninit;

use cudarc::driver::{CudaSlice, CudaViewMut};

use super::grid_cuda::{CellQueries, DeviceGrid, GridFrameArgs, GRID_CAND_CHECK, GRID_LEVELS};
use super::{Knn, KnnOptions};
use crate::device::Engine;
use crate::error::{Error, Result};
use crate::geometry::points::NO_ID;
use crate::geometry::real::Real;
use crate::runtime::cpu::{big_vec, Toucher};
use crate::runtime::cuda::launch::{kernels, In, Out};
use crate::runtime::cuda::memory::{DevicePoints, PointSource};
use crate::runtime::cuda::transfer::{download_to, download_vec, HostMemory, Overlapped};
use crate::runtime::cuda::{threads, CudaSource, Gpu, COMMON};
use crate::tree::cuda::{
    for_each_chunk_ordered, for_each_chunk_sorted_by, DeviceTree, SortedChunk, TreeArgs, TREE_HEADER, TREE_SEARCH,
};

static KNN: CudaSource = CudaSource::plain("knn.cu", include_str!("knn.cu"));

/// The list capacities the grid scan is compiled for (`knn_grid_rows{K}`); a query of k
/// takes the smallest that holds k.
const GRID_ROW_CAPACITIES: [usize; 3] = [8, 16, 32];

kernels! {
    module KERNELS = "knn", [&COMMON, &TREE_HEADER, &TREE_SEARCH, &GRID_LEVELS, &GRID_CAND_CHECK, &KNN];
    /// Each query's k nearest by the tree search, queries in Morton order.
    fn knn_rows<T>(
        qx: In<T>,
        qy: In<T>,
        qz: In<T>,
        q_ids: In<u32>,
        nq: u32,
        q_offset: u32,
        t: TreeArgs<T>,
        k: u32,
        r2: T,
        exclude_self: u32,
        out_ids: Out<u32>,
        out_d: Out<T>,
    );
    /// Each query's k nearest through the candidate grid, queries as records in cell order;
    /// the variant is the list capacity (`GRID_ROW_CAPACITIES`).
    fn knn_grid_rows<T>[GRID_ROW_CAPACITIES.map(|k| k.to_string())](
        queries: In<T>,
        nq: u32,
        q_offset: u32,
        t: TreeArgs<T>,
        f: GridFrameArgs<T>,
        start: In<u32>,
        floor_in: In<T>,
        cand: In<T>,
        k: u32,
        r2: T,
        exclude_self: u32,
        out_ids: Out<u32>,
        out_d: Out<T>,
    );
}

/// A kNN result in GPU memory: `len` queries × `k` ids and distances, row-major, for
/// [`PointIndex::knn_device`](crate::PointIndex::knn_device).
pub struct DeviceKnn<T> {
    len: usize,
    k: usize,
    ids: CudaSlice<u32>,
    distances: CudaSlice<T>,
}

impl<T: Real> DeviceKnn<T> {
    /// Room for `len` queries' `k` nearest on the engine's GPU.
    pub fn new(engine: &Engine, len: usize, k: usize) -> Result<Self> {
        let gpu = engine.need_gpu("a kNN result in GPU memory")?;
        let n =
            len.checked_mul(k).ok_or_else(|| Error::InvalidArgument(format!("{len} queries × k = {k} overflows")))?;
        Ok(Self { len, k, ids: gpu.alloc_uninit(n)?, distances: gpu.alloc_uninit(n)? })
    }

    /// Queries it has room for.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Neighbours per query it has room for.
    pub fn k(&self) -> usize {
        self.k
    }

    /// The first `len` queries' rows of `k` (as the query that wrote them) brought to host
    /// memory the caller owns, which may be uninitialised: the distances as they are, the ids
    /// widened to `i64` (numpy's and PyTorch's index type) with `missing` where a query has
    /// no such neighbour, widened while copied (no pass of its own).
    pub fn download_i64(
        &self,
        engine: &Engine,
        (len, k): (usize, usize),
        distances: &mut [std::mem::MaybeUninit<T>],
        ids: &mut [std::mem::MaybeUninit<i64>],
        missing: i64,
    ) -> Result<()> {
        let n = len * k;
        if len > self.len || k > self.k || distances.len() != n || ids.len() != n {
            return Err(Error::InvalidArgument(format!(
                "{len} rows of {k} from a result of {} × {} into {} distances and {} ids",
                self.len,
                self.k,
                distances.len(),
                ids.len()
            )));
        }
        let gpu = engine.need_gpu("a kNN result in GPU memory")?;
        let _busy = gpu.lock();
        // Fresh pages faulted in first, in parallel (and while the query still runs).
        drop(Toucher::start_on(distances, ids));
        crate::runtime::cuda::transfer::download(gpu, &self.distances.slice(0..n), distances)?;
        let widen = |id: u32| if id == NO_ID { missing } else { id as i64 };
        crate::runtime::cuda::transfer::download_mapped(gpu, &self.ids.slice(0..n), ids, widen)
    }

    /// The GPU addresses of its ids (`u32`, `NO_ID` where none) and distances, row-major with
    /// the k of the query that wrote them per row: for handing the result to another library
    /// without a copy. They stay valid while this lives; the query has finished writing them
    /// when it returns.
    pub fn addresses(&self) -> (u64, u64) {
        use cudarc::driver::DevicePtr;
        let s = self.ids.stream();
        (self.ids.device_ptr(s).0, self.distances.device_ptr(s).0)
    }

    /// Copies the result of a query of `len` queries whose effective k was `k` (what
    /// `knn_device` returned) to the host.
    pub fn to_host(&self, engine: &Engine, len: usize, k: usize) -> Result<Knn<T>> {
        self.check(len, k)?;
        let gpu = engine.need_gpu("")?;
        let n = len * k;
        let (ids, distances) =
            (download_vec(gpu, &self.ids.slice(0..n))?, download_vec(gpu, &self.distances.slice(0..n))?);
        Ok(Knn { k, ids, distances })
    }

    /// An error unless it has room for `len` queries' `k` nearest.
    pub(crate) fn check(&self, len: usize, k: usize) -> Result<()> {
        if len > self.len || k > self.k {
            return Err(Error::InvalidArgument(format!(
                "the result buffer holds {} queries × {} neighbours; this query needs {len} × {k}",
                self.len, self.k
            )));
        }
        Ok(())
    }

    pub(crate) fn parts_mut(&mut self) -> (&mut CudaSlice<u32>, &mut CudaSlice<T>) {
        (&mut self.ids, &mut self.distances)
    }
}

/// Output entries (queries × k) per chunk: bounds the device buffers for large k.
const MAX_CHUNK_ENTRIES: usize = 1 << 26;
/// Results into page-locked memory of at least this many entries go in this many chunks, so
/// that each chunk's copy overlaps the next one's search.
const OVERLAP_ENTRIES: usize = 1 << 22;
const OVERLAP_CHUNKS: usize = 4;

/// Each query's `k` nearest points of `tree` within squared radius `r2`, the queries in
/// chunks of `chunk` (fewer for large k).
pub(crate) fn knn<T: Real>(
    gpu: &Gpu,
    tree: &DeviceTree<T>,
    queries: &PointSource<'_, T>,
    opts: &KnnOptions<T>,
    k: usize,
    r2: T,
    chunk: usize,
) -> Result<Knn<T>> {
    let n = queries.len();
    // Rows go straight to their place in the result: uninitialised until downloaded.
    let mut out = Knn { k, ids: big_vec(n * k), distances: big_vec(n * k) };
    let (ids, distances) =
        (&mut out.ids.spare_capacity_mut()[..n * k], &mut out.distances.spare_capacity_mut()[..n * k]);
    knn_to(gpu, tree, queries, opts, k, r2, chunk, ids, distances, HostMemory::Pageable)?;
    // SAFETY: `knn_to` wrote every row.
    unsafe {
        out.ids.set_len(n * k);
        out.distances.set_len(n * k);
    }
    Ok(out)
}

/// [`knn`] into `ids` and `distances` (queries × k, uninitialised until written), host memory
/// of the given kind.
#[allow(clippy::too_many_arguments)]
pub(crate) fn knn_to<T: Real>(
    gpu: &Gpu,
    tree: &DeviceTree<T>,
    queries: &PointSource<'_, T>,
    opts: &KnnOptions<T>,
    k: usize,
    r2: T,
    chunk: usize,
    out_ids: &mut [MaybeUninit<u32>],
    out_distances: &mut [MaybeUninit<T>],
    memory: HostMemory,
) -> Result<()> {
    let n = queries.len();
    let grid = DeviceGrid::build(gpu, tree, n, k + usize::from(opts.exclude_self), r2, &opts.grid)?;
    let mut chunk = chunk.min((MAX_CHUNK_ENTRIES / k).max(1));
    // The chunks' device rows, kept until their copies are done (declared first, so that on
    // an error `overlapped` waits for the copies before these are freed).
    let mut copied = Vec::new();
    // Into page-locked memory the device writes directly, on a stream of its own: in a few
    // chunks, each one's copy overlaps the next one's search.
    let overlapped = match memory {
        HostMemory::Pinned => Some(Overlapped::new(gpu)?),
        HostMemory::Pageable => None,
    };
    if overlapped.is_some() && n * k >= OVERLAP_ENTRIES {
        chunk = chunk.min(n.div_ceil(OVERLAP_CHUNKS));
    }
    for_each_sorted_chunk(gpu, queries, tree, grid.as_ref(), chunk, |offset, c| {
        let len = c.len();
        let mut ids = gpu.alloc_uninit::<u32>(len * k)?;
        let mut dist = gpu.alloc_uninit::<T>(len * k)?;
        knn_chunk(
            gpu,
            tree,
            grid.as_ref(),
            offset,
            c,
            k,
            r2,
            opts.exclude_self,
            &mut ids.as_view_mut(),
            &mut dist.as_view_mut(),
        )?;
        let rows = offset * k..(offset + len) * k;
        if let Some(o) = &overlapped {
            o.download(gpu, &ids.slice(0..len * k), &mut out_ids[rows.clone()])?;
            o.download(gpu, &dist.slice(0..len * k), &mut out_distances[rows])?;
            copied.push((ids, dist));
            return Ok(());
        }
        // Pageable memory: its fresh pages faulted in, in parallel, while the GPU searches.
        drop(Toucher::start_on(&mut out_ids[rows.clone()], &mut out_distances[rows.clone()]));
        download_to(gpu, &ids.slice(0..len * k), &mut out_ids[rows.clone()], HostMemory::Pageable)?;
        download_to(gpu, &dist.slice(0..len * k), &mut out_distances[rows], HostMemory::Pageable)?;
        Ok(())
    })?;
    if let Some(o) = overlapped {
        o.finish()?;
    }
    drop(copied);
    Ok(())
}

/// kNN with everything on the device: the queries already uploaded, the results left there
/// (`ids`, `distances`: queries × k, row-major, at least that long).
#[allow(clippy::too_many_arguments)]
pub(crate) fn knn_resident<T: Real>(
    gpu: &Gpu,
    tree: &DeviceTree<T>,
    queries: &DevicePoints<T>,
    opts: &KnnOptions<T>,
    k: usize,
    r2: T,
    chunk: usize,
    ids: &mut CudaSlice<u32>,
    distances: &mut CudaSlice<T>,
) -> Result<()> {
    let grid = DeviceGrid::build(gpu, tree, queries.len, k + usize::from(opts.exclude_self), r2, &opts.grid)?;
    for_each_sorted_chunk(gpu, &PointSource::Device(queries), tree, grid.as_ref(), chunk, |offset, c| {
        let (s, e) = (offset * k, (offset + c.len()) * k);
        let (ids, dist) = (&mut ids.slice_mut(s..e), &mut distances.slice_mut(s..e));
        knn_chunk(gpu, tree, grid.as_ref(), offset, c, k, r2, opts.exclude_self, ids, dist)
    })
}

/// A chunk of queries in a coherent order.
enum Ordered<'a, T> {
    /// By grid cell, as records: the candidate-grid scan.
    Cells(CellQueries<T>),
    /// By Morton code: the tree search.
    Morton(&'a SortedChunk<T>),
}

impl<T> Ordered<'_, T> {
    fn len(&self) -> usize {
        match self {
            Ordered::Cells(c) => c.len,
            Ordered::Morton(c) => c.points.len,
        }
    }
}

/// The chunks of the queries, each with its offset, in a coherent order: by grid cell (a
/// counting sort) when there is a grid, else by the top 32 bits of their Morton codes.
fn for_each_sorted_chunk<T: Real>(
    gpu: &Gpu,
    queries: &PointSource<'_, T>,
    tree: &DeviceTree<T>,
    grid: Option<&DeviceGrid<T>>,
    chunk: usize,
    mut f: impl FnMut(usize, &Ordered<'_, T>) -> Result<()>,
) -> Result<()> {
    match grid {
        Some(g) => for_each_chunk_ordered(
            gpu,
            queries,
            chunk,
            |x, y, z, len| g.sort_queries(gpu, x, y, z, len),
            |offset, _, c| f(offset, &Ordered::Cells(c)),
        ),
        None => for_each_chunk_sorted_by(gpu, queries, tree, chunk, 32, |c| f(c.offset, &Ordered::Morton(c))),
    }
}

/// One sorted chunk of queries into its rows of the output: through the candidate
/// grid when there is one, else one tree search per query.
#[allow(clippy::too_many_arguments)]
fn knn_chunk<T: Real>(
    gpu: &Gpu,
    tree: &DeviceTree<T>,
    grid_lists: Option<&DeviceGrid<T>>,
    offset: usize,
    c: &Ordered<'_, T>,
    k: usize,
    r2: T,
    exclude_self: bool,
    ids: &mut CudaViewMut<'_, u32>,
    dist: &mut CudaViewMut<'_, T>,
) -> Result<()> {
    let args = tree.args(gpu);
    let (len32, off32, k32, exclude) = (c.len() as u32, offset as u32, k as u32, u32::from(exclude_self));
    match (c, grid_lists) {
        (Ordered::Cells(q), Some(g)) => {
            let capacity = GRID_ROW_CAPACITIES.into_iter().find(|&c| k <= c).expect("the grid serves k <= 32");
            let cand = g.cand.as_ref().expect("3-D grids carry their records");
            knn_grid_rows::<T>(
                gpu,
                threads(q.len, 128),
                &capacity.to_string(),
                &q.records,
                len32,
                off32,
                args,
                g.frame_args(),
                &g.start,
                &g.floor,
                cand,
                k32,
                r2,
                exclude,
                ids,
                dist,
            )?;
        }
        (Ordered::Morton(c), _) => {
            let p = &c.points;
            let cfg = threads(p.len, 128);
            knn_rows::<T>(gpu, cfg, &p.x, &p.y, &p.z, &c.ids, len32, off32, args, k32, r2, exclude, ids, dist)?;
        }
        (Ordered::Cells(_), None) => unreachable!("cell order comes only with a grid"),
    }
    Ok(())
}
