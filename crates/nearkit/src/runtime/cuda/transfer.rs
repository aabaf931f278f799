//! Copies between device memory and the caller's host memory at the speed of the bus.
//!
//! A copy from or to pageable memory (a `Vec`) runs at a fraction of the bus's rate: the
//! driver stages it through small pinned buffers of its own, one at a time. Here the GPU keeps
//! two large pinned staging buffers and the copy alternates between them: while the GPU fills
//! (or empties) one, the host's threads copy the other out (or in), in parallel. Results go
//! straight into their final, uninitialised place: no intermediate vector, no zero-filling.

use std::mem::MaybeUninit;

use cudarc::driver::{sys, CudaEvent, DevicePtr, DevicePtrMut, DeviceRepr, PinnedHostSlice};
use rayon::prelude::*;

use super::{cuda_err, Gpu};
use crate::error::Result;

/// Bytes per staging buffer. Large enough that a piece's fixed costs (a launch, an event)
/// vanish, small enough that the first piece's wait is short.
const STAGE_BYTES: usize = 16 << 20;

/// Downloads smaller than this go straight through the driver.
const DIRECT_BYTES: usize = 1 << 20;

/// Uploads smaller than this go straight through the driver.
const DIRECT_UP_BYTES: usize = 1 << 20;

/// The host copies of a download's piece are split into parts of this many bytes, one per
/// task: a task's start (waking a thread) costs about as much as copying a few hundred KB, so
/// a 12 MB copy in parts of 1 MB ran a quarter faster than in parts of 256 KB (BENCHMARKS.md,
/// session 48).
const PART_BYTES: usize = 1 << 20;

/// The parts of an upload's copy into staging memory. Streaming stores (`copy_streaming`) made
/// these copies fast enough that smaller parts, which spread a few MB over every thread, win:
/// 1M points checked and up in 0.39 ms in parts of 128–256 KB, 0.49 ms in parts of 1 MB
/// (BENCHMARKS.md, session 49). A multiple of every item size.
const UP_PART_BYTES: usize = 256 << 10;

/// Two pinned host buffers, and the event that marks each one's last transfer.
pub(crate) struct Staging {
    bufs: [PinnedHostSlice<u8>; 2],
    done: [Option<CudaEvent>; 2],
    /// The buffer the next piece takes: consecutive transfers (the columns of a point set)
    /// alternate too, so that each one's host copy overlaps the last one's transfer.
    next: usize,
}

impl Staging {
    pub(crate) fn new(gpu: &Gpu) -> Result<Self> {
        // Not write-combined: the host reads what downloads leave here.
        // SAFETY: every byte is written (by a transfer or a host copy) before it is read.
        let alloc = || unsafe { gpu.stream().context().alloc_pinned_with_flags::<u8>(STAGE_BYTES, 0) };
        Ok(Staging { bufs: [alloc().map_err(cuda_err)?, alloc().map_err(cuda_err)?], done: [None, None], next: 0 })
    }

    /// The buffer for the next piece.
    fn take(&mut self) -> usize {
        self.next ^= 1;
        self.next ^ 1
    }

    /// Waits for buffer `b`'s last transfer.
    fn wait(&mut self, b: usize) -> Result<()> {
        if let Some(e) = self.done[b].take() {
            e.synchronize().map_err(cuda_err)?;
        }
        Ok(())
    }

    /// Buffer `b` as `len` values of T (it holds at least that many bytes).
    fn ptr<T>(&mut self, b: usize) -> Result<*mut T> {
        // The buffers' own events are never recorded (we pass raw pointers), so this does not wait.
        Ok(self.bufs[b].as_mut_ptr().map_err(cuda_err)? as *mut T)
    }
}

/// A raw pointer that may cross to rayon's threads (each task touches its own part).
struct SendPtr<T>(*mut T);
// By hand: a pointer copies whatever it points to (the derive would ask `T: Copy`).
impl<T> Clone for SendPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SendPtr<T> {}
// SAFETY: tasks write disjoint ranges; the buffer outlives them (`par_*` joins before return).
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}

impl<T> SendPtr<T> {
    /// The pointer (a method, so that closures capture the whole `SendPtr`).
    fn get(self) -> *mut T {
        self.0
    }
}

