//! Launches ray_cast.cu: ray casts on the device. The mesh's tree is uploaded once per mesh,
//! the bodies' tree (made on the host) per call; rays go up and hits come down in chunks, a
//! thread per ray. First hits go in pieces through page-locked buffers the caster keeps, the
//! host's work on one piece beside the GPU's on the next; each piece is searched in the Morton
//! order of its rays' origins (then their directions' octants), sorted on the device, which
//! changes the order of the work only. All hits take two passes: a count
//! per ray (cut at the limit), then, with the rows' offsets from the host, each ray's nearest
//! hits kept sorted in its row.

use std::sync::Arc;

use cudarc::driver::{sys, CudaSlice, DevicePtr, DeviceRepr, PinnedHostSlice};
use rayon::prelude::*;

use super::bvh::{BodyBvh, BvhNode, MeshBvh, EMPTY, LEAF, STACK};
use super::heightfield::{MARGIN_OF_ORIGIN, MARGIN_OF_TERRAIN};
use super::instances::ShapeTrees;
use super::intersect::UnitRay;
use super::{ray_error, Ray, RayHit, RayHits, TaggedHit};
use crate::closest_point::cuda::TRIANGLE;
use crate::collide::heightfield::{Heightfield, HeightfieldView, HEIGHTFIELD};
use crate::collide::instance::MARGIN;
use crate::collide::world::{World, ID_BITS, KIND_BODY, KIND_HEIGHTFIELD, KIND_INSTANCE};
use crate::error::{Error, Result};
use crate::geometry::points::NO_ID;
use crate::runtime::cpu::RowPtr;
use crate::runtime::cuda::launch::{c_definitions, c_struct, kernels, Address, In, Out};
use crate::runtime::cuda::transfer::{download_vec, upload};
use crate::runtime::cuda::{cuda_err, threads, CudaSource, Gpu, COMMON};

