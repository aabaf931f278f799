//! Launches closest_pairs.cu: the plan of src/cpu/closest_pairs.rs on the device.
//!
//! A is processed in chunks (`NEARKIT_CUDA_CHUNK` points, 4M by default) so inputs larger
//! than GPU memory work; B and its tree stay resident. Candidates are pruned to the best k
//! between chunks, so their buffer never exceeds one chunk plus k.

use cudarc::driver::{CudaSlice, CudaView, PushKernelArg};

use super::radix_sort::{bits_for, sort_pairs};
use super::tree_build::{BuildInput, DeviceTree};
use super::{cuda_err, grid, CudaBackend};
use crate::cpu::search_constants::BOUND_WINDOW;
use crate::error::{Error, Result};
use crate::points::Points;
use crate::query::{check_inputs, radius2, to_pairs, Candidate, Nearest, Pair, PairMode, PairsOptions};
use crate::real::{from_ordered_bits, Real};

const BLOCK: u32 = 256;
/// Candidate counts up to this are sorted by one block (sort_candidates_small).
const SMALL_SORT: usize = 256 * 8;

/// A point set in device memory (structure of arrays).
pub struct DevicePoints<T> {
    pub x: CudaSlice<T>,
    pub y: CudaSlice<T>,
    pub z: CudaSlice<T>,
    pub len: usize,
}

impl<T: Real> DevicePoints<T> {
    pub fn upload(be: &CudaBackend, p: &Points<T>) -> Result<Self> {
        Self::upload_range(be, p, 0, p.len())
    }

    fn upload_range(be: &CudaBackend, p: &Points<T>, s: usize, e: usize) -> Result<Self> {
        let st = &be.stream;
        Ok(DevicePoints {
            x: st.clone_htod(&p.x[s..e]).map_err(cuda_err)?,
            y: st.clone_htod(&p.y[s..e]).map_err(cuda_err)?,
            z: st.clone_htod(&p.z[s..e]).map_err(cuda_err)?,
            len: e - s,
        })
    }
}

/// Where A comes from: host memory (uploaded chunk by chunk) or already on the device.
pub(super) enum Source<'a, T> {
    Host(&'a Points<T>),
    Device(&'a DevicePoints<T>),
}

impl<T: Real> Source<'_, T> {
    fn len(&self) -> usize {
        match self {
            Source::Host(p) => p.len(),
            Source::Device(p) => p.len,
        }
    }
}

pub(super) fn chunk_size() -> usize {
    std::env::var("NEARKIT_CUDA_CHUNK").ok().and_then(|v| v.parse::<usize>().ok()).filter(|&c| c > 0).unwrap_or(1 << 24)
}

/// One chunk of A, sorted into Morton order on the device: `ids[i]` is sorted point i's
/// index within the chunk.
pub(super) struct SortedChunk<T> {
    pub points: DevicePoints<T>,
    pub ids: CudaSlice<u32>,
    pub offset: usize,
    pub last: bool,
}

/// Runs `f` on each chunk of A, sorted in Morton order (in `tree`'s frame) so that
/// neighbouring threads search neighbouring parts of the tree.
pub(super) fn for_each_chunk<T: Real>(
    be: &CudaBackend,
    a: &Source<'_, T>,
    tree: &DeviceTree<T>,
    chunk: usize,
    f: impl FnMut(&SortedChunk<T>) -> Result<()>,
) -> Result<()> {
    // The top 32 bits of the code order queries well enough for coherence, in half the passes.
    for_each_chunk_sorted_by(be, a, tree, chunk, 32, f)
}

