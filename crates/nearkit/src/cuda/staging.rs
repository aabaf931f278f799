//! Host-to-device uploads through reusable pinned buffers. The driver copies pageable memory
//! synchronously through small bounce buffers (a few GB/s, and uneven from machine to
//! machine); instead, all cores copy the user's columns into pinned memory and the DMA runs
//! asynchronously, overlapping the next column's copy and earlier GPU work.

use std::sync::Mutex;

use cudarc::driver::{result, CudaEvent, CudaSlice, DevicePtr, PinnedHostSlice};
use rayon::prelude::*;

use super::{cuda_err, CudaBackend};
use crate::error::Result;
use crate::real::Real;

/// Below this many bytes per column the plain driver copy is as fast.
const MIN_STAGED_BYTES: usize = 1 << 20;
/// Pinned buffers larger than this are released after use rather than kept.
const MAX_KEPT_BYTES: usize = 64 << 20;

/// One set of three pinned buffers (x, y, z) and the event after their last DMA.
#[derive(Default)]
pub(crate) struct StagingSet {
    bufs: [Option<PinnedHostSlice<u8>>; 3],
    done: Option<CudaEvent>,
}

/// Which set an upload uses: B and A's chunks use different ones so they can overlap.
#[derive(Clone, Copy)]
pub(crate) enum Slot {
    B = 0,
    A = 1,
}

pub(crate) type Staging = [Mutex<StagingSet>; 2];

/// Uploads three equal-length columns.
pub(crate) fn upload_columns<T: Real>(be: &CudaBackend, cols: [&[T]; 3], slot: Slot) -> Result<[CudaSlice<T>; 3]> {
    let len = cols[0].len();
    let bytes = std::mem::size_of_val(cols[0]);
    let st = &be.stream;
    if bytes < MIN_STAGED_BYTES {
        let up = |c: &[T]| st.clone_htod(c).map_err(cuda_err);
        return Ok([up(cols[0])?, up(cols[1])?, up(cols[2])?]);
    }
    let mut set = be.staging[slot as usize].lock().unwrap();
    if let Some(ev) = set.done.take() {
        ev.synchronize().map_err(cuda_err)?; // the last DMA from these buffers is over
    }
    let ctx = st.context();
    let mut out = Vec::with_capacity(3);
    for (d, col) in cols.into_iter().enumerate() {
        if set.bufs[d].as_ref().is_none_or(|b| b.len() < bytes) {
            set.bufs[d] = None;
            // SAFETY: the buffer is fully written below before any DMA reads it.
            set.bufs[d] = Some(unsafe { ctx.alloc_pinned::<u8>(bytes) }.map_err(cuda_err)?);
        }
        let buf = set.bufs[d].as_mut().unwrap().as_mut_slice().map_err(cuda_err)?;
        // SAFETY: pinned allocations are page-aligned, and `bytes` = len * size_of::<T>().
        let staged: &mut [T] = unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr() as *mut T, len) };
        staged.par_chunks_mut(1 << 16).zip(col.par_chunks(1 << 16)).for_each(|(s, c)| s.copy_from_slice(c));
        let dst = be.alloc_uninit::<T>(len)?;
        // SAFETY: `dst` holds `len` elements; the staged slice stays alive and untouched until
        // the event recorded below has completed (checked before the next reuse or on drop).
        unsafe { result::memcpy_htod_async(dst.device_ptr(st).0, &*staged, st.cu_stream()) }.map_err(cuda_err)?;
        out.push(dst);
    }
    let ev = ctx.new_event(None).map_err(cuda_err)?;
    ev.record(st).map_err(cuda_err)?;
    if bytes > MAX_KEPT_BYTES {
        ev.synchronize().map_err(cuda_err)?;
        set.bufs = Default::default();
    } else {
        set.done = Some(ev);
    }
    let [x, y, z]: [CudaSlice<T>; 3] = out.try_into().ok().expect("three columns");
    Ok([x, y, z])
}
