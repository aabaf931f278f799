//! [`ShardedIndex`]: one point set cut by space across several GPUs of one host, so that the
//! all-nearest join runs on all of them at once, host arrays in and out.
//!
//! The plan, each step on every GPU at once (a host thread per GPU, a barrier between steps):
//! 1. GPU i takes slice i of the rows (in order), uploads it and makes columns, checked as any
//!    input is.
//! 2. The slices' bounds give one Morton frame, and each point a key (the top 32 bits of its
//!    code). The histogram of the keys' top 16 bits over all GPUs cuts the curve into one range
//!    per GPU holding an equal share (a cell).
//! 3. Each GPU groups its points by cell (one stable radix pass), with their row numbers.
//! 4. GPU c pulls cell c's points from every GPU (peer copies), in slice order, and builds its
//!    tree from them. The tree answers in row numbers, so ties break as on one GPU.
//!
//! With one GPU, steps 2–4 reduce to building the tree of the slice.
//!
//! Queries take steps 1–3 and go to the cell their key falls in, where they are sorted along
//! the curve and searched first. Then each is searched in any other cell whose box could hold
//! a point before its best so far (the test every tree search makes at its root: few queries,
//! near a cell's faces), starting from that best. The answer is the first (distance, id) in
//! the one order every search uses, whichever cell holds it: the one-GPU index's bits. Answers
//! go back to the GPU each query came from, into the caller's order, and down into the
//! caller's memory, whose fresh pages the host faults in while the GPUs search.

use std::mem::MaybeUninit;
use std::sync::Arc;

use cudarc::driver::{sys, CudaSlice, DevicePtr, DevicePtrMut, DeviceRepr};

use crate::device::Engine;
use crate::error::{Error, Result, Role};
use crate::geometry::magnitude::Magnitudes;
use crate::geometry::points::{MAX_POINTS, NO_ID};
use crate::geometry::radius2;
use crate::geometry::real::Real;
use crate::geometry::scale::Scale;
use crate::pairs::Nearest;
use crate::runtime::cpu::Toucher;
use crate::runtime::cuda::import::upload_row_pieces;
use crate::runtime::cuda::launch::{kernels, In, Out};
use crate::runtime::cuda::radix_sort::sort_pairs;
use crate::runtime::cuda::transfer::download_mapped;
use crate::runtime::cuda::{cuda_err, device_pool, threads, CudaSource, DevicePoints, Gpu, COMMON};
use crate::runtime::profile::Phases;
use crate::tree::cuda::{bounds, frame, gather_points, morton_keys, BuildInput, DeviceTree, TreeArgs};
use crate::tree::cuda::{TREE_HEADER, TREE_SEARCH};

/// Bits of the Morton code that points are sorted by on their way to a cell (the top ones).
const KEY_BITS: u32 = 32;
/// Bits of the key that cells are cut on: cells are ranges of 2^16 buckets.
const BUCKET_BITS: u32 = 16;
const BLOCK: u32 = 256;

static SHARDED: CudaSource = CudaSource::plain("sharded.cu", include_str!("sharded.cu"));

kernels! {
    module KERNELS = "sharded", [&COMMON, &TREE_HEADER, &TREE_SEARCH, &SHARDED];
    /// `bins[key >> shift] += 1` for every key.
    fn key_histogram(keys: In<u64>, n: u32, shift: u32, bins: Out<u32>);
    /// Each key replaced by its cell: the `c` with `cuts[c] <= key < cuts[c + 1]`.
    fn cells_of_keys(keys: Out<u64>, n: u32, cuts: In<u64>, cells: u32);
    /// `out[j]`: the first position of the sorted keys at or past `cuts[j]`.
    fn lower_bounds(keys: In<u64>, n: u32, cuts: In<u64>, m: u32, out: Out<u32>);
    /// Points `perm[i]` to place i, with their global ids `offset + perm[i]`.
    fn gather_with_ids<T>(
        x: In<T>,
        y: In<T>,
        z: In<T>,
        perm: In<u32>,
        n: u32,
        offset: u32,
        sx: Out<T>,
        sy: Out<T>,
        sz: Out<T>,
        gid: Out<u32>,
    );
    /// Each query's nearest point of the tree before its best so far, which it replaces (with
    /// `init`, the best so far is `(*r2, NO_ID)`).
    fn nearest_improve<T>(
        qx: In<T>,
        qy: In<T>,
        qz: In<T>,
        n: u32,
        t: TreeArgs<T>,
        r2: In<T>,
        init: u32,
        bd: Out<T>,
        bid: Out<u32>,
    );
    /// Per other cell, the queries whose best so far that cell's box could beat.
    fn rerun_lists<T>(
        qx: In<T>,
        qy: In<T>,
        qz: In<T>,
        n: u32,
        boxes: In<T>,
        min_id: In<u32>,
        cells: u32,
        home: u32,
        bd: In<T>,
        bid: In<u32>,
        counts: Out<u32>,
        lists: Out<u32>,
    );
    /// The listed queries and their bests, packed.
    fn gather_queries<T>(
        qx: In<T>,
        qy: In<T>,
        qz: In<T>,
        bd: In<T>,
        bid: In<u32>,
        list: In<u32>,
        n: u32,
        ox: Out<T>,
        oy: Out<T>,
        oz: Out<T>,
        obd: Out<T>,
        obid: Out<u32>,
    );
    /// Another cell's answers for the listed queries, kept where they come first.
    fn merge_best<T>(list: In<u32>, n: u32, rbd: In<T>, rbid: In<u32>, bd: Out<T>, bid: Out<u32>);
    /// Answers back into the caller's order (squared distances, +inf for none).
    fn scatter_best<T>(perm: In<u32>, n: u32, bd: In<T>, bid: In<u32>, od2: Out<T>, oid: Out<u32>);
    /// Bests set to `(*r2, NO_ID)`.
    fn init_best<T>(r2: In<T>, n: u32, bd: Out<T>, bid: Out<u32>);
    /// Bests from sorted order back to arrival order: place `perm[i]` gets best i.
    fn unsort_best<T>(perm: In<u32>, n: u32, bd: In<T>, bid: In<u32>, obd: Out<T>, obid: Out<u32>);
}

