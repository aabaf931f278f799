//! Launches radius.cu: radius queries on the device, the plan of radius/cpu.rs in three steps.
//!
//! A batch of rows is counted (a walk per warp of queries, which keeps the first `KEEP` points
//! of each row), the counts are scanned into offsets, and the rows are filled (copied from what
//! the count kept, or by a second walk when longer), then sorted, each row turned into
//! distances as it is written in its final order. A batch whose
//! result would not fit in GPU memory (or in 32-bit offsets) is split in two by rows and
//! each half counted again, so a result of any size comes out, batch after batch, in row order.

use cudarc::driver::{CudaSlice, CudaView};

use super::{check_total, too_many, RadiusOptions, Within};
use crate::device::EngineOptions;
use crate::error::{Error, Result};
use crate::geometry::real::Real;
use crate::runtime::cpu::{big_vec, Toucher};
use crate::runtime::cuda::launch::{kernels, In, Out};
use crate::runtime::cuda::memory::{DevicePoints, PointSource};
use crate::runtime::cuda::radix_sort::{exclusive_scan, gather_u32_as_u64, iota_u32, sort_pairs};
use crate::runtime::cuda::transfer::{download, download_vec};
use crate::runtime::cuda::{cuda_err, threads, CudaSource, Gpu, COMMON};
use crate::runtime::profile::Phases;
use crate::tree::cuda::{for_each_chunk, DeviceTree, TreeArgs, TREE_GROUP, TREE_HEADER, TREE_SEARCH};

const BLOCK: u32 = 256;
/// Rows up to this long are sorted by one warp.
const SHORT_ROW: usize = 32;
/// Points of each query's row its count keeps (rows up to this long are not walked again).
const KEEP: usize = 64;
/// Rows up to this long are sorted by one block in shared memory; longer ones by the device sort.
const LONG_ROW: usize = 4096;
const LONG_ROW_THREADS: u32 = 512;

static RADIUS: CudaSource = CudaSource {
    file: "radius.cu",
    text: include_str!("radius.cu"),
    constants: || vec![("LONG_ROW", LONG_ROW.to_string()), ("GROUP_WARPS", (BLOCK / 32).to_string())],
    structs: Vec::new,
};

kernels! {
    module KERNELS = "radius", [&COMMON, &TREE_HEADER, &TREE_SEARCH, &TREE_GROUP, &RADIUS];
    /// Each query's number of points within `r2` into `counts[row - row_lo]`, for rows
    /// `row_lo..row_hi`; their sum into `total`; the first `keep` points of each kept.
    fn within_count<T>(
        qx: In<T>,
        qy: In<T>,
        qz: In<T>,
        qrow: In<u32>,
        nq: u32,
        t: TreeArgs<T>,
        r2: T,
        above: u32,
        row_lo: u32,
        row_hi: u32,
        keep: u32,
        keep_ids: Out<u32>,
        keep_d2: Out<T>,
        counts: Out<u32>,
        thread_of: Out<u32>,
        longer: Out<u32>,
        total: Out<u64>,
    );
    /// The rows of the `longer` threads (more than 32) longer than what the count kept,
    /// walked again and written at their offsets (in tree order: distances when unsorted,
    /// squared when sorted); sorted rows longer than a warp sorts are listed.
    fn within_fill<T>(
        qx: In<T>,
        qy: In<T>,
        qz: In<T>,
        qrow: In<u32>,
        nq: u32,
        t: TreeArgs<T>,
        r2: T,
        above: u32,
        offsets: In<u32>,
        row_lo: u32,
        row_hi: u32,
        longer: In<u32>,
        nlonger: u32,
        keep: u32,
        keep_ids: In<u32>,
        keep_d2: In<T>,
        sorted: u32,
        max_lists: u32,
        out_ids: Out<u32>,
        out_d2: Out<T>,
        lists: Out<u32>,
    );
    /// Sorted rows of up to 64 kept (or 32 walked again), one warp per row: sorted and put in
    /// place as distances.
    fn short_rows<T>(
        offsets: In<u32>,
        rows: u32,
        thread_of: In<u32>,
        keep: u32,
        keep_ids: In<u32>,
        keep_d2: In<T>,
        ids: Out<u32>,
        d2: Out<T>,
    );
    /// Unsorted rows the count kept, put in place with their distances (a warp for 32 rows).
    fn copy_rows<T>(
        offsets: In<u32>,
        rows: u32,
        thread_of: In<u32>,
        keep: u32,
        keep_ids: In<u32>,
        keep_d2: In<T>,
        ids: Out<u32>,
        d: Out<T>,
    );
    /// One block per listed long row: sorted by (d2, id).
    fn sort_long_rows<T>(lists: In<u32>, offsets: In<u32>, ids: Out<u32>, d2: Out<T>);
    /// Sort keys of a huge row: ordered bits of `d2[perm[i]]`.
    fn row_d2_keys<T>(d2: In<T>, perm: In<u32>, n: u32, keys: Out<u64>);
    /// A huge row put in the order `perm`, from a copy of it, as distances.
    fn permute_row<T>(perm: In<u32>, n: u32, ids_in: In<u32>, d2_in: In<T>, ids: Out<u32>, d: Out<T>);
}

