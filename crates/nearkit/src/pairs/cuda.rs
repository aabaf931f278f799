//! Launches closest_pairs.cu: the plan of pairs/cpu.rs on the device, except for τ (step 2),
//! which bounds each A's nearest distance by the closest of its `BOUND_WINDOW` Morton
//! neighbours on each side in B (a binary search in the tree's key table, then a short scan)
//! and takes the k-th smallest of all A's bounds from a histogram.
//!
//! A is processed in chunks (`CudaOptions::chunk_points`) so inputs larger than GPU memory
//! work; B and its tree stay resident. Candidates are pruned to the best k
//! between chunks, so their buffer never exceeds one chunk plus k.

use cudarc::driver::{CudaSlice, DevicePtr};

use super::{to_pairs, Candidate, Nearest, Pair, PairMode};
use crate::error::Result;
use crate::geometry::real::{from_ordered_bits, Real};
use crate::runtime::cpu::{big_vec, Toucher};
use crate::runtime::cuda::launch::{kernels, Arg, In, Out};
use crate::runtime::cuda::memory::{DevicePoints, PointSource};
use crate::runtime::cuda::radix_sort::{bits_for, gather_u32_as_u64, gather_u64, iota_u32, sort_pairs};
use crate::runtime::cuda::transfer::{download_columns, download_vec, Column};
use crate::runtime::cuda::{cuda_err, threads, CudaSource, Gpu, COMMON};
use crate::runtime::profile::Phases;
use crate::tree::cuda::{
    for_each_chunk_sorted_by, gather_points, DeviceTree, SortedChunk, TreeArgs, TREE_HEADER, TREE_SEARCH,
};

/// A is put in order by the top 16 bits of its points' Morton codes (two radix passes): a
/// warp's points then share a cell of 1/32 of the box a side, and the searches ran as fast as
/// in the full 32-bit order while the sort took 0.1 ms less (1M × 400K; BENCHMARKS.md, session
/// 48). The answers do not depend on the order.
const A_ORDER_BITS: u32 = 16;

/// Morton-order neighbours on each side examined for an A's upper bound (step 2 of the plan).
const BOUND_WINDOW: usize = 4;
/// Each A's nearest search starts from the best of this many of B's points each side of its
/// place in B's Morton order (a bound that prunes the walk from its first step).
const NEAREST_WINDOW: usize = 4;

const BLOCK: u32 = 256;
/// Threads, and candidates per thread, of `sort_candidates_small`: candidate counts up to
/// `SMALL_SORT` are sorted by one block.
const SMALL_SORT_THREADS: usize = 256;
const SMALL_SORT_ITEMS: usize = 8;
const SMALL_SORT: usize = SMALL_SORT_THREADS * SMALL_SORT_ITEMS;

static CLOSEST_PAIRS: CudaSource = CudaSource {
    file: "closest_pairs.cu",
    text: include_str!("closest_pairs.cu"),
    constants: || {
        vec![("SMALL_SORT_THREADS", SMALL_SORT_THREADS.to_string()), ("SMALL_SORT_ITEMS", SMALL_SORT_ITEMS.to_string())]
    },
    structs: Vec::new,
};

