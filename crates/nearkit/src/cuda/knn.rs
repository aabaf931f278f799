//! Exact k-nearest neighbours on the device: through the candidate grid (candidate_grid.cu),
//! queries in grid-cell order, or by the tree search of knn.cu, queries in Morton order.

use cudarc::driver::{CudaSlice, CudaViewMut, PushKernelArg};

use super::candidate_grid::{CellQueries, DeviceGrid};
use super::closest_pairs::{
    chunk_size, for_each_chunk_ordered, for_each_chunk_sorted_by, DevicePoints, SortedChunk, Source,
};
use super::tree_build::{BuildInput, DeviceTree};
use super::{cuda_err, grid, CudaBackend};
use crate::error::Result;
use crate::points::Points;
use crate::query::{check_knn, knn_limits, Knn, KnnOptions};
use crate::real::Real;

/// Output entries (queries × k) per chunk: bounds the device buffers for large k.
const MAX_CHUNK_ENTRIES: usize = 1 << 26;

pub(super) fn knn<T: Real>(
    be: &CudaBackend,
    data: &Points<T>,
    queries: &Points<T>,
    opts: &KnnOptions<T>,
) -> Result<Knn<T>> {
    let (k, r2) = check_knn(data, queries, opts)?;
    let tree = DeviceTree::build_from(be, BuildInput::Owned(DevicePoints::upload(be, data)?))?;
    let n = queries.len();
    let grid = DeviceGrid::build(be, &tree, n, k + usize::from(opts.exclude_self), r2)?;
    let mut out = Knn { k, ids: Vec::with_capacity(n * k), distances: Vec::with_capacity(n * k) };
    let chunk = chunk_size().min((MAX_CHUNK_ENTRIES / k).max(1));
    for_each_sorted_chunk(be, &Source::Host(queries), &tree, grid.as_ref(), chunk, |offset, c| {
        let len = c.len();
        let mut ids = be.alloc_uninit::<u32>(len * k)?;
        let mut dist = be.alloc_uninit::<T>(len * k)?;
        knn_chunk(
            be,
            &tree,
            grid.as_ref(),
            offset,
            c,
            k,
            r2,
            opts.exclude_self,
            &mut ids.as_view_mut(),
            &mut dist.as_view_mut(),
        )?;
        out.ids.extend_from_slice(&be.stream.clone_dtoh(&ids.slice(0..len * k)).map_err(cuda_err)?);
        out.distances.extend_from_slice(&be.stream.clone_dtoh(&dist.slice(0..len * k)).map_err(cuda_err)?);
        Ok(())
    })?;
    Ok(out)
}

/// kNN with everything on the device: data and queries already uploaded, results left there
/// (`ids`, `distances`: queries × k, row-major). Returns the effective k.
pub(super) fn knn_resident<T: Real>(
    be: &CudaBackend,
    data: &DevicePoints<T>,
    queries: &DevicePoints<T>,
    opts: &KnnOptions<T>,
    ids: &mut CudaSlice<u32>,
    distances: &mut CudaSlice<T>,
) -> Result<usize> {
    let (k, r2) = knn_limits(data.len, queries.len, opts)?;
    assert!(ids.len() >= queries.len * k && distances.len() >= queries.len * k, "output buffers too small");
    let tree = DeviceTree::build(be, data)?;
    let grid = DeviceGrid::build(be, &tree, queries.len, k + usize::from(opts.exclude_self), r2)?;
    for_each_sorted_chunk(be, &Source::Device(queries), &tree, grid.as_ref(), chunk_size(), |offset, c| {
        let (s, e) = (offset * k, (offset + c.len()) * k);
        let (ids, dist) = (&mut ids.slice_mut(s..e), &mut distances.slice_mut(s..e));
        knn_chunk(be, &tree, grid.as_ref(), offset, c, k, r2, opts.exclude_self, ids, dist)
    })?;
    Ok(k)
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
    be: &CudaBackend,
    queries: &Source<'_, T>,
    tree: &DeviceTree<T>,
    grid: Option<&DeviceGrid<T>>,
    chunk: usize,
    mut f: impl FnMut(usize, &Ordered<'_, T>) -> Result<()>,
) -> Result<()> {
    match grid {
        Some(g) => for_each_chunk_ordered(
            be,
            queries,
            chunk,
            |x, y, z, len| g.sort_queries(be, x, y, z, len),
            |offset, _, c| f(offset, &Ordered::Cells(c)),
        ),
        None => for_each_chunk_sorted_by(be, queries, tree, chunk, 32, |c| f(c.offset, &Ordered::Morton(c))),
    }
}

/// One sorted chunk of queries into its rows of the output: through the candidate
/// grid when there is one, else one tree search per query.
#[allow(clippy::too_many_arguments)]
fn knn_chunk<T: Real>(
    be: &CudaBackend,
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
    let args = tree.args(be);
    let (len32, off32, k32, exclude) = (c.len() as u32, offset as u32, k as u32, u32::from(exclude_self));
    match (c, grid_lists) {
        (Ordered::Cells(q), Some(g)) => {
            let name = match k {
                0..=8 => "knn_grid_rows8",
                9..=16 => "knn_grid_rows16",
                _ => "knn_grid_rows32",
            };
            let f = be.func_t::<T>(name)?;
            let fargs = g.frame_args();
            let cand = g.cand.as_ref().expect("3-D grids carry their records");
            let mut l = be.stream.launch_builder(&f);
            l.arg(&q.records).arg(&len32).arg(&off32).arg(&args).arg(&fargs);
            l.arg(&g.start).arg(&g.floor).arg(cand).arg(&k32).arg(&r2).arg(&exclude).arg(ids).arg(dist);
            unsafe { l.launch(grid(q.len, 128)) }.map_err(cuda_err)?;
        }
        (Ordered::Morton(c), _) => {
            let p = &c.points;
            let f = be.func_t::<T>("knn_rows")?;
            let mut l = be.stream.launch_builder(&f);
            l.arg(&p.x).arg(&p.y).arg(&p.z).arg(&c.ids).arg(&len32).arg(&off32).arg(&args).arg(&k32).arg(&r2);
            l.arg(&exclude).arg(ids).arg(dist);
            unsafe { l.launch(grid(p.len, 128)) }.map_err(cuda_err)?;
        }
        (Ordered::Cells(_), None) => unreachable!("cell order comes only with a grid"),
    }
    Ok(())
}
