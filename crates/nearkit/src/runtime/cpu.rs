//! What the CPU code of every capability shares: rows written in parallel, large result
//! vectors in huge pages, and prefetch hints.

use crate::error::{Error, Result};

/// A result array that parallel queries write row by row (each query its own row).
#[derive(Clone, Copy)]
pub(crate) struct RowPtr<V>(pub *mut V);
// SAFETY: used only to write disjoint rows from different threads.
unsafe impl<V: Send> Send for RowPtr<V> {}
unsafe impl<V: Send> Sync for RowPtr<V> {}

impl<V> RowPtr<V> {
    /// # Safety
    /// Row `q` must lie inside the array, and no one else may touch it meanwhile.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn row(&self, q: usize, k: usize) -> &mut [V] {
        std::slice::from_raw_parts_mut(self.0.add(q * k), k)
    }

    /// # Safety
    /// `start..start + len` must lie inside the array, and no one else may touch it meanwhile.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn span(&self, start: usize, len: usize) -> &mut [V] {
        std::slice::from_raw_parts_mut(self.0.add(start), len)
    }

    /// Asks for slot `i`'s cache line ahead of a write (a hint; nothing is touched).
    #[inline(always)]
    pub(crate) fn prefetch(&self, i: usize) {
        prefetch(self.0.wrapping_add(i), 1)
    }

    /// Writes slot `i`, which may be uninitialized (no reference to it is made).
    ///
    /// # Safety
    /// Slot `i` must lie inside the allocation, and no one else may touch it meanwhile.
    pub(crate) unsafe fn write(&self, i: usize, v: V) {
        self.0.add(i).write(v)
    }

    /// Copies `src` to slots `start..start + src.len()`, which may be uninitialized.
    ///
    /// # Safety
    /// Those slots must lie inside the allocation, and no one else may touch them meanwhile.
    pub(crate) unsafe fn copy_from(&self, start: usize, src: &[V])
    where
        V: Copy,
    {
        std::ptr::copy_nonoverlapping(src.as_ptr(), self.0.add(start), src.len())
    }
}

/// An error, rather than an abort, when a result of `rows` × `per_row` values of `V` cannot
/// be allocated: the system is asked for the room (and it is given back at once).
pub(crate) fn check_room<V>(rows: usize, per_row: usize, what: &str) -> Result<()> {
    let bytes = (rows as u128) * (per_row as u128) * (std::mem::size_of::<V>() as u128);
    let fits = usize::try_from(bytes).ok().is_some_and(|b| Vec::<u8>::new().try_reserve_exact(b).is_ok());
    if fits {
        return Ok(());
    }
    Err(Error::OutOfMemory(format!(
        "{what} take {bytes} bytes ({rows} rows of {per_row}), more than this machine can give: ask for a smaller \
         k or fewer queries"
    )))
}

/// An empty vector with room for `n` values, in huge pages where the system grants them on
/// request (Linux with transparent huge pages set to `madvise`): filling hundreds of MB of
/// fresh 4 KiB pages took about a tenth of a kNN run in page faults.
pub(crate) fn big_vec<V>(n: usize) -> Vec<V> {
    let v = Vec::with_capacity(n);
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let bytes = n * std::mem::size_of::<V>();
        if bytes >= 4 * HUGE {
            // Whole huge pages inside the allocation only.
            let lo = (v.as_ptr() as usize).next_multiple_of(HUGE);
            let hi = (v.as_ptr() as usize + bytes) / HUGE * HUGE;
            if hi > lo {
                // SAFETY: advice on pages of our own allocation; it changes no contents, and
                // failure (an old kernel) is harmless.
                unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE) };
            }
        }
    }
    v
}

/// Asks for the cache lines of `len` values from `at` (a hint: no memory is touched).
#[inline(always)]
pub(crate) fn prefetch<V>(at: *const V, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: prefetching is a hint and never faults, wherever it points.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(at as *const i8);
            _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(len - 1) as *const i8);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (at, len);
}
