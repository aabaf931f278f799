//! Launches tree_build.cu: the `MortonTree` of src/tree.rs, built on the device.

use cudarc::driver::{CudaSlice, CudaView, DevicePtr, DeviceRepr, PushKernelArg};

use super::{DEFAULT_LEAF_SIZE, TABLE_BITS};
use crate::error::Result;
use crate::geometry::real::Real;
use crate::runtime::cuda::memory::{DevicePoints, PointSource};
use crate::runtime::cuda::radix_sort::sort_pairs;
use crate::runtime::cuda::{cuda_err, threads, Gpu};

/// Threads per block of the query-ordering kernels.
const BLOCK: u32 = 256;

/// The tree's device buffers, in the layout of `MortonTree`.
pub struct DeviceTree<T> {
    pub n: u32,
    pub leaf_size: u32,
    pub key_table: CudaSlice<u32>,
    pub x: CudaSlice<T>,
    pub y: CudaSlice<T>,
    pub z: CudaSlice<T>,
    pub id: CudaSlice<u32>,
    pub left: CudaSlice<u32>,
    pub right: CudaSlice<u32>,
    pub other_end: CudaSlice<u32>,
    pub lo: [CudaSlice<T>; 3],
    pub hi: [CudaSlice<T>; 3],
    pub min_id: CudaSlice<u32>,
    /// origin x, y, z and scale of the Morton frame.
    pub frame: CudaSlice<T>,
}

/// `struct Tree<T>` of common.cuh, passed to kernels by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct TreeArgs {
    ptrs: [u64; 16],
    n: u32,
    leaf_size: u32,
}
// SAFETY: plain old data matching the C struct's layout (16 pointers, 2 u32).
unsafe impl DeviceRepr for TreeArgs {}

/// The points a tree is built from: the caller's (kept) or a copy the build may free early.
pub enum BuildInput<'a, T> {
    Borrowed(&'a DevicePoints<T>),
    Owned(DevicePoints<T>),
}

impl<T: Real> DeviceTree<T> {
    pub fn build(gpu: &Gpu, b: &DevicePoints<T>) -> Result<Self> {
        Self::build_from(gpu, BuildInput::Borrowed(b))
    }

