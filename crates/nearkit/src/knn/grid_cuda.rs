//! Launches candidate_grid.cu: the `CandidateGrid` of knn/grid.rs built on the device, in the
//! same layout (and the same entry order) as the CPU build; and queries ordered by its cells.

use std::marker::PhantomData;

use cudarc::driver::{CudaSlice, CudaView, LaunchConfig};

use crate::error::Result;
use crate::geometry::real::Real;
use crate::knn::grid::{self as cgrid, GridCand, GridFrame, GridOptions, BUCKETS, LEVEL_FACTOR, MARGIN};
use crate::runtime::cuda::launch::{c_definitions, c_struct, kernels, Address, In, Out};
use crate::runtime::cuda::radix_sort::exclusive_scan;
use crate::runtime::cuda::{cuda_err, threads, CudaSource, Gpu, COMMON};
use crate::tree::cuda::{DeviceTree, TreeArgs, TREE_HEADER};

/// Cells (one warp each) per block of the narrow level kernels.
const WARPS_PER_BLOCK: usize = 4;
/// Warps (one cell) per block of the wide level kernels, which build the top level.
const WIDE_WARPS: usize = 16;

/// The level build shared by the 3-D grid and the grid of 6-D triangle boxes, and `GridCand`.
pub(crate) static GRID_LEVELS: CudaSource = CudaSource {
    file: "grid_levels.cuh",
    text: include_str!("grid_levels.cuh"),
    constants: || {
        vec![
            ("GRID_BUCKETS", BUCKETS.to_string()),
            ("GRID_MARGIN", format!("{MARGIN:?}")),
            ("GRID_LEVEL_FACTOR", LEVEL_FACTOR.to_string()),
            ("GRID_WARPS", WARPS_PER_BLOCK.to_string()),
            ("GRID_WIDE_WARPS", WIDE_WARPS.to_string()),
        ]
    },
    structs: c_definitions!(GridFrameArgs<f32>),
};

/// `GridCand` is written by hand in grid_levels.cuh (it is aligned for vector loads): its
/// size is checked after it.
pub(crate) static GRID_CAND_CHECK: CudaSource = CudaSource {
    file: "(GridCand's size)",
    text: "",
    constants: Vec::new,
    structs: || {
        [("float", std::mem::size_of::<GridCand<f32>>()), ("double", std::mem::size_of::<GridCand<f64>>())]
            .map(|(c, size)| {
                format!("static_assert(sizeof(GridCand<{c}>) == {size}, \"GridCand: its size differs from Rust's\");")
            })
            .to_vec()
    },
};

static CANDIDATE_GRID: CudaSource = CudaSource::plain("candidate_grid.cu", include_str!("candidate_grid.cu"));

c_struct! {
    /// `struct GridFrame<T>` of grid_levels.cuh, passed to kernels by value.
    pub(crate) struct GridFrameArgs<T> as "GridFrame<{R}>" {
        ox: T = "R",
        oy: T = "R",
        oz: T = "R",
        cell: T = "R",
        inv_cell: T = "R",
        half_diag: T = "R",
        dx: u32 = "u32",
        dy: u32 = "u32",
        dz: u32 = "u32",
    }
}

kernels! {
    module KERNELS = "grid", [&COMMON, &TREE_HEADER, &GRID_LEVELS, &GRID_CAND_CHECK, &CANDIDATE_GRID];
    /// Pass 1 of a level: each cell's list radius, bucket counts and floors. Variants: a warp
    /// per cell (""), a block per cell ("_wide", the top level).
    fn grid_level_count<T>[["", "_wide"]](
        t: TreeArgs<T>,
        f: GridFrameArgs<T>,
        cells: u32,
        pstart: In<u32>,
        pentry: In<u32>,
        k_list: u32,
        r2: T,
        count: Out<u32>,
        floor_out: Out<T>,
        cell_r2: Out<T>,
        cell_lo: Out<T>,
    );
    /// Pass 2 of a level: each cell's entries, in its parent list's order.
    fn grid_level_fill<T>[["", "_wide"]](
        t: TreeArgs<T>,
        f: GridFrameArgs<T>,
        cells: u32,
        pstart: In<u32>,
        pentry: In<u32>,
        start: In<u32>,
        cell_r2: In<T>,
        cell_lo: In<T>,
        entry: Out<u32>,
    );
    /// The data's bounds: lo x, y, z, hi x, y, z.
    fn root_box<T>(t: TreeArgs<T>, out: Out<T>);
    /// The entries' records (`GridCand`), in list order.
    fn grid_pack<T>(t: TreeArgs<T>, entry: In<u32>, n: u32, out: Out<T>);
    /// Each query's cell, the cells' counts, and each query's rank in its cell.
    fn grid_cell_count<T>(
        qx: In<T>,
        qy: In<T>,
        qz: In<T>,
        n: u32,
        f: GridFrameArgs<T>,
        cells: u32,
        cell_of: Out<u32>,
        rank: Out<u32>,
        count: Out<u32>,
    );
    /// Each query's record to its slot in cell order.
    fn grid_cell_scatter<T>(
        qx: In<T>,
        qy: In<T>,
        qz: In<T>,
        n: u32,
        cell_of: In<u32>,
        rank: In<u32>,
        start: In<u32>,
        out: Out<T>,
    );
}