/// The bytes of each part when a download's piece of `bytes` is copied out: up to
/// `PART_BYTES`, but small enough that every thread takes a part (a 4 MB piece in 1 MB parts
/// kept 4 of 16 threads busy).
fn down_part_bytes(bytes: usize) -> usize {
    (bytes / rayon::current_num_threads().max(1)).clamp(64 << 10, PART_BYTES) / 64 * 64
}

/// `len` values from `src` to `dst`, by parts in parallel.
fn copy_parallel<T: Copy>(src: SendPtr<T>, dst: SendPtr<T>, len: usize) {
    let size = std::mem::size_of::<T>().max(1);
    let part = (down_part_bytes(len * size) / size).max(1);
    (0..len.div_ceil(part)).into_par_iter().for_each(|p| {
        let (s, e) = (p * part, ((p + 1) * part).min(len));
        // SAFETY: both ranges lie inside their buffers and parts do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(src.get().add(s), dst.get().add(s), e - s) };
    });
}

/// Copies `bytes` from `src` to `dst` (which must not overlap) with non-temporal stores where
/// the CPU has AVX2. For a staging buffer the device reads next, ordinary stores cost twice:
/// each destination line is first read into the cache, and the device's read then finds it
/// dirty there. Streaming stores skip both (a staged upload of 12 MB went from 0.72 to 0.41
/// ms on the H200 machine: BENCHMARKS.md, session 49).
///
/// # Safety
/// Both ranges are valid for `bytes` bytes and do not overlap.
pub(crate) unsafe fn copy_streaming(src: *const u8, dst: *mut u8, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 is present; the ranges are the caller's.
        return unsafe { copy_streaming_avx2(src, dst, bytes) };
    }
    // SAFETY: as the caller promises.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, bytes) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn copy_streaming_avx2(src: *const u8, dst: *mut u8, bytes: usize) {
    use std::arch::x86_64::*;
    // SAFETY (whole body): every access lies inside the two ranges; streaming stores need
    // 32-byte aligned destinations, which the head's plain copy reaches.
    unsafe {
        let head = dst.align_offset(32).min(bytes);
        std::ptr::copy_nonoverlapping(src, dst, head);
        let mut i = head;
        while i + 128 <= bytes {
            let a = _mm256_loadu_si256(src.add(i) as *const __m256i);
            let b = _mm256_loadu_si256(src.add(i + 32) as *const __m256i);
            let c = _mm256_loadu_si256(src.add(i + 64) as *const __m256i);
            let d = _mm256_loadu_si256(src.add(i + 96) as *const __m256i);
            _mm256_stream_si256(dst.add(i) as *mut __m256i, a);
            _mm256_stream_si256(dst.add(i + 32) as *mut __m256i, b);
            _mm256_stream_si256(dst.add(i + 64) as *mut __m256i, c);
            _mm256_stream_si256(dst.add(i + 96) as *mut __m256i, d);
            i += 128;
        }
        while i + 32 <= bytes {
            _mm256_stream_si256(dst.add(i) as *mut __m256i, _mm256_loadu_si256(src.add(i) as *const __m256i));
            i += 32;
        }
        std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), bytes - i);
        // The stores are weakly ordered: fence them before the device is told to read.
        _mm_sfence();
    }
}

/// Where a download's destination lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HostMemory {
    /// Ordinary (pageable) memory: large copies go through the staging buffers.
    Pageable,
    /// Page-locked memory: the device writes it directly.
    Pinned,
}

/// Copies the device values `src` into `dst` (which may be uninitialised; all of it is written).
pub(crate) fn download<T, S>(gpu: &Gpu, src: &S, dst: &mut [MaybeUninit<T>]) -> Result<()>
where
    T: DeviceRepr + Copy + Send + Sync,
    S: DevicePtr<T>,
{
    download_to(gpu, src, dst, HostMemory::Pageable)
}

