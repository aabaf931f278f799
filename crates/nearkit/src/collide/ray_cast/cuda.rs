//! Launches ray_cast.cu: ray casts on the device. The mesh's tree is uploaded once per mesh,
//! the bodies' tree (made on the host) per call; rays go up and hits come down in chunks, a
//! thread per ray. All hits take two passes: a count per ray (cut at the limit), then, with
//! the rows' offsets from the host, each ray's nearest hits kept sorted in its row.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, DevicePtr, DeviceRepr};
use rayon::prelude::*;

use super::bvh::{BodyBvh, BvhNode, MeshBvh, EMPTY, LEAF, STACK};
use super::intersect::UnitRay;
use super::{ray_error, Ray, RayHit, RayHits, TaggedHit};
use crate::collide::world::{World, KIND_BODY};
use crate::error::{Error, Result};
use crate::geometry::points::NO_ID;
use crate::runtime::cuda::launch::{c_definitions, c_struct, kernels, In, Out};
use crate::runtime::cuda::transfer::{download, download_vec, upload};
use crate::runtime::cuda::{threads, CudaSource, Gpu, COMMON};

static RAY_CAST: CudaSource = CudaSource {
    file: "ray_cast.cu",
    text: include_str!("ray_cast.cu"),
    constants: || {
        vec![
            ("RAY_STACK", STACK.to_string()),
            ("RAY_LEAF", format!("{LEAF}u")),
            ("RAY_EMPTY", format!("{EMPTY}u")),
            ("RAY_KIND_BODY", format!("{KIND_BODY}u")),
        ]
    },
    structs: c_definitions!(BvhNode, RayMeshView, RayBodyView),
};

c_struct! {
    /// `struct RayMeshView` of ray_cast.cu: the mesh's tree.
    pub(crate) struct RayMeshView as "RayMeshView" {
        nodes: u64 = "const BvhNode*",
        /// 9 per sorted triangle.
        corners: u64 = "const double*",
        n_nodes: u32 = "u32",
        /// The mesh's layer bits.
        layer: u32 = "u32",
    }
}

c_struct! {
    /// `struct RayBodyView` of ray_cast.cu: the live bodies' tree.
    pub(crate) struct RayBodyView as "RayBodyView" {
        nodes: u64 = "const BvhNode*",
        /// 3 per sorted body.
        center: u64 = "const double*",
        /// S⁻¹·Rᵀ, row by row: 9 per sorted body.
        unit: u64 = "const double*",
        n_nodes: u32 = "u32",
        pad: u32 = "u32",
    }
}

kernels! {
    module KERNELS = "ray_cast", [&COMMON, &RAY_CAST];
    /// Each ray's nearest hit: its tagged id (`NO_ID`: none) and 7 values (t, point, normal).
    fn ray_first_hits(
        rays: In<f64>,
        masks: In<u32>,
        n: u32,
        mesh: RayMeshView,
        mesh_ids: In<u32>,
        bodies: RayBodyView,
        body_ids: In<u32>,
        out_tag: Out<u32>,
        out: Out<f64>,
    );
    /// Each ray's hits, up to `limit`.
    fn ray_hit_counts(
        rays: In<f64>,
        masks: In<u32>,
        n: u32,
        mesh: RayMeshView,
        mesh_ids: In<u32>,
        bodies: RayBodyView,
        body_ids: In<u32>,
        limit: u32,
        counts: Out<u32>,
    );
    /// Each ray's `counts[i]` nearest hits, sorted, in its row from `offsets[i]`.
    fn ray_all_hits(
        rays: In<f64>,
        masks: In<u32>,
        n: u32,
        mesh: RayMeshView,
        mesh_ids: In<u32>,
        bodies: RayBodyView,
        body_ids: In<u32>,
        offsets: In<u64>,
        counts: In<u32>,
        out_tag: Out<u32>,
        out: Out<f64>,
    );
}

/// Rays per launch: bounds the device memory a call holds (about 240 MB of rays and hits).
const CHUNK: usize = 1 << 22;

