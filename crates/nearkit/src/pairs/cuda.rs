//! Launches closest_pairs.cu: the plan of src/cpu/closest_pairs.rs on the device.
//!
//! A is processed in chunks (`CudaOptions::chunk_points`) so inputs larger than GPU memory
//! work; B and its tree stay resident. Candidates are pruned to the best k
//! between chunks, so their buffer never exceeds one chunk plus k.

use cudarc::driver::{CudaSlice, PushKernelArg};

use super::{to_pairs, Candidate, Nearest, Pair, PairMode, BOUND_WINDOW};
use crate::error::Result;
use crate::geometry::points::Points;
use crate::geometry::real::{from_ordered_bits, Real};
use crate::runtime::cuda::memory::PointSource;
use crate::runtime::cuda::radix_sort::{bits_for, sort_pairs};
use crate::runtime::cuda::{cuda_err, threads, Gpu};
use crate::runtime::profile::Phases;
use crate::tree::cuda::{for_each_chunk, DeviceTree};

const BLOCK: u32 = 256;
/// Candidate counts up to this are sorted by one block (sort_candidates_small).
const SMALL_SORT: usize = 256 * 8;

/// Every A's nearest point of `tree` within squared radius `r2`, A in chunks of `chunk`.
pub(crate) fn nearest<T: Real>(
    gpu: &Gpu,
    tree: &DeviceTree<T>,
    a: &Points<T>,
    r2: T,
    chunk: usize,
) -> Result<Nearest<T>> {
    let args = tree.args(gpu);
    let r2_dev = gpu.stream().clone_htod(&[r2]).map_err(cuda_err)?;
    let f = gpu.func_t::<T>("nearest_all")?;
    let mut out = Nearest { b: Vec::with_capacity(a.len()), distance: Vec::with_capacity(a.len()) };
    for_each_chunk(gpu, &PointSource::Host(a), tree, chunk, |c| {
        let len = c.points.len;
        let mut ob = gpu.alloc_uninit::<u32>(len)?;
        let mut od = gpu.alloc_uninit::<T>(len)?;
        let len32 = len as u32;
        let p = &c.points;
        let mut l = gpu.stream().launch_builder(&f);
        l.arg(&p.x).arg(&p.y).arg(&p.z).arg(&c.ids).arg(&len32).arg(&args).arg(&r2_dev).arg(&mut ob).arg(&mut od);
        unsafe { l.launch(threads(len, BLOCK)) }.map_err(cuda_err)?;
        let hb = gpu.stream().clone_dtoh(&ob).map_err(cuda_err)?;
        let hd = gpu.stream().clone_dtoh(&od).map_err(cuda_err)?;
        out.b.extend_from_slice(&hb[..len]);
        out.distance.extend(hd[..len].iter().map(|&d| d.sqrt()));
        Ok(())
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
            let f = gpu.func("sort_candidates_small")?;
            let mut l = st.launch_builder(&f);
            l.arg(&self.d2).arg(&self.a).arg(&self.b).arg(&n32).arg(&a_bits).arg(&b_bits).arg(&d2_bits);
            l.arg(&mut out.d2).arg(&mut out.a).arg(&mut out.b);
            unsafe { l.launch(threads(256, 256)) }.map_err(cuda_err)?;
            let kept = keep.min(n);
            st.memcpy_htod(&[kept as u32], &mut out.count).map_err(cuda_err)?;
            *self = out;
            return Ok(kept);
        }
        let mut perm = gpu.alloc_uninit::<u32>(n)?;
        let mut keys = gpu.alloc_uninit::<u64>(n)?;
        let f = gpu.func("iota_u32")?;
        let mut l = st.launch_builder(&f);
        l.arg(&mut perm).arg(&n32);
        unsafe { l.launch(threads(n, BLOCK)) }.map_err(cuda_err)?;
        let g32 = gpu.func("gather_u32_as_u64")?;
        let g64 = gpu.func("gather_u64")?;
        let mut columns: Vec<(&CudaSlice<u32>, u32)> = Vec::new();
        if with_b {
            columns.push((&self.b, bits_for(nb)));
        }
        columns.push((&self.a, bits_for(na)));
        for (col, bits) in columns {
            let mut l = st.launch_builder(&g32);
            l.arg(col).arg(&perm).arg(&n32).arg(&mut keys);
            unsafe { l.launch(threads(n, BLOCK)) }.map_err(cuda_err)?;
            sort_pairs(gpu, &mut keys, &mut perm, n, bits)?;
        }
        let mut l = st.launch_builder(&g64);
        l.arg(&self.d2).arg(&perm).arg(&n32).arg(&mut keys);
        unsafe { l.launch(threads(n, BLOCK)) }.map_err(cuda_err)?;
        sort_pairs(gpu, &mut keys, &mut perm, n, d2_bits)?;

        let cap = self.d2.len();
        let mut out = Candidates::new(gpu, cap)?;
        let f = gpu.func("permute_candidates")?;
        let mut l = st.launch_builder(&f);
        l.arg(&perm).arg(&n32).arg(&self.d2).arg(&self.a).arg(&self.b);
        l.arg(&mut out.d2).arg(&mut out.a).arg(&mut out.b);
        unsafe { l.launch(threads(n, BLOCK)) }.map_err(cuda_err)?;
        let kept = keep.min(n);
        st.memcpy_htod(&[kept as u32], &mut out.count).map_err(cuda_err)?;
        *self = out;
        Ok(kept)
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
    let f_sums = gpu.func("select_threshold_sums")?;
    let (f_bound, f_sel, f_near) = (
        gpu.func_t::<T>("window_bound")?,
        gpu.func_t::<T>("select_threshold")?,
        gpu.func_t::<T>("nearest_candidates")?,
    );
    let window = BOUND_WINDOW as u32;
    let k32 = k as u32;
    for_each_chunk(gpu, a, tree, chunk, |c| {
        phases.mark_after("A upload + Morton order", || gpu.synchronize())?;
        let (len, off, last) = (c.points.len, c.offset, c.last);
        let (x, y, z) = (&c.points.x, &c.points.y, &c.points.z);
        let len32 = len as u32;
        let off32 = off as u32;
        if k < len {
            st.memset_zeros(&mut hist).map_err(cuda_err)?;
            let mut l = st.launch_builder(&f_bound);
            // Warp minima once there are at least 2k warps (see window_bound in the kernel).
            let per_warp = u32::from(len >= 64 * k);
            l.arg(x).arg(y).arg(z).arg(&len32).arg(&args).arg(&window).arg(&per_warp).arg(&mut hist);
            unsafe { l.launch(threads(len, BLOCK)) }.map_err(cuda_err)?;
            let mut l = st.launch_builder(&f_sums);
            l.arg(&hist).arg(&mut bucket_sums);
            unsafe { l.launch(threads(1 << 16, 256)) }.map_err(cuda_err)?;
            let mut l = st.launch_builder(&f_sel);
            l.arg(&hist).arg(&bucket_sums).arg(&k32).arg(&mut tau);
            unsafe { l.launch(threads(256, 256)) }.map_err(cuda_err)?;
            phases.mark_after("bound + threshold", || gpu.synchronize())?;
        }
        let mut l = st.launch_builder(&f_near);
        l.arg(x).arg(y).arg(z).arg(&c.ids).arg(&len32).arg(&off32).arg(&args).arg(&tau);
        l.arg(&mut cands.count).arg(&mut cands.d2).arg(&mut cands.a).arg(&mut cands.b);
        unsafe { l.launch(threads(len, BLOCK)) }.map_err(cuda_err)?;
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
    let n = cands.count(gpu)?;
    let kept = cands.sort_and_keep::<T>(gpu, n, na, nb, false, k)?;
    let out = cands.download(gpu, kept)?;
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
    let f = gpu.func_t::<T>("knn_candidates")?;
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
                let g = gpu.func_t::<T>("gather_points")?;
                let mut l = st.launch_builder(&g);
                l.arg(&d.x).arg(&d.y).arg(&d.z).arg(&qid).arg(&q32).arg(&mut qx).arg(&mut qy).arg(&mut qz);
                unsafe { l.launch(threads(q, BLOCK)) }.map_err(cuda_err)?;
                (qx, qy, qz)
            }
        };
        let mut heap_d = gpu.alloc_uninit::<T>(q * k)?;
        let mut heap_id = gpu.alloc_uninit::<u32>(q * k)?;
        let mut l = st.launch_builder(&f);
        l.arg(&qx).arg(&qy).arg(&qz).arg(&qid).arg(&q32).arg(&args).arg(&k32).arg(&tau);
        l.arg(&mut heap_d)
            .arg(&mut heap_id)
            .arg(&mut cands.count)
            .arg(&mut cands.d2)
            .arg(&mut cands.a)
            .arg(&mut cands.b);
        unsafe { l.launch(threads(q, 64)) }.map_err(cuda_err)?;
        if (ci + 1) * chunk < ids.len() {
            let n = cands.count(gpu)?;
            cands.sort_and_keep::<T>(gpu, n, na, nb, true, k)?;
        }
    }
    let n = cands.count(gpu)?;
    let kept = cands.sort_and_keep::<T>(gpu, n, na, nb, true, k)?;
    cands.download(gpu, kept)
}