/// [`download`] into memory of the given kind.
pub(crate) fn download_to<T, S>(gpu: &Gpu, src: &S, dst: &mut [MaybeUninit<T>], memory: HostMemory) -> Result<()>
where
    T: DeviceRepr + Copy + Send + Sync,
    S: DevicePtr<T>,
{
    assert_eq!(src.len(), dst.len(), "a download fills its destination exactly");
    let stream = gpu.stream();
    let (base, _sync) = src.device_ptr(stream);
    let size = std::mem::size_of::<T>();
    let n = dst.len();
    if n * size <= DIRECT_BYTES || memory == HostMemory::Pinned {
        // SAFETY: `dst` holds n values; the copy completes before the stream sync below.
        unsafe { sys::cuMemcpyDtoHAsync_v2(dst.as_mut_ptr() as *mut _, base, n * size, stream.cu_stream()) }
            .result()
            .map_err(cuda_err)?;
        return stream.synchronize().map_err(cuda_err);
    }
    let dst_ptr = SendPtr(dst.as_mut_ptr() as *mut T);
    through_staging(gpu, base, n, size, |from, s, e| {
        // SAFETY: the piece's e - s values are at `from`; they go to s..e of `dst`.
        copy_parallel(SendPtr(from as *mut T), SendPtr(unsafe { dst_ptr.0.add(s) }), e - s)
    })
}

/// Downloads into page-locked host memory on a stream of their own, so that they overlap the
/// work queued after them on the GPU's stream: each copy starts once the work queued before
/// it is done. The sources must live until [`Overlapped::finish`] returns.
pub(crate) struct Overlapped {
    copies: std::sync::Arc<cudarc::driver::CudaStream>,
}

impl Overlapped {
    pub(crate) fn new(gpu: &Gpu) -> Result<Self> {
        Ok(Overlapped { copies: gpu.stream().fork().map_err(cuda_err)? })
    }

    /// Queues the copy of `src` into `dst` (page-locked, of the same length) after the work
    /// queued on the GPU's stream so far.
    pub(crate) fn download<T: DeviceRepr, S: DevicePtr<T>>(
        &self,
        gpu: &Gpu,
        src: &S,
        dst: &mut [MaybeUninit<T>],
    ) -> Result<()> {
        assert_eq!(src.len(), dst.len(), "a download fills its destination exactly");
        let ready = gpu.stream().record_event(None).map_err(cuda_err)?;
        self.copies.wait(&ready).map_err(cuda_err)?;
        let (base, _sync) = src.device_ptr(&self.copies);
        // SAFETY: `dst` is page-locked and holds the values; the caller keeps `src` alive and
        // `dst` untouched until `finish`.
        unsafe {
            sys::cuMemcpyDtoHAsync_v2(
                dst.as_mut_ptr() as *mut _,
                base,
                std::mem::size_of_val(dst),
                self.copies.cu_stream(),
            )
        }
        .result()
        .map_err(cuda_err)
    }

    /// Waits for every queued copy.
    pub(crate) fn finish(self) -> Result<()> {
        self.copies.synchronize().map_err(cuda_err)
    }
}

impl Drop for Overlapped {
    /// On every path (an error too), no copy outlives this: its memory may go right after.
    fn drop(&mut self) {
        let _ = self.copies.synchronize();
    }
}

/// Copies `n` values of `size` bytes from device address `base` through the staging buffers,
/// a piece at a time with the next one's copy in flight: `take(from, s, e)` hands on values
/// `s..e`, which lie at `from` (valid until `take` returns).
fn through_staging(
    gpu: &Gpu,
    base: u64,
    n: usize,
    size: usize,
    mut take: impl FnMut(*const u8, usize, usize),
) -> Result<()> {
    let stream = gpu.stream();
    let mut staging = gpu.staging()?;
    let piece = STAGE_BYTES / size;
    let pieces = n.div_ceil(piece);
    let range = |j: usize| (j * piece, ((j + 1) * piece).min(n));
    let enqueue = |staging: &mut Staging, j: usize| -> Result<usize> {
        let (b, (s, e)) = (staging.take(), range(j));
        staging.wait(b)?;
        let to = staging.ptr::<u8>(b)?;
        // SAFETY: the buffer holds STAGE_BYTES >= (e - s) values; its previous transfer is done.
        unsafe {
            sys::cuMemcpyDtoHAsync_v2(to as *mut _, base + (s * size) as u64, (e - s) * size, stream.cu_stream())
        }
        .result()
        .map_err(cuda_err)?;
        staging.done[b] = Some(stream.record_event(None).map_err(cuda_err)?);
        Ok(b)
    };
    let mut b = enqueue(&mut staging, 0)?;
    for j in 0..pieces {
        let next = if j + 1 < pieces { Some(enqueue(&mut staging, j + 1)?) } else { None };
        let (s, e) = range(j);
        staging.wait(b)?;
        take(staging.ptr::<u8>(b)? as *const u8, s, e);
        b = next.unwrap_or(b);
    }
    Ok(())
}