kernels! {
    module KERNELS = "pairs", [&COMMON, &TREE_HEADER, &TREE_SEARCH, &CLOSEST_PAIRS];
    /// Each A's upper bound on its nearest distance from its Morton neighbours, into a
    /// histogram of 2^16 bins.
    fn window_bound<T>(ax: In<T>, ay: In<T>, az: In<T>, na: u32, t: TreeArgs<T>, window: u32, per_warp: u32, hist: Out<u32>);
    /// Per-bucket sums of 256 histogram bins.
    fn select_threshold_sums(hist: In<u32>, sums: Out<u32>);
    /// Lowers `tau` to the largest value of the bin holding the k-th smallest bound.
    fn select_threshold<T>(hist: In<u32>, sums: In<u32>, k: u32, tau: Out<T>);
    /// Every query's nearest point within `r2`, and its distance.
    fn nearest_all<T>(
        ax: In<T>,
        ay: In<T>,
        az: In<T>,
        a_ids: In<u32>,
        na: u32,
        t: TreeArgs<T>,
        r2: In<T>,
        window: u32,
        out_b: Out<u32>,
        out_d: Out<T>,
    );
    /// Queries whose nearest point lies within `tau` append a candidate.
    fn nearest_candidates<T>(
        ax: In<T>,
        ay: In<T>,
        az: In<T>,
        a_ids: In<u32>,
        na: u32,
        a_offset: u32,
        t: TreeArgs<T>,
        tau: In<T>,
        count: Out<u32>,
        cand_d2: Out<u64>,
        cand_a: Out<u32>,
        cand_b: Out<u32>,
    );
    /// Each query's k nearest within `tau`, appended as candidates.
    fn knn_candidates<T>(
        qx: In<T>,
        qy: In<T>,
        qz: In<T>,
        qid: In<u32>,
        nq: u32,
        t: TreeArgs<T>,
        k: u32,
        tau: In<T>,
        heap_d: Out<T>,
        heap_id: Out<u32>,
        count: Out<u32>,
        cand_d2: Out<u64>,
        cand_a: Out<u32>,
        cand_b: Out<u32>,
    );
    /// The candidates listed by `perm` to the front, in that order.
    fn permute_candidates(
        perm: In<u32>,
        n: u32,
        d2: In<u64>,
        a: In<u32>,
        b: In<u32>,
        d2_out: Out<u64>,
        a_out: Out<u32>,
        b_out: Out<u32>,
    );
    /// Up to `SMALL_SORT` candidates sorted by (d2, a, b) in one block.
    fn sort_candidates_small(
        d2: In<u64>,
        a: In<u32>,
        b: In<u32>,
        n: u32,
        a_bits: u32,
        b_bits: u32,
        d2_bits: u32,
        d2_out: Out<u64>,
        a_out: Out<u32>,
        b_out: Out<u32>,
    );
    /// The best `keep` of the `count` candidates sorted by (d2, a, b) in one block and packed
    /// (count, then d2 and a << 32 | b a row) where `count` fits `SMALL_SORT`; else the count.
    fn top_candidates_small(
        d2: In<u64>,
        a: In<u32>,
        b: In<u32>,
        count: In<u32>,
        keep: u32,
        a_bits: u32,
        b_bits: u32,
        d2_bits: u32,
        out: Out<u64>,
    );
}

/// Every A's nearest B left in GPU memory, in A's order, for
/// [`PointIndex::nearest_device`](crate::PointIndex::nearest_device).
pub struct DeviceNearest<T> {
    b: CudaSlice<u32>,
    distance: CudaSlice<T>,
}

impl<T: Real> DeviceNearest<T> {
    /// The number of queries it holds.
    pub fn len(&self) -> usize {
        self.b.len()
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.b.is_empty()
    }

    /// The answers brought to host memory.
    pub fn download(&self, engine: &crate::Engine) -> Result<Nearest<T>> {
        let gpu = engine.need_gpu("a nearest result in GPU memory")?;
        let _busy = gpu.lock();
        Ok(Nearest { b: download_vec(gpu, &self.b)?, distance: download_vec(gpu, &self.distance)? })
    }
}

/// One sorted chunk's nearest searches, answers to `ob`, `od` in the chunk's own order.
fn search_chunk<T: Real>(
    gpu: &Gpu,
    tree: &DeviceTree<T>,
    c: &SortedChunk<T>,
    r2: &CudaSlice<T>,
    ob: impl Arg<Out<u32>>,
    od: impl Arg<Out<T>>,
) -> Result<()> {
    let len = c.points.len;
    let p = &c.points;
    let window = NEAREST_WINDOW as u32;
    let args = tree.args(gpu);
    nearest_all::<T>(gpu, threads(len, BLOCK), &p.x, &p.y, &p.z, &c.ids, len as u32, args, r2, window, ob, od)
}