/// The queries of a radius search on the device, in search order: query `i` is point
/// `(x[i], y[i], z[i])` and its result is row `rows[i]`.
struct Queries<'a, T> {
    x: CudaView<'a, T>,
    y: CudaView<'a, T>,
    z: CudaView<'a, T>,
    rows: CudaView<'a, u32>,
    len: usize,
}

/// What the search is: the tree, the squared radius, and whether a row lists only ids above
/// its own.
struct Search<'a, T> {
    gpu: &'a Gpu,
    tree: &'a DeviceTree<T>,
    r2: T,
    above: bool,
    sorted: bool,
    /// Print phase times (the GPU waits between phases).
    profile: bool,
    /// The most neighbours a result may hold (checked on each count, before any fill).
    max_results: Option<u64>,
}

/// A batch of rows `lo..hi`, filled on the device: offsets from 0 (`hi - lo + 1` of them),
/// ids and distances.
struct Batch<T> {
    offsets: CudaSlice<u32>,
    ids: CudaSlice<u32>,
    distances: CudaSlice<T>,
    total: usize,
}

/// A count's result: each row's count (and a zero after them), and the thread (query in
/// search order) of each row.
struct Counted {
    counts: CudaSlice<u32>,
    thread_of: CudaSlice<u32>,
    /// The threads whose rows are longer than the count kept (their number first).
    longer: CudaSlice<u32>,
    nlonger: usize,
}

/// What a count keeps of each query's row: its first `cap` points, point k of query i at
/// `i * cap + k`, so that the fill copies rows of up to `cap` instead of walking again.
struct Kept<T> {
    ids: CudaSlice<u32>,
    d2: CudaSlice<T>,
    cap: u32,
}

impl<T: Real> Kept<T> {
    /// Nothing kept: every row is walked twice.
    fn none(gpu: &Gpu) -> Result<Self> {
        Ok(Self { ids: gpu.alloc_uninit(1)?, d2: gpu.alloc_uninit(1)?, cap: 0 })
    }

    /// Up to `KEEP` points of each of `queries`, where that takes at most a quarter of the
    /// GPU's free memory (else fewer, or none).
    fn for_queries(gpu: &Gpu, queries: usize) -> Result<Self> {
        let (free, _) = gpu.memory_info()?;
        let per = (queries * (std::mem::size_of::<u32>() + std::mem::size_of::<T>())).max(1);
        let cap = (free / 4 / per).min(KEEP);
        if cap == 0 {
            return Self::none(gpu);
        }
        Ok(Self { ids: gpu.alloc_uninit(cap * queries)?, d2: gpu.alloc_uninit(cap * queries)?, cap: cap as u32 })
    }
}

impl<'a, T: Real> Search<'a, T> {
    fn new(
        gpu: &'a Gpu,
        tree: &'a DeviceTree<T>,
        r2: T,
        above: bool,
        sorted: bool,
        max_results: Option<u64>,
        options: &EngineOptions,
    ) -> Self {
        Search { gpu, tree, r2, above, sorted, profile: options.profile, max_results }
    }