/// One column of a transfer in pieces: `size` bytes an item, at device address `device` and
/// host address `host` (the caller's memory, which outlives the call; a download's may be
/// uninitialised; an upload's is read before the call returns).
#[derive(Clone, Copy)]
pub(crate) struct Column {
    pub size: usize,
    pub device: u64,
    pub host: usize,
}

/// Copies of `bytes` from `src` to `dst` (addresses), all in one parallel loop by parts.
fn copy_all_parallel(copies: &[(usize, usize, usize)]) {
    let parts: Vec<(usize, usize, usize)> = copies
        .iter()
        .flat_map(|&(src, dst, bytes)| {
            let part = down_part_bytes(bytes);
            (0..bytes.div_ceil(part)).map(move |p| {
                let (s, e) = (p * part, ((p + 1) * part).min(bytes));
                (src + s, dst + s, e - s)
            })
        })
        .collect();
    parts.into_par_iter().for_each(|(src, dst, bytes)| {
        // SAFETY: the callers' columns lie inside their buffers and no two parts overlap.
        unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, bytes) };
    });
}

/// Copies `n` items of each of `columns` from the device into host memory (which may be
/// uninitialised): every column is cut into pieces of a quarter of a staging buffer, and the
/// eight quarters of the two buffers are filled in turn, so that while the host copies one
/// piece out the bus brings the next seven.
pub(crate) fn download_columns(gpu: &Gpu, n: usize, columns: &[Column]) -> Result<()> {
    const SLOT: usize = STAGE_BYTES / 4;
    const SLOTS: usize = 8;
    let stream = gpu.stream();
    let mut staging = gpu.staging()?;
    staging.wait(0)?;
    staging.wait(1)?;
    let bufs = [staging.ptr::<u8>(0)? as usize, staging.ptr::<u8>(1)? as usize];
    let slot = |k: usize| bufs[(k % SLOTS) / 4] + (k % 4) * SLOT;
    // (column, first byte, bytes)
    let pieces: Vec<(usize, usize, usize)> = columns
        .iter()
        .enumerate()
        .flat_map(|(i, c)| {
            let total = n * c.size;
            (0..total.div_ceil(SLOT)).map(move |p| (i, p * SLOT, SLOT.min(total - p * SLOT)))
        })
        .collect();
    let mut done: std::collections::VecDeque<CudaEvent> = std::collections::VecDeque::new();
    let enqueue = |k: usize, done: &mut std::collections::VecDeque<CudaEvent>| -> Result<()> {
        let (i, at, bytes) = pieces[k];
        // SAFETY: the slot holds SLOT >= bytes; the host copied its last piece out already.
        unsafe {
            sys::cuMemcpyDtoHAsync_v2(slot(k) as *mut _, columns[i].device + at as u64, bytes, stream.cu_stream())
        }
        .result()
        .map_err(cuda_err)?;
        done.push_back(stream.record_event(None).map_err(cuda_err)?);
        Ok(())
    };
    for k in 0..pieces.len().min(SLOTS) {
        enqueue(k, &mut done)?;
    }
    for k in 0..pieces.len() {
        done.pop_front().expect("one event per piece").synchronize().map_err(cuda_err)?;
        let (i, at, bytes) = pieces[k];
        copy_all_parallel(&[(slot(k), columns[i].host + at, bytes)]);
        if k + SLOTS < pieces.len() {
            enqueue(k + SLOTS, &mut done)?;
        }
    }
    Ok(())
}

/// `len` values of `src` mapped by `f` into `dst`, by parts in parallel.
fn map_parallel<S: Copy, D>(src: SendPtr<S>, dst: SendPtr<D>, len: usize, f: &(impl Fn(S) -> D + Sync)) {
    let part = (PART_BYTES / std::mem::size_of::<D>().max(1)).max(1);
    (0..len.div_ceil(part)).into_par_iter().for_each(|p| {
        let (s, e) = (p * part, ((p + 1) * part).min(len));
        for i in s..e {
            // SAFETY: both ranges lie inside their buffers and parts do not overlap.
            unsafe { dst.get().add(i).write(f(src.get().add(i).read())) };
        }
    });
}

