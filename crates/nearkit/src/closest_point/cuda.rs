//! Launches closest_point.cu: closest points on a mesh for many queries. The `TriangleBvh`,
//! collapsed to a `WideBvh`, is built on the device (bvh_cuda.rs);
//! queries are ordered on the device by Morton code and searched in packets of 32, a warp
//! walking the tree once for its 32 queries.

use std::marker::PhantomData;
use std::sync::{Mutex, OnceLock};

use cudarc::driver::{CudaSlice, DevicePtr};

use super::bvh_cuda::QueuedBuild;
use super::{query_frame, ClosestPoints};
use crate::closest_point::bvh::{TriangleBvh, WideBvh, WIDE, WIDE_EMPTY, WIDE_LEAF, WIDE_START};
use crate::error::{Error, Result};
use crate::geometry::mesh::Mesh;
use crate::geometry::points::Points;
use crate::geometry::real::Real;
use crate::runtime::cpu::{big_vec, Toucher};
use crate::runtime::cuda::launch::{c_definitions, c_struct, kernels, Address, In, Out};
use crate::runtime::cuda::radix_sort::sort_pairs;
use crate::runtime::cuda::transfer::{download_columns, download_vec, Column};
use crate::runtime::cuda::{cuda_err, threads, CudaSource, DevicePoints, Gpu, COMMON};
use crate::runtime::profile::Phases;
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
    /// The wide tree, once its build has finished (the first search waits for it).
    wide: OnceLock<Wide<T>>,
    /// A build still on its way: the host goes on meanwhile.
    queued: Mutex<Option<QueuedBuild<T>>>,
    /// Per sorted triangle {a, b, c, pad}: 12 values.
    tris: CudaSlice<T>,
    ids: CudaSlice<u32>,
    n: usize,
    /// origin x, y, z and scale of the Morton frame that orders the queries.
    frame: CudaSlice<T>,
}

/// The wide tree's nodes.
struct Wide<T> {
    /// `OrientedBox` records of every node's `WIDE` children, 16 values each.
    boxes: CudaSlice<T>,
    children: CudaSlice<u32>,
    /// Stack entries a warp's search may need.
    stack_cap: usize,
}