/// A point set indexed across several GPUs of one host, each holding one cell of space (a
/// range of the Morton curve with an equal share of the points): every A's nearest point from
/// host arrays to host arrays, on all the GPUs at once. Answers are bitwise those of a
/// [`PointIndex`](crate::PointIndex) of the same points on one GPU or the CPU (ties to the
/// smaller row).
///
/// Rows come as `[x0, y0, z0, x1, …]` (a C-ordered numpy `(n, 3)` array), in one piece or
/// several read one after another (a Dask array's chunks, say), and go up as they are. The
/// GPUs must reach each other's memory (NVLink or PCIe peer access); any may be listed
/// more than once (for tests on one GPU).
///
/// ```no_run
/// use nearkit::{Device, Engine, ShardedIndex};
/// let engines: Vec<Engine> = (0..Device::cuda_count()).map(|g| Engine::open(Device::Cuda(g)).unwrap()).collect();
/// let data = [0.0f32, 0.0, 0.0, 1.0, 0.0, 0.0, 5.0, 5.0, 5.0];
/// let index = ShardedIndex::from_rows(&[&data], &engines).unwrap();
/// let nn = index.nearest_rows(&[&[0.9f32, 0.1, 0.0]], None).unwrap();
/// assert_eq!(nn.b, [1]);
/// ```
pub struct ShardedIndex<T: Real> {
    shards: Vec<Shard<T>>,
    /// Cell c holds the keys `cuts[c]..cuts[c + 1]`; cell c lives on shard c.
    cuts: Vec<u64>,
    len: usize,
    profile: bool,
}

/// One GPU's part: the frame of the cut (the whole set's), its cell's tree, and every cell's
/// box for the re-run test.
struct Shard<T> {
    gpu: Arc<Gpu>,
    frame: CudaSlice<T>,
    tree: Option<DeviceTree<T>>,
    /// Cell c's box at `6c` (lo x, y, z, hi x, y, z) and its smallest id (`NO_ID`: empty).
    boxes: CudaSlice<T>,
    min_ids: CudaSlice<u32>,
}

/// One slice of a point set on its GPU, grouped by cell.
struct Sorted<T> {
    x: CudaSlice<T>,
    y: CudaSlice<T>,
    z: CudaSlice<T>,
    /// Row numbers in the whole set (data only).
    gid: Option<CudaSlice<u32>>,
    /// Grouped position -> position in the slice.
    perm: CudaSlice<u32>,
    /// Where each cell's points start, and the end (`cells + 1` values).
    seg: Vec<usize>,
    len: usize,
}

impl<T> Sorted<T> {
    fn count(&self, c: usize) -> usize {
        self.seg[c + 1] - self.seg[c]
    }
}