    /// Builds the tree. Buffers are allocated and freed in an order that keeps the peak low
    /// (an owned input is freed once gathered; full codes before the box pass).
    pub fn build_from(gpu: &Gpu, input: BuildInput<'_, T>) -> Result<Self> {
        let b = match &input {
            BuildInput::Borrowed(b) => *b,
            BuildInput::Owned(b) => b,
        };
        let n = b.len;
        let n32 = n as u32;
        let s = gpu.stream();

        // Bounds -> frame, with exact float min/max through order-preserving integers.
        let mut frame = gpu.alloc_uninit::<T>(4)?;
        let blocks = n.div_ceil(256).min(1024);
        if T::NAME == "f32" {
            let mut acc = s.clone_htod(&[u32::MAX, u32::MAX, u32::MAX, 0, 0, 0]).map_err(cuda_err)?;
            let f = gpu.func_t::<T>("bounds")?;
            let mut l = s.launch_builder(&f);
            l.arg(&b.x).arg(&b.y).arg(&b.z).arg(&n32).arg(&mut acc);
            unsafe { l.launch(threads(blocks * 256, 256)) }.map_err(cuda_err)?;
            let f = gpu.func_t::<T>("frame")?;
            let mut l = s.launch_builder(&f);
            l.arg(&acc).arg(&mut frame);
            unsafe { l.launch(threads(1, 1)) }.map_err(cuda_err)?;
        } else {
            let mut acc = s.clone_htod(&[u64::MAX, u64::MAX, u64::MAX, 0, 0, 0]).map_err(cuda_err)?;
            let f = gpu.func_t::<T>("bounds")?;
            let mut l = s.launch_builder(&f);
            l.arg(&b.x).arg(&b.y).arg(&b.z).arg(&n32).arg(&mut acc);
            unsafe { l.launch(threads(blocks * 256, 256)) }.map_err(cuda_err)?;
            let f = gpu.func_t::<T>("frame")?;
            let mut l = s.launch_builder(&f);
            l.arg(&acc).arg(&mut frame);
            unsafe { l.launch(threads(1, 1)) }.map_err(cuda_err)?;
        }

        // Morton keys, sorted with the ids as values (stable, so ties stay in id order).
        let mut codes = gpu.alloc_uninit::<u64>(n)?;
        let mut id = gpu.alloc_uninit::<u32>(n)?;
        let f = gpu.func_t::<T>("morton_keys")?;
        let mut l = s.launch_builder(&f);
        let shift = 0u32;
        l.arg(&b.x).arg(&b.y).arg(&b.z).arg(&n32).arg(&frame).arg(&shift).arg(&mut codes).arg(&mut id);
        unsafe { l.launch(threads(n, 256)) }.map_err(cuda_err)?;
        sort_pairs(gpu, &mut codes, &mut id, n, 63)?;
        let table_len = (1usize << TABLE_BITS) + 1;
        let mut key_table = gpu.alloc_uninit::<u32>(table_len)?;
        let f = gpu.func("key_table")?;
        let mut l = s.launch_builder(&f);
        l.arg(&codes).arg(&n32).arg(&mut key_table);
        unsafe { l.launch(threads(table_len, 256)) }.map_err(cuda_err)?;

        let (mut x, mut y, mut z) = (gpu.alloc_uninit::<T>(n)?, gpu.alloc_uninit::<T>(n)?, gpu.alloc_uninit::<T>(n)?);
        let f = gpu.func_t::<T>("gather_points")?;
        let mut l = s.launch_builder(&f);
        l.arg(&b.x).arg(&b.y).arg(&b.z).arg(&id).arg(&n32).arg(&mut x).arg(&mut y).arg(&mut z);
        unsafe { l.launch(threads(n, 256)) }.map_err(cuda_err)?;
        drop(input);

        // Radix tree topology, then boxes bottom-up.
        let internal = n.saturating_sub(1);
        let (mut left, mut right, mut other_end) = (
            gpu.alloc_uninit::<u32>(internal)?,
            gpu.alloc_uninit::<u32>(internal)?,
            gpu.alloc_uninit::<u32>(internal)?,
        );
        let mut parent = gpu.alloc_uninit::<u32>(internal)?;
        let mut flags = gpu.alloc::<u32>(internal.div_ceil(4))?; // zeroed byte counters
        if internal > 0 {
            let f = gpu.func("radix_nodes")?;
            let mut l = s.launch_builder(&f);
            l.arg(&codes).arg(&n32).arg(&mut left).arg(&mut right).arg(&mut other_end).arg(&mut parent).arg(&mut flags);
            unsafe { l.launch(threads(internal, 256)) }.map_err(cuda_err)?;
        }
        // The full codes are needed no more: free them before the box pass, the memory peak.
        drop(codes);
        let mut lo =
            [gpu.alloc_uninit::<T>(internal)?, gpu.alloc_uninit::<T>(internal)?, gpu.alloc_uninit::<T>(internal)?];
        let mut hi =
            [gpu.alloc_uninit::<T>(internal)?, gpu.alloc_uninit::<T>(internal)?, gpu.alloc_uninit::<T>(internal)?];
        let mut min_id = gpu.alloc_uninit::<u32>(internal)?;
        if internal > 0 {
            let f = gpu.func_t::<T>("radix_boxes")?;
            let mut l = s.launch_builder(&f);
            l.arg(&x).arg(&y).arg(&z).arg(&id).arg(&n32).arg(&left).arg(&right).arg(&parent).arg(&mut flags);
            let [lx, ly, lz] = &mut lo;
            let [hx, hy, hz] = &mut hi;
            l.arg(lx).arg(ly).arg(lz).arg(hx).arg(hy).arg(hz).arg(&mut min_id);
            unsafe { l.launch(threads(internal, 256)) }.map_err(cuda_err)?;
        }
        drop((parent, flags));
        let leaf_size = DEFAULT_LEAF_SIZE;
        Ok(DeviceTree { n: n32, leaf_size, key_table, x, y, z, id, left, right, other_end, lo, hi, min_id, frame })
    }

    pub(crate) fn args(&self, gpu: &Gpu) -> TreeArgs {
        let s = gpu.stream();
        let p = |c: &CudaSlice<T>| c.device_ptr(s).0;
        TreeArgs {
            ptrs: [
                p(&self.lo[0]),
                p(&self.lo[1]),
                p(&self.lo[2]),
                p(&self.hi[0]),
                p(&self.hi[1]),
                p(&self.hi[2]),
                self.min_id.device_ptr(s).0,
                self.left.device_ptr(s).0,
                self.right.device_ptr(s).0,
                self.other_end.device_ptr(s).0,
                p(&self.x),
                p(&self.y),
                p(&self.z),
                self.id.device_ptr(s).0,
                self.key_table.device_ptr(s).0,
                p(&self.frame),
            ],
            n: self.n,
            leaf_size: self.leaf_size,
        }
    }

    #[cfg(feature = "test-hooks")]
    pub fn to_host(&self, gpu: &Gpu) -> Result<super::MortonTree<T>> {
        use crate::geometry::morton::MortonFrame;
        let s = gpu.stream();
        let n = self.n as usize;
        let internal = n.saturating_sub(1);
        let v = |c: &CudaSlice<T>, len: usize| s.clone_dtoh(&c.slice(0..len)).map_err(cuda_err);
        let u = |c: &CudaSlice<u32>, len: usize| s.clone_dtoh(&c.slice(0..len)).map_err(cuda_err);
        let frame = v(&self.frame, 4)?;
        Ok(super::MortonTree {
            frame: MortonFrame { origin: [frame[0], frame[1], frame[2]], scale: frame[3] },
            leaf_size: self.leaf_size,
            key_table: s.clone_dtoh(&self.key_table).map_err(cuda_err)?,
            x: v(&self.x, n)?,
            y: v(&self.y, n)?,
            z: v(&self.z, n)?,
            id: u(&self.id, n)?,
            left: u(&self.left, internal)?,
            right: u(&self.right, internal)?,
            other_end: u(&self.other_end, internal)?,
            lo: [v(&self.lo[0], internal)?, v(&self.lo[1], internal)?, v(&self.lo[2], internal)?],
            hi: [v(&self.hi[0], internal)?, v(&self.hi[1], internal)?, v(&self.hi[2], internal)?],
            min_id: u(&self.min_id, internal)?,
        })
    }
}

