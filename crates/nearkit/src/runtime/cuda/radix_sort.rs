//! Launches radix_sort.cu: device-wide stable sort of (u64 key, u32 value) pairs, and scans.

use cudarc::driver::{CudaSlice, PushKernelArg};

use super::{cuda_err, threads, Gpu};
use crate::error::Result;

const SORT_TILE: usize = 256 * 8;
const SCAN_TILE: usize = 1024 * 4;
/// Up to this many elements one block scans tile after tile; beyond, tiles run in parallel.
const SINGLE_BLOCK_SCAN: usize = SCAN_TILE * 2;

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
    let n32 = n as u32;
    if n <= SINGLE_BLOCK_SCAN {
        let f = gpu.func("scan_single_block")?;
        let mut l = gpu.stream().launch_builder(&f);
        l.arg(&mut *data).arg(&n32);
        unsafe { l.launch(threads(1024, 1024)) }.map_err(cuda_err)?;
        return Ok(());
    }
    debug_assert!(state.len() >= scan_state_len(n));
    let f = gpu.func("scan_lookback")?;
    let mut l = gpu.stream().launch_builder(&f);
    l.arg(&mut *data).arg(&n32).arg(&mut *state);
    unsafe { l.launch(threads(tiles * 1024, 1024)) }.map_err(cuda_err)?;
    Ok(())
}

/// Sorts the first `n` (key, value) pairs by the low `bits` bits of the key, stably.
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
    let mut keys_alt = gpu.alloc_uninit::<u64>(n)?;
    let mut vals_alt = gpu.alloc_uninit::<u32>(n)?;
    let mut counts = gpu.alloc_uninit::<u32>(256 * tiles)?;
    let (up, down) = (gpu.func("radix_upsweep")?, gpu.func("radix_downsweep")?);
    let n32 = n as u32;
    let cfg = threads(tiles * 256, 256);
    let mut shift = 0u32;
    while shift < bits {
        let mut l = gpu.stream().launch_builder(&up);
        l.arg(&*keys).arg(&n32).arg(&shift).arg(&mut counts);
        unsafe { l.launch(cfg) }.map_err(cuda_err)?;
        exclusive_scan(gpu, &mut counts, 256 * tiles)?;
        let mut l = gpu.stream().launch_builder(&down);
        l.arg(&*keys).arg(&*vals).arg(&mut keys_alt).arg(&mut vals_alt).arg(&n32).arg(&shift).arg(&counts);
        unsafe { l.launch(cfg) }.map_err(cuda_err)?;
        std::mem::swap(keys, &mut keys_alt);
        std::mem::swap(vals, &mut vals_alt);
        shift += 8;
    }
    Ok(())
}

/// Bits needed to hold values `0..n`.
pub(crate) fn bits_for(n: usize) -> u32 {
    (usize::BITS - n.saturating_sub(1).leading_zeros()).max(1)
}