    /// Counts rows `lo..hi`: (counts with a zero after them, total), keeping what `kept`
    /// has room for.
    fn count(&self, q: &Queries<'_, T>, lo: usize, hi: usize, kept: &mut Kept<T>) -> Result<(Counted, u64)> {
        let gpu = self.gpu;
        let mut prof = Phases::new("cuda radius count", self.profile);
        prof.restart(|| gpu.synchronize())?;
        let mut counts = gpu.alloc::<u32>(hi - lo + 1)?;
        let mut thread_of = gpu.alloc_uninit::<u32>(hi - lo)?;
        let mut longer = gpu.alloc_uninit::<u32>(hi - lo + 1)?;
        gpu.stream().memset_zeros(&mut longer.slice_mut(0..1)).map_err(cuda_err)?;
        let mut total = gpu.alloc::<u64>(1)?;
        let args = self.tree.args(gpu);
        within_count::<T>(
            gpu,
            threads(q.len, BLOCK),
            &q.x,
            &q.y,
            &q.z,
            &q.rows,
            q.len as u32,
            args,
            self.r2,
            u32::from(self.above),
            lo as u32,
            hi as u32,
            kept.cap,
            &mut kept.ids,
            &mut kept.d2,
            &mut counts,
            &mut thread_of,
            &mut longer,
            &mut total,
        )?;
        let total = download_vec(gpu, &total)?[0];
        let nlonger = download_vec(gpu, &longer.slice(0..1))?[0] as usize;
        prof.mark("count");
        prof.report();
        Ok((Counted { counts, thread_of, longer, nlonger }, total))
    }

    /// Rows `lo..hi`, to `sink` batch after batch (in row order); a batch holds at most `cap`
    /// entries, or one row.
    fn rows(
        &self,
        q: &Queries<'_, T>,
        lo: usize,
        hi: usize,
        cap: u64,
        kept: &mut Kept<T>,
        sink: &mut impl FnMut(usize, Batch<T>) -> Result<()>,
    ) -> Result<()> {
        if lo == hi {
            return Ok(());
        }
        let (counted, total) = self.count(q, lo, hi, kept)?;
        if let Some(max) = self.max_results {
            if total > max {
                return Err(too_many::<T>(total, max));
            }
        }
        if total > cap {
            if hi - lo == 1 {
                return Err(Error::OutOfMemory(format!(
                    "one row holds {total} neighbours, more than the GPU's memory can hold at once ({cap}): use a \
                     smaller radius or the CPU"
                )));
            }
            drop(counted);
            let mid = lo + (hi - lo) / 2;
            self.rows(q, lo, mid, cap, kept, sink)?;
            return self.rows(q, mid, hi, cap, kept, sink);
        }
        let batch = self.fill(q, lo, hi, counted, total as usize, kept)?;
        sink(lo, batch)
    }

    /// Fills rows `lo..hi` whose counts (and total) are known.
    fn fill(
        &self,
        q: &Queries<'_, T>,
        lo: usize,
        hi: usize,
        counted: Counted,
        total: usize,
        kept: &Kept<T>,
    ) -> Result<Batch<T>> {
        let Counted { counts: mut offsets, thread_of, longer, nlonger } = counted;
        let gpu = self.gpu;
        let mut prof = Phases::new("cuda radius fill", self.profile);
        let rows = hi - lo;
        exclusive_scan(gpu, &mut offsets, rows + 1)?;
        prof.mark_after("scan", || gpu.synchronize())?;
        let mut ids = gpu.alloc_uninit::<u32>(total.max(1))?;
        let mut d = gpu.alloc_uninit::<T>(total.max(1))?;
        let max_lists = if self.sorted { rows.min(total / (SHORT_ROW + 1) + 1) } else { 0 };
        let mut lists = gpu.alloc::<u32>(2 + 3 * max_lists)?;
        if nlonger > 0 {
            within_fill::<T>(
                gpu,
                threads(nlonger, BLOCK),
                &q.x,
                &q.y,
                &q.z,
                &q.rows,
                q.len as u32,
                self.tree.args(gpu),
                self.r2,
                u32::from(self.above),
                &offsets,
                lo as u32,
                hi as u32,
                &longer,
                nlonger as u32,
                kept.cap,
                &kept.ids,
                &kept.d2,
                u32::from(self.sorted),
                max_lists as u32,
                &mut ids,
                &mut d,
                &mut lists,
            )?;
        }
        prof.mark_after("fill", || gpu.synchronize())?;
        if total > 0 && !self.sorted {
            // Unsorted rows are final once placed, with their distances (within_fill did the
            // rows it walked again).
            copy_rows::<T>(
                gpu,
                threads(rows.div_ceil(32) * 32, BLOCK),
                &offsets,
                rows as u32,
                &thread_of,
                kept.cap,
                &kept.ids,
                &kept.d2,
                &mut ids,
                &mut d,
            )?;
        } else if total > 0 {
            short_rows::<T>(
                gpu,
                threads(rows * 32, BLOCK),
                &offsets,
                rows as u32,
                &thread_of,
                kept.cap,
                &kept.ids,
                &kept.d2,
                &mut ids,
                &mut d,
            )?;
        }
        if max_lists > 0 {
            let listed = download_vec(gpu, &lists.slice(0..2))?;
            let (long, huge) = (listed[0] as usize, listed[1] as usize);
            if long > 0 {
                let cfg = cudarc::driver::LaunchConfig {
                    grid_dim: (long as u32, 1, 1),
                    block_dim: (LONG_ROW_THREADS, 1, 1),
                    shared_mem_bytes: 0,
                };
                sort_long_rows::<T>(gpu, cfg, &lists, &offsets, &mut ids, &mut d)?;
            }
            if huge > 0 {
                let spans = download_vec(gpu, &lists.slice(2 + max_lists..2 + max_lists + 2 * huge))?;
                for s in spans.chunks(2) {
                    self.sort_huge_row(&mut ids, &mut d, s[0] as usize, s[1] as usize)?;
                }
            }
        }
        prof.mark_after("place and sort", || gpu.synchronize())?;
        prof.report();
        Ok(Batch { offsets, ids, distances: d, total })
    }

