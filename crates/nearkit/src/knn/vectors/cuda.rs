//! Launches vector_knn.cu: exact and shifted-sort kNN of vectors of any dimension (1 to 8).
//! The exact search walks the `VectorTree` built on the host (a sort of n keys; the data is
//! the small side) and uploaded; queries are ordered on the device by Morton key for
//! coherence. The shifted copies are keyed and sorted on the device.

use cudarc::driver::{CudaSlice, DevicePtr, DeviceRepr, PushKernelArg};

use super::check_vectors;
use crate::error::Result;
use crate::geometry::real::Real;
use crate::geometry::vectors::{Aabb6, Vectors, MAX_DIM};
use crate::knn::grid::GridOptions;
use crate::knn::grid::{aabb6_stretch, GridFrame};
use crate::knn::grid_cuda::{DeviceGrid, LevelKernels};
use crate::knn::vectors::shifted_sort::{ShiftFrame, ShiftedSortOptions};
use crate::knn::vectors::tree::VectorTree;
use crate::knn::{Knn, KnnOptions};
use crate::runtime::cuda::radix_sort::sort_pairs;
use crate::runtime::cuda::{cuda_err, threads, Gpu};

/// `struct VecColsArg<T>` of vector_knn.cu.
#[repr(C)]
#[derive(Clone, Copy)]
struct VecColsArg {
    cols: u64,
    n: u32,
}
// SAFETY: plain old data matching the C struct (a pointer and a u32, C padding).
unsafe impl DeviceRepr for VecColsArg {}

/// `struct ShiftFrameArgs` of vector_knn.cu.
#[repr(C)]
#[derive(Clone, Copy)]
struct ShiftFrameArgs {
    lo: [f64; MAX_DIM],
    scale: f64,
    bits: u32,
    step: u32,
}
// SAFETY: plain old data matching the C struct (9 f64, 2 u32).
unsafe impl DeviceRepr for ShiftFrameArgs {}

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
    /// Each axis's (min, max), for the shifted sort's frame.
    pub(crate) bounds: (Vec<f64>, Vec<f64>),
}

impl<T: Real> DeviceVectors<T> {
    /// The number of vectors.
    pub fn len(&self) -> usize {
        self.len
    }

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
        Ok(Self { cols, dim: v.dim(), len: v.len(), embedded, bounds: v.bounds() })
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
    let f = gpu.func_t::<T>(&format!("vector_order_keys_d{d}"))?;
    let mut l = gpu.stream().launch_builder(&f);
    l.arg(&queries.cols).arg(&nq32).arg(&fargs).arg(&shift).arg(&mut keys).arg(&mut order);
    unsafe { l.launch(threads(nq, 256)) }.map_err(cuda_err)?;
    sort_pairs(gpu, &mut keys, &mut order, nq, order_bits(d))?;
    Ok(order)
}

/// Queries in their own order (for searches too short to gain from sorting).
fn identity_order(gpu: &Gpu, n: usize) -> Result<CudaSlice<u32>> {
    let mut order = gpu.alloc_uninit::<u32>(n)?;
    let n32 = n as u32;
    let f = gpu.func("iota_u32")?;
    let mut l = gpu.stream().launch_builder(&f);
    l.arg(&mut order).arg(&n32);
    unsafe { l.launch(threads(n, 256)) }.map_err(cuda_err)?;
    Ok(order)
}