/// A level's parent lists: `None` for the top level, which lists every point.
pub(crate) struct Parent<'a> {
    pub start: Address<u32>,
    pub entry: Address<u32>,
    _lists: PhantomData<&'a ()>,
}

/// The data a grid lists, as its level kernels see it (the device side of `grid::GridData`):
/// the 3-D tree here, the 6-D triangle boxes in `vectors::cuda`.
pub(crate) trait LevelData<T: Real> {
    /// Pass 1 of a level (`grid_level_count`); `wide`: a block per cell.
    #[allow(clippy::too_many_arguments)]
    fn count(
        &self,
        gpu: &Gpu,
        cfg: LaunchConfig,
        wide: bool,
        f: GridFrameArgs<T>,
        cells: u32,
        parent: &Parent<'_>,
        k_list: u32,
        r2: T,
        out: (&mut CudaSlice<u32>, &mut CudaSlice<T>, &mut CudaSlice<T>, &mut CudaSlice<T>),
    ) -> Result<()>;

    /// Pass 2 of a level (`grid_level_fill`).
    #[allow(clippy::too_many_arguments)]
    fn fill(
        &self,
        gpu: &Gpu,
        cfg: LaunchConfig,
        wide: bool,
        f: GridFrameArgs<T>,
        cells: u32,
        parent: &Parent<'_>,
        lists: (&CudaSlice<u32>, &CudaSlice<T>, &CudaSlice<T>),
        entry: &mut CudaSlice<u32>,
    ) -> Result<()>;
}

impl<T: Real> LevelData<T> for TreeArgs<T> {
    fn count(
        &self,
        gpu: &Gpu,
        cfg: LaunchConfig,
        wide: bool,
        f: GridFrameArgs<T>,
        cells: u32,
        parent: &Parent<'_>,
        k_list: u32,
        r2: T,
        (count, floor, cell_r2, cell_lo): (
            &mut CudaSlice<u32>,
            &mut CudaSlice<T>,
            &mut CudaSlice<T>,
            &mut CudaSlice<T>,
        ),
    ) -> Result<()> {
        let variant = if wide { "_wide" } else { "" };
        let (ps, pe) = (parent.start, parent.entry);
        grid_level_count::<T>(gpu, cfg, variant, *self, f, cells, ps, pe, k_list, r2, count, floor, cell_r2, cell_lo)
    }

    fn fill(
        &self,
        gpu: &Gpu,
        cfg: LaunchConfig,
        wide: bool,
        f: GridFrameArgs<T>,
        cells: u32,
        parent: &Parent<'_>,
        (start, cell_r2, cell_lo): (&CudaSlice<u32>, &CudaSlice<T>, &CudaSlice<T>),
        entry: &mut CudaSlice<u32>,
    ) -> Result<()> {
        let variant = if wide { "_wide" } else { "" };
        let (ps, pe) = (parent.start, parent.entry);
        grid_level_fill::<T>(gpu, cfg, variant, *self, f, cells, ps, pe, start, cell_r2, cell_lo, entry)
    }
}

/// A chunk of queries in grid-cell order: `len` records (x, y, z, index in the chunk) of
/// `GridCand` layout.
pub(crate) struct CellQueries<T> {
    pub records: CudaSlice<T>,
    pub len: usize,
}

