//! Launches vector_knn.cu: exact and shifted-sort kNN of vectors of any dimension (1 to 8).
//! The exact search walks the `VectorTree` built on the host (a sort of n keys; the data is
//! the small side) and uploaded; queries are ordered on the device by Morton key for
//! coherence. The shifted copies are keyed and sorted on the device.

use std::marker::PhantomData;

use cudarc::driver::{CudaSlice, DevicePtr, LaunchConfig};

use super::check_vectors;
use super::tree::VECTOR_LEAF;
use crate::error::Result;
use crate::geometry::real::Real;
use crate::geometry::vectors::{Aabb6, Vectors, MAX_DIM};
use crate::knn::grid::{aabb6_stretch, GridFrame, GridOptions};
use crate::knn::grid_cuda::{DeviceGrid, GridFrameArgs, LevelData, Parent, GRID_LEVELS};
use crate::knn::vectors::shifted_sort::{ShiftFrame, ShiftedSortOptions};
use crate::knn::vectors::tree::VectorTree;
use crate::knn::{Knn, KnnOptions};
use crate::runtime::cuda::launch::{c_definitions, c_struct, kernels, In, Out};
use crate::runtime::cuda::radix_sort::{gather_u64, iota_u32, sort_pairs};
use crate::runtime::cuda::{cuda_err, threads, CudaSource, Gpu, COMMON};

static VECTOR_KNN: CudaSource = CudaSource {
    file: "vector_knn.cu",
    text: include_str!("vector_knn.cu"),
    constants: || vec![("MAX_DIM", MAX_DIM.to_string()), ("VECTOR_LEAF", VECTOR_LEAF.to_string())],
    structs: c_definitions!(VecColsArg<f32>, ShiftFrameArgs),
};

c_struct! {
    /// `struct VecColsArg<T>` of vector_knn.cu: columns of n values (stride n).
    pub(crate) struct VecColsArg<T> as "VecColsArg<{R}>" {
        cols: u64 = "const R*",
        n: u32 = "u32",
    }
}

c_struct! {
    /// `struct ShiftFrameArgs` of vector_knn.cu: a `ShiftFrame`.
    pub(crate) struct ShiftFrameArgs as "ShiftFrameArgs" {
        lo: [f64; MAX_DIM] = "double[NK_MAX_DIM]",
        scale: f64 = "double",
        bits: u32 = "u32",
        step: u32 = "u32",
    }
}

/// The dimensions the kernels are compiled for, and the list capacities of a search
/// (`_k0`: any k, in memory).
fn dims() -> impl Iterator<Item = usize> {
    1..=MAX_DIM
}
const CAPACITIES: [usize; 3] = [8, 32, 0];

/// `_d{d}` for every dimension.
fn dim_variants() -> Vec<String> {
    dims().map(|d| format!("_d{d}")).collect()
}

/// `_d{d}_k{cap}` for every dimension and capacity.
fn search_variants() -> Vec<String> {
    dims().flat_map(|d| CAPACITIES.map(|c| format!("_d{d}_k{c}"))).collect()
}

/// The search variant of dimension `d` for `k` neighbours: the smallest capacity that holds
/// them (0: any).
fn search_variant(d: usize, k: usize) -> String {
    let cap = CAPACITIES.into_iter().find(|&c| c != 0 && k <= c).unwrap_or(0);
    format!("_d{d}_k{cap}")
}

