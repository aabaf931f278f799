//! Launches radix_sort.cu: device-wide stable sort of (u64 key, u32 value) pairs, exclusive
//! scans, and the gathers that go with them.

use cudarc::driver::CudaSlice;

use super::launch::{kernels, In, Out};
use super::{threads, Gpu, COMMON, LOOKBACK};
use crate::error::Result;

/// Threads and keys per thread of a sort tile.
const SORT_THREADS: usize = 256;
const SORT_ITEMS: usize = 16;
const SORT_TILE: usize = SORT_THREADS * SORT_ITEMS;
/// Threads and values per thread of a scan tile.
const SCAN_THREADS: usize = 1024;
const SCAN_ITEMS: usize = 4;
const SCAN_TILE: usize = SCAN_THREADS * SCAN_ITEMS;
/// Up to this many elements one block scans tile after tile; beyond, tiles run in parallel.
const SINGLE_BLOCK_SCAN: usize = SCAN_TILE * 2;

static RADIX_SORT: CudaSource = CudaSource {
    file: "radix_sort.cu",
    text: include_str!("radix_sort.cu"),
    constants: || {
        vec![
            ("SORT_THREADS", SORT_THREADS.to_string()),
            ("SORT_ITEMS", SORT_ITEMS.to_string()),
            ("SCAN_THREADS", SCAN_THREADS.to_string()),
            ("SCAN_ITEMS", SCAN_ITEMS.to_string()),
        ]
    },
    structs: Vec::new,
};

use super::CudaSource;

kernels! {
    module KERNELS = "sort", [&COMMON, &LOOKBACK, &RADIX_SORT];
    /// Every pass's digit counts: `hist[p * 256 + d]` += the keys whose digit p is d.
    fn radix_histograms(keys: In<u64>, n: u32, passes: u32, hist: Out<u32>);
    /// One pass: each tile sorted by digit `pass` (stable), its keys' places found by
    /// decoupled look-back through `state`, and scattered.
    fn radix_onesweep(
        keys_in: In<u64>,
        vals_in: In<u32>,
        keys_out: Out<u64>,
        vals_out: Out<u32>,
        n: u32,
        pass: u32,
        hist: In<u32>,
        state: Out<u64>,
    );
    /// Exclusive scan, tiles in parallel (decoupled look-back through `state`).
    fn scan_lookback(data: Out<u32>, n: u32, state: Out<u64>);
    /// Exclusive scan by one block.
    fn scan_single_block(data: Out<u32>, n: u32);
    fn gather_u64(source: In<u64>, perm: In<u32>, n: u32, keys: Out<u64>);
    fn gather_u32_as_u64(source: In<u32>, perm: In<u32>, n: u32, keys: Out<u64>);
    /// `v[i] = i`.
    fn iota_u32(v: Out<u32>, n: u32);
}

/// Exclusive prefix sum of the first `n` entries of `data`, in place.
pub(crate) fn exclusive_scan(gpu: &Gpu, data: &mut CudaSlice<u32>, n: usize) -> Result<()> {
    let mut state = gpu.alloc::<u64>(scan_state_len(n))?;
    exclusive_scan_with(gpu, data, n, &mut state)
}

/// The words of scan state `exclusive_scan_with` needs for `n` entries.
pub(crate) fn scan_state_len(n: usize) -> usize {
    n.div_ceil(SCAN_TILE) + 2
}

/// `exclusive_scan` with a state buffer of at least `scan_state_len(n)` words, zero on entry
/// and left zero (so one buffer, zeroed once, serves every scan of a stream; no allocation or
/// memset goes into a captured graph).
pub(crate) fn exclusive_scan_with(
    gpu: &Gpu,
    data: &mut CudaSlice<u32>,
    n: usize,
    state: &mut CudaSlice<u64>,
) -> Result<()> {
    let tiles = n.div_ceil(SCAN_TILE);
    if n <= SINGLE_BLOCK_SCAN {
        return scan_single_block(gpu, threads(SCAN_THREADS, SCAN_THREADS as u32), data, n as u32);
    }
    debug_assert!(state.len() >= scan_state_len(n));
    scan_lookback(gpu, threads(tiles * SCAN_THREADS, SCAN_THREADS as u32), data, n as u32, state)
}

/// Sorts the first `n` (key, value) pairs by key, stably; the keys must be below `2^bits`
/// (one pass per 8 bits).
pub(crate) fn sort_pairs(
    gpu: &Gpu,
    keys: &mut CudaSlice<u64>,
    vals: &mut CudaSlice<u32>,
    n: usize,
    bits: u32,
) -> Result<()> {
    if n <= 1 || bits == 0 {
        return Ok(());
    }
    let tiles = n.div_ceil(SORT_TILE);
    let passes = bits.min(64).div_ceil(8) as usize;
    let mut keys_alt = gpu.alloc_uninit::<u64>(n)?;
    let mut vals_alt = gpu.alloc_uninit::<u32>(n)?;
    let mut hist = gpu.alloc::<u32>(256 * passes)?;
    // A ticket a pass, then each tile's 256 look-back words, which every pass reuses (its
    // words are tagged with the pass); zero, as the kernel needs.
    let mut state = gpu.alloc::<u64>(8 + 256 * tiles)?;
    let n32 = n as u32;
    let cfg = threads(tiles * SORT_THREADS, SORT_THREADS as u32);
    radix_histograms(gpu, cfg, &*keys, n32, passes as u32, &mut hist)?;
    for pass in 0..passes {
        radix_onesweep(gpu, cfg, &*keys, &*vals, &mut keys_alt, &mut vals_alt, n32, pass as u32, &hist, &mut state)?;
        std::mem::swap(keys, &mut keys_alt);
        std::mem::swap(vals, &mut vals_alt);
    }
    Ok(())
}

/// Bits needed to hold values `0..n`.
pub(crate) fn bits_for(n: usize) -> u32 {
    (usize::BITS - n.saturating_sub(1).leading_zeros()).max(1)
}
