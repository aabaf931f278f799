//! Point sets in device memory, and the helpers that move them.

use cudarc::driver::CudaSlice;

use super::{cuda_err, Gpu};
use crate::error::Result;
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

    /// Points `s..e` of `p`.
    pub(crate) fn upload_range(gpu: &Gpu, p: &Points<T>, s: usize, e: usize) -> Result<Self> {
        let up = |c: &[T]| -> Result<CudaSlice<T>> {
            if c.is_empty() {
                return gpu.stream().clone_htod(c).map_err(cuda_err);
            }
            let mut d = gpu.alloc_uninit::<T>(c.len())?;
            super::transfer::upload(gpu, c, &mut d)?;
            Ok(d)
        };
        Ok(DevicePoints {
            x: up(&p.x[s..e])?,
            y: up(&p.y[s..e])?,
            z: up(&p.z[s..e])?,
            len: e - s,
            bounds: None,
            magnitudes: None,
        })
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