/// Every A's nearest point of `tree` within squared radius `r2`, A in chunks of `chunk`.
pub(crate) fn nearest<T: Real>(
    gpu: &Gpu,
    tree: &DeviceTree<T>,
    a: &PointSource<'_, T>,
    r2: T,
    chunk: usize,
    profile: bool,
) -> Result<Nearest<T>> {
    let mut phases = Phases::new("cuda nearest", profile);
    phases.restart(|| gpu.synchronize())?;
    let s = gpu.stream();
    let r2_dev = s.clone_htod(&[r2]).map_err(cuda_err)?;
    let n = a.len();
    let mut out = Nearest { b: big_vec(n), distance: big_vec(n) };
    let (b_at, d_at) = (out.b.as_mut_ptr() as usize, out.distance.as_mut_ptr() as usize);
    // The answers' fresh pages are faulted in by other threads while the first chunk is searched.
    let mut touched = Some(Toucher::start(&[(b_at, 4 * n), (d_at, n * std::mem::size_of::<T>())]));
    let mut done = 0;
    for_each_chunk_sorted_by(gpu, a, tree, chunk, A_ORDER_BITS, |c| {
        phases.mark_after("A upload + Morton order", || gpu.synchronize())?;
        let len = c.points.len;
        let mut ob = gpu.alloc_uninit::<u32>(len)?;
        let mut od = gpu.alloc_uninit::<T>(len)?;
        search_chunk(gpu, tree, c, &r2_dev, &mut ob, &mut od)?;
        drop(touched.take());
        phases.mark_after("search (and the answers' pages touched)", || gpu.synchronize())?;
        // Chunks come in order: each one's rows follow the last one's.
        let size = std::mem::size_of::<T>();
        download_columns(
            gpu,
            len,
            &[
                Column { size: 4, device: ob.device_ptr(s).0, host: b_at + 4 * done },
                Column { size, device: od.device_ptr(s).0, host: d_at + size * done },
            ],
        )?;
        done += len;
        phases.mark("download");
        Ok(())
    })?;
    phases.report();
    assert_eq!(done, n, "the chunks cover A");
    // SAFETY: the chunks' downloads wrote every row.
    unsafe {
        out.b.set_len(n);
        out.distance.set_len(n);
    }
    Ok(out)
}

/// [`nearest`] of A in GPU memory, the answers left there.
pub(crate) fn nearest_resident<T: Real>(
    gpu: &Gpu,
    tree: &DeviceTree<T>,
    a: &DevicePoints<T>,
    r2: T,
    chunk: usize,
) -> Result<DeviceNearest<T>> {
    let r2_dev = gpu.stream().clone_htod(&[r2]).map_err(cuda_err)?;
    let n = a.len();
    let mut out = DeviceNearest { b: gpu.alloc_uninit::<u32>(n)?, distance: gpu.alloc_uninit::<T>(n)? };
    for_each_chunk_sorted_by(gpu, &PointSource::Device(a), tree, chunk, A_ORDER_BITS, |c| {
        let rows = c.offset..c.offset + c.points.len;
        search_chunk(gpu, tree, c, &r2_dev, &mut out.b.slice_mut(rows.clone()), &mut out.distance.slice_mut(rows))
    })?;
    Ok(out)
}

/// The `k` closest pairs of A and the points of `tree` within squared radius `r2`: tree
/// search and top-k run on the device, and only the k result rows come back.
#[allow(clippy::too_many_arguments)]
pub(crate) fn closest_pairs<T: Real>(
    gpu: &Gpu,
    tree: &DeviceTree<T>,
    a: &PointSource<'_, T>,
    k: usize,
    mode: PairMode,
    r2: T,
    chunk: usize,
    profile: bool,
) -> Result<Vec<Pair<T>>> {
    let mut phases = Phases::new("cuda closest pairs", profile);
    phases.restart(|| gpu.synchronize())?;
    let per_a = nearest_per_a(gpu, tree, a, k, r2, chunk, &mut phases)?;
    let best = match mode {
        PairMode::NearestPerA => per_a,
        PairMode::AllPairs => {
            let best = all_pairs(gpu, tree, a, k, r2, &per_a)?;
            phases.mark_after("all-pairs kNN", || gpu.synchronize())?;
            best
        }
    };
    phases.report();
    Ok(to_pairs(&best, from_ordered_bits::<T>))
}