/// Copies the device values `src` into `dst`, each mapped by `f` on the way (a widening of
/// ids, say): through the staging buffers, the mapping done by the host's copy out of them,
/// so it costs no pass of its own.
pub(crate) fn download_mapped<S, D, P>(
    gpu: &Gpu,
    src: &P,
    dst: &mut [MaybeUninit<D>],
    f: impl Fn(S) -> D + Sync,
) -> Result<()>
where
    S: DeviceRepr + Copy + Send + Sync,
    D: Send + Sync,
    P: DevicePtr<S>,
{
    assert_eq!(src.len(), dst.len(), "a download fills its destination exactly");
    if dst.is_empty() {
        return Ok(());
    }
    let stream = gpu.stream();
    let (base, _sync) = src.device_ptr(stream);
    let size = std::mem::size_of::<S>();
    let n = dst.len();
    let dst_ptr = SendPtr(dst.as_mut_ptr() as *mut D);
    through_staging(gpu, base, n, size, |from, s, e| {
        // SAFETY: the piece's e - s values are at `from`; they go to s..e of `dst`.
        map_parallel(SendPtr(from as *mut S), SendPtr(unsafe { dst_ptr.0.add(s) }), e - s, &f)
    })
}

/// Copies `src` into the device values `dst` (of the same length).
pub(crate) fn upload<T, D>(gpu: &Gpu, src: &[T], dst: &mut D) -> Result<()>
where
    T: DeviceRepr + Copy + Send + Sync,
    D: DevicePtrMut<T>,
{
    assert_eq!(src.len(), dst.len(), "an upload fills its destination exactly");
    let (base, _sync) = dst.device_ptr_mut(gpu.stream());
    upload_columns(gpu, src.len(), &[host_column(src, base)])
}

/// A host slice and its device destination as a one-column transfer.
fn host_column<T>(src: &[T], device: u64) -> Column {
    Column { size: std::mem::size_of::<T>(), device, host: src.as_ptr() as usize }
}

/// Copies `n` items of each of `columns` from the caller's host memory to the device through
/// the staging buffers: the columns' bytes fill a buffer one after another, the host copies
/// every part of a buffer-full in one parallel loop (one start of the threads for all the
/// columns, where a column at a time started them three times), and each column's segment in
/// it goes up by one transfer while the host fills the other buffer. Uploads of a megabyte or
/// less in all go straight through the driver.
pub(crate) fn upload_columns(gpu: &Gpu, n: usize, columns: &[Column]) -> Result<()> {
    upload_columns_visited(gpu, n, columns, |_, _, _| ()).map(drop)
}

/// [`upload_columns`], each part of a column also handed, right after its copy (while it is
/// in the cache), to `visit(column, host address, bytes)`, whose results come back with their
/// column's index, in no particular order: a check of the values costs no pass of its own.
/// Parts hold whole items.
pub(crate) fn upload_columns_visited<V: Send>(
    gpu: &Gpu,
    n: usize,
    columns: &[Column],
    visit: impl Fn(usize, usize, usize) -> V + Sync,
) -> Result<Vec<(usize, V)>> {
    let stream = gpu.stream();
    let total: usize = columns.iter().map(|c| n * c.size).sum();
    if total <= DIRECT_UP_BYTES {
        let mut seen = Vec::new();
        for (i, c) in columns.iter().enumerate().filter(|(_, c)| n * c.size > 0) {
            // SAFETY: pageable source of n items: the driver has copied it out when the call returns.
            unsafe { sys::cuMemcpyHtoDAsync_v2(c.device, c.host as *const _, n * c.size, stream.cu_stream()) }
                .result()
                .map_err(cuda_err)?;
            seen.push((i, visit(i, c.host, n * c.size)));
        }
        return Ok(seen);
    }
    staged_columns(gpu, n, columns, visit)
}