impl<T: Real> ShardedIndex<T> {
    /// Indexes the rows (`pieces` one after another) across the engines' GPUs, a cell each.
    /// Fewer cells than GPUs are used for fewer points than GPUs.
    pub fn from_rows(pieces: &[&[T]], engines: &[Engine]) -> Result<Self> {
        let n = rows_in(pieces)?;
        if n == 0 {
            return Err(Error::EmptySet { role: Role::Data });
        }
        if n > MAX_POINTS {
            return Err(Error::TooLarge { role: Role::Data, len: n, max: MAX_POINTS });
        }
        if engines.is_empty() {
            return Err(Error::InvalidArgument("a sharded index needs at least one GPU".into()));
        }
        let gpus =
            engines.iter().map(|e| e.need_gpu("a sharded index").cloned()).take(n).collect::<Result<Vec<_>>>()?;
        let profile = engines[0].options().profile;
        let mut phases = Phases::new("sharded index", profile);
        enable_peer_access(&gpus)?;
        let _busy = lock_all(&gpus);
        let g = gpus.len();

        // 1. Each slice up, as columns; its bounds.
        let slices = on_each(&gpus, |i, gpu| {
            let (s, e) = slice_of(n, g, i);
            let p = upload_slice(gpu, pieces, s, e, Role::Data)?;
            let s = gpu.stream();
            let mut acc = s.clone_htod(&[u64::MAX, u64::MAX, u64::MAX, 0, 0, 0]).map_err(cuda_err)?;
            let blocks = p.len.div_ceil(256).min(1024);
            bounds::<T>(gpu, threads(blocks * 256, 256), &p.x, &p.y, &p.z, p.len as u32, &mut acc)?;
            let acc = s.clone_dtoh(&acc).map_err(cuda_err)?;
            Ok((p, acc))
        })?;
        let m = slices.iter().fold(Magnitudes::NONE, |m, (p, _)| wider(m, p.magnitudes.unwrap_or(Magnitudes::NONE)));
        if !Scale::for_points::<T>(m, Role::Data)?.is_identity() {
            return Err(Error::Magnitudes {
                role: Role::Data,
                detail: "coordinates this far from 1 need scaling by a power of two, which a sharded index does \
                         not do: use PointIndex"
                    .into(),
            });
        }
        let mut acc = [u64::MAX, u64::MAX, u64::MAX, 0, 0, 0];
        for (_, a) in &slices {
            for k in 0..3 {
                acc[k] = acc[k].min(a[k]);
                acc[k + 3] = acc[k + 3].max(a[k + 3]);
            }
        }
        phases.mark("slices up");

        // 2. One frame; each point's key; the keys' buckets counted.
        let slices: Vec<_> = slices.into_iter().map(|(p, _)| std::sync::Mutex::new(Some(p))).collect();
        let keyed = on_each(&gpus, |i, gpu| {
            let p = slices[i].lock().unwrap().take().expect("each slice is keyed once");
            let s = gpu.stream();
            let acc = s.clone_htod(&acc).map_err(cuda_err)?;
            let mut fr = gpu.alloc_uninit::<T>(4)?;
            frame::<T>(gpu, threads(1, 1), &acc, &mut fr)?;
            if g == 1 {
                // One cell: the slice is the cell, its rows its ids.
                return Ok((p, None, fr, Vec::new()));
            }
            let (keys, perm) = keys_of(gpu, &p, &fr)?;
            let mut bins = gpu.alloc::<u32>(1 << BUCKET_BITS)?;
            key_histogram(gpu, threads(p.len, BLOCK), &keys, p.len as u32, KEY_BITS - BUCKET_BITS, &mut bins)?;
            let bins = s.clone_dtoh(&bins).map_err(cuda_err)?;
            Ok((p, Some((keys, perm)), fr, bins))
        })?;
        let cuts = cut_buckets(keyed.iter().map(|k| &k.3[..]), n, g);
        let mut frames = Vec::with_capacity(g);
        let mut keyed_slices = Vec::with_capacity(g);
        for (p, keys, fr, _) in keyed {
            frames.push(fr);
            keyed_slices.push(std::sync::Mutex::new(Some((p, keys))));
        }
        phases.mark("keyed and cut");

        // 3. Each slice's points grouped by cell (one stable pass), with their row numbers.
        let parts = on_each(&gpus, |i, gpu| {
            if g == 1 {
                return Ok(None); // the slice stays as it is, for step 4
            }
            let (p, keys) = keyed_slices[i].lock().unwrap().take().expect("each slice is grouped once");
            let (keys, perm) = keys.expect("several cells: keyed in step 2");
            Ok(Some(partition(gpu, p, keys, perm, &cuts, Some(slice_of(n, g, i).0))?))
        })?;
        phases.mark("grouped by cell");

        // 4. Each cell's points pulled to its GPU; its tree, in row numbers.
        let single = std::sync::Mutex::new(keyed_slices.into_iter().next().and_then(|k| k.into_inner().unwrap()));
        let trees = on_each(&gpus, |c, gpu| {
            let tree = if g == 1 {
                let (p, _) = single.lock().unwrap().take().expect("one slice, one cell");
                DeviceTree::build_from(gpu, BuildInput::Owned(p))?
            } else {
                let count = |p: &Option<Sorted<T>>| p.as_ref().map_or(0, |p| p.count(c));
                let m: usize = parts.iter().map(count).sum();
                if m == 0 {
                    return Ok((None, [T::ZERO; 6], NO_ID));
                }
                let (points, gid) = pull_cell(gpu, &gpus, &parts, c, m, true)?;
                DeviceTree::build_with_ids(gpu, BuildInput::Owned(points), gid.as_ref())?
            };
            let (bx, min_id) = root_box(gpu, &tree)?;
            Ok((Some(tree), bx, min_id))
        })?;
        drop(parts);
        let boxes: Vec<T> = trees.iter().flat_map(|t| t.1).collect();
        let min_ids: Vec<u32> = trees.iter().map(|t| t.2).collect();
        let shards = trees
            .into_iter()
            .zip(frames)
            .zip(&gpus)
            .map(|(((tree, _, _), frame), gpu)| {
                let s = gpu.stream();
                Ok(Shard {
                    gpu: gpu.clone(),
                    frame,
                    tree,
                    boxes: s.clone_htod(&boxes).map_err(cuda_err)?,
                    min_ids: s.clone_htod(&min_ids).map_err(cuda_err)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        phases.mark("cells built");
        phases.report();
        Ok(ShardedIndex { shards, cuts, len: n, profile })
    }

    /// The number of indexed points.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: an index holds at least one point.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The GPUs it spans (one cell each).
    pub fn gpus(&self) -> usize {
        self.shards.len()
    }

    /// Each query row's nearest indexed point (`b`, `distance`), ties to the smaller id; with
    /// a `max_distance`, queries with none within it get `NO_ID` and an infinite distance.
    pub fn nearest_rows(&self, pieces: &[&[T]], max_distance: Option<T>) -> Result<Nearest<T>> {
        let n = rows_in(pieces)?;
        let (mut b, mut distance) = (crate::runtime::cpu::big_vec(n), crate::runtime::cpu::big_vec(n));
        self.nearest_rows_into(
            pieces,
            max_distance,
            &mut distance.spare_capacity_mut()[..n],
            &mut b.spare_capacity_mut()[..n],
            |id| id,
        )?;
        // SAFETY: `nearest_rows_into` wrote every row.
        unsafe {
            b.set_len(n);
            distance.set_len(n);
        }
        Ok(Nearest { b, distance })
    }

    /// [`ShardedIndex::nearest_rows`] into the caller's memory (one value per query row), each
    /// id passed through `id` on its way (`NO_ID` for none): a widening to the caller's type,
    /// say, done as the answers are copied out of the transfer buffers.
    pub fn nearest_rows_into<I: Send + Sync>(
        &self,
        pieces: &[&[T]],
        max_distance: Option<T>,
        distance: &mut [MaybeUninit<T>],
        ids: &mut [MaybeUninit<I>],
        id: impl Fn(u32) -> I + Sync,
    ) -> Result<()> {
        let n = rows_in(pieces)?;
        if distance.len() != n || ids.len() != n {
            return Err(Error::InvalidArgument(format!(
                "{n} queries need {n} places for distances and ids, not {} and {}",
                distance.len(),
                ids.len()
            )));
        }
        let r2 = radius2(max_distance)?;
        if n == 0 {
            return Ok(());
        }
        let gpus: Vec<Arc<Gpu>> = self.shards.iter().map(|s| s.gpu.clone()).collect();
        let _busy = lock_all(&gpus);
        let g = gpus.len();
        if g == 1 {
            let sh = &self.shards[0];
            let tree = sh.tree.as_ref().expect("one cell holds every point");
            sh.gpu.stream().context().bind_to_thread().map_err(cuda_err)?;
            let job = NearestRows { pieces, r2, chunk: n, profile: self.profile };
            return nearest_rows_on_gpu(&sh.gpu, tree, &sh.frame, &job, distance, ids, &id);
        }
        let mut phases = Phases::new("sharded nearest", self.profile);

        // Up, sorted, cut by the index's cells.
        let parts = on_each(&gpus, |i, gpu| {
            let (s, e) = slice_of(n, g, i);
            if s == e {
                return Ok(None);
            }
            let mut clock = Lap::new(self.profile, gpu)?;
            let p = upload_slice(gpu, pieces, s, e, Role::Queries)?;
            let up = clock.lap(gpu)?;
            let m = p.magnitudes;
            let (keys, perm) = keys_of(gpu, &p, &self.shards[i].frame)?;
            let sorted = partition(gpu, p, keys, perm, &self.cuts, None)?;
            if self.profile {
                eprintln!(
                    "profile sharded nearest, slice {i}: {} rows up {up:.3} ms, grouped {:.3} ms",
                    e - s,
                    clock.lap(gpu)?
                );
            }
            Ok(Some((sorted, m)))
        })?;
        for (_, m) in parts.iter().flatten() {
            Scale::default().check_point_queries::<T>(m.unwrap_or(Magnitudes::NONE), Role::Queries)?;
        }
        let parts: Vec<Option<Sorted<T>>> = parts.into_iter().map(|p| p.map(|p| p.0)).collect();
        let count = |i: usize, c: usize| parts[i].as_ref().map_or(0, |p| p.count(c));
        phases.mark("queries up and grouped");

        // While the GPUs search, the host faults in the answers' fresh pages (the kernel
        // zeroes each one), which the download would otherwise wait for.
        let _touched = Toucher::start_on(distance, ids);

        // Each cell's queries searched at home; those another cell may beat, listed and packed.
        let homes = on_each(&gpus, |c, gpu| {
            let m: usize = (0..g).map(|i| count(i, c)).sum();
            if m == 0 {
                return Ok(None);
            }
            let s = gpu.stream();
            let mut clock = Lap::new(self.profile, gpu)?;
            let (points, _) = pull_cell(gpu, &gpus, &parts, c, m, false)?;
            // Sorted along the curve: neighbouring threads search neighbouring points (the
            // answers are the same in any order).
            let sorted = sort_slice(gpu, points, &self.shards[c].frame)?;
            let (x, y, z, order) = (sorted.x, sorted.y, sorted.z, sorted.perm);
            let pulled = clock.lap(gpu)?;
            let r2d = s.clone_htod(&[r2]).map_err(cuda_err)?;
            let (mut bd, mut bid) = (gpu.alloc_uninit::<T>(m)?, gpu.alloc_uninit::<u32>(m)?);
            let cfg = threads(m, BLOCK);
            let m32 = m as u32;
            match &self.shards[c].tree {
                Some(t) => nearest_improve::<T>(gpu, cfg, &x, &y, &z, m32, t.args(gpu), &r2d, 1, &mut bd, &mut bid)?,
                None => init_best::<T>(gpu, cfg, &r2d, m32, &mut bd, &mut bid)?,
            }
            let searched = clock.lap(gpu)?;
            if self.profile {
                eprintln!("profile sharded nearest, cell {c}: {m} queries; their pull {pulled:.3} ms, search {searched:.3} ms");
            }
            let sh = &self.shards[c];
            let mut counts = gpu.alloc::<u32>(g)?;
            let mut lists = gpu.alloc_uninit::<u32>(g * m)?;
            rerun_lists::<T>(
                gpu,
                cfg,
                &x,
                &y,
                &z,
                m32,
                &sh.boxes,
                &sh.min_ids,
                g as u32,
                c as u32,
                &bd,
                &bid,
                &mut counts,
                &mut lists,
            )?;
            let counts = s.clone_dtoh(&counts).map_err(cuda_err)?;
            let mut packs = Vec::with_capacity(g);
            for (o, &k) in counts.iter().enumerate() {
                let k = k as usize;
                if k == 0 {
                    packs.push(None);
                    continue;
                }
                let list = lists.slice(o * m..o * m + k);
                let mut pk = Pack::new(gpu, k)?;
                gather_queries::<T>(
                    gpu,
                    threads(k, BLOCK),
                    &x,
                    &y,
                    &z,
                    &bd,
                    &bid,
                    &list,
                    k as u32,
                    &mut pk.x,
                    &mut pk.y,
                    &mut pk.z,
                    &mut pk.bd,
                    &mut pk.bid,
                )?;
                packs.push(Some(pk));
            }
            Ok(Some(Home { bd, bid, lists, m, packs, order }))
        })?;
        phases.mark("home cells searched");

        // Each cell searches the queries other cells sent it, from their bests.
        let answers = on_each(&gpus, |o, gpu| {
            let mut got = Vec::with_capacity(g);
            for (c, h) in homes.iter().enumerate() {
                let Some(pk) = h.as_ref().and_then(|h| h.packs[o].as_ref()) else {
                    got.push(None);
                    continue;
                };
                let k = pk.len;
                let mut mine = Pack::new(gpu, k)?;
                pull(gpu, &mut mine.x, 0, &gpus[c], &pk.x, 0, k)?;
                pull(gpu, &mut mine.y, 0, &gpus[c], &pk.y, 0, k)?;
                pull(gpu, &mut mine.z, 0, &gpus[c], &pk.z, 0, k)?;
                pull(gpu, &mut mine.bd, 0, &gpus[c], &pk.bd, 0, k)?;
                pull(gpu, &mut mine.bid, 0, &gpus[c], &pk.bid, 0, k)?;
                let tree = self.shards[o].tree.as_ref().expect("only cells with points are asked");
                let r2d = gpu.stream().clone_htod(&[r2]).map_err(cuda_err)?;
                let Pack { x, y, z, bd, bid, .. } = &mut mine;
                nearest_improve::<T>(
                    gpu,
                    threads(k, BLOCK),
                    &*x,
                    &*y,
                    &*z,
                    k as u32,
                    tree.args(gpu),
                    &r2d,
                    0,
                    bd,
                    bid,
                )?;
                got.push(Some(mine));
            }
            Ok(got)
        })?;
        phases.mark("re-runs");

        // The answers merged at home, in the order the lists give.
        let mut homes = homes;
        let merged: Vec<_> = homes.iter_mut().map(std::sync::Mutex::new).collect();
        on_each(&gpus, |c, gpu| {
            let mut h = merged[c].lock().unwrap();
            let Some(h) = h.as_mut() else { return Ok(()) };
            for (o, a) in answers.iter().enumerate() {
                let Some(pk) = a[c].as_ref() else { continue };
                let k = pk.len;
                let (mut rbd, mut rbid) = (gpu.alloc_uninit::<T>(k)?, gpu.alloc_uninit::<u32>(k)?);
                pull(gpu, &mut rbd, 0, &gpus[o], &pk.bd, 0, k)?;
                pull(gpu, &mut rbid, 0, &gpus[o], &pk.bid, 0, k)?;
                let list = h.lists.slice(o * h.m..o * h.m + k);
                merge_best::<T>(gpu, threads(k, BLOCK), &list, k as u32, &rbd, &rbid, &mut h.bd, &mut h.bid)?;
            }
            // Back to the order the queries arrived in, which the sources' segments index.
            let (mut bd, mut bid) = (gpu.alloc_uninit::<T>(h.m)?, gpu.alloc_uninit::<u32>(h.m)?);
            unsort_best::<T>(gpu, threads(h.m, BLOCK), &h.order, h.m as u32, &h.bd, &h.bid, &mut bd, &mut bid)?;
            (h.bd, h.bid) = (bd, bid);
            Ok(())
        })?;
        drop(merged);
        drop(answers);
        phases.mark("merged");

        drop(_touched);
        phases.mark("pages touched");

        // Back to the slice each query came from, into the caller's order, and down.
        let outs: Vec<_> = split_rows(distance, ids, n, g).into_iter().map(std::sync::Mutex::new).collect();
        on_each(&gpus, |i, gpu| {
            let Some(p) = &parts[i] else { return Ok(()) };
            let len = p.len;
            let mut clock = Lap::new(self.profile, gpu)?;
            let (mut rbd, mut rbid) = (gpu.alloc_uninit::<T>(len)?, gpu.alloc_uninit::<u32>(len)?);
            for (c, h) in homes.iter().enumerate() {
                let k = p.count(c);
                if k == 0 {
                    continue;
                }
                let h = h.as_ref().expect("a cell with queries has answers");
                let from: usize = (0..i).map(|j| count(j, c)).sum();
                pull(gpu, &mut rbd, p.seg[c], &gpus[c], &h.bd, from, k)?;
                pull(gpu, &mut rbid, p.seg[c], &gpus[c], &h.bid, from, k)?;
            }
            let (mut od2, mut oid) = (gpu.alloc_uninit::<T>(len)?, gpu.alloc_uninit::<u32>(len)?);
            scatter_best::<T>(gpu, threads(len, BLOCK), &p.perm, len as u32, &rbd, &rbid, &mut od2, &mut oid)?;
            let back = clock.lap(gpu)?;
            let mut out = outs[i].lock().unwrap();
            let (d_out, id_out) = &mut *out;
            download_mapped(gpu, &od2, d_out, |d: T| d.sqrt())?;
            download_mapped(gpu, &oid, id_out, &id)?;
            if self.profile {
                eprintln!(
                    "profile sharded nearest, slice {i}: answers back {back:.3} ms, down {:.3} ms",
                    clock.lap(gpu)?
                );
            }
            Ok(())
        })?;
        phases.mark("answers down");
        phases.report();
        Ok(())
    }
}

/// What [`nearest_rows_on_gpu`] answers: query rows in pieces, read one after another.
pub(crate) struct NearestRows<'a, T> {
    pub pieces: &'a [&'a [T]],
    /// Squared search radius (infinite for none).
    pub r2: T,
    /// Queries on the GPU at a time.
    pub chunk: usize,
    pub profile: bool,
}

/// Each query row's nearest point of `tree` on one GPU, from host rows into the caller's
/// memory, each id passed through `id` (`NO_ID` for none; distances infinite there): a chunk
/// of rows at a time goes up as rows, is sorted along the curve of `frame` (neighbouring
/// threads then search neighbouring points), searched, put back in the caller's order and
/// downloaded in place, while a host thread faults in the chunk's fresh output pages. The
/// tree's coordinates must be unscaled (queries needing scaling are refused); the caller
/// holds the GPU and has its context bound.
pub(crate) fn nearest_rows_on_gpu<T: Real, I: Send + Sync>(
    gpu: &Gpu,
    tree: &DeviceTree<T>,
    frame: &CudaSlice<T>,
    job: &NearestRows<'_, T>,
    distance: &mut [MaybeUninit<T>],
    ids: &mut [MaybeUninit<I>],
    id: &(impl Fn(u32) -> I + Sync),
) -> Result<()> {
    let n = rows_in(job.pieces)?;
    assert!(distance.len() == n && ids.len() == n, "one place per query for each answer");
    let s = gpu.stream();
    let r2d = s.clone_htod(&[job.r2]).map_err(cuda_err)?;
    let chunk = job.chunk.max(1);
    let mut start = 0;
    while start < n {
        let end = (start + chunk).min(n);
        let len = end - start;
        let mut clock = Lap::new(job.profile, gpu)?;
        let p = upload_slice(gpu, job.pieces, start, end, Role::Queries)?;
        Scale::default().check_point_queries::<T>(p.magnitudes.unwrap_or(Magnitudes::NONE), Role::Queries)?;
        let up = clock.lap(gpu)?;
        let (d_out, id_out) = (&mut distance[start..end], &mut ids[start..end]);
        let touched = Toucher::start_on(d_out, id_out);
        let sorted = sort_slice(gpu, p, frame)?;
        let sorted_at = clock.lap(gpu)?;
        let (cfg, len32) = (threads(len, BLOCK), len as u32);
        let (mut bd, mut bid) = (gpu.alloc_uninit::<T>(len)?, gpu.alloc_uninit::<u32>(len)?);
        let t = tree.args(gpu);
        nearest_improve::<T>(gpu, cfg, &sorted.x, &sorted.y, &sorted.z, len32, t, &r2d, 1, &mut bd, &mut bid)?;
        drop((sorted.x, sorted.y, sorted.z));
        let (mut od2, mut oid) = (gpu.alloc_uninit::<T>(len)?, gpu.alloc_uninit::<u32>(len)?);
        scatter_best::<T>(gpu, cfg, &sorted.perm, len32, &bd, &bid, &mut od2, &mut oid)?;
        let searched = clock.lap(gpu)?;
        drop(touched);
        let touch_wait = clock.lap(gpu)?;
        download_mapped(gpu, &od2, d_out, |d: T| d.sqrt())?;
        download_mapped(gpu, &oid, id_out, id)?;
        if job.profile {
            eprintln!(
                "profile nearest rows {start}..{end}: up {up:.3} ms, sorted {sorted_at:.3} ms, searched {searched:.3} \
                 ms, pages {touch_wait:.3} ms, down {:.3} ms",
                clock.lap(gpu)?
            );
        }
        start = end;
    }
    Ok(())
}

/// One GPU's time between points of a step, when profiling (each lap waits for the GPU).
struct Lap(Option<std::time::Instant>);

impl Lap {
    fn new(on: bool, gpu: &Gpu) -> Result<Self> {
        if on {
            gpu.synchronize()?;
        }
        Ok(Lap(on.then(std::time::Instant::now)))
    }

    /// Milliseconds since the last lap (0 when not profiling).
    fn lap(&mut self, gpu: &Gpu) -> Result<f64> {
        let Some(t) = self.0 else { return Ok(0.0) };
        gpu.synchronize()?;
        let now = std::time::Instant::now();
        self.0 = Some(now);
        Ok((now - t).as_secs_f64() * 1e3)
    }
}

/// A cell's queries after their home search.
struct Home<T> {
    bd: CudaSlice<T>,
    bid: CudaSlice<u32>,
    /// Per other cell, the queries it may beat (at `o * m`).
    lists: CudaSlice<u32>,
    m: usize,
    /// Per other cell, those queries packed for it.
    packs: Vec<Option<Pack<T>>>,
    /// The queries' sort in their cell: sorted position -> arrival position.
    order: CudaSlice<u32>,
}

/// Queries with their bests, packed for a search in another cell.
struct Pack<T> {
    x: CudaSlice<T>,
    y: CudaSlice<T>,
    z: CudaSlice<T>,
    bd: CudaSlice<T>,
    bid: CudaSlice<u32>,
    len: usize,
}

impl<T: Real> Pack<T> {
    fn new(gpu: &Gpu, len: usize) -> Result<Self> {
        Ok(Pack {
            x: gpu.alloc_uninit(len)?,
            y: gpu.alloc_uninit(len)?,
            z: gpu.alloc_uninit(len)?,
            bd: gpu.alloc_uninit(len)?,
            bid: gpu.alloc_uninit(len)?,
            len,
        })
    }
}

/// Rows in the pieces; each must hold whole rows.
fn rows_in<T>(pieces: &[&[T]]) -> Result<usize> {
    let mut n = 0;
    for p in pieces {
        if p.len() % 3 != 0 {
            return Err(Error::InvalidArgument(format!("{} values are not rows of three", p.len())));
        }
        n += p.len() / 3;
    }
    Ok(n)
}

/// Rows `start..end` of slice i of g.
fn slice_of(n: usize, g: usize, i: usize) -> (usize, usize) {
    (n * i / g, n * (i + 1) / g)
}

/// Rows `s..e` of the pieces, uploaded as columns; a bad row is named by its place in the whole.
fn upload_slice<T: Real>(gpu: &Gpu, pieces: &[&[T]], s: usize, e: usize, role: Role) -> Result<DevicePoints<T>> {
    let mut parts = Vec::new();
    let mut at = 0;
    for p in pieces {
        let rows = p.len() / 3;
        let (a, b) = (s.max(at), e.min(at + rows));
        if a < b {
            parts.push(&p[3 * (a - at)..3 * (b - at)]);
        }
        at += rows;
    }
    upload_row_pieces(gpu, &parts, role).map_err(|e| match e {
        Error::NonFinite { role, index, axis, value } => Error::NonFinite { role, index: index + s, axis, value },
        e => e,
    })
}

/// Each point's key (the top `KEY_BITS` of its Morton code in `frame`) and its index.
fn keys_of<T: Real>(gpu: &Gpu, p: &DevicePoints<T>, frame: &CudaSlice<T>) -> Result<(CudaSlice<u64>, CudaSlice<u32>)> {
    let mut keys = gpu.alloc_uninit::<u64>(p.len)?;
    let mut perm = gpu.alloc_uninit::<u32>(p.len)?;
    let cfg = threads(p.len, BLOCK);
    morton_keys::<T>(gpu, cfg, &p.x, &p.y, &p.z, p.len as u32, frame, 63 - KEY_BITS, &mut keys, &mut perm)?;
    Ok((keys, perm))
}

/// Points sorted by key.
struct SortedPoints<T> {
    x: CudaSlice<T>,
    y: CudaSlice<T>,
    z: CudaSlice<T>,
    /// Sorted position -> position before.
    perm: CudaSlice<u32>,
}

/// Points sorted by their keys in `frame`.
fn sort_slice<T: Real>(gpu: &Gpu, p: DevicePoints<T>, frame: &CudaSlice<T>) -> Result<SortedPoints<T>> {
    let (len, cfg) = (p.len, threads(p.len, BLOCK));
    let (mut keys, mut perm) = keys_of(gpu, &p, frame)?;
    sort_pairs(gpu, &mut keys, &mut perm, len, KEY_BITS)?;
    drop(keys);
    let (mut x, mut y, mut z) = (gpu.alloc_uninit::<T>(len)?, gpu.alloc_uninit::<T>(len)?, gpu.alloc_uninit::<T>(len)?);
    gather_points::<T>(gpu, cfg, &p.x, &p.y, &p.z, &perm, len as u32, &mut x, &mut y, &mut z)?;
    Ok(SortedPoints { x, y, z, perm })
}

/// A slice's points grouped by cell (`cuts` in key space), in their order within each cell,
/// with row numbers `offset + i` where an offset is given. `keys` and `perm` are
/// [`keys_of`]'s.
fn partition<T: Real>(
    gpu: &Gpu,
    p: DevicePoints<T>,
    mut keys: CudaSlice<u64>,
    mut perm: CudaSlice<u32>,
    cuts: &[u64],
    offset: Option<usize>,
) -> Result<Sorted<T>> {
    let (len, cfg) = (p.len, threads(p.len, BLOCK));
    let cells = cuts.len() - 1;
    let s = gpu.stream();
    let cuts_dev = s.clone_htod(cuts).map_err(cuda_err)?;
    cells_of_keys(gpu, cfg, &mut keys, len as u32, &cuts_dev, cells as u32)?;
    // Stable: within a cell, points keep their order (and so their ids' order).
    sort_pairs(gpu, &mut keys, &mut perm, len, crate::runtime::cuda::radix_sort::bits_for(cells))?;
    let (mut x, mut y, mut z) = (gpu.alloc_uninit::<T>(len)?, gpu.alloc_uninit::<T>(len)?, gpu.alloc_uninit::<T>(len)?);
    let gid = match offset {
        Some(o) => {
            let mut gid = gpu.alloc_uninit::<u32>(len)?;
            gather_with_ids::<T>(
                gpu, cfg, &p.x, &p.y, &p.z, &perm, len as u32, o as u32, &mut x, &mut y, &mut z, &mut gid,
            )?;
            Some(gid)
        }
        None => {
            gather_points::<T>(gpu, cfg, &p.x, &p.y, &p.z, &perm, len as u32, &mut x, &mut y, &mut z)?;
            None
        }
    };
    // Where each cell starts: the first position of cell c's index.
    let starts: Vec<u64> = (0..=cells as u64).collect();
    let starts_dev = s.clone_htod(&starts).map_err(cuda_err)?;
    let mut out = gpu.alloc_uninit::<u32>(cells + 1)?;
    lower_bounds(gpu, threads(cells + 1, 32), &keys, len as u32, &starts_dev, (cells + 1) as u32, &mut out)?;
    let seg = s.clone_dtoh(&out).map_err(cuda_err)?.into_iter().map(|v| v as usize).collect();
    Ok(Sorted { x, y, z, gid, perm, seg, len })
}

/// The cells' first keys (and the end): cell c starts at the first bucket before which
/// c/g of all the points lie.
fn cut_buckets<'a>(hists: impl Iterator<Item = &'a [u32]>, n: usize, g: usize) -> Vec<u64> {
    let mut total = vec![0u64; 1 << BUCKET_BITS];
    for h in hists {
        for (t, &v) in total.iter_mut().zip(h) {
            *t += v as u64;
        }
    }
    let shift = KEY_BITS - BUCKET_BITS;
    let mut cuts = vec![0u64];
    let (mut below, mut b) = (0u64, 0usize);
    for c in 1..g {
        let want = (n * c / g) as u64;
        while b < total.len() && below < want {
            below += total[b];
            b += 1;
        }
        cuts.push((b as u64) << shift);
    }
    cuts.push(1u64 << KEY_BITS);
    cuts
}

/// The tree's root box and smallest id.
fn root_box<T: Real>(gpu: &Gpu, tree: &DeviceTree<T>) -> Result<([T; 6], u32)> {
    let s = gpu.stream();
    let one = |c: &CudaSlice<T>| -> Result<T> { Ok(s.clone_dtoh(&c.slice(0..1)).map_err(cuda_err)?[0]) };
    if tree.n == 1 {
        let (x, y, z) = (one(&tree.x)?, one(&tree.y)?, one(&tree.z)?);
        let id = s.clone_dtoh(&tree.id.slice(0..1)).map_err(cuda_err)?[0];
        return Ok(([x, y, z, x, y, z], id));
    }
    let bx = [
        one(&tree.lo[0])?,
        one(&tree.lo[1])?,
        one(&tree.lo[2])?,
        one(&tree.hi[0])?,
        one(&tree.hi[1])?,
        one(&tree.hi[2])?,
    ];
    let id = s.clone_dtoh(&tree.min_id.slice(0..1)).map_err(cuda_err)?[0];
    Ok((bx, id))
}

fn wider(a: Magnitudes, b: Magnitudes) -> Magnitudes {
    Magnitudes { max: a.max.max(b.max), min_nonzero: a.min_nonzero.min(b.min_nonzero) }
}

/// The caller's output cut into the slices' parts.
#[allow(clippy::type_complexity)]
fn split_rows<'a, T, I>(
    mut d: &'a mut [MaybeUninit<T>],
    mut ids: &'a mut [MaybeUninit<I>],
    n: usize,
    g: usize,
) -> Vec<(&'a mut [MaybeUninit<T>], &'a mut [MaybeUninit<I>])> {
    (0..g)
        .map(|i| {
            let (s, e) = slice_of(n, g, i);
            let (a, rest) = std::mem::take(&mut d).split_at_mut(e - s);
            d = rest;
            let (b, rest) = std::mem::take(&mut ids).split_at_mut(e - s);
            ids = rest;
            (a, b)
        })
        .collect()
}