/// Candidate pairs on the device: (squared distance bits, a, b) and how many there are.
struct Candidates {
    d2: CudaSlice<u64>,
    a: CudaSlice<u32>,
    b: CudaSlice<u32>,
    count: CudaSlice<u32>,
}

impl Candidates {
    fn new(gpu: &Gpu, capacity: usize) -> Result<Self> {
        Ok(Candidates {
            d2: gpu.alloc_uninit(capacity)?,
            a: gpu.alloc_uninit(capacity)?,
            b: gpu.alloc_uninit(capacity)?,
            count: gpu.alloc(1)?,
        })
    }

    fn count(&self, gpu: &Gpu) -> Result<usize> {
        Ok(gpu.stream().clone_dtoh(&self.count).map_err(cuda_err)?[0] as usize)
    }

    /// Sorts the first `n` candidates by (d2, a, b) — stable passes from the least
    /// significant column up — and keeps the first `keep` as the new count.
    fn sort_and_keep<T: Real>(
        &mut self,
        gpu: &Gpu,
        n: usize,
        na: usize,
        nb: usize,
        with_b: bool,
        keep: usize,
    ) -> Result<usize> {
        if n == 0 {
            return Ok(0);
        }
        let st = gpu.stream();
        let n32 = n as u32;
        let d2_bits: u32 = if T::NAME == "f32" { 31 } else { 63 };
        if n <= SMALL_SORT {
            // One block does every pass in shared memory: one launch instead of dozens.
            let mut out = Candidates::new(gpu, self.d2.len())?;
            let (a_bits, b_bits) = (bits_for(na), if with_b { bits_for(nb) } else { 0 });
            let (d2, a, b) = (&mut out.d2, &mut out.a, &mut out.b);
            let cfg = threads(SMALL_SORT_THREADS, SMALL_SORT_THREADS as u32);
            sort_candidates_small(gpu, cfg, &self.d2, &self.a, &self.b, n32, a_bits, b_bits, d2_bits, d2, a, b)?;
            let kept = keep.min(n);
            st.memcpy_htod(&[kept as u32], &mut out.count).map_err(cuda_err)?;
            *self = out;
            return Ok(kept);
        }
        let mut perm = gpu.alloc_uninit::<u32>(n)?;
        let mut keys = gpu.alloc_uninit::<u64>(n)?;
        let cfg = threads(n, BLOCK);
        iota_u32(gpu, cfg, &mut perm, n32)?;
        let mut columns: Vec<(&CudaSlice<u32>, u32)> = Vec::new();
        if with_b {
            columns.push((&self.b, bits_for(nb)));
        }
        columns.push((&self.a, bits_for(na)));
        for (col, bits) in columns {
            gather_u32_as_u64(gpu, cfg, col, &perm, n32, &mut keys)?;
            sort_pairs(gpu, &mut keys, &mut perm, n, bits)?;
        }
        gather_u64(gpu, cfg, &self.d2, &perm, n32, &mut keys)?;
        sort_pairs(gpu, &mut keys, &mut perm, n, d2_bits)?;

        let cap = self.d2.len();
        let mut out = Candidates::new(gpu, cap)?;
        let (d2, a, b) = (&mut out.d2, &mut out.a, &mut out.b);
        permute_candidates(gpu, cfg, &perm, n32, &self.d2, &self.a, &self.b, d2, a, b)?;
        let kept = keep.min(n);
        st.memcpy_htod(&[kept as u32], &mut out.count).map_err(cuda_err)?;
        *self = out;
        Ok(kept)
    }