kernels! {
    module KERNELS = "vectors", [&COMMON, &GRID_LEVELS, &VECTOR_KNN];
    /// Each data vector's key in shifted copy `shift` (low and high 64 bits) and its index.
    fn shift_keys<T>[dim_variants()](
        cols: In<T>,
        n: u32,
        f: ShiftFrameArgs,
        shift: u32,
        klo: Out<u64>,
        khi: Out<u64>,
        vals: Out<u32>,
    );
    /// Each query's Morton key's top bits (for ordering) and its index.
    fn vector_order_keys<T>[dim_variants()](
        qcols: In<T>,
        nq: u32,
        f: ShiftFrameArgs,
        shift: u32,
        keys: Out<u64>,
        vals: Out<u32>,
    );
    /// Exact kNN by the `VectorTree`'s search, queries in `order`.
    fn vector_knn<T>[search_variants()](
        qcols: In<T>,
        nq: u32,
        order: In<u32>,
        cols: In<T>,
        ids: In<u32>,
        n: u32,
        lo: In<T>,
        hi: In<T>,
        leaves: u32,
        k: u32,
        r2: T,
        exclude_self: u32,
        out_ids: Out<u32>,
        out_d: Out<T>,
    );
    /// The shifted sort's candidates: `window` on each side of each query in each copy.
    fn shifted_knn<T>[search_variants()](
        qcols: In<T>,
        nq: u32,
        order: In<u32>,
        f: ShiftFrameArgs,
        shifts: u32,
        window: u32,
        khi: In<u64>,
        klo: In<u64>,
        ids: In<u32>,
        cols: In<T>,
        n: u32,
        k: u32,
        out_ids: Out<u32>,
        out_d: Out<T>,
    );
    /// `dim` columns gathered by `perm`.
    fn gather_cols<T>(src: In<T>, perm: In<u32>, n: u32, dim: u32, dst: Out<T>);
    fn gather_u32(source: In<u32>, perm: In<u32>, n: u32, out: Out<u32>);
    /// The 6-D grid's level passes (see `grid_cuda`), for min-max (`_mm`) or min-extent
    /// (`_me`) embeddings, a warp or a block (`_wide`) per cell.
    fn aabb6_grid_level_count<T>[["_mm", "_me", "_wide_mm", "_wide_me"]](
        a: VecColsArg<T>,
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
    fn aabb6_grid_level_fill<T>[["_mm", "_me", "_wide_mm", "_wide_me"]](
        a: VecColsArg<T>,
        f: GridFrameArgs<T>,
        cells: u32,
        pstart: In<u32>,
        pentry: In<u32>,
        start: In<u32>,
        cell_r2: In<T>,
        cell_lo: In<T>,
        entry: Out<u32>,
    );
    /// Exact 6-D kNN of embedded queries through the grid (list capacity 8 or 32).
    fn aabb6_grid_rows<T>[["_mm_k8", "_mm_k32", "_me_k8", "_me_k32"]](
        qcols: In<T>,
        nq: u32,
        order: In<u32>,
        cols: In<T>,
        ids: In<u32>,
        n: u32,
        lo: In<T>,
        hi: In<T>,
        leaves: u32,
        f: GridFrameArgs<T>,
        start: In<u32>,
        floor_in: In<T>,
        entry: In<u32>,
        k: u32,
        r2: T,
        exclude_self: u32,
        out_ids: Out<u32>,
        out_d: Out<T>,
    );
}

impl From<&ShiftFrame> for ShiftFrameArgs {
    fn from(f: &ShiftFrame) -> Self {
        Self { lo: f.lo, scale: f.scale, bits: f.bits, step: f.step }
    }
}

/// Vectors in GPU memory (column `a` is `cols[a*len..(a+1)*len]`), made by
/// [`VectorIndex::upload`](crate::VectorIndex::upload).
pub struct DeviceVectors<T> {
    pub(crate) cols: CudaSlice<T>,
    pub(crate) dim: usize,
    pub(crate) len: usize,
    /// Triangle-box queries (`Aabb6::detect`) and the box of their 3-D coordinates.
    pub(crate) embedded: Option<(Aabb6, [T; 3], [T; 3])>,
    /// Each axis's (mins, maxes), for the shifted sort's frame (`VectorIndex::upload` sets it).
    pub(crate) bounds: Option<(Vec<f64>, Vec<f64>)>,
    /// The coordinates' magnitudes (`VectorIndex::upload` sets them).
    pub(crate) magnitudes: Option<crate::geometry::magnitude::Magnitudes>,
}

impl<T: Real> DeviceVectors<T> {
    /// The number of vectors.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Their dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    pub(crate) fn upload(gpu: &Gpu, v: &Vectors<T>) -> Result<Self> {
        let flat: Vec<T> = v.cols.concat();
        let embedded = Aabb6::detect(v).map(|e| {
            let (lo, hi) = v.bounds3();
            (e, lo, hi)
        });
        let cols = gpu.stream().clone_htod(&flat).map_err(cuda_err)?;
        Ok(Self { cols, dim: v.dim(), len: v.len(), embedded, bounds: None, magnitudes: None })
    }
}

