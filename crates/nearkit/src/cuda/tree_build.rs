//! Launches tree_build.cu: the `MortonTree` of src/tree.rs, built on the device.

use cudarc::driver::{CudaSlice, DevicePtr, DeviceRepr, PushKernelArg};

use super::closest_pairs::DevicePoints;
use super::radix_sort::sort_pairs;
use super::{cuda_err, grid, CudaBackend};
use crate::error::Result;
use crate::morton::MortonFrame;
use crate::real::Real;
use crate::tree::{leaf_base_for, MortonTree, DEFAULT_LEAF_SIZE};

/// The tree's device buffers, in the layout of `MortonTree`.
pub struct DeviceTree<T> {
    pub n: u32,
    pub leaf_size: u32,
    pub leaf_base: u32,
    pub keys: CudaSlice<u64>,
    pub x: CudaSlice<T>,
    pub y: CudaSlice<T>,
    pub z: CudaSlice<T>,
    pub id: CudaSlice<u32>,
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
    ptrs: [u64; 13],
    n: u32,
    leaf_size: u32,
    leaf_base: u32,
    pad: u32,
}
// SAFETY: plain old data matching the C struct's layout (13 pointers, 4 u32).
unsafe impl DeviceRepr for TreeArgs {}

impl<T: Real> DeviceTree<T> {
    pub fn build(be: &CudaBackend, b: &DevicePoints<T>) -> Result<Self> {
        let n = b.len;
        let n32 = n as u32;
        let s = &be.stream;

        // Bounds -> frame, with exact float min/max through order-preserving integers.
        let mut frame = be.alloc::<T>(4)?;
        let blocks = n.div_ceil(256).min(1024);
        if T::NAME == "f32" {
            let mut acc = s.clone_htod(&[u32::MAX, u32::MAX, u32::MAX, 0, 0, 0]).map_err(cuda_err)?;
            let f = be.func_t::<T>("bounds")?;
            let mut l = s.launch_builder(&f);
            l.arg(&b.x).arg(&b.y).arg(&b.z).arg(&n32).arg(&mut acc);
            unsafe { l.launch(grid(blocks * 256, 256)) }.map_err(cuda_err)?;
            let f = be.func_t::<T>("frame")?;
            let mut l = s.launch_builder(&f);
            l.arg(&acc).arg(&mut frame);
            unsafe { l.launch(grid(1, 1)) }.map_err(cuda_err)?;
        } else {
            let mut acc = s.clone_htod(&[u64::MAX, u64::MAX, u64::MAX, 0, 0, 0]).map_err(cuda_err)?;
            let f = be.func_t::<T>("bounds")?;
            let mut l = s.launch_builder(&f);
            l.arg(&b.x).arg(&b.y).arg(&b.z).arg(&n32).arg(&mut acc);
            unsafe { l.launch(grid(blocks * 256, 256)) }.map_err(cuda_err)?;
            let f = be.func_t::<T>("frame")?;
            let mut l = s.launch_builder(&f);
            l.arg(&acc).arg(&mut frame);
            unsafe { l.launch(grid(1, 1)) }.map_err(cuda_err)?;
        }

        // Morton keys, sorted with the ids as values (stable, so ties stay in id order).
        let mut keys = be.alloc::<u64>(n)?;
        let mut id = be.alloc::<u32>(n)?;
        let f = be.func_t::<T>("morton_keys")?;
        let mut l = s.launch_builder(&f);
        l.arg(&b.x).arg(&b.y).arg(&b.z).arg(&n32).arg(&frame).arg(&mut keys).arg(&mut id);
        unsafe { l.launch(grid(n, 256)) }.map_err(cuda_err)?;
        sort_pairs(be, &mut keys, &mut id, n, 63)?;

        let (mut x, mut y, mut z) = (be.alloc::<T>(n)?, be.alloc::<T>(n)?, be.alloc::<T>(n)?);
        let f = be.func_t::<T>("gather_points")?;
        let mut l = s.launch_builder(&f);
        l.arg(&b.x).arg(&b.y).arg(&b.z).arg(&id).arg(&n32).arg(&mut x).arg(&mut y).arg(&mut z);
        unsafe { l.launch(grid(n, 256)) }.map_err(cuda_err)?;

        let leaf_size = DEFAULT_LEAF_SIZE;
        let leaf_base = leaf_base_for(n, leaf_size);
        let nodes = 2 * leaf_base as usize;
        let mut lo = [be.alloc::<T>(nodes)?, be.alloc::<T>(nodes)?, be.alloc::<T>(nodes)?];
        let mut hi = [be.alloc::<T>(nodes)?, be.alloc::<T>(nodes)?, be.alloc::<T>(nodes)?];
        let mut min_id = be.alloc::<u32>(nodes)?;
        let f = be.func_t::<T>("leaf_boxes")?;
        let mut l = s.launch_builder(&f);
        l.arg(&x).arg(&y).arg(&z).arg(&id).arg(&n32).arg(&leaf_size).arg(&leaf_base);
        {
            let [lx, ly, lz] = &mut lo;
            let [hx, hy, hz] = &mut hi;
            l.arg(lx).arg(ly).arg(lz).arg(hx).arg(hy).arg(hz).arg(&mut min_id);
            unsafe { l.launch(grid(leaf_base as usize, 256)) }.map_err(cuda_err)?;
        }
        // Wide levels one launch each; the last 1024 nodes in one block that loops upwards.
        let f = be.func_t::<T>("internal_boxes")?;
        let mut level = leaf_base / 2;
        while level >= 1 {
            let single = level <= 1024;
            let cfg = if single { grid(level as usize, level.max(32)) } else { grid(level as usize, 256) };
            let mut l = s.launch_builder(&f);
            let [lx, ly, lz] = &mut lo;
            let [hx, hy, hz] = &mut hi;
            l.arg(&level).arg(lx).arg(ly).arg(lz).arg(hx).arg(hy).arg(hz).arg(&mut min_id);
            unsafe { l.launch(cfg) }.map_err(cuda_err)?;
            if single {
                break;
            }
            level /= 2;
        }
        Ok(DeviceTree { n: n32, leaf_size, leaf_base, keys, x, y, z, id, lo, hi, min_id, frame })
    }