    /// The best `keep` candidates, sorted by (d2, a, b): where they fit one block, sorted
    /// there and brought back with their count in one download (one wait of the host);
    /// else counted, sorted by passes and downloaded.
    fn top<T: Real>(&mut self, gpu: &Gpu, na: usize, nb: usize, with_b: bool, keep: usize) -> Result<Vec<Candidate>> {
        let st = gpu.stream();
        let mut packed = gpu.alloc_uninit::<u64>(1 + 2 * keep.min(SMALL_SORT))?;
        let (a_bits, b_bits) = (bits_for(na), if with_b { bits_for(nb) } else { 0 });
        let d2_bits: u32 = if T::NAME == "f32" { 31 } else { 63 };
        let cfg = threads(SMALL_SORT_THREADS, SMALL_SORT_THREADS as u32);
        let keep32 = keep.min(SMALL_SORT) as u32;
        top_candidates_small(
            gpu,
            cfg,
            &self.d2,
            &self.a,
            &self.b,
            &self.count,
            keep32,
            a_bits,
            b_bits,
            d2_bits,
            &mut packed,
        )?;
        let host = st.clone_dtoh(&packed).map_err(cuda_err)?;
        let n = host[0] as usize;
        if n > SMALL_SORT {
            let kept = self.sort_and_keep::<T>(gpu, n, na, nb, with_b, keep)?;
            return self.download(gpu, kept);
        }
        Ok((0..n.min(keep))
            .map(|p| {
                let ab = host[2 + 2 * p];
                Candidate { d2_bits: host[1 + 2 * p], a: (ab >> 32) as u32, b: ab as u32 }
            })
            .collect())
    }

    fn download(&self, gpu: &Gpu, n: usize) -> Result<Vec<Candidate>> {
        let st = gpu.stream();
        let d2 = st.clone_dtoh(&self.d2.slice(0..n)).map_err(cuda_err)?;
        let a = st.clone_dtoh(&self.a.slice(0..n)).map_err(cuda_err)?;
        let b = st.clone_dtoh(&self.b.slice(0..n)).map_err(cuda_err)?;
        Ok((0..n).map(|i| Candidate { d2_bits: d2[i], a: a[i], b: b[i] }).collect())
    }
}

fn nearest_per_a<T: Real>(
    gpu: &Gpu,
    tree: &DeviceTree<T>,
    a: &PointSource<'_, T>,
    k: usize,
    r2: T,
    chunk: usize,
    phases: &mut Phases,
) -> Result<Vec<Candidate>> {
    let na = a.len();
    let nb = tree.n as usize;
    let st = gpu.stream();
    let args = tree.args(gpu);
    let chunk = chunk.max(1);
    let mut tau = st.clone_htod(&[r2]).map_err(cuda_err)?;
    let mut cands = Candidates::new(gpu, chunk.min(na) + k)?;
    let mut hist = gpu.alloc::<u32>(1 << 16)?; // zeroed per chunk
    let mut bucket_sums = gpu.alloc_uninit::<u32>(256)?;
    let window = BOUND_WINDOW as u32;
    let k32 = k as u32;
    for_each_chunk_sorted_by(gpu, a, tree, chunk, A_ORDER_BITS, |c| {
        phases.mark_after("A upload + Morton order", || gpu.synchronize())?;
        let (len, off, last) = (c.points.len, c.offset, c.last);
        let (x, y, z) = (&c.points.x, &c.points.y, &c.points.z);
        let len32 = len as u32;
        let off32 = off as u32;
        if k < len {
            st.memset_zeros(&mut hist).map_err(cuda_err)?;
            // Warp minima once there are at least 2k warps (see window_bound in the kernel).
            let per_warp = u32::from(len >= 64 * k);
            window_bound::<T>(gpu, threads(len, BLOCK), x, y, z, len32, args, window, per_warp, &mut hist)?;
            select_threshold_sums(gpu, threads(1 << 16, 256), &hist, &mut bucket_sums)?;
            select_threshold::<T>(gpu, threads(256, 256), &hist, &bucket_sums, k32, &mut tau)?;
            phases.mark_after("bound + threshold", || gpu.synchronize())?;
        }
        let (count, d2, ca, cb) = (&mut cands.count, &mut cands.d2, &mut cands.a, &mut cands.b);
        let cfg = threads(len, BLOCK);
        nearest_candidates::<T>(gpu, cfg, x, y, z, &c.ids, len32, off32, args, &tau, count, d2, ca, cb)?;
        phases.mark_after("exact search", || gpu.synchronize())?;
        if !last {
            // Keep the best k and tighten tau to the k-th, so the buffer never overflows.
            let n = cands.count(gpu)?;
            if n > k {
                cands.sort_and_keep::<T>(gpu, n, na, nb, false, k)?;
                let kth = st.clone_dtoh(&cands.d2.slice(k - 1..k)).map_err(cuda_err)?[0];
                let cur = st.clone_dtoh(&tau).map_err(cuda_err)?[0];
                let t = from_ordered_bits::<T>(kth).min(cur);
                st.memcpy_htod(&[t], &mut tau).map_err(cuda_err)?;
            }
        }
        Ok(())
    })?;
    let out = cands.top::<T>(gpu, na, nb, false, k)?;
    phases.mark("top-k select + download");
    Ok(out)
}