/// A `VectorTree` on the device.
pub(crate) struct DeviceVectorTree<T> {
    cols: CudaSlice<T>,
    ids: CudaSlice<u32>,
    lo: CudaSlice<T>,
    hi: CudaSlice<T>,
    leaves: usize,
    dim: usize,
    len: usize,
    /// Orders queries along the data's Morton curve (shift 0 of a one-copy frame).
    order_frame: ShiftFrame,
}

impl<T: Real> DeviceVectorTree<T> {
    pub(crate) fn upload(gpu: &Gpu, t: &VectorTree<T>, data: &Vectors<T>) -> Result<Self> {
        let s = gpu.stream();
        Ok(Self {
            cols: s.clone_htod(&t.cols.concat()).map_err(cuda_err)?,
            ids: s.clone_htod(&t.ids).map_err(cuda_err)?,
            lo: s.clone_htod(&t.lo.concat()).map_err(cuda_err)?,
            hi: s.clone_htod(&t.hi.concat()).map_err(cuda_err)?,
            leaves: t.leaves,
            dim: t.dim(),
            len: t.len(),
            order_frame: ShiftFrame::new(data, data),
        })
    }
}

/// Morton bits queries are ordered on: 8 per dimension (one radix pass each), at least 24.
/// (6-D triangle-box queries ordered on only 24 bits — 4 per axis — lost a third of their
/// speed to warps spanning several grid cells.)
fn order_bits(d: usize) -> u32 {
    (8 * d as u32).clamp(24, 64)
}

/// The queries' indices sorted by the top `order_bits` bits of their Morton keys in `frame`
/// (copy 0).
fn morton_order<T: Real>(gpu: &Gpu, queries: &DeviceVectors<T>, frame: &ShiftFrame) -> Result<CudaSlice<u32>> {
    let (nq, d) = (queries.len, queries.dim);
    let (nq32, shift) = (nq as u32, 64 - order_bits(d));
    let mut keys = gpu.alloc_uninit::<u64>(nq)?;
    let mut order = gpu.alloc_uninit::<u32>(nq)?;
    let fargs = ShiftFrameArgs::from(frame);
    let cfg = threads(nq, 256);
    vector_order_keys::<T>(gpu, cfg, &format!("_d{d}"), &queries.cols, nq32, fargs, shift, &mut keys, &mut order)?;
    sort_pairs(gpu, &mut keys, &mut order, nq, order_bits(d))?;
    Ok(order)
}

/// Queries in their own order (for searches too short to gain from sorting).
fn identity_order(gpu: &Gpu, n: usize) -> Result<CudaSlice<u32>> {
    let mut order = gpu.alloc_uninit::<u32>(n)?;
    iota_u32(gpu, threads(n, 256), &mut order, n as u32)?;
    Ok(order)
}