    /// Sorts the row at `start..start + len` by (d2, id) with the device sort: stably by id,
    /// then stably by d2.
    fn sort_huge_row(&self, ids: &mut CudaSlice<u32>, d2: &mut CudaSlice<T>, start: usize, len: usize) -> Result<()> {
        let gpu = self.gpu;
        let cfg = threads(len, BLOCK);
        let n = len as u32;
        let row_ids = ids.slice(start..start + len);
        let row_d2 = d2.slice(start..start + len);
        let mut perm = gpu.alloc_uninit::<u32>(len)?;
        iota_u32(gpu, cfg, &mut perm, n)?;
        let mut keys = gpu.alloc_uninit::<u64>(len)?;
        gather_u32_as_u64(gpu, cfg, &row_ids, &perm, n, &mut keys)?;
        sort_pairs(gpu, &mut keys, &mut perm, len, 32)?;
        row_d2_keys::<T>(gpu, cfg, &row_d2, &perm, n, &mut keys)?;
        sort_pairs(gpu, &mut keys, &mut perm, len, (8 * std::mem::size_of::<T>()) as u32)?;
        drop(keys);
        let s = gpu.stream();
        let ids_copy = s.clone_dtod(&row_ids).map_err(cuda_err)?;
        let d2_copy = s.clone_dtod(&row_d2).map_err(cuda_err)?;
        permute_row::<T>(
            gpu,
            cfg,
            &perm,
            n,
            &ids_copy,
            &d2_copy,
            &mut ids.slice_mut(start..start + len),
            &mut d2.slice_mut(start..start + len),
        )?;
        Ok(())
    }
}

/// The most entries one batch may hold: `asked`, or what fits in about a third of the GPU's
/// free memory (a batch's sort needs room beside it); and what 32-bit offsets can hold.
fn batch_cap<T>(gpu: &Gpu, asked: Option<usize>) -> Result<u64> {
    let cap = match asked {
        Some(n) => n as u64,
        None => {
            let (free, _) = gpu.memory_info()?;
            free as u64 / 3 / (std::mem::size_of::<u32>() + std::mem::size_of::<T>()) as u64
        }
    };
    Ok(cap.clamp(1, u32::MAX as u64 - BLOCK as u64))
}

/// Rows appended to a host result, batch after batch, with the asked-for limit on their total.
struct HostRows<'a, T> {
    out: Within<T>,
    opts: &'a RadiusOptions,
}