/// [`upload_columns_visited`] through the staging buffers, whatever the size.
fn staged_columns<V: Send>(
    gpu: &Gpu,
    n: usize,
    columns: &[Column],
    visit: impl Fn(usize, usize, usize) -> V + Sync,
) -> Result<Vec<(usize, V)>> {
    let stream = gpu.stream();
    // (column, first byte, bytes, place in its buffer) of each segment, a buffer-full a round.
    let mut rounds: Vec<Vec<(usize, usize, usize, usize)>> = vec![Vec::new()];
    let mut filled = 0;
    for (i, c) in columns.iter().enumerate() {
        let (bytes, mut at) = (n * c.size, 0);
        while at < bytes {
            // Whole items only: a segment never splits one across buffers.
            let room = (STAGE_BYTES - filled) / c.size * c.size;
            if room == 0 {
                rounds.push(Vec::new());
                filled = 0;
                continue;
            }
            let len = room.min(bytes - at);
            rounds.last_mut().expect("one round at least").push((i, at, len, filled));
            (at, filled) = (at + len, filled + len);
        }
    }
    let mut seen = Vec::new();
    let mut staging = gpu.staging()?;
    for round in rounds.iter().filter(|r| !r.is_empty()) {
        let b = staging.take();
        // The host fills this buffer while the GPU uploads the other.
        staging.wait(b)?;
        let to = staging.ptr::<u8>(b)? as usize;
        // (column, source, destination, bytes) of every part; UP_PART_BYTES is a multiple of
        // every item size, so parts hold whole items.
        let parts: Vec<(usize, usize, usize, usize)> = round
            .iter()
            .flat_map(|&(i, at, len, off)| {
                let host = columns[i].host + at;
                (0..len.div_ceil(UP_PART_BYTES)).map(move |p| {
                    let (s, e) = (p * UP_PART_BYTES, ((p + 1) * UP_PART_BYTES).min(len));
                    (i, host + s, to + off + s, e - s)
                })
            })
            .collect();
        let visited: Vec<(usize, V)> = parts
            .into_par_iter()
            .map(|(i, src, dst, bytes)| {
                // SAFETY: the caller's column and the staging buffer hold these bytes; no two
                // parts overlap.
                unsafe { copy_streaming(src as *const u8, dst as *mut u8, bytes) };
                (i, visit(i, src, bytes))
            })
            .collect();
        seen.extend(visited);
        for &(i, at, len, off) in round {
            // SAFETY: the buffer holds the segment; it is not written again before this
            // round's event.
            unsafe {
                sys::cuMemcpyHtoDAsync_v2(
                    columns[i].device + at as u64,
                    (to + off) as *const _,
                    len,
                    stream.cu_stream(),
                )
            }
            .result()
            .map_err(cuda_err)?;
        }
        staging.done[b] = Some(stream.record_event(None).map_err(cuda_err)?);
    }
    // The staging buffers are reused by the next transfer, which waits for these events.
    Ok(seen)
}

/// A vector of `n` values filled from the device values `src`.
pub(crate) fn download_vec<T, S>(gpu: &Gpu, src: &S) -> Result<Vec<T>>
where
    T: DeviceRepr + Copy + Send + Sync,
    S: DevicePtr<T>,
{
    let mut v = crate::runtime::cpu::big_vec::<T>(src.len());
    download(gpu, src, &mut v.spare_capacity_mut()[..src.len()])?;
    // SAFETY: `download` wrote all `src.len()` values.
    unsafe { v.set_len(src.len()) };
    Ok(v)
}

/// What moving `bytes` across the bus costs on this machine, measured now: the floor an
/// end-to-end query's transfers cannot beat, and a plain download into fresh host memory
/// (what a result in a new `Vec` costs without staging).
#[derive(Clone, Copy, Debug)]
pub struct BusFloor {
    /// The bytes moved.
    pub bytes: usize,
    /// Device to pinned host memory.
    pub pinned_down: std::time::Duration,
    /// Pinned host memory to device.
    pub pinned_up: std::time::Duration,
    /// Device to a fresh (pageable, never touched) host vector, through the driver.
    pub fresh_down: std::time::Duration,
    /// A host vector (touched) to the device, through the driver.
    pub plain_up: std::time::Duration,
    /// A host vector (touched) to the device, through nearkit's staging buffers.
    pub staged_up: std::time::Duration,
    /// Device to a fresh host vector, as nearkit downloads.
    pub staged_down: std::time::Duration,
    /// Device to a fresh host vector whose pages are first touched in parallel, then
    /// page-locked for the copy (`cuMemHostRegister`): the alternative to staging.
    pub registered_down: std::time::Duration,
}