/// Threads per block.
const BLOCK: u32 = 128;

/// `src` in new device memory (one element at least).
fn upload_new<T: DeviceRepr + Copy + Send + Sync>(gpu: &Gpu, src: &[T]) -> Result<CudaSlice<T>> {
    let mut d = gpu.alloc_uninit::<T>(src.len())?;
    if !src.is_empty() {
        upload(gpu, src, &mut d)?;
    }
    Ok(d)
}

/// A tree on the device.
struct DeviceTree {
    nodes: CudaSlice<BvhNode>,
    /// Per sorted primitive: corners (9), or centre (3) and unit-ball map (9).
    data: [CudaSlice<f64>; 2],
    ids: CudaSlice<u32>,
    n_nodes: u32,
}

impl DeviceTree {
    fn mesh(gpu: &Gpu, m: &MeshBvh) -> Result<Self> {
        let corners: Vec<f64> = m.corners.iter().flat_map(|c| c.iter().flatten().copied()).collect();
        Ok(DeviceTree {
            nodes: upload_new(gpu, &m.nodes)?,
            data: [upload_new(gpu, &corners)?, gpu.alloc_uninit::<f64>(1)?],
            ids: upload_new(gpu, &m.ids)?,
            n_nodes: m.nodes.len() as u32,
        })
    }

    fn bodies(gpu: &Gpu, b: &BodyBvh) -> Result<Self> {
        let center: Vec<f64> = b.center.as_flattened().to_vec();
        let unit: Vec<f64> = b.unit.par_iter().flat_map_iter(|u| u.iter().flatten().copied()).collect();
        Ok(DeviceTree {
            nodes: upload_new(gpu, &b.nodes)?,
            data: [upload_new(gpu, &center)?, upload_new(gpu, &unit)?],
            ids: upload_new(gpu, &b.ids)?,
            n_nodes: b.nodes.len() as u32,
        })
    }

    fn empty(gpu: &Gpu) -> Result<Self> {
        Ok(DeviceTree {
            nodes: gpu.alloc_uninit::<BvhNode>(1)?,
            data: [gpu.alloc_uninit::<f64>(1)?, gpu.alloc_uninit::<f64>(1)?],
            ids: gpu.alloc_uninit::<u32>(1)?,
            n_nodes: 0,
        })
    }

    fn mesh_view(&self, gpu: &Gpu, layer: u32) -> RayMeshView {
        let s = gpu.stream();
        RayMeshView {
            nodes: self.nodes.device_ptr(s).0,
            corners: self.data[0].device_ptr(s).0,
            n_nodes: self.n_nodes,
            layer,
        }
    }

    fn body_view(&self, gpu: &Gpu) -> RayBodyView {
        let s = gpu.stream();
        RayBodyView {
            nodes: self.nodes.device_ptr(s).0,
            center: self.data[0].device_ptr(s).0,
            unit: self.data[1].device_ptr(s).0,
            n_nodes: self.n_nodes,
            pad: 0,
        }
    }
}

/// A collider's ray casts on one GPU: the mesh's tree as last uploaded, and the host
/// buffers a call fills, kept from call to call (fresh memory for a million rays took
/// longer, in page faults, than the kernel).
pub(crate) struct CudaRayCaster {
    gpu: Arc<Gpu>,
    mesh: Option<(Arc<MeshBvh>, DeviceTree)>,
    host: HostBuffers,
}

/// Host memory a call reuses: the rays flattened, their masks, and the hits as they come
/// down (tags and 7 values each).
#[derive(Default)]
struct HostBuffers {
    flat: Vec<f64>,
    masks: Vec<u32>,
    tags: Vec<u32>,
    vals: Vec<f64>,
}

/// `v` holding `n` values (old ones or zeros: every use overwrites them).
fn sized<T: Copy + Default>(v: &mut Vec<T>, n: usize) -> &mut [T] {
    if v.len() < n {
        v.resize(n, T::default());
    }
    &mut v[..n]
}