static RAY_CAST: CudaSource = CudaSource {
    file: "ray_cast.cu",
    text: include_str!("ray_cast.cu"),
    constants: || {
        vec![
            ("RAY_STACK", STACK.to_string()),
            ("RAY_LEAF", format!("{LEAF}u")),
            ("RAY_EMPTY", format!("{EMPTY}u")),
            ("RAY_KIND_BODY", format!("{KIND_BODY}u")),
            ("RAY_KIND_HEIGHTFIELD", format!("{KIND_HEIGHTFIELD}u")),
            ("RAY_MARGIN_OF_TERRAIN", format!("{MARGIN_OF_TERRAIN:?}")),
            ("RAY_MARGIN_OF_ORIGIN", format!("{MARGIN_OF_ORIGIN:?}")),
            ("RAY_KIND_INSTANCE", format!("{KIND_INSTANCE}u")),
            ("RAY_ID_BITS", format!("{ID_BITS}u")),
            ("RAY_INSTANCE_MARGIN", format!("{MARGIN:?}")),
        ]
    },
    structs: c_definitions!(BvhNode, RayMeshView, RayBodyView, RayShape, RayInstanceView),
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

c_struct! {
    /// `struct RayShape` of ray_cast.cu: where a shape's tree and corners lie in
    /// `RayInstanceView`'s arrays.
    pub(crate) struct RayShape as "RayShape" {
        /// The largest magnitude of a corner's coordinate (`MeshShape::reach`).
        reach: f64 = "double",
        /// Its first triangle's place in `shape_corners` (the shape's own order).
        corners: u64 = "u64",
        /// Its first node in `shape_nodes` (0 nodes: nothing to hit).
        nodes: u32 = "u32",
        n_nodes: u32 = "u32",
        /// Its first leaf's place in `shape_ids`.
        ids: u32 = "u32",
        pad: u32 = "u32",
    }
}

c_struct! {
    /// `struct RayInstanceView` of ray_cast.cu: the world's instances (`ray_cast::instances`).
    pub(crate) struct RayInstanceView as "RayInstanceView" {
        /// The tree over the live instances' boxes, and the instance slot each leaf names.
        nodes: u64 = "const BvhNode*",
        slot: u64 = "const u32*",
        /// Per instance slot: rotation (row by row) and position, 12 values; its shape slot.
        place: u64 = "const double*",
        shape: u64 = "const u32*",
        /// Per shape slot.
        shapes: u64 = "const RayShape*",
        /// The shapes' trees (each numbered from its first node), their leaves' triangles,
        /// and their corners (9 per triangle).
        shape_nodes: u64 = "const BvhNode*",
        shape_ids: u64 = "const u32*",
        shape_corners: u64 = "const double*",
        /// The instances' tree's nodes (0: no instances).
        n_nodes: u32 = "u32",
        pad: u32 = "u32",
    }
}

impl RayInstanceView {
    /// No instances.
    fn none() -> Self {
        RayInstanceView {
            nodes: 0,
            slot: 0,
            place: 0,
            shape: 0,
            shapes: 0,
            shape_nodes: 0,
            shape_ids: 0,
            shape_corners: 0,
            n_nodes: 0,
            pad: 0,
        }
    }
}

kernels! {
    module KERNELS = "ray_cast", [&COMMON, &TRIANGLE, &HEIGHTFIELD, &RAY_CAST];
    /// Each ray's nearest hit: its tagged id (`NO_ID`: none), its triangle in its own mesh
    /// (`out_tri`, unless null) and 7 values (t, point, normal).
    fn ray_first_hits(
        rays: In<f64>,
        masks: In<u32>,
        n: u32,
        order: In<u32>,
        mesh: RayMeshView,
        mesh_ids: In<u32>,
        terrain: HeightfieldView,
        bodies: RayBodyView,
        body_ids: In<u32>,
        instances: RayInstanceView,
        out_tag: Out<u32>,
        out_tri: Out<u32>,
        out: Out<f64>,
    );
    /// The order a piece of rays is searched in: keys (Morton code of the origin, then the
    /// direction's octant) and the rays' places, for the radix sort.
    fn ray_order_keys(rays: In<f64>, n: u32, lo0: f64, lo1: f64, lo2: f64, scale: f64, keys: Out<u64>, order: Out<u32>);
    /// Each ray's hits, up to `limit`.
    fn ray_hit_counts(
        rays: In<f64>,
        masks: In<u32>,
        n: u32,
        mesh: RayMeshView,
        mesh_ids: In<u32>,
        terrain: HeightfieldView,
        bodies: RayBodyView,
        body_ids: In<u32>,
        instances: RayInstanceView,
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
        terrain: HeightfieldView,
        bodies: RayBodyView,
        body_ids: In<u32>,
        instances: RayInstanceView,
        offsets: In<u64>,
        counts: In<u32>,
        out_tag: Out<u32>,
        out_tri: Out<u32>,
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

    /// `b` in `held`'s buffers (made, or remade larger, when they are short).
    fn hold_bodies(held: &mut Option<Self>, gpu: &Gpu, b: &BodyBvh) -> Result<()> {
        let need = [b.nodes.len(), 3 * b.center.len(), 9 * b.unit.len(), b.ids.len()].map(|n| n.max(1));
        let fits = |t: &Self| {
            t.nodes.len() >= need[0]
                && t.data[0].len() >= need[1]
                && t.data[1].len() >= need[2]
                && t.ids.len() >= need[3]
        };
        if !held.as_ref().is_some_and(fits) {
            // Room for a quarter more, so that a world that grows a little is not remade.
            let room = need.map(|n| n + n / 4);
            *held = None;
            *held = Some(DeviceTree {
                nodes: gpu.alloc_uninit::<BvhNode>(room[0])?,
                data: [gpu.alloc_uninit::<f64>(room[1])?, gpu.alloc_uninit::<f64>(room[2])?],
                ids: gpu.alloc_uninit::<u32>(room[3])?,
                n_nodes: 0,
            });
        }
        let t = held.as_mut().expect("made above");
        let unit: Vec<f64> = b.unit.par_iter().flat_map_iter(|u| u.iter().flatten().copied()).collect();
        if !b.nodes.is_empty() {
            upload(gpu, &b.nodes, &mut t.nodes.slice_mut(0..b.nodes.len()))?;
            upload(gpu, b.center.as_flattened(), &mut t.data[0].slice_mut(0..3 * b.center.len()))?;
            upload(gpu, &unit, &mut t.data[1].slice_mut(0..unit.len()))?;
            upload(gpu, &b.ids, &mut t.ids.slice_mut(0..b.ids.len()))?;
        }
        t.n_nodes = b.nodes.len() as u32;
        Ok(())
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

/// The world's instances on the device: the shapes' trees and corners (kept while the world's
/// shapes keep their trees), and the instances' tree and placements (uploaded again when the
/// instances change).
struct DeviceInstances {
    /// The shapes' trees uploaded, by slot (`None`: a free slot).
    trees: Vec<Option<Arc<MeshBvh>>>,
    shapes: DeviceShapes,
    /// The world (by id) and the version of its instances uploaded.
    placed_for: (u64, u64),
    placements: DevicePlacements,
}

/// Every shape's tree and corners, one after another (`RayShape` says where each lies).
struct DeviceShapes {
    shapes: CudaSlice<RayShape>,
    nodes: CudaSlice<BvhNode>,
    ids: CudaSlice<u32>,
    corners: CudaSlice<f64>,
}

/// The instances' tree (its leaves' instance slots) and, per slot, placement and shape.
struct DevicePlacements {
    nodes: CudaSlice<BvhNode>,
    slot: CudaSlice<u32>,
    place: CudaSlice<f64>,
    shape: CudaSlice<u32>,
    n_nodes: u32,
}

impl DevicePlacements {
    fn upload(gpu: &Gpu, world: &World) -> Result<Self> {
        let inst = world.instances();
        let tree = inst.tree();
        let slot: Vec<u32> = tree.order.iter().map(|&k| inst.live[k as usize]).collect();
        let slots = inst.slots();
        let mut place = vec![0.0; 12 * slots.len()];
        let mut shape = vec![0u32; slots.len()];
        for (k, i) in slots.iter().enumerate() {
            if let Some(i) = i {
                place[12 * k..12 * k + 9].copy_from_slice(i.rot.as_flattened());
                place[12 * k + 9..12 * k + 12].copy_from_slice(&i.placement.position);
                shape[k] = i.placement.shape.0;
            }
        }
        Ok(DevicePlacements {
            nodes: upload_new(gpu, &tree.nodes)?,
            slot: upload_new(gpu, &slot)?,
            place: upload_new(gpu, &place)?,
            shape: upload_new(gpu, &shape)?,
            n_nodes: tree.nodes.len() as u32,
        })
    }
}

impl DeviceShapes {
    /// The shapes of `world` with these trees (by slot).
    fn upload(gpu: &Gpu, world: &World, trees: &[Option<Arc<MeshBvh>>]) -> Result<Self> {
        let slots = world.instances().shape_slots();
        let (mut shapes, mut nodes, mut ids, mut corners) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (tree, shape) in trees.iter().zip(slots) {
            let (Some(tree), Some(shape)) = (tree, shape) else {
                shapes.push(RayShape { reach: 0.0, corners: 0, nodes: 0, n_nodes: 0, ids: 0, pad: 0 });
                continue;
            };
            if u32::try_from(ids.len() + tree.ids.len()).is_err()
                || u32::try_from(nodes.len() + tree.nodes.len()).is_err()
            {
                return Err(Error::InvalidArgument("the shapes' trees hold 2^32 or more nodes".into()));
            }
            shapes.push(RayShape {
                reach: shape.reach,
                corners: (corners.len() / 9) as u64,
                nodes: nodes.len() as u32,
                n_nodes: tree.nodes.len() as u32,
                ids: ids.len() as u32,
                pad: 0,
            });
            nodes.extend_from_slice(&tree.nodes);
            ids.extend_from_slice(&tree.ids);
            corners.extend(shape.mesh.corners.iter().flat_map(|c| c.iter().flatten().copied()));
        }
        Ok(DeviceShapes {
            shapes: upload_new(gpu, &shapes)?,
            nodes: upload_new(gpu, &nodes)?,
            ids: upload_new(gpu, &ids)?,
            corners: upload_new(gpu, &corners)?,
        })
    }
}

impl DeviceInstances {
    fn view(&self, gpu: &Gpu) -> RayInstanceView {
        let s = gpu.stream();
        let (p, sh) = (&self.placements, &self.shapes);
        RayInstanceView {
            nodes: p.nodes.device_ptr(s).0,
            slot: p.slot.device_ptr(s).0,
            place: p.place.device_ptr(s).0,
            shape: p.shape.device_ptr(s).0,
            shapes: sh.shapes.device_ptr(s).0,
            shape_nodes: sh.nodes.device_ptr(s).0,
            shape_ids: sh.ids.device_ptr(s).0,
            shape_corners: sh.corners.device_ptr(s).0,
            n_nodes: p.n_nodes,
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
    /// The heightfield as last uploaded: its heights and its tiles' heights.
    terrain: Option<(Arc<Heightfield>, CudaSlice<f64>, CudaSlice<f64>)>,
    /// The tree searched where the world has no mesh.
    none: Option<DeviceTree>,
    /// The last call's bodies' tree (its buffers reused), and the host tree it holds.
    bodies: Option<DeviceTree>,
    bodies_held: Option<Arc<BodyBvh>>,
    /// The world's instances as last uploaded.
    instances: Option<DeviceInstances>,
    host: HostBuffers,
    pipeline: Pipeline,
    /// Print each first-hits call's phase times to stderr.
    pub profile: bool,
}

/// What the kernels take of the trees.
struct Trees {
    mesh: RayMeshView,
    mesh_ids: Address<u32>,
    terrain: HeightfieldView,
    bodies: RayBodyView,
    body_ids: Address<u32>,
    instances: RayInstanceView,
}

/// Host memory all hits reuse: the rays flattened, and their masks.
#[derive(Default)]
struct HostBuffers {
    flat: Vec<f64>,
    masks: Vec<u32>,
}

/// `v` holding `n` values (old ones or zeros: every use overwrites them).
fn sized<T: Copy + Default>(v: &mut Vec<T>, n: usize) -> &mut [T] {
    if v.len() < n {
        v.resize(n, T::default());
    }
    &mut v[..n]
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

/// Rays per piece of a chunk of `n`: a quarter of it, so that the host's work on one piece
/// hides behind the GPU's on another, within bounds that keep a piece's fixed costs (copies,
/// a launch) small beside its work.
fn piece_len(n: usize) -> usize {
    n.div_ceil(4).clamp(1 << 12, 1 << 18)
}

/// The buffers first hits reuse from call to call, sized for the largest chunk so far: rays
/// (7 values each) and masks, tags, instance hits' triangles and hits (7 values each), in
/// page-locked host memory and on the device.
#[derive(Default)]
struct Pipeline {
    cap: usize,
    held: Option<PipelineBuffers>,
}

struct PipelineBuffers {
    flat: PinnedHostSlice<f64>,
    masks: PinnedHostSlice<u32>,
    tags: PinnedHostSlice<u32>,
    tris: PinnedHostSlice<u32>,
    vals: PinnedHostSlice<f64>,
    dev_rays: CudaSlice<f64>,
    dev_masks: CudaSlice<u32>,
    dev_tags: CudaSlice<u32>,
    dev_tris: CudaSlice<u32>,
    dev_vals: CudaSlice<f64>,
}

/// The host buffers' addresses, for the host's threads.
struct HostPtrs {
    flat: RowPtr<f64>,
    masks: RowPtr<u32>,
    tags: RowPtr<u32>,
    tris: RowPtr<u32>,
    vals: RowPtr<f64>,
}

/// The device buffers' addresses.
struct DeviceAddresses {
    rays: u64,
    masks: u64,
    tags: u64,
    tris: u64,
    vals: u64,
}

impl Pipeline {
    /// Buffers for `n` rays at least.
    fn hold(&mut self, gpu: &Gpu, n: usize) -> Result<&mut PipelineBuffers> {
        let n = n.max(1);
        if self.held.is_none() || self.cap < n {
            self.held = None;
            let ctx = gpu.stream().context().clone();
            // SAFETY: every value is written (by the host or a copy) before it is read.
            let (flat, masks, tags, tris, vals) = unsafe {
                (
                    ctx.alloc_pinned_with_flags::<f64>(7 * n, 0).map_err(cuda_err)?,
                    ctx.alloc_pinned_with_flags::<u32>(n, 0).map_err(cuda_err)?,
                    ctx.alloc_pinned_with_flags::<u32>(n, 0).map_err(cuda_err)?,
                    ctx.alloc_pinned_with_flags::<u32>(n, 0).map_err(cuda_err)?,
                    ctx.alloc_pinned_with_flags::<f64>(7 * n, 0).map_err(cuda_err)?,
                )
            };
            self.held = Some(PipelineBuffers {
                flat,
                masks,
                tags,
                tris,
                vals,
                dev_rays: gpu.alloc_uninit::<f64>(7 * n)?,
                dev_masks: gpu.alloc_uninit::<u32>(n)?,
                dev_tags: gpu.alloc_uninit::<u32>(n)?,
                dev_tris: gpu.alloc_uninit::<u32>(n)?,
                dev_vals: gpu.alloc_uninit::<f64>(7 * n)?,
            });
            self.cap = n;
        }
        Ok(self.held.as_mut().expect("held above"))
    }
}

impl PipelineBuffers {
    fn host_ptrs(&mut self) -> Result<HostPtrs> {
        Ok(HostPtrs {
            flat: RowPtr(self.flat.as_mut_ptr().map_err(cuda_err)?),
            masks: RowPtr(self.masks.as_mut_ptr().map_err(cuda_err)?),
            tags: RowPtr(self.tags.as_mut_ptr().map_err(cuda_err)?),
            tris: RowPtr(self.tris.as_mut_ptr().map_err(cuda_err)?),
            vals: RowPtr(self.vals.as_mut_ptr().map_err(cuda_err)?),
        })
    }

    fn device_addresses(&self, gpu: &Gpu) -> DeviceAddresses {
        let s = gpu.stream();
        DeviceAddresses {
            rays: self.dev_rays.device_ptr(s).0,
            masks: self.dev_masks.device_ptr(s).0,
            tags: self.dev_tags.device_ptr(s).0,
            tris: self.dev_tris.device_ptr(s).0,
            vals: self.dev_vals.device_ptr(s).0,
        }
    }
}

impl HostPtrs {
    /// `rays` made unit (they were checked) into slots `off..` of the rays and masks.
    ///
    /// # Safety
    /// The slots lie inside the buffers, and nothing else touches them meanwhile.
    unsafe fn flatten(&self, rays: &[Ray], off: usize) {
        rays.par_iter().enumerate().with_min_len(4096).for_each(|(i, r)| {
            let u = UnitRay::new(r).expect("rays are checked before they are cast");
            let at = 7 * (off + i);
            // SAFETY: the caller's promise; each ray writes its own slots.
            unsafe {
                let d = self.flat.span(at, 7);
                d[..3].copy_from_slice(&u.origin);
                d[3..6].copy_from_slice(&u.dir);
                d[6] = u.max_distance;
                self.masks.write(off + i, u.mask);
            }
        });
    }

    /// The hits of slots `off..off + n` into `out`'s slots from `to` (`tris`: whether the
    /// triangles came down, as they do where the world has instances).
    ///
    /// # Safety
    /// The slots lie inside the buffers and `out`'s capacity; nothing else touches them.
    unsafe fn unpack(&self, off: usize, n: usize, tris: bool, out: &RowPtr<Option<RayHit>>, to: usize) {
        (0..n).into_par_iter().with_min_len(4096).for_each(|i| {
            // SAFETY: the caller's promise; each ray reads and writes its own slots.
            unsafe {
                let tag = *self.tags.span(off + i, 1).first().expect("one");
                let tri = if tris { self.tris.span(off + i, 1)[0] } else { 0 };
                let hit = (tag != NO_ID).then(|| unpack(tag, tri, self.vals.span(7 * (off + i), 7)));
                out.write(to + i, hit);
            }
        });
    }
}

/// The hit from a tagged id, an instance's triangle, and its 7 values (t, point, normal), as
/// the kernels write them.
fn unpack(tag: u32, tri: u32, v: &[f64]) -> RayHit {
    let h = TaggedHit { t: v[0], tagged: tag, at: tri };
    RayHit {
        distance: v[0],
        kind: h.kind(),
        id: h.id(),
        triangle: h.triangle(),
        point: [v[1], v[2], v[3]],
        normal: [v[4], v[5], v[6]],
    }
}

impl CudaRayCaster {
    pub fn new(gpu: Arc<Gpu>) -> Self {
        CudaRayCaster {
            gpu,
            mesh: None,
            terrain: None,
            none: None,
            bodies: None,
            bodies_held: None,
            instances: None,
            host: HostBuffers::default(),
            pipeline: Pipeline::default(),
            profile: false,
        }
    }

    /// The trees a call searches, on the device: the mesh's (uploaded when it is not the one
    /// held; an empty tree, made once, for none) and the bodies' (into buffers kept from call
    /// to call: device memory allocated and freed per call cost more than a small batch).
    fn trees(
        &mut self,
        gpu: &Gpu,
        world: &World,
        mesh: Option<&Arc<MeshBvh>>,
        bodies: &Arc<BodyBvh>,
        shapes: &ShapeTrees,
    ) -> Result<Trees> {
        self.hold_mesh(mesh)?;
        if self.none.is_none() {
            self.none = Some(DeviceTree::empty(gpu)?);
        }
        let m = self.mesh.as_ref().map(|(_, d)| d).or(self.none.as_ref()).expect("made above");
        let (mesh, mesh_ids) = (m.mesh_view(gpu, world.mesh_layer()), Address::of(&m.ids, gpu.stream()));
        // The same host tree as last time (the world's bodies did not change): already there.
        if !self.bodies_held.as_ref().is_some_and(|h| Arc::ptr_eq(h, bodies)) {
            self.bodies_held = None;
            DeviceTree::hold_bodies(&mut self.bodies, gpu, bodies)?;
            self.bodies_held = Some(bodies.clone());
        }
        let terrain = self.hold_terrain(world)?;
        let instances = self.hold_instances(world, shapes)?;
        let b = self.bodies.as_ref().expect("held above");
        Ok(Trees {
            mesh,
            mesh_ids,
            terrain,
            bodies: b.body_view(gpu),
            body_ids: Address::of(&b.ids, gpu.stream()),
            instances,
        })
    }

    /// The world's instances on the device: the shapes' trees uploaded when they are not the
    /// ones held, the placements when the instances changed.
    fn hold_instances(&mut self, world: &World, shapes: &ShapeTrees) -> Result<RayInstanceView> {
        if world.instances().is_empty() {
            self.instances = None;
            return Ok(RayInstanceView::none());
        }
        let gpu = &*self.gpu;
        let trees: Vec<Option<Arc<MeshBvh>>> = shapes.slots().map(|t| t.cloned()).collect();
        let same_trees = |held: &[Option<Arc<MeshBvh>>]| {
            held.len() == trees.len()
                && held.iter().zip(&trees).all(|(a, b)| match (a, b) {
                    (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                    (None, None) => true,
                    _ => false,
                })
        };
        let placed_for = (world.id(), world.versions().instances);
        match self.instances.as_mut() {
            Some(held) if same_trees(&held.trees) => {
                if held.placed_for != placed_for {
                    held.placements = DevicePlacements::upload(gpu, world)?;
                    held.placed_for = placed_for;
                }
            }
            _ => {
                self.instances = None;
                let shapes = DeviceShapes::upload(gpu, world, &trees)?;
                let placements = DevicePlacements::upload(gpu, world)?;
                self.instances = Some(DeviceInstances { trees, shapes, placed_for, placements });
            }
        }
        Ok(self.instances.as_ref().expect("held above").view(gpu))
    }

    /// The world's heightfield on the device (its heights uploaded when they are not the ones
    /// held).
    fn hold_terrain(&mut self, world: &World) -> Result<HeightfieldView> {
        let Some(h) = world.heightfield_shared() else {
            self.terrain = None;
            return Ok(HeightfieldView::none());
        };
        if !self.terrain.as_ref().is_some_and(|(held, ..)| Arc::ptr_eq(held, h)) {
            self.terrain = None;
            let heights = upload_new(&self.gpu, h.heights())?;
            let tiles = upload_new(&self.gpu, h.tiles().as_flattened())?;
            self.terrain = Some((h.clone(), heights, tiles));
        }
        let (h, heights, tiles) = self.terrain.as_ref().expect("held above");
        let s = self.gpu.stream();
        Ok(HeightfieldView::of(h, heights.device_ptr(s).0, tiles.device_ptr(s).0))
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

    /// Each ray's nearest hit, as the CPU finds it, into `out` (cleared first; its memory is
    /// reused). The rays were checked (`check_rays`). A chunk goes in pieces: the host makes
    /// piece p + 1's rays unit (into page-locked memory, which the device copies directly)
    /// and unpacks piece p − 1's hits while the GPU copies and searches piece p.
    pub fn first_hits_into(
        &mut self,
        world: &World,
        mesh: Option<&Arc<MeshBvh>>,
        bodies: &Arc<BodyBvh>,
        shapes: &ShapeTrees,
        rays: &[Ray],
        out: &mut Vec<Option<RayHit>>,
    ) -> Result<()> {
        let gpu_arc = self.gpu.clone();
        let gpu = &*gpu_arc;
        let _busy = gpu.lock();
        let t = self.trees(gpu, world, mesh, bodies, shapes)?;
        // Only an instance's hit names a triangle apart from its id.
        let tris = t.instances.n_nodes > 0;
        out.clear();
        out.try_reserve(rays.len()).map_err(|_| Error::OutOfMemory(format!("the hits of {} rays", rays.len())))?;
        let dst = RowPtr(out.as_mut_ptr());
        // The box of the mesh's tree (else the bodies'): each piece's rays are searched in the
        // Morton order of their origins in it (a warp's rays then start near each other).
        let root_box = |nodes: &[BvhNode]| -> Option<([f64; 3], f64)> {
            let n = nodes.first()?;
            let (mut lo, mut hi) = ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]);
            for k in 0..2 {
                if n.child[k] != EMPTY {
                    let (l, h) = n.child_box(k);
                    for a in 0..3 {
                        lo[a] = lo[a].min(l[a] as f64);
                        hi[a] = hi[a].max(h[a] as f64);
                    }
                }
            }
            let extent = (0..3).map(|a| hi[a] - lo[a]).fold(0.0f64, f64::max);
            (extent > 0.0 && extent.is_finite()).then(|| (lo, 1024.0 / extent))
        };
        let frame = mesh.and_then(|m| root_box(&m.nodes)).or_else(|| root_box(&bodies.nodes));
        let start = std::time::Instant::now();
        // Host time making rays unit, waiting for pieces, and waiting then unpacking hits.
        let mut times = [std::time::Duration::ZERO; 3];
        let bufs = self.pipeline.hold(gpu, rays.len().min(CHUNK))?;
        let stream = gpu.stream();
        let host = bufs.host_ptrs()?;
        let dev = bufs.device_addresses(gpu);
        for (k, chunk) in rays.chunks(CHUNK).enumerate() {
            let mut pending: Option<(usize, usize, cudarc::driver::CudaEvent)> = None;
            let piece_len = piece_len(chunk.len());
            for (p, piece) in chunk.chunks(piece_len).enumerate() {
                let (off, n) = (p * piece_len, piece.len());
                // SAFETY: the piece's slots lie inside the buffers (sized for a chunk), and the
                // device is done with them: each chunk waits for its last piece.
                let clock = std::time::Instant::now();
                unsafe { host.flatten(piece, off) };
                times[0] += clock.elapsed();
                let bytes = |count: usize, size: usize| (count * size) as u64;
                // SAFETY: page-locked host memory and device memory holding the piece; the
                // host does not touch the piece again before its event.
                unsafe {
                    sys::cuMemcpyHtoDAsync_v2(
                        dev.rays + bytes(7 * off, 8),
                        host.flat.0.add(7 * off) as *const _,
                        7 * n * 8,
                        stream.cu_stream(),
                    )
                    .result()
                    .map_err(cuda_err)?;
                    sys::cuMemcpyHtoDAsync_v2(
                        dev.masks + bytes(off, 4),
                        host.masks.0.add(off) as *const _,
                        n * 4,
                        stream.cu_stream(),
                    )
                    .result()
                    .map_err(cuda_err)?;
                }
                let piece_rays = Address::<f64>::raw(dev.rays + bytes(7 * off, 8));
                // Freed in stream order, after the search that reads it.
                let mut sorted = None;
                if let Some((lo, scale)) = frame {
                    let (mut keys, mut order) = (gpu.alloc_uninit::<u64>(n)?, gpu.alloc_uninit::<u32>(n)?);
                    let cfg = threads(n, 256);
                    ray_order_keys(gpu, cfg, piece_rays, n as u32, lo[0], lo[1], lo[2], scale, &mut keys, &mut order)?;
                    crate::runtime::cuda::radix_sort::sort_pairs(gpu, &mut keys, &mut order, n, 33)?;
                    sorted = Some(order);
                }
                let order = match &sorted {
                    Some(o) => Address::of(o, stream),
                    None => Address::<u32>::raw(0),
                };
                ray_first_hits(
                    gpu,
                    threads(n, BLOCK),
                    piece_rays,
                    Address::<u32>::raw(dev.masks + bytes(off, 4)),
                    n as u32,
                    order,
                    t.mesh,
                    t.mesh_ids,
                    t.terrain,
                    t.bodies,
                    t.body_ids,
                    t.instances,
                    Address::<u32>::raw(dev.tags + bytes(off, 4)),
                    Address::<u32>::raw(if tris { dev.tris + bytes(off, 4) } else { 0 }),
                    Address::<f64>::raw(dev.vals + bytes(7 * off, 8)),
                )?;
                // SAFETY: as for the uploads.
                unsafe {
                    sys::cuMemcpyDtoHAsync_v2(
                        host.tags.0.add(off) as *mut _,
                        dev.tags + bytes(off, 4),
                        n * 4,
                        stream.cu_stream(),
                    )
                    .result()
                    .map_err(cuda_err)?;
                    sys::cuMemcpyDtoHAsync_v2(
                        host.vals.0.add(7 * off) as *mut _,
                        dev.vals + bytes(7 * off, 8),
                        7 * n * 8,
                        stream.cu_stream(),
                    )
                    .result()
                    .map_err(cuda_err)?;
                    if tris {
                        sys::cuMemcpyDtoHAsync_v2(
                            host.tris.0.add(off) as *mut _,
                            dev.tris + bytes(off, 4),
                            n * 4,
                            stream.cu_stream(),
                        )
                        .result()
                        .map_err(cuda_err)?;
                    }
                }
                let done = stream.record_event(None).map_err(cuda_err)?;
                if let Some((off, n, e)) = pending.replace((off, n, done)) {
                    let clock = std::time::Instant::now();
                    e.synchronize().map_err(cuda_err)?;
                    times[1] += clock.elapsed();
                    // SAFETY: the piece's hits are down; its slots of `out` are in capacity.
                    unsafe { host.unpack(off, n, tris, &dst, k * CHUNK + off) };
                    times[2] += clock.elapsed();
                }
            }
            if let Some((off, n, e)) = pending {
                let clock = std::time::Instant::now();
                e.synchronize().map_err(cuda_err)?;
                times[1] += clock.elapsed();
                // SAFETY: as above.
                unsafe { host.unpack(off, n, tris, &dst, k * CHUNK + off) };
                times[2] += clock.elapsed();
            }
        }
        // SAFETY: every ray's slot was written by the unpacking of its piece.
        unsafe { out.set_len(rays.len()) };
        if self.profile {
            eprintln!(
                "profile cuda rays: {} rays in {:?}: making them unit {:?}, waiting for the device {:?}, unpacking {:?}",
                rays.len(),
                start.elapsed(),
                times[0],
                times[1],
                times[2] - times[1]
            );
        }
        Ok(())
    }

    /// Each ray's `limit` nearest hits, as the CPU finds them.
    pub fn all_hits(
        &mut self,
        world: &World,
        mesh: Option<&Arc<MeshBvh>>,
        bodies: &Arc<BodyBvh>,
        shapes: &ShapeTrees,
        rays: &[Ray],
        limit: usize,
    ) -> Result<RayHits> {
        let gpu_arc = self.gpu.clone();
        let gpu = &*gpu_arc;
        let _busy = gpu.lock();
        let t = self.trees(gpu, world, mesh, bodies, shapes)?;
        let limit32 = limit.min(u32::MAX as usize) as u32;
        let mut offsets = Vec::with_capacity(rays.len() + 1);
        offsets.push(0usize);
        let mut hits = Vec::new();
        for (k, chunk) in rays.chunks(CHUNK).enumerate() {
            let r = DeviceRays::upload(gpu, chunk, k * CHUNK, &mut self.host)?;
            let mut counts = gpu.alloc_uninit::<u32>(r.n)?;
            let cfg = threads(r.n, BLOCK);
            ray_hit_counts(
                gpu,
                cfg,
                &r.rays,
                &r.masks,
                r.n as u32,
                t.mesh,
                t.mesh_ids,
                t.terrain,
                t.bodies,
                t.body_ids,
                t.instances,
                limit32,
                &mut counts,
            )?;
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
            let mut tris = gpu.alloc_uninit::<u32>(total)?;
            let mut vals = gpu.alloc_uninit::<f64>(7 * total)?;
            ray_all_hits(
                gpu,
                cfg,
                &r.rays,
                &r.masks,
                r.n as u32,
                t.mesh,
                t.mesh_ids,
                t.terrain,
                t.bodies,
                t.body_ids,
                t.instances,
                &starts,
                &counts,
                &mut tags,
                &mut tris,
                &mut vals,
            )?;
            let tags: Vec<u32> = download_vec(gpu, &tags.slice(0..total))?;
            let tris: Vec<u32> = download_vec(gpu, &tris.slice(0..total))?;
            let vals: Vec<f64> = download_vec(gpu, &vals.slice(0..7 * total))?;
            hits.par_extend(
                tags.par_iter()
                    .zip(&tris)
                    .zip(vals.par_chunks_exact(7))
                    .with_min_len(4096)
                    .map(|((&t, &tri), v)| unpack(t, tri, v)),
            );
        }
        Ok(RayHits { offsets, hits })
    }
}