/// Exact kNN with the tree and queries on the device; results into `ids` / `distances`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn knn_resident<T: Real>(
    gpu: &Gpu,
    tree: &DeviceVectorTree<T>,
    queries: &DeviceVectors<T>,
    opts: &KnnOptions<T>,
    k: usize,
    r2: T,
    ids: &mut CudaSlice<u32>,
    distances: &mut CudaSlice<T>,
) -> Result<()> {
    let nq = queries.len;
    let (d, nq32) = (tree.dim, nq as u32);
    // Queries in Morton order: neighbouring threads walk the same part of the tree.
    let order = morton_order(gpu, queries, &tree.order_frame)?;
    let (n32, leaves32, k32, excl) = (tree.len as u32, tree.leaves as u32, k as u32, u32::from(opts.exclude_self));
    if let Some(g) = aabb6_grid(gpu, tree, queries, k + usize::from(opts.exclude_self), r2, &opts.grid)? {
        let (cap, e) = (if k <= 8 { 8 } else { 32 }, queries.embedded.unwrap().0);
        let variant = format!("_{}_k{cap}", embedding_name(e));
        let (t, q) = (tree, queries);
        aabb6_grid_rows::<T>(
            gpu,
            threads(nq, 128),
            &variant,
            &q.cols,
            nq32,
            &order,
            &t.cols,
            &t.ids,
            n32,
            &t.lo,
            &t.hi,
            leaves32,
            g.frame_args(),
            &g.start,
            &g.floor,
            &g.entry,
            k32,
            r2,
            excl,
            ids,
            distances,
        )?;
        return Ok(());
    }
    let (t, q) = (tree, queries);
    let variant = search_variant(d, k);
    vector_knn::<T>(
        gpu,
        threads(nq, 128),
        &variant,
        &q.cols,
        nq32,
        &order,
        &t.cols,
        &t.ids,
        n32,
        &t.lo,
        &t.hi,
        leaves32,
        k32,
        r2,
        excl,
        ids,
        distances,
    )
}

fn embedding_name(e: Aabb6) -> &'static str {
    match e {
        Aabb6::MinMax => "mm",
        Aabb6::MinExtent => "me",
    }
}

/// The candidate grid over triangle-box queries' 3-D space (grid::Aabb6Data), when they are
/// such queries, many, and k is small; as `CandidateGrid::for_embedded` on the CPU.
fn aabb6_grid<T: Real>(
    gpu: &Gpu,
    tree: &DeviceVectorTree<T>,
    queries: &DeviceVectors<T>,
    k_list: usize,
    r2: T,
    opts: &GridOptions,
) -> Result<Option<DeviceGrid<T>>> {
    let Some((e, lo, hi)) = queries.embedded else { return Ok(None) };
    if tree.dim != 6 || k_list > 32 {
        return Ok(None);
    }
    let Some(frame) = GridFrame::embedded(lo, hi, tree.len, queries.len, k_list, aabb6_stretch(e), opts) else {
        return Ok(None);
    };
    let cols = VecColsArg { cols: tree.cols.device_ptr(gpu.stream()).0, n: tree.len as u32, _real: PhantomData };
    DeviceGrid::build_levels(gpu, &Aabb6Levels { cols, embedding: e }, frame, k_list, r2, opts).map(Some)
}

#[cfg(feature = "test-hooks")]
/// Builds the 6-D candidate grid on the device and brings it back (tests compare it with
/// the CPU build); `None` where it would not be used.
pub(crate) fn aabb6_grid_to_host<T: Real>(
    gpu: &Gpu,
    data: &Vectors<T>,
    queries: &Vectors<T>,
    k_list: usize,
    r2: T,
) -> Result<Option<crate::knn::grid::CandidateGrid<T>>> {
    let tree = DeviceVectorTree::upload(gpu, &VectorTree::build(data), data)?;
    let dq = DeviceVectors::upload(gpu, queries)?;
    aabb6_grid(gpu, &tree, &dq, k_list, r2, &GridOptions::default())?.map(|g| g.to_host(gpu)).transpose()
}

/// Each query's `k` nearest data points of `tree` within squared radius `r2`.
pub(crate) fn knn<T: Real>(
    gpu: &Gpu,
    tree: &DeviceVectorTree<T>,
    queries: &Vectors<T>,
    opts: &KnnOptions<T>,
    k: usize,
    r2: T,
) -> Result<Knn<T>> {
    let dq = DeviceVectors::upload(gpu, queries)?;
    let mut ids = gpu.alloc_uninit::<u32>(queries.len() * k)?;
    let mut dist = gpu.alloc_uninit::<T>(queries.len() * k)?;
    knn_resident(gpu, tree, &dq, opts, k, r2, &mut ids, &mut dist)?;
    download(gpu, k, &ids, &dist)
}