impl<T: Real> HostRows<'_, T> {
    fn add(&mut self, gpu: &Gpu, batch: Batch<T>) -> Result<()> {
        let done = self.out.ids.len();
        let total = done as u64 + batch.total as u64;
        if let Some(max) = self.opts.max_results {
            if total > max {
                return Err(too_many::<T>(total, max));
            }
        }
        check_total::<T>(total, self.opts)?;
        let rows = batch.offsets.len() - 1;
        let offsets = download_vec(gpu, &batch.offsets)?;
        self.out.offsets.extend(offsets[1..=rows].iter().map(|&o| done as u64 + o as u64));
        let n = batch.total;
        // Without distances, the distances stay on the device.
        let nd = if self.opts.distances { n } else { 0 };
        if self.out.ids.capacity() == 0 {
            // The first (usually the only) batch: fresh memory in huge pages, as page faults
            // on a fresh result cost more than its download.
            (self.out.ids, self.out.distances) = (big_vec(n), big_vec(nd));
        }
        self.out.ids.reserve(n);
        self.out.distances.reserve(nd);
        if n > 0 {
            // Fresh pages of the rows' place faulted in, in parallel, while the rows are filled.
            let (ids, distances) =
                (&mut self.out.ids.spare_capacity_mut()[..n], &mut self.out.distances.spare_capacity_mut()[..nd]);
            drop(Toucher::start_on(ids, distances));
            download(gpu, &batch.ids.slice(0..n), &mut self.out.ids.spare_capacity_mut()[..n])?;
            if nd > 0 {
                download(gpu, &batch.distances.slice(0..nd), &mut self.out.distances.spare_capacity_mut()[..nd])?;
            }
        }
        // SAFETY: the downloads wrote n ids and nd distances after the old ends.
        unsafe {
            self.out.ids.set_len(done + n);
            self.out.distances.set_len(self.out.distances.len() + nd);
        }
        Ok(())
    }
}

/// Each query's points of `tree` within squared radius `r2`, the queries in chunks of `chunk`.
pub(crate) fn within<T: Real>(
    gpu: &Gpu,
    tree: &DeviceTree<T>,
    queries: &PointSource<'_, T>,
    r2: T,
    opts: &RadiusOptions,
    options: &EngineOptions,
) -> Result<Within<T>> {
    let cuda = &options.cuda;
    let search = Search::new(gpu, tree, r2, false, opts.sorted, opts.max_results, options);
    let mut host = HostRows { out: Within { offsets: vec![0], ..Within::default() }, opts };
    for_each_chunk(gpu, queries, tree, cuda.chunk_points.max(1), |c| {
        let p = &c.points;
        let q = Queries { x: p.x.as_view(), y: p.y.as_view(), z: p.z.as_view(), rows: c.ids.as_view(), len: p.len };
        let mut kept = Kept::for_queries(gpu, p.len)?;
        let cap = batch_cap::<T>(gpu, cuda.radius_batch)?;
        search.rows(&q, 0, p.len, cap, &mut kept, &mut |_, batch| host.add(gpu, batch))
    })?;
    Ok(host.out)
}

/// Each query's number of points within `r2`, in query order.
pub(crate) fn count_within<T: Real>(
    gpu: &Gpu,
    tree: &DeviceTree<T>,
    queries: &PointSource<'_, T>,
    r2: T,
    options: &EngineOptions,
) -> Result<Vec<u32>> {
    let cuda = &options.cuda;
    let search = Search::new(gpu, tree, r2, false, false, None, options);
    let mut counts = Vec::with_capacity(queries.len());
    for_each_chunk(gpu, queries, tree, cuda.chunk_points.max(1), |c| {
        let p = &c.points;
        let q = Queries { x: p.x.as_view(), y: p.y.as_view(), z: p.z.as_view(), rows: c.ids.as_view(), len: p.len };
        let (dev, _) = search.count(&q, 0, p.len, &mut Kept::none(gpu)?)?;
        counts.extend(download_vec(gpu, &dev.counts.slice(0..p.len))?);
        Ok(())
    })?;
    Ok(counts)
}

/// The rows of the points of `rows_of` (one per point, by id) against `tree`: with `above`
/// (a self-join, `tree` is `rows_of`) each lists only ids above its own.
pub(crate) fn tree_rows<T: Real>(
    gpu: &Gpu,
    tree: &DeviceTree<T>,
    rows_of: &DeviceTree<T>,
    r2: T,
    above: bool,
    opts: &RadiusOptions,
    options: &EngineOptions,
) -> Result<Within<T>> {
    let cuda = &options.cuda;
    let search = Search::new(gpu, tree, r2, above, opts.sorted, opts.max_results, options);
    let q = tree_queries(rows_of);
    let mut host = HostRows { out: Within { offsets: vec![0], ..Within::default() }, opts };
    let mut kept = Kept::for_queries(gpu, q.len)?;
    let cap = batch_cap::<T>(gpu, cuda.radius_batch)?;
    search.rows(&q, 0, q.len, cap, &mut kept, &mut |_, batch| host.add(gpu, batch))?;
    Ok(host.out)
}

