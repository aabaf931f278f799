//! Point sets in device memory, and the helpers that move them.

use cudarc::driver::{CudaSlice, DevicePtr};

use super::transfer::{upload_columns, upload_columns_visited, Column};
use super::{cuda_err, Gpu};
use crate::error::{Result, Role};
use crate::geometry::magnitude::Magnitudes;
use crate::geometry::points::Points;
use crate::geometry::real::Real;

/// A 3-D point set in GPU memory, as three coordinate columns (the layout of [`Points`]).
/// Made by [`Engine::upload`](crate::Engine::upload); queries on it run on the GPU with no
/// transfer of the points.
pub struct DevicePoints<T> {
    pub(crate) x: CudaSlice<T>,
    pub(crate) y: CudaSlice<T>,
    pub(crate) z: CudaSlice<T>,
    pub(crate) len: usize,
    /// The points' box, `(lo, hi)`, where it was asked for at the upload (`Engine::upload`).
    pub(crate) bounds: Option<([T; 3], [T; 3])>,
    /// The coordinates' magnitudes, where known (`Engine::upload` finds them).
    pub(crate) magnitudes: Option<crate::geometry::magnitude::Magnitudes>,
}

impl<T: Real> DevicePoints<T> {
    pub(crate) fn upload(gpu: &Gpu, p: &Points<T>) -> Result<Self> {
        Self::upload_range(gpu, p, 0, p.len())
    }

    /// Points `s..e` of `p`, the three columns through the staging buffers together.
    pub(crate) fn upload_range(gpu: &Gpu, p: &Points<T>, s: usize, e: usize) -> Result<Self> {
        let (n, stream) = (e - s, gpu.stream());
        if n == 0 {
            let empty = || stream.clone_htod(&[] as &[T]).map_err(cuda_err);
            return Ok(DevicePoints { x: empty()?, y: empty()?, z: empty()?, len: 0, bounds: None, magnitudes: None });
        }
        let (x, y, z) = (gpu.alloc_uninit::<T>(n)?, gpu.alloc_uninit::<T>(n)?, gpu.alloc_uninit::<T>(n)?);
        let size = std::mem::size_of::<T>();
        let column = |d: &CudaSlice<T>, h: &[T]| Column {
            size,
            device: d.device_ptr(stream).0,
            host: h[s..e].as_ptr() as usize,
        };
        upload_columns(gpu, n, &[column(&x, &p.x), column(&y, &p.y), column(&z, &p.z)])?;
        Ok(DevicePoints { x, y, z, len: n, bounds: None, magnitudes: None })
    }

    /// All of `p`, uploaded as `upload_range` does, and checked on the way as
    /// [`Points::validate`] checks (the same errors): each part of a column has its
    /// magnitudes found right after its copy, so the check makes no pass of its own.
    pub(crate) fn upload_checked(gpu: &Gpu, p: &Points<T>, role: Role) -> Result<(Self, Magnitudes)> {
        p.check_shape(role)?;
        let n = p.len();
        let (x, y, z) = (gpu.alloc_uninit::<T>(n)?, gpu.alloc_uninit::<T>(n)?, gpu.alloc_uninit::<T>(n)?);
        let size = std::mem::size_of::<T>();
        let stream = gpu.stream();
        let column =
            |d: &CudaSlice<T>, h: &[T]| Column { size, device: d.device_ptr(stream).0, host: h.as_ptr() as usize };
        let parts =
            upload_columns_visited(gpu, n, &[column(&x, &p.x), column(&y, &p.y), column(&z, &p.z)], |_, at, bytes| {
                // SAFETY: a part of a column of T, whole items (`upload_columns_visited`).
                Magnitudes::of_part(unsafe { std::slice::from_raw_parts(at as *const T, bytes / size) })
            })?;
        let mut found = vec![Some(Magnitudes::NONE); 3];
        for (i, m) in parts {
            found[i] = match (found[i], m) {
                (Some(a), Some(b)) => Some(a.union(b)),
                _ => None,
            };
        }
        let m = p.validate_found(role, found)?;
        Ok((DevicePoints { x, y, z, len: n, bounds: None, magnitudes: Some(m) }, m))
    }

    /// The number of points.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Where query points come from: host memory (uploaded chunk by chunk) or already on the
/// device.
pub(crate) enum PointSource<'a, T> {
    Host(&'a Points<T>),
    Device(&'a DevicePoints<T>),
}

impl<T: Real> PointSource<'_, T> {
    pub(crate) fn len(&self) -> usize {
        match self {
            PointSource::Host(p) => p.len(),
            PointSource::Device(p) => p.len,
        }
    }
}