/// Runs `f` for every GPU at once, each on a thread of its own with its context bound, and
/// waits for each GPU's queued work: a barrier.
fn on_each<R: Send>(gpus: &[Arc<Gpu>], f: impl Fn(usize, &Gpu) -> Result<R> + Sync) -> Result<Vec<R>> {
    std::thread::scope(|scope| {
        let f = &f;
        let runs: Vec<_> = gpus
            .iter()
            .enumerate()
            .map(|(i, gpu)| {
                scope.spawn(move || {
                    gpu.stream().context().bind_to_thread().map_err(cuda_err)?;
                    let r = f(i, gpu)?;
                    gpu.synchronize()?;
                    Ok(r)
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
    })
}

/// Each distinct GPU's lock, in ordinal order.
fn lock_all(gpus: &[Arc<Gpu>]) -> Vec<std::sync::MutexGuard<'_, ()>> {
    let mut order: Vec<&Arc<Gpu>> = gpus.iter().collect();
    order.sort_by_key(|g| g.ordinal());
    order.dedup_by_key(|g| g.ordinal());
    order.into_iter().map(|g| g.lock()).collect()
}

/// Cell `c`'s `m` points pulled to `gpu` from every slice (`parts`, on `gpus`), in slice
/// order, with their row numbers where `ids` (the data's slices carry them).
fn pull_cell<T: Real>(
    gpu: &Gpu,
    gpus: &[Arc<Gpu>],
    parts: &[Option<Sorted<T>>],
    c: usize,
    m: usize,
    ids: bool,
) -> Result<(DevicePoints<T>, Option<CudaSlice<u32>>)> {
    let (mut x, mut y, mut z) = (gpu.alloc_uninit::<T>(m)?, gpu.alloc_uninit::<T>(m)?, gpu.alloc_uninit::<T>(m)?);
    let mut gid = if ids { Some(gpu.alloc_uninit::<u32>(m)?) } else { None };
    let mut at = 0;
    for (i, p) in parts.iter().enumerate() {
        let Some(p) = p else { continue };
        let (s, len) = (p.seg[c], p.count(c));
        pull(gpu, &mut x, at, &gpus[i], &p.x, s, len)?;
        pull(gpu, &mut y, at, &gpus[i], &p.y, s, len)?;
        pull(gpu, &mut z, at, &gpus[i], &p.z, s, len)?;
        if let Some(g) = &mut gid {
            pull(gpu, g, at, &gpus[i], p.gid.as_ref().expect("data carry ids"), s, len)?;
        }
        at += len;
    }
    Ok((DevicePoints { x, y, z, len: m, bounds: None, magnitudes: None }, gid))
}

/// `len` values at `src_at` of `src` (on `src_gpu`) to `dst_at` of `dst` (on `gpu`), queued on
/// `gpu`'s stream. The source must be complete (a barrier since it was written) and live until
/// `gpu`'s stream has run the copy.
fn pull<V: DeviceRepr>(
    gpu: &Gpu,
    dst: &mut CudaSlice<V>,
    dst_at: usize,
    src_gpu: &Gpu,
    src: &CudaSlice<V>,
    src_at: usize,
    len: usize,
) -> Result<()> {
    if len == 0 {
        return Ok(());
    }
    assert!(dst_at + len <= dst.len() && src_at + len <= src.len(), "a pull stays inside its buffers");
    let size = std::mem::size_of::<V>();
    let stream = gpu.stream();
    let (d, _dg) = dst.device_ptr_mut(stream);
    let (s, _sg) = src.device_ptr(src_gpu.stream());
    let (d, s) = (d + (dst_at * size) as u64, s + (src_at * size) as u64);
    // SAFETY: both ranges lie inside their buffers (asserted); the caller keeps the source
    // alive and complete until the stream has run the copy.
    unsafe {
        if gpu.ordinal() == src_gpu.ordinal() {
            sys::cuMemcpyDtoDAsync_v2(d, s, len * size, stream.cu_stream())
        } else {
            let (dc, sc) = (stream.context().cu_ctx(), src_gpu.stream().context().cu_ctx());
            sys::cuMemcpyPeerAsync(d, dc, s, sc, len * size, stream.cu_stream())
        }
    }
    .result()
    .map_err(cuda_err)
}

/// Lets every GPU of the set read the others' memory (their memory pools included) where the
/// hardware allows; elsewhere peer copies go through the host, slower but the same.
fn enable_peer_access(gpus: &[Arc<Gpu>]) -> Result<()> {
    for a in gpus {
        for b in gpus {
            if a.ordinal() == b.ordinal() {
                continue;
            }
            let (ca, cb) = (a.stream().context(), b.stream().context());
            let mut can = 0;
            // SAFETY: out-parameter queries of two devices of this process.
            unsafe { sys::cuDeviceCanAccessPeer(&mut can, ca.cu_device(), cb.cu_device()) }
                .result()
                .map_err(cuda_err)?;
            if can == 0 {
                continue;
            }
            ca.bind_to_thread().map_err(cuda_err)?;
            // SAFETY: a's context is current; b's is live for the process.
            match unsafe { sys::cuCtxEnablePeerAccess(cb.cu_ctx(), 0) } {
                sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {}
                r => return Err(cuda_err(r.result().unwrap_err())),
            }
            // Stream-ordered allocations are not covered by peer access: their pool grants it.
            let pool = device_pool(cb)?;
            let desc = sys::CUmemAccessDesc {
                location: sys::CUmemLocation {
                    type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                    id: a.ordinal() as i32,
                },
                flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
            };
            // SAFETY: b's own pool; one descriptor.
            unsafe { sys::cuMemPoolSetAccess(pool, &desc, 1) }.result().map_err(cuda_err)?;
        }
    }
    Ok(())
}