fn tree_queries<T>(t: &DeviceTree<T>) -> Queries<'_, T> {
    let n = t.n as usize;
    Queries { x: t.x.slice(0..n), y: t.y.slice(0..n), z: t.z.slice(0..n), rows: t.id.slice(0..n), len: n }
}

/// Rows in GPU memory, from [`PointIndex::within_device`](crate::PointIndex::within_device) or
/// [`PointIndex::pairs_within_device`](crate::PointIndex::pairs_within_device):
/// offsets (rows + 1), ids and distances, as [`Within`] holds them on the host.
pub struct DeviceWithin<T> {
    offsets: CudaSlice<u32>,
    ids: CudaSlice<u32>,
    distances: CudaSlice<T>,
    rows: usize,
    total: usize,
}

impl<T: Real> DeviceWithin<T> {
    /// The number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The number of neighbours over all rows.
    pub fn total(&self) -> usize {
        self.total
    }

    /// The rows, copied to host memory.
    pub fn to_host(&self, engine: &crate::Engine) -> Result<Within<T>> {
        let gpu = engine.need_gpu("rows in GPU memory")?;
        let _busy = gpu.lock();
        let offsets = download_vec(gpu, &self.offsets.slice(0..=self.rows))?.into_iter().map(u64::from).collect();
        let (ids, distances) = if self.total == 0 {
            (Vec::new(), Vec::new())
        } else {
            (
                download_vec(gpu, &self.ids.slice(0..self.total))?,
                download_vec(gpu, &self.distances.slice(0..self.total))?,
            )
        };
        Ok(Within { offsets, ids, distances })
    }
}

/// [`tree_rows`] for a self-join, the result left in GPU memory (which must hold it).
pub(crate) fn self_join_resident<T: Real>(
    gpu: &Gpu,
    tree: &DeviceTree<T>,
    r2: T,
    opts: &RadiusOptions,
    options: &EngineOptions,
) -> Result<DeviceWithin<T>> {
    let cuda = &options.cuda;
    let search = Search::new(gpu, tree, r2, true, opts.sorted, opts.max_results, options);
    resident(&search, &tree_queries(tree), opts, cuda)
}

/// [`within`] of queries in GPU memory, the result left there (which must hold it).
pub(crate) fn within_resident<T: Real>(
    gpu: &Gpu,
    tree: &DeviceTree<T>,
    queries: &DevicePoints<T>,
    r2: T,
    opts: &RadiusOptions,
    options: &EngineOptions,
) -> Result<DeviceWithin<T>> {
    let cuda = &options.cuda;
    let search = Search::new(gpu, tree, r2, false, opts.sorted, opts.max_results, options);
    let mut out = None;
    // One chunk of all the queries: its rows are the queries' own.
    for_each_chunk(gpu, &PointSource::Device(queries), tree, queries.len(), |c| {
        let p = &c.points;
        let q = Queries { x: p.x.as_view(), y: p.y.as_view(), z: p.z.as_view(), rows: c.ids.as_view(), len: p.len };
        out = Some(resident(&search, &q, opts, cuda)?);
        Ok(())
    })?;
    out.ok_or(Error::EmptySet { role: crate::error::Role::Queries })
}

fn resident<T: Real>(
    search: &Search<'_, T>,
    q: &Queries<'_, T>,
    opts: &RadiusOptions,
    cuda: &crate::device::CudaOptions,
) -> Result<DeviceWithin<T>> {
    let mut kept = Kept::for_queries(search.gpu, q.len)?;
    let (counted, total) = search.count(q, 0, q.len, &mut kept)?;
    if let Some(max) = opts.max_results {
        if total > max {
            return Err(too_many::<T>(total, max));
        }
    }
    let cap = batch_cap::<T>(search.gpu, cuda.radius_batch)?;
    if total > cap {
        return Err(Error::OutOfMemory(format!(
            "{total} neighbours do not fit in GPU memory at once (about {cap} do): bring them to host memory \
             (within, pairs_within), which fills them batch after batch"
        )));
    }
    let b = search.fill(q, 0, q.len, counted, total as usize, &kept)?;
    Ok(DeviceWithin { offsets: b.offsets, ids: b.ids, distances: b.distances, rows: q.len, total: b.total })
}