/// One chunk of A, sorted into Morton order on the device: `ids[i]` is sorted point i's
/// index within the chunk.
pub(crate) struct SortedChunk<T> {
    pub points: DevicePoints<T>,
    pub ids: CudaSlice<u32>,
    pub offset: usize,
    pub last: bool,
}

/// Runs `f` on each chunk of A, sorted in Morton order (in `tree`'s frame) so that
/// neighbouring threads search neighbouring parts of the tree.
pub(crate) fn for_each_chunk<T: Real>(
    gpu: &Gpu,
    a: &PointSource<'_, T>,
    tree: &DeviceTree<T>,
    chunk: usize,
    f: impl FnMut(&SortedChunk<T>) -> Result<()>,
) -> Result<()> {
    // The top 32 bits of the code order queries well enough for coherence, in half the passes.
    for_each_chunk_sorted_by(gpu, a, tree, chunk, 32, f)
}

/// `for_each_chunk` with the top `key_bits` bits of the Morton code as the sort key.
pub(crate) fn for_each_chunk_sorted_by<T: Real>(
    gpu: &Gpu,
    a: &PointSource<'_, T>,
    tree: &DeviceTree<T>,
    chunk: usize,
    key_bits: u32,
    mut f: impl FnMut(&SortedChunk<T>) -> Result<()>,
) -> Result<()> {
    let order = |x: &CudaView<'_, T>, y: &CudaView<'_, T>, z: &CudaView<'_, T>, len| {
        sort_chunk(gpu, tree, x, y, z, len, key_bits)
    };
    for_each_chunk_ordered(gpu, a, chunk, order, |offset, last, c| f(&SortedChunk { offset, last, ..c }))
}

/// The chunks of `a`, each put in order by `order(x, y, z, len)` on the device, to
/// `f(offset, last, ordered)`.
pub(crate) fn for_each_chunk_ordered<T: Real, C>(
    gpu: &Gpu,
    a: &PointSource<'_, T>,
    chunk: usize,
    order: impl Fn(&CudaView<'_, T>, &CudaView<'_, T>, &CudaView<'_, T>, usize) -> Result<C>,
    mut f: impl FnMut(usize, bool, C) -> Result<()>,
) -> Result<()> {
    let (n, c) = (a.len(), chunk.max(1));
    let mut s = 0;
    while s < n {
        let e = (s + c).min(n);
        let chunk = match a {
            PointSource::Host(p) => {
                let d = DevicePoints::upload_range(gpu, p, s, e)?;
                order(&d.x.as_view(), &d.y.as_view(), &d.z.as_view(), e - s)?
            }
            PointSource::Device(d) => order(&d.x.slice(s..e), &d.y.slice(s..e), &d.z.slice(s..e), e - s)?,
        };
        f(s, e == n, chunk)?;
        s = e;
    }
    Ok(())
}

fn sort_chunk<T: Real>(
    gpu: &Gpu,
    tree: &DeviceTree<T>,
    x: &CudaView<'_, T>,
    y: &CudaView<'_, T>,
    z: &CudaView<'_, T>,
    len: usize,
    key_bits: u32,
) -> Result<SortedChunk<T>> {
    let st = gpu.stream();
    let len32 = len as u32;
    let mut keys = gpu.alloc_uninit::<u64>(len)?;
    let mut ids = gpu.alloc_uninit::<u32>(len)?;
    let f = gpu.func_t::<T>("morton_keys")?;
    let shift = 63 - key_bits;
    let mut l = st.launch_builder(&f);
    l.arg(x).arg(y).arg(z).arg(&len32).arg(&tree.frame).arg(&shift).arg(&mut keys).arg(&mut ids);
    unsafe { l.launch(threads(len, BLOCK)) }.map_err(cuda_err)?;
    sort_pairs(gpu, &mut keys, &mut ids, len, key_bits)?;
    drop(keys);
    let (mut sx, mut sy, mut sz) =
        (gpu.alloc_uninit::<T>(len)?, gpu.alloc_uninit::<T>(len)?, gpu.alloc_uninit::<T>(len)?);
    let f = gpu.func_t::<T>("gather_points")?;
    let mut l = st.launch_builder(&f);
    l.arg(x).arg(y).arg(z).arg(&ids).arg(&len32).arg(&mut sx).arg(&mut sy).arg(&mut sz);
    unsafe { l.launch(threads(len, BLOCK)) }.map_err(cuda_err)?;
    Ok(SortedChunk { points: DevicePoints { x: sx, y: sy, z: sz, len, bounds: None }, ids, offset: 0, last: false })
}
