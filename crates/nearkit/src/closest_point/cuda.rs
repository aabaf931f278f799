//! Launches closest_point.cu: closest points on a mesh for many queries. The `TriangleBvh` is
//! built on the host (one sort of the triangles), collapsed to a `WideBvh` and uploaded;
//! queries are ordered on the device by Morton code and searched in packets of 32, a warp
//! walking the tree once for its 32 queries.

use std::marker::PhantomData;

use cudarc::driver::{CudaSlice, DevicePtr};

use super::{query_frame, ClosestPoints};
use crate::closest_point::bvh::{TriangleBvh, WideBvh, WIDE, WIDE_EMPTY, WIDE_LEAF, WIDE_START};
use crate::error::{Error, Result};
use crate::geometry::points::Points;
use crate::geometry::real::Real;
use crate::runtime::cuda::launch::{c_definitions, c_struct, kernels, In, Out};
use crate::runtime::cuda::radix_sort::sort_pairs;
use crate::runtime::cuda::transfer::download_vec;
use crate::runtime::cuda::{cuda_err, threads, CudaSource, DevicePoints, Gpu, COMMON};
use crate::tree::cuda::TREE_HEADER;

/// Shared memory a block of the closest-point kernel may take for its warps' stacks.
const STACK_BYTES: usize = 48 * 1024;

/// The closest point of a triangle (triangle.rs) in C, shared with the collision kernels.
pub(crate) static TRIANGLE: CudaSource = CudaSource::plain("triangle.cuh", include_str!("triangle.cuh"));

static CLOSEST_POINT: CudaSource = CudaSource {
    file: "closest_point.cu",
    text: include_str!("closest_point.cu"),
    constants: || {
        vec![
            ("WIDE", WIDE.to_string()),
            ("WIDE_LEAF", format!("{WIDE_LEAF}u")),
            ("WIDE_START", format!("{WIDE_START}u")),
            ("WIDE_EMPTY", format!("{WIDE_EMPTY}u")),
        ]
    },
    structs: c_definitions!(WideBvhArgs<f32>),
};

c_struct! {
    /// `struct WideBvh<T>` of closest_point.cu: device pointers and the stack size.
    pub(crate) struct WideBvhArgs<T> as "WideBvh<{R}>" {
        boxes: u64 = "const R*",
        children: u64 = "const u32*",
        tris: u64 = "const R*",
        ids: u64 = "const u32*",
        /// Stack entries per warp.
        stack_cap: u32 = "u32",
        /// Triangles.
        n: u32 = "u32",
    }
}

kernels! {
    module KERNELS = "closest_point", [&COMMON, &TREE_HEADER, &TRIANGLE, &CLOSEST_POINT];
    /// Each query's Morton key (top 30 bits) in the index's query frame, and its index.
    fn cp_query_keys<T>(qx: In<T>, qy: In<T>, qz: In<T>, n: u32, frame: In<T>, keys: Out<u64>, vals: Out<u32>);
    /// Each query's closest point, a warp per 32 queries in `order`.
    fn closest_points<T>(
        qx: In<T>,
        qy: In<T>,
        qz: In<T>,
        order: In<u32>,
        nq: u32,
        t: WideBvhArgs<T>,
        r2: T,
        slack: T,
        out_tri: Out<u32>,
        out_d: Out<T>,
        out_x: Out<T>,
        out_y: Out<T>,
        out_z: Out<T>,
        out_u: Out<T>,
        out_v: Out<T>,
        out_w: Out<T>,
    );
}

/// A mesh's closest-point index in device memory: the `TriangleBvh` collapsed to a `WideBvh`.
pub(crate) struct DeviceTriangleBvh<T> {
    /// `OrientedBox` records of every node's `WIDE` children, 16 values each.
    boxes: CudaSlice<T>,
    children: CudaSlice<u32>,
    /// Per sorted triangle {a, b, c, pad}: 12 values.
    tris: CudaSlice<T>,
    ids: CudaSlice<u32>,
    /// Stack entries a warp's search may need.
    stack_cap: usize,
    n: usize,
    /// origin x, y, z and scale of the Morton frame that orders the queries.
    frame: CudaSlice<T>,
}

