//! `KnnBuffer`: host memory for kNN results that a caller reuses from call to call. On a GPU
//! engine it is page-locked once, when it first grows, so that every later result is copied
//! into it by the device directly, at the bus's speed, with no staging and no page faults.

use std::mem::MaybeUninit;

use cudarc::driver::{sys, DeviceRepr, PinnedHostSlice, ValidAsZeroBits};

use super::Knn;
use crate::error::Result;
use crate::geometry::real::Real;
use crate::runtime::cuda::transfer::HostMemory;
use crate::runtime::cuda::{cuda_err, Gpu};

/// Uninitialised rows for a query's ids and distances, and the memory they are in.
pub(crate) type Room<'a, T> = (&'a mut [MaybeUninit<u32>], &'a mut [MaybeUninit<T>], HostMemory);

/// A kNN result held in reusable host memory: query `q`'s neighbours are
/// `ids()[q*k..(q+1)*k]` and `distances()[q*k..(q+1)*k]`, as in [`Knn`]. Fill it with
/// [`PointIndex::knn_into`](crate::PointIndex::knn_into).
///
/// ```
/// use nearkit::{Device, KnnBuffer, KnnOptions, PointIndex, Points};
/// let index = PointIndex::build(&Points::from_rows(&[[0.0f32, 0.0, 0.0], [1.0, 0.0, 0.0]]), Device::Cpu).unwrap();
/// let mut out = KnnBuffer::new();
/// for shift in [0.1f32, 0.9] {
///     index.knn_into(&Points::from_rows(&[[shift, 0.0, 0.0]]), &KnnOptions::k(1), &mut out).unwrap();
///     assert_eq!(out.ids(), [if shift < 0.5 { 0 } else { 1 }]);
/// }
/// ```
pub struct KnnBuffer<T> {
    k: usize,
    len: usize,
    ids: Host<u32>,
    distances: Host<T>,
}

/// Values in ordinary or page-locked memory; page-locked memory is allocated, never freed
/// until the buffer is, and replaced only by a larger one.
enum Host<V> {
    Vec(Vec<V>),
    Pinned(PinnedHostSlice<V>),
}

impl<V: DeviceRepr + ValidAsZeroBits + Copy> Host<V> {
    fn as_slice(&self, n: usize) -> &[V] {
        match self {
            Host::Vec(v) => &v[..n],
            // SAFETY: the first n values were written by the query that set `n`.
            Host::Pinned(p) => unsafe { std::slice::from_raw_parts(p.as_ptr().expect("no pending copy"), n) },
        }
    }

    fn as_mut_slice(&mut self, n: usize) -> &mut [V] {
        match self {
            Host::Vec(v) => &mut v[..n],
            // SAFETY: as `as_slice`.
            Host::Pinned(p) => unsafe { std::slice::from_raw_parts_mut(p.as_mut_ptr().expect("no pending copy"), n) },
        }
    }

    /// Room for `n` values in page-locked memory of `gpu`'s context, uninitialised.
    fn pinned(&mut self, gpu: &Gpu, n: usize) -> Result<&mut [MaybeUninit<V>]> {
        if !matches!(self, Host::Pinned(p) if p.len() >= n) {
            let flags = sys::CU_MEMHOSTALLOC_PORTABLE;
            // SAFETY: only the values a query writes are ever read (`as_slice` of its `n`).
            let p = unsafe { gpu.stream().context().alloc_pinned_with_flags::<V>(n.max(1), flags) };
            *self = Host::Pinned(p.map_err(cuda_err)?);
        }
        let Host::Pinned(p) = self else { unreachable!("made pinned above") };
        let ptr = p.as_mut_ptr().map_err(cuda_err)?;
        // SAFETY: the allocation holds at least n values; MaybeUninit makes no claim on them.
        Ok(unsafe { std::slice::from_raw_parts_mut(ptr as *mut MaybeUninit<V>, n) })
    }
}

impl<T: Real> Default for KnnBuffer<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Real> KnnBuffer<T> {
    /// An empty buffer; it grows to the first result it holds.
    pub fn new() -> Self {
        Self { k: 0, len: 0, ids: Host::Vec(Vec::new()), distances: Host::Vec(Vec::new()) }
    }

    /// Neighbours per query of the result it holds.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Queries in the result it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no result.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Neighbour ids, queries × k, row-major (`NO_ID` where missing).
    pub fn ids(&self) -> &[u32] {
        self.ids.as_slice(self.len * self.k)
    }

    /// Their distances (∞ where missing).
    pub fn distances(&self) -> &[T] {
        self.distances.as_slice(self.len * self.k)
    }

    /// A copy as a [`Knn`].
    pub fn to_knn(&self) -> Knn<T> {
        Knn { k: self.k, ids: self.ids().to_vec(), distances: self.distances().to_vec() }
    }

    /// Holds a result computed into vectors (the CPU's).
    pub(crate) fn hold(&mut self, knn: Knn<T>, queries: usize) {
        (self.k, self.len) = (knn.k, queries);
        (self.ids, self.distances) = (Host::Vec(knn.ids), Host::Vec(knn.distances));
    }

    /// Page-locked room for `queries` × `k` neighbours on `gpu`, for the device to fill.
    pub(crate) fn room(&mut self, gpu: &Gpu, queries: usize, k: usize) -> Result<Room<'_, T>> {
        (self.k, self.len) = (0, 0);
        let n = queries * k;
        let ids = self.ids.pinned(gpu, n)?;
        let distances = self.distances.pinned(gpu, n)?;
        Ok((ids, distances, HostMemory::Pinned))
    }

    /// Marks `queries` × `k` neighbours as written.
    pub(crate) fn filled(&mut self, queries: usize, k: usize) {
        (self.k, self.len) = (k, queries);
    }

    /// The distances, to scale them back in place.
    pub(crate) fn distances_mut(&mut self) -> &mut [T] {
        self.distances.as_mut_slice(self.len * self.k)
    }
}