pub(crate) fn measure_bus(gpu: &Gpu, bytes: usize) -> Result<BusFloor> {
    use std::time::Instant;
    let bytes = bytes.max(1);
    let s = gpu.stream();
    let dev = gpu.alloc::<u8>(bytes)?;
    // SAFETY: written by the first transfer before anything reads it.
    let mut pinned = unsafe { s.context().alloc_pinned_with_flags::<u8>(bytes, 0) }.map_err(cuda_err)?;
    let mut dev2 = gpu.alloc::<u8>(bytes)?;
    // Warm: page-lock and map once, so that only the copies are timed.
    s.memcpy_dtoh(&dev, &mut pinned).map_err(cuda_err)?;
    s.synchronize().map_err(cuda_err)?;
    let t = Instant::now();
    s.memcpy_dtoh(&dev, &mut pinned).map_err(cuda_err)?;
    s.synchronize().map_err(cuda_err)?;
    let pinned_down = t.elapsed();
    let t = Instant::now();
    s.memcpy_htod(&pinned, &mut dev2).map_err(cuda_err)?;
    s.synchronize().map_err(cuda_err)?;
    let pinned_up = t.elapsed();
    let t = Instant::now();
    let fresh = s.clone_dtoh(&dev).map_err(cuda_err)?;
    let fresh_down = t.elapsed();
    let t = Instant::now();
    s.memcpy_htod(&fresh, &mut dev2).map_err(cuda_err)?;
    s.synchronize().map_err(cuda_err)?;
    let plain_up = t.elapsed();
    let t = Instant::now();
    staged_columns(gpu, bytes, &[host_column(&fresh, dev2.device_ptr_mut(s).0)], |_, _, _| ())?;
    s.synchronize().map_err(cuda_err)?;
    let staged_up = t.elapsed();
    drop(fresh);
    let t = Instant::now();
    let staged = download_vec(gpu, &dev)?;
    let staged_down = t.elapsed();
    drop(staged);
    let t = Instant::now();
    let registered = download_registered(gpu, &dev)?;
    let registered_down = t.elapsed();
    drop(registered);
    Ok(BusFloor { bytes, pinned_down, pinned_up, fresh_down, plain_up, staged_up, staged_down, registered_down })
}

/// A download into fresh memory by page-locking the destination itself: its pages are
/// touched in parallel (the kernel zeroes them on the threads that touch), registered, and
/// the device writes them directly.
fn download_registered<T, S>(gpu: &Gpu, src: &S) -> Result<Vec<T>>
where
    T: DeviceRepr + Copy + Send + Sync,
    S: DevicePtr<T>,
{
    let n = src.len();
    let mut v = crate::runtime::cpu::big_vec::<T>(n);
    let bytes = n * std::mem::size_of::<T>();
    let base = SendPtr(v.as_mut_ptr() as *mut u8);
    (0..bytes.div_ceil(PART_BYTES)).into_par_iter().for_each(|p| {
        let (s, e) = (p * PART_BYTES, ((p + 1) * PART_BYTES).min(bytes));
        // SAFETY: inside the allocation; one write per 4 KiB page faults it in.
        (s..e).step_by(4096).for_each(|i| unsafe { base.get().add(i).write_volatile(0) });
    });
    let stream = gpu.stream();
    let (dptr, _sync) = src.device_ptr(stream);
    // SAFETY: the range is our allocation; it is unregistered before the vector is returned.
    unsafe {
        sys::cuMemHostRegister_v2(base.get() as *mut _, bytes, 0).result().map_err(cuda_err)?;
        let copied = sys::cuMemcpyDtoHAsync_v2(base.get() as *mut _, dptr, bytes, stream.cu_stream()).result();
        let synced = stream.synchronize();
        sys::cuMemHostUnregister(base.get() as *mut _).result().map_err(cuda_err)?;
        copied.map_err(cuda_err)?;
        synced.map_err(cuda_err)?;
        v.set_len(n);
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    /// Streaming copies at every alignment of source and destination, with heads and tails.
    #[test]
    fn copy_streaming_copies_every_byte() {
        let src: Vec<u8> = (0..5000u32).map(|i| (i * 31 + 7) as u8).collect();
        for (s, d, len) in [(0, 0, 0), (1, 0, 1), (0, 3, 31), (5, 9, 200), (3, 17, 4096), (31, 1, 4900)] {
            let mut dst = vec![0xAAu8; 5000];
            // SAFETY: both ranges lie inside their vectors, which do not overlap.
            unsafe { super::copy_streaming(src.as_ptr().add(s), dst.as_mut_ptr().add(d), len) };
            assert_eq!(&dst[d..d + len], &src[s..s + len], "source {s}, destination {d}, {len} bytes");
            assert!(dst[..d].iter().chain(&dst[d + len..]).all(|&b| b == 0xAA), "only the range is written");
        }
    }
}