impl<T: Real> DeviceTriangleBvh<T> {
    /// `lo`, `hi`: the mesh's box.
    pub(crate) fn upload(gpu: &Gpu, bvh: &TriangleBvh<T>, lo: [T; 3], hi: [T; 3]) -> Result<Self> {
        let s = gpu.stream();
        // (1M queries around the bunny: 2.50–2.54 ms with `query_frame`, against 2.83–2.87
        // with the mesh's own box and 24-bit keys.)
        let frame = query_frame(lo, hi);
        let wide = WideBvh::of(bvh).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "the mesh has {} triangles; the CUDA closest-point index holds fewer than 2^28 (use --device cpu)",
                bvh.len()
            ))
        })?;
        let tris: Vec<T> = (0..bvh.len().max(1))
            .flat_map(|s| {
                let c = if s < bvh.len() { bvh.triangle(s) } else { [[T::ZERO; 3]; 3] };
                c.into_iter().flatten().chain([T::ZERO; 3])
            })
            .collect();
        let boxes: Vec<T> =
            wide.boxes.iter().flat_map(|b| b.axes.iter().chain(&b.lo).chain(&b.hi).chain([&b.pad])).copied().collect();
        let up = |v: &[T]| s.clone_htod(v).map_err(cuda_err);
        let up32 = |v: &[u32]| s.clone_htod(if v.is_empty() { &[0u32][..] } else { v }).map_err(cuda_err);
        Ok(Self {
            boxes: up(&boxes)?,
            children: up32(&wide.children)?,
            tris: up(&tris)?,
            ids: up32(&bvh.ids)?,
            // The depth-first bound, plus two to spare.
            stack_cap: 1 + (WIDE - 1) * wide.depth + 2,
            n: bvh.len(),
            frame: up(&[frame.origin[0], frame.origin[1], frame.origin[2], frame.scale])?,
        })
    }

    fn args(&self, gpu: &Gpu) -> WideBvhArgs<T> {
        let s = gpu.stream();
        WideBvhArgs {
            boxes: self.boxes.device_ptr(s).0,
            children: self.children.device_ptr(s).0,
            tris: self.tris.device_ptr(s).0,
            ids: self.ids.device_ptr(s).0,
            stack_cap: self.stack_cap as u32,
            n: self.n as u32,
            _real: PhantomData,
        }
    }
}

/// A closest-point result in GPU memory (one entry per query), for
/// [`MeshIndex::closest_points_device`](crate::MeshIndex::closest_points_device).
pub struct DeviceClosestPoints<T> {
    pub(crate) triangle: CudaSlice<u32>,
    /// distance, x, y, z, u, v, w
    pub(crate) values: [CudaSlice<T>; 7],
}

impl<T: Real> DeviceClosestPoints<T> {
    pub(crate) fn alloc(gpu: &Gpu, n: usize) -> Result<Self> {
        Ok(Self {
            triangle: gpu.alloc_uninit::<u32>(n)?,
            values: [
                gpu.alloc_uninit::<T>(n)?,
                gpu.alloc_uninit::<T>(n)?,
                gpu.alloc_uninit::<T>(n)?,
                gpu.alloc_uninit::<T>(n)?,
                gpu.alloc_uninit::<T>(n)?,
                gpu.alloc_uninit::<T>(n)?,
                gpu.alloc_uninit::<T>(n)?,
            ],
        })
    }

    /// The number of queries it holds.
    pub fn len(&self) -> usize {
        self.triangle.len()
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.triangle.is_empty()
    }

    pub(crate) fn download(&self, gpu: &Gpu) -> Result<ClosestPoints<T>> {
        let get = |v: &CudaSlice<T>| download_vec(gpu, v);
        let [d, x, y, z, u, v, w] = &self.values;
        Ok(ClosestPoints {
            triangle: download_vec(gpu, &self.triangle)?,
            distance: get(d)?,
            point: Points { x: get(x)?, y: get(y)?, z: get(z)? },
            bary: [get(u)?, get(v)?, get(w)?],
        })
    }
}

/// Closest points with the mesh index and the queries already on the device; `slack` as
/// `rounding_slack` gives it.
pub(crate) fn closest_points_resident<T: Real>(
    gpu: &Gpu,
    bvh: &DeviceTriangleBvh<T>,
    queries: &DevicePoints<T>,
    r2: T,
    slack: T,
    out: &mut DeviceClosestPoints<T>,
) -> Result<()> {
    let nq = queries.len;
    let nq32 = nq as u32;
    let mut keys = gpu.alloc_uninit::<u64>(nq)?;
    let mut order = gpu.alloc_uninit::<u32>(nq)?;
    let q = queries;
    cp_query_keys::<T>(gpu, threads(nq, 256), &q.x, &q.y, &q.z, nq32, &bvh.frame, &mut keys, &mut order)?;
    sort_pairs(gpu, &mut keys, &mut order, nq, 30)?;
    // A warp per 32 queries, each warp's stack (4 bytes an entry) in shared memory. Four warps
    // a block were as fast as two and a little faster than eight or sixteen.
    let warps = (STACK_BYTES / (4 * bvh.stack_cap)).clamp(1, 4);
    if 4 * bvh.stack_cap > STACK_BYTES {
        return Err(Error::InvalidArgument("the mesh's index is too deep for the CUDA closest-point search".into()));
    }
    let mut cfg = threads(nq, (warps * 32) as u32);
    cfg.shared_mem_bytes = (warps * 4 * bvh.stack_cap) as u32;
    let [d, x, y, z, u, v, w] = &mut out.values;
    let args = bvh.args(gpu);
    closest_points::<T>(
        gpu,
        cfg,
        &q.x,
        &q.y,
        &q.z,
        &order,
        nq32,
        args,
        r2,
        slack,
        &mut out.triangle,
        d,
        x,
        y,
        z,
        u,
        v,
        w,
    )
}

/// Each query's closest point on the mesh of `bvh` within squared radius `r2`.
pub(crate) fn closest_points_host<T: Real>(
    gpu: &Gpu,
    bvh: &DeviceTriangleBvh<T>,
    queries: &Points<T>,
    r2: T,
    slack: T,
) -> Result<ClosestPoints<T>> {
    let dq = DevicePoints::upload(gpu, queries)?;
    let mut out = DeviceClosestPoints::alloc(gpu, queries.len())?;
    closest_points_resident(gpu, bvh, &dq, r2, slack, &mut out)?;
    out.download(gpu)
}