/// Downloads `src` into the first `src.len()` values of `v`.
fn download_into<T: DeviceRepr + Copy + Default + Send + Sync>(
    gpu: &Gpu,
    src: &cudarc::driver::CudaView<'_, T>,
    v: &mut Vec<T>,
) -> Result<()> {
    let n = src.len();
    let dst = sized(v, n);
    // SAFETY: initialised values viewed as possibly uninitialised ones, all overwritten.
    let dst = unsafe { &mut *(dst as *mut [T] as *mut [std::mem::MaybeUninit<T>]) };
    download(gpu, src, dst)
}

/// One chunk of rays on the device: 7 values each (origin, unit direction, max distance)
/// and the masks.
struct DeviceRays {
    rays: CudaSlice<f64>,
    masks: CudaSlice<u32>,
    n: usize,
}

impl DeviceRays {
    /// Rays `first..` (`rays`), made unit (`UnitRay`: an error names a bad one) and flattened.
    fn upload(gpu: &Gpu, rays: &[Ray], first: usize, host: &mut HostBuffers) -> Result<Self> {
        let flat = sized(&mut host.flat, 7 * rays.len());
        let masks = sized(&mut host.masks, rays.len());
        flat.par_chunks_mut(7)
            .zip(masks.par_iter_mut())
            .zip(rays.par_iter())
            .enumerate()
            .with_min_len(4096)
            .try_for_each(|(i, ((d, m), r))| {
                let u = UnitRay::new(r).map_err(|e| ray_error(first + i, e))?;
                d[..3].copy_from_slice(&u.origin);
                d[3..6].copy_from_slice(&u.dir);
                d[6] = u.max_distance;
                *m = u.mask;
                Ok::<(), Error>(())
            })?;
        Ok(DeviceRays { rays: upload_new(gpu, flat)?, masks: upload_new(gpu, masks)?, n: rays.len() })
    }
}

/// The hit from a tagged id and its 7 values (t, point, normal), as the kernels write them.
fn unpack(tag: u32, v: &[f64]) -> RayHit {
    let h = TaggedHit { t: v[0], tagged: tag, at: 0 };
    RayHit { distance: v[0], kind: h.kind(), id: h.id(), point: [v[1], v[2], v[3]], normal: [v[4], v[5], v[6]] }
}

impl CudaRayCaster {
    pub fn new(gpu: Arc<Gpu>) -> Self {
        CudaRayCaster { gpu, mesh: None, host: HostBuffers::default() }
    }

    /// The mesh's tree on the device (uploaded when it is not the one held).
    fn hold_mesh(&mut self, mesh: Option<&Arc<MeshBvh>>) -> Result<()> {
        match mesh {
            None => self.mesh = None,
            Some(m) => {
                if !self.mesh.as_ref().is_some_and(|(held, _)| Arc::ptr_eq(held, m)) {
                    self.mesh = None;
                    let d = DeviceTree::mesh(&self.gpu, m)?;
                    self.mesh = Some((m.clone(), d));
                }
            }
        }
        Ok(())
    }

