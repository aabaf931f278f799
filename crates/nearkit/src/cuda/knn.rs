//! Launches knn.cu: exact k-nearest neighbours on the device, queries in Morton-ordered chunks.

use cudarc::driver::PushKernelArg;

use super::closest_pairs::{chunk_size, for_each_chunk, DevicePoints, Source};
use super::tree_build::{BuildInput, DeviceTree};
use super::{cuda_err, grid, CudaBackend};
use crate::error::Result;
use crate::points::Points;
use crate::query::{check_knn, Knn, KnnOptions};
use crate::real::Real;

/// Output entries (queries × k) per chunk: bounds the device buffers for large k.
const MAX_CHUNK_ENTRIES: usize = 1 << 26;

pub(super) fn knn<T: Real>(
    be: &CudaBackend,
    data: &Points<T>,
    queries: &Points<T>,
    opts: &KnnOptions<T>,
) -> Result<Knn<T>> {
    let (k, r2) = check_knn(data, queries, opts)?;
    let tree = DeviceTree::build_from(be, BuildInput::Owned(DevicePoints::upload(be, data)?))?;
    let args = tree.args(be);
    let n = queries.len();
    let mut out = Knn { k, ids: Vec::with_capacity(n * k), distances: Vec::with_capacity(n * k) };
    let f = be.func_t::<T>("knn_rows")?;
    let (k32, exclude) = (k as u32, u32::from(opts.exclude_self));
    let chunk = chunk_size().min((MAX_CHUNK_ENTRIES / k).max(1));
    for_each_chunk(be, &Source::Host(queries), &tree, chunk, |c| {
        let len = c.points.len;
        let mut ids = be.alloc_uninit::<u32>(len * k)?;
        let mut dist = be.alloc_uninit::<T>(len * k)?;
        let (len32, off32) = (len as u32, c.offset as u32);
        let p = &c.points;
        let mut l = be.stream.launch_builder(&f);
        l.arg(&p.x).arg(&p.y).arg(&p.z).arg(&c.ids).arg(&len32).arg(&off32).arg(&args).arg(&k32).arg(&r2);
        l.arg(&exclude).arg(&mut ids).arg(&mut dist);
        unsafe { l.launch(grid(len, 128)) }.map_err(cuda_err)?;
        out.ids.extend_from_slice(&be.stream.clone_dtoh(&ids.slice(0..len * k)).map_err(cuda_err)?);
        out.distances.extend_from_slice(&be.stream.clone_dtoh(&dist.slice(0..len * k)).map_err(cuda_err)?);
        Ok(())
    })?;
    Ok(out)
}