pub(crate) struct DeviceGrid<T> {
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
        root_box::<T>(gpu, threads(1, 32), targs, &mut bounds)?;
        let b = gpu.stream().clone_dtoh(&bounds).map_err(cuda_err)?;
        let (lo, hi) = ([b[0], b[1], b[2]], [b[3], b[4], b[5]]);
        let Some(frame) = GridFrame::for_queries(lo, hi, tree.n as usize, n_queries, k_list, opts) else {
            return Ok(None);
        };
        let mut g = Self::build_levels(gpu, &targs, frame, k_list, r2, opts)?;
        let mut cand = gpu.alloc_uninit::<T>(4 * g.entries.max(1))?;
        let n32 = g.entries as u32;
        grid_pack::<T>(gpu, threads(g.entries, 256), targs, &g.entry, n32, &mut cand)?;
        g.cand = Some(cand);
        Ok(Some(g))
    }

    /// Every level of `frame`, coarse to fine, each filtering its parent's lists
    /// (grid::CandidateGrid::build), with the level kernels of one kind of data.
    pub(crate) fn build_levels(
        gpu: &Gpu,
        data: &impl LevelData<T>,
        frame: GridFrame<T>,
        k_list: usize,
        r2: T,
        opts: &GridOptions,
    ) -> Result<Self> {
        let mut level: Option<Self> = None;
        for f in cgrid::levels(frame, opts).into_iter().rev() {
            level = Some(Self::build_level(gpu, data, f, level.as_ref(), k_list, r2)?);
        }
        Ok(level.expect("at least one level"))
    }

    fn build_level(
        gpu: &Gpu,
        data: &impl LevelData<T>,
        frame: GridFrame<T>,
        parent: Option<&Self>,
        k_list: usize,
        r2: T,
    ) -> Result<Self> {
        let fargs = frame_args(&frame);
        let cells = frame.cells();
        let (cells32, k32) = (cells as u32, k_list as u32);
        let mut start = gpu.alloc_uninit::<u32>(cells * BUCKETS + 1)?;
        let mut floor = gpu.alloc_uninit::<T>(cells * BUCKETS)?;
        let mut cell_r2 = gpu.alloc_uninit::<T>(cells)?;
        let mut cell_lo = gpu.alloc_uninit::<T>(cells)?;
        // The count pass leaves the last slot alone: zero it so the scan ends with the total.
        gpu.stream().memset_zeros(&mut start.slice_mut(cells * BUCKETS..)).map_err(cuda_err)?;
        // The top level has no parent lists: a null start stands for "every point".
        let null = gpu.alloc::<u32>(1)?;
        let s = gpu.stream();
        let lists = match parent {
            Some(p) => Parent { start: Address::of(&p.start, s), entry: Address::of(&p.entry, s), _lists: PhantomData },
            None => Parent { start: Address::NULL, entry: Address::of(&null, s), _lists: PhantomData },
        };
        // The top level's few cells each read every point: a block per cell there.
        let wide = parent.is_none();
        let cfg = if wide {
            threads(cells * 32 * WIDE_WARPS, (32 * WIDE_WARPS) as u32)
        } else {
            threads(cells * 32, (32 * WARPS_PER_BLOCK) as u32)
        };
        let out = (&mut start, &mut floor, &mut cell_r2, &mut cell_lo);
        data.count(gpu, cfg, wide, fargs, cells32, &lists, k32, r2, out)?;
        exclusive_scan(gpu, &mut start, cells * BUCKETS + 1)?;
        let total = gpu.stream().clone_dtoh(&start.slice(cells * BUCKETS..)).map_err(cuda_err)?[0] as usize;
        let mut entry = gpu.alloc_uninit::<u32>(total)?;
        data.fill(gpu, cfg, wide, fargs, cells32, &lists, (&start, &cell_r2, &cell_lo), &mut entry)?;
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
        let cfg = threads(len, 256);
        grid_cell_count::<T>(gpu, cfg, x, y, z, len32, fargs, cells32, &mut cell_of, &mut rank, &mut count)?;
        exclusive_scan(gpu, &mut count, cells + 1)?;
        let mut records = gpu.alloc_uninit::<T>(4 * len.max(1))?;
        grid_cell_scatter::<T>(gpu, cfg, x, y, z, len32, &cell_of, &rank, &count, &mut records)?;
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
    GridFrameArgs {
        ox: f.origin[0],
        oy: f.origin[1],
        oz: f.origin[2],
        cell: f.cell,
        inv_cell: f.inv_cell,
        half_diag: f.half_diag,
        dx: f.dims[0],
        dy: f.dims[1],
        dz: f.dims[2],
        _real: PhantomData,
    }
}