/// `for_each_chunk` with the top `key_bits` bits of the Morton code as the sort key.
pub(super) fn for_each_chunk_sorted_by<T: Real>(
    be: &CudaBackend,
    a: &Source<'_, T>,
    tree: &DeviceTree<T>,
    chunk: usize,
    key_bits: u32,
    mut f: impl FnMut(&SortedChunk<T>) -> Result<()>,
) -> Result<()> {
    let order = |x: &CudaView<'_, T>, y: &CudaView<'_, T>, z: &CudaView<'_, T>, len| {
        sort_chunk(be, tree, x, y, z, len, key_bits)
    };
    for_each_chunk_ordered(be, a, chunk, order, |offset, last, c| f(&SortedChunk { offset, last, ..c }))
}

/// The chunks of `a`, each put in order by `order(x, y, z, len)` on the device, to
/// `f(offset, last, ordered)`.
pub(super) fn for_each_chunk_ordered<T: Real, C>(
    be: &CudaBackend,
    a: &Source<'_, T>,
    chunk: usize,
    order: impl Fn(&CudaView<'_, T>, &CudaView<'_, T>, &CudaView<'_, T>, usize) -> Result<C>,
    mut f: impl FnMut(usize, bool, C) -> Result<()>,
) -> Result<()> {
    let (n, c) = (a.len(), chunk.max(1));
    let mut s = 0;
    while s < n {
        let e = (s + c).min(n);
        let chunk = match a {
            Source::Host(p) => {
                let d = DevicePoints::upload_range(be, p, s, e)?;
                order(&d.x.as_view(), &d.y.as_view(), &d.z.as_view(), e - s)?
            }
            Source::Device(d) => order(&d.x.slice(s..e), &d.y.slice(s..e), &d.z.slice(s..e), e - s)?,
        };
        f(s, e == n, chunk)?;
        s = e;
    }
    Ok(())
}

fn sort_chunk<T: Real>(
    be: &CudaBackend,
    tree: &DeviceTree<T>,
    x: &CudaView<'_, T>,
    y: &CudaView<'_, T>,
    z: &CudaView<'_, T>,
    len: usize,
    key_bits: u32,
) -> Result<SortedChunk<T>> {
    let st = &be.stream;
    let len32 = len as u32;
    let mut keys = be.alloc_uninit::<u64>(len)?;
    let mut ids = be.alloc_uninit::<u32>(len)?;
    let f = be.func_t::<T>("morton_keys")?;
    let shift = 63 - key_bits;
    let mut l = st.launch_builder(&f);
    l.arg(x).arg(y).arg(z).arg(&len32).arg(&tree.frame).arg(&shift).arg(&mut keys).arg(&mut ids);
    unsafe { l.launch(grid(len, BLOCK)) }.map_err(cuda_err)?;
    sort_pairs(be, &mut keys, &mut ids, len, key_bits)?;
    drop(keys);
    let (mut sx, mut sy, mut sz) = (be.alloc_uninit::<T>(len)?, be.alloc_uninit::<T>(len)?, be.alloc_uninit::<T>(len)?);
    let f = be.func_t::<T>("gather_points")?;
    let mut l = st.launch_builder(&f);
    l.arg(x).arg(y).arg(z).arg(&ids).arg(&len32).arg(&mut sx).arg(&mut sy).arg(&mut sz);
    unsafe { l.launch(grid(len, BLOCK)) }.map_err(cuda_err)?;
    Ok(SortedChunk { points: DevicePoints { x: sx, y: sy, z: sz, len }, ids, offset: 0, last: false })
}

pub(super) fn nearest<T: Real>(
    be: &CudaBackend,
    a: &Points<T>,
    b: &Points<T>,
    max_distance: Option<T>,
) -> Result<Nearest<T>> {
    let r2 = check_inputs(a, b, max_distance)?;
    let tree = DeviceTree::build_from(be, BuildInput::Owned(DevicePoints::upload(be, b)?))?;
    let args = tree.args(be);
    let r2_dev = be.stream.clone_htod(&[r2]).map_err(cuda_err)?;
    let f = be.func_t::<T>("nearest_all")?;
    let mut out = Nearest { b: Vec::with_capacity(a.len()), distance: Vec::with_capacity(a.len()) };
    for_each_chunk(be, &Source::Host(a), &tree, chunk_size(), |c| {
        let len = c.points.len;
        let mut ob = be.alloc_uninit::<u32>(len)?;
        let mut od = be.alloc_uninit::<T>(len)?;
        let len32 = len as u32;
        let p = &c.points;
        let mut l = be.stream.launch_builder(&f);
        l.arg(&p.x).arg(&p.y).arg(&p.z).arg(&c.ids).arg(&len32).arg(&args).arg(&r2_dev).arg(&mut ob).arg(&mut od);
        unsafe { l.launch(super::grid(len, BLOCK)) }.map_err(cuda_err)?;
        let hb = be.stream.clone_dtoh(&ob).map_err(cuda_err)?;
        let hd = be.stream.clone_dtoh(&od).map_err(cuda_err)?;
        out.b.extend_from_slice(&hb[..len]);
        out.distance.extend(hd[..len].iter().map(|&d| d.sqrt()));
        Ok(())
    })?;
    Ok(out)
}

pub(super) fn closest_pairs<T: Real>(
    be: &CudaBackend,
    a: &Points<T>,
    b: &Points<T>,
    opts: &PairsOptions<T>,
) -> Result<Vec<Pair<T>>> {
    let mut phases = Phases::new(be);
    let r2 = check_inputs(a, b, opts.max_distance)?;
    if opts.k == 0 {
        return Err(Error::ZeroK);
    }
    phases.mark("validate")?;
    let db = DevicePoints::upload(be, b)?;
    phases.mark("B upload")?;
    // B's unsorted copy is freed as soon as its tree is built.
    let tree = DeviceTree::build_from(be, BuildInput::Owned(db))?;
    phases.mark("tree build")?;
    run_pairs(be, &Source::Host(a), tree, opts, r2, phases)
}

pub(super) fn closest_pairs_resident<T: Real>(
    be: &CudaBackend,
    a: &DevicePoints<T>,
    b: &DevicePoints<T>,
    opts: &PairsOptions<T>,
) -> Result<Vec<Pair<T>>> {
    if opts.k == 0 {
        return Err(Error::ZeroK);
    }
    if a.len == 0 || b.len == 0 {
        return Err(Error::InvalidArgument("empty point set".into()));
    }
    let r2 = radius2(opts.max_distance)?;
    let mut phases = Phases::new(be);
    let tree = DeviceTree::build(be, b)?;
    phases.mark("tree build")?;
    run_pairs(be, &Source::Device(a), tree, opts, r2, phases)
}

fn run_pairs<T: Real>(
    be: &CudaBackend,
    a: &Source<'_, T>,
    tree: DeviceTree<T>,
    opts: &PairsOptions<T>,
    r2: T,
    mut phases: Phases<'_>,
) -> Result<Vec<Pair<T>>> {
    let per_a = nearest_per_a(be, &tree, a, opts.k, r2, &mut phases)?;
    let best = match opts.mode {
        PairMode::NearestPerA => per_a,
        PairMode::AllPairs => {
            let best = all_pairs(be, &tree, a, opts.k, r2, &per_a)?;
            phases.mark("all-pairs kNN")?;
            best
        }
    };
    phases.report();
    Ok(to_pairs(&best, from_ordered_bits::<T>))
}

/// With NEARKIT_PROFILE=1, times each phase (synchronising the stream at every mark) and
/// prints them to stderr; otherwise does nothing.
struct Phases<'a> {
    be: &'a CudaBackend,
    on: bool,
    last: std::time::Instant,
    done: Vec<(&'static str, f64)>,
}

impl<'a> Phases<'a> {
    fn new(be: &'a CudaBackend) -> Self {
        let on = std::env::var("NEARKIT_PROFILE").as_deref() == Ok("1");
        if on {
            let _ = be.synchronize();
        }
        Phases { be, on, last: std::time::Instant::now(), done: Vec::new() }
    }

    fn mark(&mut self, name: &'static str) -> Result<()> {
        if self.on {
            self.be.synchronize()?;
            let now = std::time::Instant::now();
            self.done.push((name, (now - self.last).as_secs_f64() * 1e3));
            self.last = now;
        }
        Ok(())
    }

    fn report(&self) {
        if self.on {
            let parts: Vec<String> = self.done.iter().map(|(n, ms)| format!("{n} {ms:.3} ms")).collect();
            eprintln!("profile: {}", parts.join(", "));
        }
    }
}

/// Candidate pairs on the device: (squared distance bits, a, b) and how many there are.
struct Candidates {
    d2: CudaSlice<u64>,
    a: CudaSlice<u32>,
    b: CudaSlice<u32>,
    count: CudaSlice<u32>,
}

impl Candidates {
    fn new(be: &CudaBackend, capacity: usize) -> Result<Self> {
        Ok(Candidates {
            d2: be.alloc_uninit(capacity)?,
            a: be.alloc_uninit(capacity)?,
            b: be.alloc_uninit(capacity)?,
            count: be.alloc(1)?,
        })
    }

    fn count(&self, be: &CudaBackend) -> Result<usize> {
        Ok(be.stream.clone_dtoh(&self.count).map_err(cuda_err)?[0] as usize)
    }

    /// Sorts the first `n` candidates by (d2, a, b) — stable passes from the least
    /// significant column up — and keeps the first `keep` as the new count.
    fn sort_and_keep<T: Real>(
        &mut self,
        be: &CudaBackend,
        n: usize,
        na: usize,
        nb: usize,
        with_b: bool,
        keep: usize,
    ) -> Result<usize> {
        if n == 0 {
            return Ok(0);
        }
        let st = &be.stream;
        let n32 = n as u32;
        let d2_bits: u32 = if T::NAME == "f32" { 31 } else { 63 };
        if n <= SMALL_SORT {
            // One block does every pass in shared memory: one launch instead of dozens.
            let mut out = Candidates::new(be, self.d2.len())?;
            let (a_bits, b_bits) = (bits_for(na), if with_b { bits_for(nb) } else { 0 });
            let f = be.func("sort_candidates_small")?;
            let mut l = st.launch_builder(&f);
            l.arg(&self.d2).arg(&self.a).arg(&self.b).arg(&n32).arg(&a_bits).arg(&b_bits).arg(&d2_bits);
            l.arg(&mut out.d2).arg(&mut out.a).arg(&mut out.b);
            unsafe { l.launch(grid(256, 256)) }.map_err(cuda_err)?;
            let kept = keep.min(n);
            st.memcpy_htod(&[kept as u32], &mut out.count).map_err(cuda_err)?;
            *self = out;
            return Ok(kept);
        }
        let mut perm = be.alloc_uninit::<u32>(n)?;
        let mut keys = be.alloc_uninit::<u64>(n)?;
        let f = be.func("iota_u32")?;
        let mut l = st.launch_builder(&f);
        l.arg(&mut perm).arg(&n32);
        unsafe { l.launch(grid(n, BLOCK)) }.map_err(cuda_err)?;
        let g32 = be.func("gather_u32_as_u64")?;
        let g64 = be.func("gather_u64")?;
        let mut columns: Vec<(&CudaSlice<u32>, u32)> = Vec::new();
        if with_b {
            columns.push((&self.b, bits_for(nb)));
        }
        columns.push((&self.a, bits_for(na)));
        for (col, bits) in columns {
            let mut l = st.launch_builder(&g32);
            l.arg(col).arg(&perm).arg(&n32).arg(&mut keys);
            unsafe { l.launch(grid(n, BLOCK)) }.map_err(cuda_err)?;
            sort_pairs(be, &mut keys, &mut perm, n, bits)?;
        }
        let mut l = st.launch_builder(&g64);
        l.arg(&self.d2).arg(&perm).arg(&n32).arg(&mut keys);
        unsafe { l.launch(grid(n, BLOCK)) }.map_err(cuda_err)?;
        sort_pairs(be, &mut keys, &mut perm, n, d2_bits)?;

        let cap = self.d2.len();
        let mut out = Candidates::new(be, cap)?;
        let f = be.func("permute_candidates")?;
        let mut l = st.launch_builder(&f);
        l.arg(&perm).arg(&n32).arg(&self.d2).arg(&self.a).arg(&self.b);
        l.arg(&mut out.d2).arg(&mut out.a).arg(&mut out.b);
        unsafe { l.launch(grid(n, BLOCK)) }.map_err(cuda_err)?;
        let kept = keep.min(n);
        st.memcpy_htod(&[kept as u32], &mut out.count).map_err(cuda_err)?;
        *self = out;
        Ok(kept)
    }

    fn download(&self, be: &CudaBackend, n: usize) -> Result<Vec<Candidate>> {
        let st = &be.stream;
        let d2 = st.clone_dtoh(&self.d2.slice(0..n)).map_err(cuda_err)?;
        let a = st.clone_dtoh(&self.a.slice(0..n)).map_err(cuda_err)?;
        let b = st.clone_dtoh(&self.b.slice(0..n)).map_err(cuda_err)?;
        Ok((0..n).map(|i| Candidate { d2_bits: d2[i], a: a[i], b: b[i] }).collect())
    }
}

fn nearest_per_a<T: Real>(
    be: &CudaBackend,
    tree: &DeviceTree<T>,
    a: &Source<'_, T>,
    k: usize,
    r2: T,
    phases: &mut Phases<'_>,
) -> Result<Vec<Candidate>> {
    let na = a.len();
    let nb = tree.n as usize;
    let st = &be.stream;
    let args = tree.args(be);
    let chunk = chunk_size().min(na);
    let mut tau = st.clone_htod(&[r2]).map_err(cuda_err)?;
    let mut cands = Candidates::new(be, chunk + k)?;
    let mut hist = be.alloc::<u32>(1 << 16)?; // zeroed per chunk
    let mut bucket_sums = be.alloc_uninit::<u32>(256)?;
    let f_sums = be.func("select_threshold_sums")?;
    let (f_bound, f_sel, f_near) =
        (be.func_t::<T>("window_bound")?, be.func_t::<T>("select_threshold")?, be.func_t::<T>("nearest_candidates")?);
    let window = BOUND_WINDOW as u32;
    let k32 = k as u32;
    for_each_chunk(be, a, tree, chunk_size(), |c| {
        phases.mark("A upload + Morton order")?;
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
            unsafe { l.launch(grid(len, BLOCK)) }.map_err(cuda_err)?;
            let mut l = st.launch_builder(&f_sums);
            l.arg(&hist).arg(&mut bucket_sums);
            unsafe { l.launch(grid(1 << 16, 256)) }.map_err(cuda_err)?;
            let mut l = st.launch_builder(&f_sel);
            l.arg(&hist).arg(&bucket_sums).arg(&k32).arg(&mut tau);
            unsafe { l.launch(grid(256, 256)) }.map_err(cuda_err)?;
            phases.mark("bound + threshold")?;
        }
        let mut l = st.launch_builder(&f_near);
        l.arg(x).arg(y).arg(z).arg(&c.ids).arg(&len32).arg(&off32).arg(&args).arg(&tau);
        l.arg(&mut cands.count).arg(&mut cands.d2).arg(&mut cands.a).arg(&mut cands.b);
        unsafe { l.launch(grid(len, BLOCK)) }.map_err(cuda_err)?;
        phases.mark("exact search")?;
        if !last {
            // Keep the best k and tighten tau to the k-th, so the buffer never overflows.
            let n = cands.count(be)?;
            if n > k {
                cands.sort_and_keep::<T>(be, n, na, nb, false, k)?;
                let kth = st.clone_dtoh(&cands.d2.slice(k - 1..k)).map_err(cuda_err)?[0];
                let cur = st.clone_dtoh(&tau).map_err(cuda_err)?[0];
                let t = from_ordered_bits::<T>(kth).min(cur);
                st.memcpy_htod(&[t], &mut tau).map_err(cuda_err)?;
            }
        }
        Ok(())
    })?;
    let n = cands.count(be)?;
    let kept = cands.sort_and_keep::<T>(be, n, na, nb, false, k)?;
    let out = cands.download(be, kept);
    phases.mark("top-k select + download")?;
    out
}

