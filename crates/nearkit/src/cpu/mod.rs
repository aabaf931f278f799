//! The CPU backend: rayon over all cores, the same tree and algorithm as the CUDA backend.

#[cfg(target_arch = "x86_64")]
mod avx2_f64;
#[cfg(target_arch = "x86_64")]
mod body_shapes_avx2;
mod candidate_lists;
mod closest_pairs;
pub mod closest_point;
#[cfg(target_arch = "x86_64")]
mod closest_point_avx2;
mod closest_point_packet;
pub mod collide;
#[cfg(target_arch = "x86_64")]
mod contact_ellipsoid_ellipsoid_avx2;
#[cfg(target_arch = "x86_64")]
mod contact_ellipsoid_triangle_avx2;
mod knn;
pub mod search;
pub mod vector_knn;

/// Tuning constants the CUDA backend shares with the CPU one.
pub mod search_constants {
    pub use super::closest_pairs::BOUND_WINDOW;
}

use crate::backend::Backend;
use crate::closest_point::{ClosestPointOptions, ClosestPoints};
use crate::error::Result;
use crate::mesh::Mesh;
use crate::points::Points;
use crate::query::{Knn, KnnOptions, Nearest, Pair, PairsOptions};
use crate::real::Real;
use crate::shifted_sort::ShiftedSortOptions;
use crate::vectors::Vectors;

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

#[derive(Clone, Copy, Debug, Default)]
pub struct CpuBackend;

impl Backend for CpuBackend {
    fn describe(&self) -> String {
        format!("cpu ({} threads)", rayon::current_num_threads())
    }

    fn nearest<T: Real>(&self, a: &Points<T>, b: &Points<T>, max_distance: Option<T>) -> Result<Nearest<T>> {
        closest_pairs::nearest(a, b, max_distance)
    }

    fn closest_pairs<T: Real>(&self, a: &Points<T>, b: &Points<T>, opts: &PairsOptions<T>) -> Result<Vec<Pair<T>>> {
        closest_pairs::closest_pairs(a, b, opts)
    }

    fn knn<T: Real>(&self, data: &Points<T>, queries: &Points<T>, opts: &KnnOptions<T>) -> Result<Knn<T>> {
        knn::knn(data, queries, opts)
    }

    fn closest_points<T: Real>(
        &self,
        mesh: &Mesh<T>,
        queries: &Points<T>,
        opts: &ClosestPointOptions<T>,
    ) -> Result<ClosestPoints<T>> {
        closest_point::closest_points(mesh, queries, opts)
    }

    fn knn_vectors<T: Real>(&self, data: &Vectors<T>, queries: &Vectors<T>, opts: &KnnOptions<T>) -> Result<Knn<T>> {
        vector_knn::knn(data, queries, opts)
    }

    fn approx_knn<T: Real>(
        &self,
        data: &Vectors<T>,
        queries: &Vectors<T>,
        opts: &ShiftedSortOptions,
    ) -> Result<Knn<T>> {
        vector_knn::approx_knn(data, queries, opts)
    }
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
