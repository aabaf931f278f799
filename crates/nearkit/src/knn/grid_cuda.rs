//! Launches candidate_grid.cu: the `CandidateGrid` of src/grid.rs built on the device, in the
//! same layout (and the same entry order) as the CPU build.

use cudarc::driver::{CudaSlice, CudaView, DevicePtr, DeviceRepr, PushKernelArg};

use crate::error::Result;
use crate::geometry::real::Real;
use crate::knn::grid::{self as cgrid, GridFrame, GridOptions, BUCKETS};
use crate::runtime::cuda::radix_sort::exclusive_scan;
use crate::runtime::cuda::{cuda_err, threads, Gpu};
use crate::tree::cuda::DeviceTree;

/// Cells (one warp each) per block of the narrow level kernels (GRID_WARPS in grid_levels.cuh).
const WARPS_PER_BLOCK: usize = 4;
/// Warps (one cell) per block of the wide level kernels, which build the top level
/// (GRID_WIDE_WARPS).
const WIDE_WARPS: usize = 16;

/// `struct GridFrame<T>` of candidate_grid.cu, passed to kernels by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct GridFrameArgs<T> {
    origin: [T; 3],
    cell: T,
    inv_cell: T,
    half_diag: T,
    dims: [u32; 3],
}
// SAFETY: plain old data matching the C struct's layout (6 T, 3 u32, C padding).
unsafe impl<T: DeviceRepr> DeviceRepr for GridFrameArgs<T> {}

/// The level kernels of one kind of data (their `_f32`/`_f64` base names: a warp per cell,
/// and `_wide`, a block per cell, for the top level) and the data's kernel argument, passed
/// first.
pub(crate) struct LevelKernels<'a, A> {
    pub count: &'a str,
    pub fill: &'a str,
    pub count_wide: &'a str,
    pub fill_wide: &'a str,
    pub data: &'a A,
}

/// A chunk of queries in grid-cell order: `len` records (x, y, z, index in the chunk) of
/// `GridCand` layout.
pub(crate) struct CellQueries<T> {
    pub records: CudaSlice<T>,
    pub len: usize,
}

pub struct DeviceGrid<T> {
    pub frame: GridFrame<T>,
    pub start: CudaSlice<u32>,
    pub floor: CudaSlice<T>,
    pub entry: CudaSlice<u32>,
    pub entries: usize,
    /// Each entry's point and id (`GridCand` of candidate_grid.cu, 4 values an entry), for
    /// the 3-D scan; `None` for grids over embedded data, whose kernels read the entries.
    pub cand: Option<CudaSlice<T>>,
}

impl<T: Real> DeviceGrid<T> {
    /// The grid for `n_queries` queries of the `k_list` nearest within `r2`, or `None` where
    /// the tree search is the better plan (`grid::worth_it`) or the data's box cannot be
    /// gridded.
    pub fn build(
        gpu: &Gpu,
        tree: &DeviceTree<T>,
        n_queries: usize,
        k_list: usize,
        r2: T,
        opts: &GridOptions,
    ) -> Result<Option<Self>> {
        if !cgrid::worth_it(tree.n as usize, n_queries, k_list, opts) {
            return Ok(None); // decided before reading the box back
        }
        let targs = tree.args(gpu);
        let mut bounds = gpu.alloc_uninit::<T>(6)?;
        let f = gpu.func_t::<T>("root_box")?;
        let mut l = gpu.stream().launch_builder(&f);
        l.arg(&targs).arg(&mut bounds);
        unsafe { l.launch(threads(1, 32)) }.map_err(cuda_err)?;
        let b = gpu.stream().clone_dtoh(&bounds).map_err(cuda_err)?;
        let (lo, hi) = ([b[0], b[1], b[2]], [b[3], b[4], b[5]]);
        let Some(frame) = GridFrame::for_queries(lo, hi, tree.n as usize, n_queries, k_list, opts) else {
            return Ok(None);
        };
        let mut g = Self::build_levels(
            gpu,
            &LevelKernels {
                count: "grid_level_count",
                fill: "grid_level_fill",
                count_wide: "grid_level_count_wide",
                fill_wide: "grid_level_fill_wide",
                data: &targs,
            },
            frame,
            k_list,
            r2,
            opts,
        )?;
        let mut cand = gpu.alloc_uninit::<T>(4 * g.entries.max(1))?;
        let n32 = g.entries as u32;
        let f = gpu.func_t::<T>("grid_pack")?;
        let mut l = gpu.stream().launch_builder(&f);
        l.arg(&targs).arg(&g.entry).arg(&n32).arg(&mut cand);
        unsafe { l.launch(threads(g.entries, 256)) }.map_err(cuda_err)?;
        g.cand = Some(cand);
        Ok(Some(g))
    }

    /// Every level of `frame`, coarse to fine, each filtering its parent's lists
    /// (grid::CandidateGrid::build), with the level kernels of one kind of data.
    pub(crate) fn build_levels<A: DeviceRepr>(
        gpu: &Gpu,
        kernels: &LevelKernels<'_, A>,
        frame: GridFrame<T>,
        k_list: usize,
        r2: T,
        opts: &GridOptions,
    ) -> Result<Self> {
        let mut level: Option<Self> = None;
        for f in cgrid::levels(frame, opts).into_iter().rev() {
            level = Some(Self::build_level(gpu, kernels, f, level.as_ref(), k_list, r2)?);
        }
        Ok(level.expect("at least one level"))
    }