    /// Each ray's nearest hit, as the CPU finds it.
    pub fn first_hits(
        &mut self,
        world: &World,
        mesh: Option<&Arc<MeshBvh>>,
        bodies: &BodyBvh,
        rays: &[Ray],
    ) -> Result<Vec<Option<RayHit>>> {
        let gpu_arc = self.gpu.clone();
        let gpu = &*gpu_arc;
        let _busy = gpu.lock();
        self.hold_mesh(mesh)?;
        let none = DeviceTree::empty(gpu)?;
        let m = self.mesh.as_ref().map_or(&none, |(_, d)| d);
        let b = DeviceTree::bodies(gpu, bodies)?;
        let (mv, bv) = (m.mesh_view(gpu, world.mesh_layer()), b.body_view(gpu));
        let mut out = Vec::with_capacity(rays.len());
        for (k, chunk) in rays.chunks(CHUNK).enumerate() {
            let r = DeviceRays::upload(gpu, chunk, k * CHUNK, &mut self.host)?;
            let mut tags = gpu.alloc_uninit::<u32>(r.n)?;
            let mut vals = gpu.alloc_uninit::<f64>(7 * r.n)?;
            ray_first_hits(
                gpu,
                threads(r.n, BLOCK),
                &r.rays,
                &r.masks,
                r.n as u32,
                mv,
                &m.ids,
                bv,
                &b.ids,
                &mut tags,
                &mut vals,
            )?;
            download_into(gpu, &tags.slice(0..r.n), &mut self.host.tags)?;
            download_into(gpu, &vals.slice(0..7 * r.n), &mut self.host.vals)?;
            let (tags, vals) = (&self.host.tags[..r.n], &self.host.vals[..7 * r.n]);
            out.par_extend(
                tags.par_iter()
                    .zip(vals.par_chunks_exact(7))
                    .with_min_len(4096)
                    .map(|(&t, v)| (t != NO_ID).then(|| unpack(t, v))),
            );
        }
        Ok(out)
    }

    /// Each ray's `limit` nearest hits, as the CPU finds them.
    pub fn all_hits(
        &mut self,
        world: &World,
        mesh: Option<&Arc<MeshBvh>>,
        bodies: &BodyBvh,
        rays: &[Ray],
        limit: usize,
    ) -> Result<RayHits> {
        let gpu_arc = self.gpu.clone();
        let gpu = &*gpu_arc;
        let _busy = gpu.lock();
        self.hold_mesh(mesh)?;
        let none = DeviceTree::empty(gpu)?;
        let m = self.mesh.as_ref().map_or(&none, |(_, d)| d);
        let b = DeviceTree::bodies(gpu, bodies)?;
        let (mv, bv) = (m.mesh_view(gpu, world.mesh_layer()), b.body_view(gpu));
        let limit32 = limit.min(u32::MAX as usize) as u32;
        let mut offsets = Vec::with_capacity(rays.len() + 1);
        offsets.push(0usize);
        let mut hits = Vec::new();
        for (k, chunk) in rays.chunks(CHUNK).enumerate() {
            let r = DeviceRays::upload(gpu, chunk, k * CHUNK, &mut self.host)?;
            let mut counts = gpu.alloc_uninit::<u32>(r.n)?;
            let cfg = threads(r.n, BLOCK);
            ray_hit_counts(gpu, cfg, &r.rays, &r.masks, r.n as u32, mv, &m.ids, bv, &b.ids, limit32, &mut counts)?;
            let host_counts: Vec<u32> = download_vec(gpu, &counts.slice(0..r.n))?;
            let mut starts = Vec::with_capacity(r.n);
            let mut total = 0u64;
            for &c in &host_counts {
                starts.push(total);
                total += c as u64;
            }
            let total = total as usize;
            hits.try_reserve(total).map_err(|_| Error::OutOfMemory(format!("{total} ray hits")))?;
            let base = *offsets.last().expect("one at least");
            offsets.extend(starts.iter().zip(&host_counts).map(|(&s, &c)| base + s as usize + c as usize));
            if total == 0 {
                continue;
            }
            let starts = upload_new(gpu, &starts)?;
            let mut tags = gpu.alloc_uninit::<u32>(total)?;
            let mut vals = gpu.alloc_uninit::<f64>(7 * total)?;
            ray_all_hits(
                gpu, cfg, &r.rays, &r.masks, r.n as u32, mv, &m.ids, bv, &b.ids, &starts, &counts, &mut tags, &mut vals,
            )?;
            let tags: Vec<u32> = download_vec(gpu, &tags.slice(0..total))?;
            let vals: Vec<f64> = download_vec(gpu, &vals.slice(0..7 * total))?;
            hits.par_extend(
                tags.par_iter().zip(vals.par_chunks_exact(7)).with_min_len(4096).map(|(&t, v)| unpack(t, v)),
            );
        }
        Ok(RayHits { offsets, hits })
    }
}