impl<T> Wide<T> {
    fn of(boxes: CudaSlice<T>, children: CudaSlice<u32>, depth: usize) -> Self {
        // The depth-first bound, plus two to spare.
        Wide { boxes, children, stack_cap: 1 + (WIDE - 1) * depth + 2 }
    }
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
                "the mesh has {} triangles; the CUDA closest-point index holds fewer than 2^28 (the CPU index holds any number)",
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
            wide: OnceLock::from(Wide::of(up(&boxes)?, up32(&wide.children)?, wide.depth)),
            queued: Mutex::new(None),
            tris: up(&tris)?,
            ids: up32(&bvh.ids)?,
            n: bvh.len(),
            frame: up(&[frame.origin[0], frame.origin[1], frame.origin[2], frame.scale])?,
        })
    }

    /// The index of `mesh` (validated; its vertices' box `lo`, `hi`), built on the GPU. The
    /// build is queued: the first search waits for its end.
    pub(crate) fn build(gpu: &Gpu, mesh: &Mesh<T>, lo: [T; 3], hi: [T; 3], phases: &mut Phases) -> Result<Self> {
        if mesh.triangles.is_empty() {
            return Self::upload(gpu, &TriangleBvh::build(mesh), lo, hi);
        }
        let frame = query_frame(lo, hi);
        let (tris, ids, queued) = super::bvh_cuda::build(gpu, mesh, lo, hi, phases)?;
        Ok(Self {
            wide: OnceLock::new(),
            tris,
            ids,
            queued: Mutex::new(Some(queued)),
            n: mesh.triangles.len(),
            frame: gpu
                .stream()
                .clone_htod(&[frame.origin[0], frame.origin[1], frame.origin[2], frame.scale])
                .map_err(cuda_err)?,
        })
    }

    /// The wide tree, its build finished first if it was queued. The GPU must be held.
    fn wide(&self, gpu: &Gpu) -> Result<&Wide<T>> {
        if let Some(w) = self.wide.get() {
            return Ok(w);
        }
        let mut queued = self.queued.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(q) = queued.take() {
            let w = q.finish(gpu)?;
            let _ = self.wide.set(Wide::of(w.boxes, w.children, w.depth));
        }
        self.wide.get().ok_or_else(|| Error::Cuda("the closest-point index's build failed earlier".into()))
    }

    /// The index's arrays, brought back: box records, children, triangle records, ids and
    /// the stack size (for tests).
    #[allow(clippy::type_complexity)]
    #[cfg(feature = "test-hooks")]
    pub(crate) fn to_host(&self, gpu: &Gpu) -> Result<(Vec<T>, Vec<u32>, Vec<T>, Vec<u32>, usize)> {
        let s = gpu.stream();
        let w = self.wide(gpu)?;
        let ids = if self.n == 0 { Vec::new() } else { s.clone_dtoh(&self.ids).map_err(cuda_err)? };
        Ok((
            s.clone_dtoh(&w.boxes).map_err(cuda_err)?,
            s.clone_dtoh(&w.children).map_err(cuda_err)?,
            s.clone_dtoh(&self.tris).map_err(cuda_err)?,
            ids,
            w.stack_cap,
        ))
    }

    fn args(&self, gpu: &Gpu, w: &Wide<T>) -> WideBvhArgs<T> {
        let s = gpu.stream();
        WideBvhArgs {
            boxes: w.boxes.device_ptr(s).0,
            children: w.children.device_ptr(s).0,
            tris: self.tris.device_ptr(s).0,
            ids: self.ids.device_ptr(s).0,
            stack_cap: w.stack_cap as u32,
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
    let mut keys = gpu.alloc_uninit::<u64>(nq)?;
    let mut order = gpu.alloc_uninit::<u32>(nq)?;
    let s = gpu.stream();
    let at = |c: &CudaSlice<T>| Address::of(c, s);
    let q = [at(&queries.x), at(&queries.y), at(&queries.z)];
    let [d, x, y, z, u, v, w] = &out.values;
    let found = [at(d), at(x), at(y), at(z), at(u), at(v), at(w)];
    search(gpu, bvh, q, nq, &mut keys, &mut order, r2, slack, Address::of(&out.triangle, s), found)
}

/// Queries `q` (`nq` of them, device columns x, y, z) ordered along the curve and searched,
/// their triangles into `tri` and their distance, point and barycentrics into `found`.
#[allow(clippy::too_many_arguments)]
fn search<T: Real>(
    gpu: &Gpu,
    bvh: &DeviceTriangleBvh<T>,
    q: [Address<T>; 3],
    nq: usize,
    keys: &mut CudaSlice<u64>,
    order: &mut CudaSlice<u32>,
    r2: T,
    slack: T,
    tri: Address<u32>,
    found: [Address<T>; 7],
) -> Result<()> {
    let nq32 = nq as u32;
    cp_query_keys::<T>(gpu, threads(nq, 256), q[0], q[1], q[2], nq32, &bvh.frame, &mut *keys, &mut *order)?;
    sort_pairs(gpu, keys, order, nq, 30)?;
    // A warp per 32 queries, each warp's stack (4 bytes an entry) in shared memory. Four warps
    // a block were as fast as two and a little faster than eight or sixteen.
    let wide = bvh.wide(gpu)?;
    let warps = (STACK_BYTES / (4 * wide.stack_cap)).clamp(1, 4);
    if 4 * wide.stack_cap > STACK_BYTES {
        return Err(Error::InvalidArgument("the mesh's index is too deep for the CUDA closest-point search".into()));
    }
    let mut cfg = threads(nq, (warps * 32) as u32);
    cfg.shared_mem_bytes = (warps * 4 * wide.stack_cap) as u32;
    let [d, x, y, z, u, v, w] = found;
    let args = bvh.args(gpu, wide);
    closest_points::<T>(gpu, cfg, q[0], q[1], q[2], &*order, nq32, args, r2, slack, tri, d, x, y, z, u, v, w)
}

/// Each query's closest point on the mesh of `bvh` within squared radius `r2`, from host
/// memory into fresh vectors, whose pages other threads fault in while the GPU searches.
pub(crate) fn closest_points_host<T: Real>(
    gpu: &Gpu,
    bvh: &DeviceTriangleBvh<T>,
    queries: &Points<T>,
    r2: T,
    slack: T,
    phases: &mut Phases,
) -> Result<ClosestPoints<T>> {
    let n = queries.len();
    let dq = DevicePoints::upload(gpu, queries)?;
    let mut out = DeviceClosestPoints::alloc(gpu, n)?;
    phases.mark_after("queries up", || gpu.synchronize())?;
    let mut found = ClosestPoints {
        triangle: big_vec::<u32>(n),
        distance: big_vec(n),
        point: Points { x: big_vec(n), y: big_vec(n), z: big_vec(n) },
        bary: [big_vec(n), big_vec(n), big_vec(n)],
    };
    let s = gpu.stream();
    let size = std::mem::size_of::<T>();
    let [bu, bv, bw] = &mut found.bary;
    let column = |host: &mut Vec<T>, dev: &CudaSlice<T>| Column {
        size,
        device: dev.device_ptr(s).0,
        host: host.as_mut_ptr() as usize,
    };
    let [d, x, y, z, u, v, w] = &out.values;
    let down = [
        Column { size: 4, device: out.triangle.device_ptr(s).0, host: found.triangle.as_mut_ptr() as usize },
        column(&mut found.distance, d),
        column(&mut found.point.x, x),
        column(&mut found.point.y, y),
        column(&mut found.point.z, z),
        column(bu, u),
        column(bv, v),
        column(bw, w),
    ];
    let touched = Toucher::start(&down.map(|c| (c.host, n * c.size)));
    closest_points_resident(gpu, bvh, &dq, r2, slack, &mut out)?;
    drop(touched);
    phases.mark_after("searched", || gpu.synchronize())?;
    download_columns(gpu, n, &down)?;
    // SAFETY: `download_columns` wrote all n values of every column.
    unsafe {
        found.triangle.set_len(n);
        for c in [&mut found.distance, &mut found.point.x, &mut found.point.y, &mut found.point.z] {
            c.set_len(n);
        }
        for c in &mut found.bary {
            c.set_len(n);
        }
    }
    phases.mark("results down");
    Ok(found)
}
