//! Launches closest_point.cu: closest points on a mesh for many queries. The `TriangleBvh` is
//! built on the host (one sort of the triangles) and uploaded; queries are ordered on the
//! device by Morton code and searched one per thread.

use cudarc::driver::{CudaSlice, DevicePtr, DeviceRepr, PushKernelArg};

use super::radix_sort::sort_pairs;
use super::{cuda_err, grid, CudaBackend};
use crate::closest_point::{check_closest_points, Checked, ClosestPointOptions, ClosestPoints};
use crate::error::Result;
use crate::mesh::Mesh;
use crate::morton::MortonFrame;
use crate::points::Points;
use crate::real::Real;
use crate::triangle_bvh::TriangleBvh;

/// `struct TriBvh<T>` of closest_point.cu: device pointers and the triangle count.
#[repr(C)]
#[derive(Clone, Copy)]
struct TriBvhArgs {
    ptrs: [u64; 7],
    n: u32,
}
// SAFETY: plain old data matching the C struct (7 pointers, a u32, C padding).
unsafe impl DeviceRepr for TriBvhArgs {}

/// A `TriangleBvh` in device memory.
pub struct DeviceTriangleBvh<T> {
    ids: CudaSlice<u32>,
    corners: CudaSlice<T>,
    left: CudaSlice<u32>,
    right: CudaSlice<u32>,
    other_end: CudaSlice<u32>,
    lo: CudaSlice<T>,
    hi: CudaSlice<T>,
    n: usize,
    /// origin x, y, z and scale of the mesh's Morton frame (orders the queries).
    frame: CudaSlice<T>,
}

impl<T: Real> DeviceTriangleBvh<T> {
    pub fn upload(be: &CudaBackend, bvh: &TriangleBvh<T>, frame: &MortonFrame<T>) -> Result<Self> {
        let s = &be.stream;
        let flat = |cols: &[&Vec<T>]| cols.iter().flat_map(|c| c.iter().copied()).collect::<Vec<T>>();
        let c = &bvh.corners;
        let corners = flat(&[&c[0][0], &c[0][1], &c[0][2], &c[1][0], &c[1][1], &c[1][2], &c[2][0], &c[2][1], &c[2][2]]);
        let up = |v: &[T]| s.clone_htod(v).map_err(cuda_err);
        let up32 = |v: &[u32]| s.clone_htod(if v.is_empty() { &[0u32][..] } else { v }).map_err(cuda_err);
        let lo = flat(&[&bvh.lo[0], &bvh.lo[1], &bvh.lo[2]]);
        let hi = flat(&[&bvh.hi[0], &bvh.hi[1], &bvh.hi[2]]);
        let pad = |v: Vec<T>| if v.is_empty() { vec![T::ZERO] } else { v };
        Ok(Self {
            ids: up32(&bvh.ids)?,
            corners: up(&corners)?,
            left: up32(&bvh.left)?,
            right: up32(&bvh.right)?,
            other_end: up32(&bvh.other_end)?,
            lo: up(&pad(lo))?,
            hi: up(&pad(hi))?,
            n: bvh.len(),
            frame: up(&[frame.origin[0], frame.origin[1], frame.origin[2], frame.scale])?,
        })
    }

    fn args(&self, be: &CudaBackend) -> TriBvhArgs {
        let s = &be.stream;
        TriBvhArgs {
            ptrs: [
                self.ids.device_ptr(s).0,
                self.corners.device_ptr(s).0,
                self.left.device_ptr(s).0,
                self.right.device_ptr(s).0,
                self.other_end.device_ptr(s).0,
                self.lo.device_ptr(s).0,
                self.hi.device_ptr(s).0,
            ],
            n: self.n as u32,
        }
    }
}

/// Device buffers of a closest-point result (one entry per query).
pub struct DeviceClosestPoints<T> {
    pub triangle: CudaSlice<u32>,
    /// distance, x, y, z, u, v, w
    pub values: [CudaSlice<T>; 7],
}

impl<T: Real> DeviceClosestPoints<T> {
    pub fn alloc(be: &CudaBackend, n: usize) -> Result<Self> {
        Ok(Self {
            triangle: be.alloc_uninit::<u32>(n)?,
            values: [
                be.alloc_uninit::<T>(n)?,
                be.alloc_uninit::<T>(n)?,
                be.alloc_uninit::<T>(n)?,
                be.alloc_uninit::<T>(n)?,
                be.alloc_uninit::<T>(n)?,
                be.alloc_uninit::<T>(n)?,
                be.alloc_uninit::<T>(n)?,
            ],
        })
    }

    pub fn download(&self, be: &CudaBackend) -> Result<ClosestPoints<T>> {
        let s = &be.stream;
        let get = |v: &CudaSlice<T>| s.clone_dtoh(v).map_err(cuda_err);
        let [d, x, y, z, u, v, w] = &self.values;
        Ok(ClosestPoints {
            triangle: s.clone_dtoh(&self.triangle).map_err(cuda_err)?,
            distance: get(d)?,
            point: Points { x: get(x)?, y: get(y)?, z: get(z)? },
            bary: [get(u)?, get(v)?, get(w)?],
        })
    }
}

/// Closest points with the mesh index and the queries already on the device; `slack` as
/// `cpu::closest_point::rounding_slack` gives it.
pub(crate) fn closest_points_resident<T: Real>(
    be: &CudaBackend,
    bvh: &DeviceTriangleBvh<T>,
    queries: &super::DevicePoints<T>,
    r2: T,
    slack: T,
    out: &mut DeviceClosestPoints<T>,
) -> Result<()> {
    let nq = queries.len;
    let nq32 = nq as u32;
    let mut keys = be.alloc_uninit::<u64>(nq)?;
    let mut order = be.alloc_uninit::<u32>(nq)?;
    let f = be.func_t::<T>("cp_query_keys")?;
    let mut l = be.stream.launch_builder(&f);
    l.arg(&queries.x).arg(&queries.y).arg(&queries.z).arg(&nq32).arg(&bvh.frame).arg(&mut keys).arg(&mut order);
    unsafe { l.launch(grid(nq, 256)) }.map_err(cuda_err)?;
    sort_pairs(be, &mut keys, &mut order, nq, 24)?;
    let args = bvh.args(be);
    let f = be.func_t::<T>("closest_points")?;
    let mut l = be.stream.launch_builder(&f);
    l.arg(&queries.x).arg(&queries.y).arg(&queries.z).arg(&order).arg(&nq32).arg(&args).arg(&r2).arg(&slack);
    l.arg(&mut out.triangle);
    for v in out.values.iter_mut() {
        l.arg(v);
    }
    unsafe { l.launch(grid(nq, 128)) }.map_err(cuda_err)?;
    Ok(())
}

pub(crate) fn closest_points<T: Real>(
    be: &CudaBackend,
    mesh: &Mesh<T>,
    queries: &Points<T>,
    opts: &ClosestPointOptions<T>,
) -> Result<ClosestPoints<T>> {
    let Checked { r2, slack, lo, hi } = check_closest_points(mesh, queries, opts)?;
    let bvh = DeviceTriangleBvh::upload(be, &TriangleBvh::build(mesh), &MortonFrame::from_bounds(lo, hi))?;
    let dq = super::DevicePoints::upload(be, queries)?;
    let mut out = DeviceClosestPoints::alloc(be, queries.len())?;
    closest_points_resident(be, &bvh, &dq, r2, slack, &mut out)?;
    out.download(be)
}