/// Kernel name for dimension `d` and list capacity for `k`.
fn kernel(base: &str, d: usize, k: usize) -> String {
    let cap = match k {
        0..=8 => 8,
        9..=32 => 32,
        _ => 0,
    };
    format!("{base}_d{d}_k{cap}")
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
        let (name, e) = (if k <= 8 { 8 } else { 32 }, queries.embedded.unwrap().0);
        let f = gpu.func_t::<T>(&format!("aabb6_grid_rows_{}_k{name}", embedding_name(e)))?;
        let fargs = g.frame_args();
        let mut l = gpu.stream().launch_builder(&f);
        l.arg(&queries.cols).arg(&nq32).arg(&order).arg(&tree.cols).arg(&tree.ids).arg(&n32);
        l.arg(&tree.lo).arg(&tree.hi).arg(&leaves32).arg(&fargs).arg(&g.start).arg(&g.floor).arg(&g.entry);
        l.arg(&k32).arg(&r2).arg(&excl).arg(ids).arg(distances);
        unsafe { l.launch(threads(nq, 128)) }.map_err(cuda_err)?;
        return Ok(());
    }
    let f = gpu.func_t::<T>(&kernel("vector_knn", d, k))?;
    let mut l = gpu.stream().launch_builder(&f);
    l.arg(&queries.cols).arg(&nq32).arg(&order).arg(&tree.cols).arg(&tree.ids).arg(&n32);
    l.arg(&tree.lo).arg(&tree.hi).arg(&leaves32).arg(&k32).arg(&r2).arg(&excl).arg(ids).arg(distances);
    unsafe { l.launch(threads(nq, 128)) }.map_err(cuda_err)?;
    Ok(())
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
    let data = VecColsArg { cols: tree.cols.device_ptr(gpu.stream()).0, n: tree.len as u32 };
    let kernels = match e {
        Aabb6::MinMax => LevelKernels {
            count: "aabb6_grid_level_count_mm",
            fill: "aabb6_grid_level_fill_mm",
            count_wide: "aabb6_grid_level_count_wide_mm",
            fill_wide: "aabb6_grid_level_fill_wide_mm",
            data: &data,
        },
        Aabb6::MinExtent => LevelKernels {
            count: "aabb6_grid_level_count_me",
            fill: "aabb6_grid_level_fill_me",
            count_wide: "aabb6_grid_level_count_wide_me",
            fill_wide: "aabb6_grid_level_fill_wide_me",
            data: &data,
        },
    };
    DeviceGrid::build_levels(gpu, &kernels, frame, k_list, r2, opts).map(Some)
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
    /// Keys each copy of `data` and sorts it by (key, id), as `cpu::vector_knn::ShiftedCopies`.
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
        for c in 0..shifts {
            let c32 = c as u32;
            let f = gpu.func_t::<T>(&format!("shift_keys_d{d}"))?;
            let mut l = s.launch_builder(&f);
            l.arg(&data.cols).arg(&n32).arg(&fargs).arg(&c32).arg(&mut lo).arg(&mut hi).arg(&mut vals);
            unsafe { l.launch(threads(n, 256)) }.map_err(cuda_err)?;
            // Stable LSD passes: low half, then high half; ids start in order, so ties keep it.
            sort_pairs(gpu, &mut lo, &mut vals, n, total_bits.min(64))?;
            if total_bits > 64 {
                let g = gpu.func("gather_u64")?;
                let mut l = s.launch_builder(&g);
                l.arg(&hi).arg(&vals).arg(&n32).arg(&mut tmp);
                unsafe { l.launch(threads(n, 256)) }.map_err(cuda_err)?;
                std::mem::swap(&mut hi, &mut tmp);
                // `lo` must follow the high pass too: carry its position as the value.
                let iota = gpu.func("iota_u32")?;
                let mut pos = gpu.alloc_uninit::<u32>(n)?;
                let mut l = s.launch_builder(&iota);
                l.arg(&mut pos).arg(&n32);
                unsafe { l.launch(threads(n, 256)) }.map_err(cuda_err)?;
                sort_pairs(gpu, &mut hi, &mut pos, n, total_bits - 64)?;
                let mut l = s.launch_builder(&g);
                l.arg(&lo).arg(&pos).arg(&n32).arg(&mut tmp);
                unsafe { l.launch(threads(n, 256)) }.map_err(cuda_err)?;
                std::mem::swap(&mut lo, &mut tmp);
                let g32 = gpu.func("gather_u32")?;
                let mut sorted_ids = gpu.alloc_uninit::<u32>(n)?;
                let mut l = s.launch_builder(&g32);
                l.arg(&vals).arg(&pos).arg(&n32).arg(&mut sorted_ids);
                unsafe { l.launch(threads(n, 256)) }.map_err(cuda_err)?;
                vals = sorted_ids;
            } else {
                s.memset_zeros(&mut hi).map_err(cuda_err)?;
            }
            s.memcpy_dtod(&lo, &mut klo.slice_mut(c * n..(c + 1) * n)).map_err(cuda_err)?;
            s.memcpy_dtod(&hi, &mut khi.slice_mut(c * n..(c + 1) * n)).map_err(cuda_err)?;
            s.memcpy_dtod(&vals, &mut ids.slice_mut(c * n..(c + 1) * n)).map_err(cuda_err)?;
            let g = gpu.func_t::<T>("gather_cols")?;
            let mut dst = cols.slice_mut(c * n * d..(c + 1) * n * d);
            let mut l = s.launch_builder(&g);
            l.arg(&data.cols).arg(&vals).arg(&n32).arg(&d32).arg(&mut dst);
            unsafe { l.launch(threads(n, 256)) }.map_err(cuda_err)?;
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
    let f = gpu.func_t::<T>(&kernel("shifted_knn", copies.frame.dim, k))?;
    let mut l = gpu.stream().launch_builder(&f);
    l.arg(&queries.cols).arg(&nq32).arg(&order).arg(&fargs).arg(&s32).arg(&w32).arg(&copies.khi).arg(&copies.klo);
    l.arg(&copies.ids).arg(&copies.cols).arg(&n32).arg(&k32).arg(ids).arg(distances);
    unsafe { l.launch(threads(nq, 128)) }.map_err(cuda_err)?;
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