    fn build_level<A: DeviceRepr>(
        gpu: &Gpu,
        kernels: &LevelKernels<'_, A>,
        frame: GridFrame<T>,
        parent: Option<&Self>,
        k_list: usize,
        r2: T,
    ) -> Result<Self> {
        let targs = kernels.data;
        let fargs = frame_args(&frame);
        let cells = frame.cells();
        let (cells32, k32) = (cells as u32, k_list as u32);
        let mut start = gpu.alloc_uninit::<u32>(cells * BUCKETS + 1)?;
        let mut floor = gpu.alloc_uninit::<T>(cells * BUCKETS)?;
        let mut cell_r2 = gpu.alloc_uninit::<T>(cells)?;
        let mut cell_lo = gpu.alloc_uninit::<T>(cells)?;
        // The count pass leaves the last slot alone: zero it so the scan ends with the total.
        gpu.stream().memset_zeros(&mut start.slice_mut(cells * BUCKETS..)).map_err(cuda_err)?;
        // The top level has no parent lists: null pointers stand for "every point".
        let null = gpu.alloc::<u32>(1)?;
        let (pstart, pentry) = match parent {
            Some(p) => (p.start.device_ptr(gpu.stream()).0, p.entry.device_ptr(gpu.stream()).0),
            None => (0u64, null.device_ptr(gpu.stream()).0),
        };
        // The top level's few cells each read every point: a block per cell there.
        let (count_name, fill_name, cfg) = match parent {
            None => (kernels.count_wide, kernels.fill_wide, threads(cells * 32 * WIDE_WARPS, (32 * WIDE_WARPS) as u32)),
            Some(_) => (kernels.count, kernels.fill, threads(cells * 32, (32 * WARPS_PER_BLOCK) as u32)),
        };
        let f = gpu.func_t::<T>(count_name)?;
        let mut l = gpu.stream().launch_builder(&f);
        l.arg(targs).arg(&fargs).arg(&cells32).arg(&pstart).arg(&pentry).arg(&k32).arg(&r2);
        l.arg(&mut start).arg(&mut floor).arg(&mut cell_r2).arg(&mut cell_lo);
        unsafe { l.launch(cfg) }.map_err(cuda_err)?;
        exclusive_scan(gpu, &mut start, cells * BUCKETS + 1)?;
        let total = gpu.stream().clone_dtoh(&start.slice(cells * BUCKETS..)).map_err(cuda_err)?[0] as usize;
        let mut entry = gpu.alloc_uninit::<u32>(total)?;
        let f = gpu.func_t::<T>(fill_name)?;
        let mut l = gpu.stream().launch_builder(&f);
        l.arg(targs).arg(&fargs).arg(&cells32).arg(&pstart).arg(&pentry);
        l.arg(&start).arg(&cell_r2).arg(&cell_lo).arg(&mut entry);
        unsafe { l.launch(cfg) }.map_err(cuda_err)?;
        Ok(Self { frame, start, floor, entry, entries: total, cand: None })
    }

    /// Queries `x, y, z` (`len` of them) ordered by the cell of this grid that holds them, by
    /// a counting sort, as records (x, y, z, index in the chunk); those outside the grid come
    /// last.
    pub(crate) fn sort_queries(
        &self,
        gpu: &Gpu,
        x: &CudaView<'_, T>,
        y: &CudaView<'_, T>,
        z: &CudaView<'_, T>,
        len: usize,
    ) -> Result<CellQueries<T>> {
        let cells = self.frame.cells();
        let (len32, cells32) = (len as u32, cells as u32);
        let fargs = self.frame_args();
        let mut cell_of = gpu.alloc_uninit::<u32>(len)?;
        let mut rank = gpu.alloc_uninit::<u32>(len)?;
        let mut count = gpu.alloc::<u32>(cells + 2)?;
        let f = gpu.func_t::<T>("grid_cell_count")?;
        let mut l = gpu.stream().launch_builder(&f);
        l.arg(x).arg(y).arg(z).arg(&len32).arg(&fargs).arg(&cells32).arg(&mut cell_of).arg(&mut rank);
        l.arg(&mut count);
        unsafe { l.launch(threads(len, 256)) }.map_err(cuda_err)?;
        exclusive_scan(gpu, &mut count, cells + 1)?;
        let mut records = gpu.alloc_uninit::<T>(4 * len.max(1))?;
        let f = gpu.func_t::<T>("grid_cell_scatter")?;
        let mut l = gpu.stream().launch_builder(&f);
        l.arg(x).arg(y).arg(z).arg(&len32).arg(&cell_of).arg(&rank).arg(&count).arg(&mut records);
        unsafe { l.launch(threads(len, 256)) }.map_err(cuda_err)?;
        Ok(CellQueries { records, len })
    }

    pub(crate) fn frame_args(&self) -> GridFrameArgs<T> {
        frame_args(&self.frame)
    }

    #[cfg(feature = "test-hooks")]
    pub fn to_host(&self, gpu: &Gpu) -> Result<crate::knn::grid::CandidateGrid<T>> {
        let s = gpu.stream();
        Ok(crate::knn::grid::CandidateGrid {
            frame: self.frame,
            start: s.clone_dtoh(&self.start).map_err(cuda_err)?,
            floor: s.clone_dtoh(&self.floor).map_err(cuda_err)?,
            entry: s.clone_dtoh(&self.entry.slice(0..self.entries)).map_err(cuda_err)?,
        })
    }
}

fn frame_args<T: Real>(f: &GridFrame<T>) -> GridFrameArgs<T> {
    GridFrameArgs { origin: f.origin, cell: f.cell, inv_cell: f.inv_cell, half_diag: f.half_diag, dims: f.dims }
}