fn all_pairs<T: Real>(
    gpu: &Gpu,
    tree: &DeviceTree<T>,
    a: &PointSource<'_, T>,
    k: usize,
    r2: T,
    per_a: &[Candidate],
) -> Result<Vec<Candidate>> {
    let st = gpu.stream();
    let (na, nb) = (a.len(), tree.n as usize);
    let tau_v = if per_a.len() == k { from_ordered_bits::<T>(per_a[k - 1].d2_bits) } else { r2 };
    let tau = st.clone_htod(&[tau_v]).map_err(cuda_err)?;
    let args = tree.args(gpu);
    // Queries: the owners of the nearest-per-a top k (see the CPU module for why).
    let ids: Vec<u32> = per_a.iter().map(|c| c.a).collect();
    let chunk = ((1usize << 25) / k).max(1);
    let mut cands = Candidates::new(gpu, chunk.min(ids.len()) * k + k)?;
    let k32 = k as u32;
    for (ci, part) in ids.chunks(chunk).enumerate() {
        let q = part.len();
        let q32 = q as u32;
        let qid = st.clone_htod(part).map_err(cuda_err)?;
        let (qx, qy, qz) = match a {
            PointSource::Host(p) => {
                let pick = |c: &Vec<T>| part.iter().map(|&i| c[i as usize]).collect::<Vec<T>>();
                (
                    st.clone_htod(&pick(&p.x)).map_err(cuda_err)?,
                    st.clone_htod(&pick(&p.y)).map_err(cuda_err)?,
                    st.clone_htod(&pick(&p.z)).map_err(cuda_err)?,
                )
            }
            PointSource::Device(d) => {
                let (mut qx, mut qy, mut qz) =
                    (gpu.alloc_uninit::<T>(q)?, gpu.alloc_uninit::<T>(q)?, gpu.alloc_uninit::<T>(q)?);
                let cfg = threads(q, BLOCK);
                gather_points::<T>(gpu, cfg, &d.x, &d.y, &d.z, &qid, q32, &mut qx, &mut qy, &mut qz)?;
                (qx, qy, qz)
            }
        };
        let mut heap_d = gpu.alloc_uninit::<T>(q * k)?;
        let mut heap_id = gpu.alloc_uninit::<u32>(q * k)?;
        let (count, d2, ca, cb) = (&mut cands.count, &mut cands.d2, &mut cands.a, &mut cands.b);
        let (hd, hi) = (&mut heap_d, &mut heap_id);
        knn_candidates::<T>(gpu, threads(q, 64), &qx, &qy, &qz, &qid, q32, args, k32, &tau, hd, hi, count, d2, ca, cb)?;
        if (ci + 1) * chunk < ids.len() {
            let n = cands.count(gpu)?;
            cands.sort_and_keep::<T>(gpu, n, na, nb, true, k)?;
        }
    }
    cands.top::<T>(gpu, na, nb, true, k)
}