fn all_pairs<T: Real>(
    be: &CudaBackend,
    tree: &DeviceTree<T>,
    a: &Source<'_, T>,
    k: usize,
    r2: T,
    per_a: &[Candidate],
) -> Result<Vec<Candidate>> {
    let st = &be.stream;
    let (na, nb) = (a.len(), tree.n as usize);
    let tau_v = if per_a.len() == k { from_ordered_bits::<T>(per_a[k - 1].d2_bits) } else { r2 };
    let tau = st.clone_htod(&[tau_v]).map_err(cuda_err)?;
    let args = tree.args(be);
    // Queries: the owners of the nearest-per-a top k (see the CPU module for why).
    let ids: Vec<u32> = per_a.iter().map(|c| c.a).collect();
    let chunk = ((1usize << 25) / k).max(1);
    let mut cands = Candidates::new(be, chunk.min(ids.len()) * k + k)?;
    let f = be.func_t::<T>("knn_candidates")?;
    let k32 = k as u32;
    for (ci, part) in ids.chunks(chunk).enumerate() {
        let q = part.len();
        let q32 = q as u32;
        let qid = st.clone_htod(part).map_err(cuda_err)?;
        let (qx, qy, qz) = match a {
            Source::Host(p) => {
                let pick = |c: &Vec<T>| part.iter().map(|&i| c[i as usize]).collect::<Vec<T>>();
                (
                    st.clone_htod(&pick(&p.x)).map_err(cuda_err)?,
                    st.clone_htod(&pick(&p.y)).map_err(cuda_err)?,
                    st.clone_htod(&pick(&p.z)).map_err(cuda_err)?,
                )
            }
            Source::Device(d) => {
                let (mut qx, mut qy, mut qz) =
                    (be.alloc_uninit::<T>(q)?, be.alloc_uninit::<T>(q)?, be.alloc_uninit::<T>(q)?);
                let g = be.func_t::<T>("gather_points")?;
                let mut l = st.launch_builder(&g);
                l.arg(&d.x).arg(&d.y).arg(&d.z).arg(&qid).arg(&q32).arg(&mut qx).arg(&mut qy).arg(&mut qz);
                unsafe { l.launch(grid(q, BLOCK)) }.map_err(cuda_err)?;
                (qx, qy, qz)
            }
        };
        let mut heap_d = be.alloc_uninit::<T>(q * k)?;
        let mut heap_id = be.alloc_uninit::<u32>(q * k)?;
        let mut l = st.launch_builder(&f);
        l.arg(&qx).arg(&qy).arg(&qz).arg(&qid).arg(&q32).arg(&args).arg(&k32).arg(&tau);
        l.arg(&mut heap_d)
            .arg(&mut heap_id)
            .arg(&mut cands.count)
            .arg(&mut cands.d2)
            .arg(&mut cands.a)
            .arg(&mut cands.b);
        unsafe { l.launch(grid(q, 64)) }.map_err(cuda_err)?;
        if (ci + 1) * chunk < ids.len() {
            let n = cands.count(be)?;
            cands.sort_and_keep::<T>(be, n, na, nb, true, k)?;
        }
    }
    let n = cands.count(be)?;
    let kept = cands.sort_and_keep::<T>(be, n, na, nb, true, k)?;
    cands.download(be, kept)
}