fn download<T: Real>(gpu: &Gpu, k: usize, ids: &CudaSlice<u32>, dist: &CudaSlice<T>) -> Result<Knn<T>> {
    let s = gpu.stream();
    Ok(Knn { k, ids: s.clone_dtoh(ids).map_err(cuda_err)?, distances: s.clone_dtoh(dist).map_err(cuda_err)? })
}

/// The shifted, sorted copies of the data on the device (see `shifted_sort`).
pub(crate) struct DeviceShiftedCopies<T> {
    frame: ShiftFrame,
    shifts: usize,
    khi: CudaSlice<u64>,
    klo: CudaSlice<u64>,
    ids: CudaSlice<u32>,
    cols: CudaSlice<T>,
    len: usize,
}

impl<T: Real> DeviceShiftedCopies<T> {
    /// Keys each copy of `data` and sorts it by (key, id), as `cpu::ShiftedCopies`.
    pub(crate) fn build(gpu: &Gpu, data: &DeviceVectors<T>, frame: ShiftFrame, shifts: usize) -> Result<Self> {
        let (n, d) = (data.len, data.dim);
        let s = gpu.stream();
        let mut khi = gpu.alloc_uninit::<u64>(n * shifts)?;
        let mut klo = gpu.alloc_uninit::<u64>(n * shifts)?;
        let mut ids = gpu.alloc_uninit::<u32>(n * shifts)?;
        let mut cols = gpu.alloc_uninit::<T>(n * shifts * d)?;
        let fargs = ShiftFrameArgs::from(&frame);
        let (n32, d32) = (n as u32, d as u32);
        let (mut lo, mut hi, mut vals) =
            (gpu.alloc_uninit::<u64>(n)?, gpu.alloc_uninit::<u64>(n)?, gpu.alloc_uninit::<u32>(n)?);
        let mut tmp = gpu.alloc_uninit::<u64>(n)?;
        let total_bits = frame.bits * d as u32;
        let variant = format!("_d{d}");
        for c in 0..shifts {
            let c32 = c as u32;
            let cfg = threads(n, 256);
            shift_keys::<T>(gpu, cfg, &variant, &data.cols, n32, fargs, c32, &mut lo, &mut hi, &mut vals)?;
            // Stable LSD passes: low half, then high half; ids start in order, so ties keep it.
            sort_pairs(gpu, &mut lo, &mut vals, n, total_bits.min(64))?;
            if total_bits > 64 {
                gather_u64(gpu, cfg, &hi, &vals, n32, &mut tmp)?;
                std::mem::swap(&mut hi, &mut tmp);
                // `lo` must follow the high pass too: carry its position as the value.
                let mut pos = gpu.alloc_uninit::<u32>(n)?;
                iota_u32(gpu, cfg, &mut pos, n32)?;
                sort_pairs(gpu, &mut hi, &mut pos, n, total_bits - 64)?;
                gather_u64(gpu, cfg, &lo, &pos, n32, &mut tmp)?;
                std::mem::swap(&mut lo, &mut tmp);
                let mut sorted_ids = gpu.alloc_uninit::<u32>(n)?;
                gather_u32(gpu, cfg, &vals, &pos, n32, &mut sorted_ids)?;
                vals = sorted_ids;
            } else {
                s.memset_zeros(&mut hi).map_err(cuda_err)?;
            }
            s.memcpy_dtod(&lo, &mut klo.slice_mut(c * n..(c + 1) * n)).map_err(cuda_err)?;
            s.memcpy_dtod(&hi, &mut khi.slice_mut(c * n..(c + 1) * n)).map_err(cuda_err)?;
            s.memcpy_dtod(&vals, &mut ids.slice_mut(c * n..(c + 1) * n)).map_err(cuda_err)?;
            let mut dst = cols.slice_mut(c * n * d..(c + 1) * n * d);
            gather_cols::<T>(gpu, cfg, &data.cols, &vals, n32, d32, &mut dst)?;
        }
        Ok(Self { frame, shifts, khi, klo, ids, cols, len: n })
    }
}