    pub(crate) fn args(&self, be: &CudaBackend) -> TreeArgs {
        let s = &be.stream;
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
                p(&self.x),
                p(&self.y),
                p(&self.z),
                self.id.device_ptr(s).0,
                self.keys.device_ptr(s).0,
                p(&self.frame),
            ],
            n: self.n,
            leaf_size: self.leaf_size,
            leaf_base: self.leaf_base,
            pad: 0,
        }
    }

    pub fn to_host(&self, be: &CudaBackend) -> Result<MortonTree<T>> {
        let s = &be.stream;
        let v = |c: &CudaSlice<T>| s.clone_dtoh(c).map_err(cuda_err);
        let frame = v(&self.frame)?;
        let n = self.n as usize;
        let nodes = 2 * self.leaf_base as usize;
        let mut t = MortonTree {
            frame: MortonFrame { origin: [frame[0], frame[1], frame[2]], scale: frame[3] },
            leaf_size: self.leaf_size,
            leaf_base: self.leaf_base,
            keys: s.clone_dtoh(&self.keys).map_err(cuda_err)?,
            x: v(&self.x)?,
            y: v(&self.y)?,
            z: v(&self.z)?,
            id: s.clone_dtoh(&self.id).map_err(cuda_err)?,
            lo: [v(&self.lo[0])?, v(&self.lo[1])?, v(&self.lo[2])?],
            hi: [v(&self.hi[0])?, v(&self.hi[1])?, v(&self.hi[2])?],
            min_id: s.clone_dtoh(&self.min_id).map_err(cuda_err)?,
        };
        for col in [&mut t.keys].into_iter() {
            col.truncate(n);
        }
        t.x.truncate(n);
        t.y.truncate(n);
        t.z.truncate(n);
        t.id.truncate(n);
        // Node 0 is unused; make it match the CPU's untouched value.
        for d in 0..3 {
            t.lo[d].truncate(nodes);
            t.hi[d].truncate(nodes);
            t.lo[d][0] = T::INFINITY;
            t.hi[d][0] = -T::INFINITY;
        }
        t.min_id.truncate(nodes);
        t.min_id[0] = crate::tree::NO_ID;
        Ok(t)
    }
}