/// Shifted-sort kNN with the copies and queries on the device; results into `ids` / `distances`.
pub(crate) fn approx_knn_resident<T: Real>(
    gpu: &Gpu,
    copies: &DeviceShiftedCopies<T>,
    queries: &DeviceVectors<T>,
    opts: &ShiftedSortOptions,
    ids: &mut CudaSlice<u32>,
    distances: &mut CudaSlice<T>,
) -> Result<usize> {
    let k = opts.check(copies.len)?;
    let nq = queries.len;
    if ids.len() < nq * k || distances.len() < nq * k {
        return Err(crate::error::Error::InvalidArgument(format!(
            "the output buffers hold {} ids and {} distances; {nq} queries × k = {k} need {}",
            ids.len(),
            distances.len(),
            nq * k
        )));
    }
    // Sorting the queries pays once the windows are long (measured on an H100: 16 x 32 went
    // from 164 to 32 ms at 2^23, while 4 x 8 went from 6.9 to 9.4 ms).
    let order = if copies.shifts * opts.window >= 64 {
        morton_order(gpu, queries, &copies.frame)?
    } else {
        identity_order(gpu, nq)?
    };
    let fargs = ShiftFrameArgs::from(&copies.frame);
    let (nq32, s32, w32, n32, k32) = (nq as u32, copies.shifts as u32, opts.window as u32, copies.len as u32, k as u32);
    let c = copies;
    let variant = search_variant(c.frame.dim, k);
    shifted_knn::<T>(
        gpu,
        threads(nq, 128),
        &variant,
        &queries.cols,
        nq32,
        &order,
        fargs,
        s32,
        w32,
        &c.khi,
        &c.klo,
        &c.ids,
        &c.cols,
        n32,
        k32,
        ids,
        distances,
    )?;
    Ok(k)
}

pub(crate) fn approx_knn<T: Real>(
    gpu: &Gpu,
    data: &Vectors<T>,
    queries: &Vectors<T>,
    opts: &ShiftedSortOptions,
) -> Result<Knn<T>> {
    check_vectors(data, queries)?;
    let k = opts.check(data.len())?;
    let frame = ShiftFrame::new(data, queries);
    let dd = DeviceVectors::upload(gpu, data)?;
    let copies = DeviceShiftedCopies::build(gpu, &dd, frame, opts.shifts)?;
    let dq = DeviceVectors::upload(gpu, queries)?;
    let mut ids = gpu.alloc_uninit::<u32>(queries.len() * k)?;
    let mut dist = gpu.alloc_uninit::<T>(queries.len() * k)?;
    approx_knn_resident(gpu, &copies, &dq, opts, &mut ids, &mut dist)?;
    download(gpu, k, &ids, &dist)
}

/// The 6-D triangle boxes as the grid's level kernels see them (`grid::Aabb6Data`).
struct Aabb6Levels<T> {
    cols: VecColsArg<T>,
    embedding: Aabb6,
}

impl<T: Real> LevelData<T> for Aabb6Levels<T> {
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
        let variant = format!("{}_{}", if wide { "_wide" } else { "" }, embedding_name(self.embedding));
        let (ps, pe) = (parent.start, parent.entry);
        let a = self.cols;
        aabb6_grid_level_count::<T>(gpu, cfg, &variant, a, f, cells, ps, pe, k_list, r2, count, floor, cell_r2, cell_lo)
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
        let variant = format!("{}_{}", if wide { "_wide" } else { "" }, embedding_name(self.embedding));
        let (ps, pe) = (parent.start, parent.entry);
        aabb6_grid_level_fill::<T>(gpu, cfg, &variant, self.cols, f, cells, ps, pe, start, cell_r2, cell_lo, entry)
    }
}
