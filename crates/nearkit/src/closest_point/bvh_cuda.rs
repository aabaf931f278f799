//! Launches bvh_cuda.cu: a mesh's `TriangleBvh`, collapsed to its `WideBvh`, built on the GPU
//! for an index that lives there (the host build took most of an end-to-end query). The tree
//! has the host's shape (same keys, topology and collapse); its boxes are computed the host's
//! way in another summation order, and the search is exact with any boxes that hold their
//! triangles, so the results are bitwise the host-built index's.

use cudarc::driver::{CudaSlice, LaunchConfig};

use super::bvh::{FLAT_ENOUGH, WIDE, WIDE_EMPTY, WIDE_LEAF, WIDE_START};
use crate::error::{Error, Result};
use crate::geometry::mesh::Mesh;
use crate::geometry::morton::MortonFrame;
use crate::geometry::real::Real;
use crate::runtime::cuda::launch::{kernels, In, Out};
use crate::runtime::cuda::radix_sort::sort_pairs;
use crate::runtime::cuda::transfer::upload;
use crate::runtime::cuda::{cuda_err, threads, CudaSource, DevicePoints, Gpu, COMMON};
use crate::runtime::profile::Phases;
use crate::tree::cuda::{radix_nodes, TREE_HEADER};

static BVH_CUDA: CudaSource = CudaSource {
    file: "bvh_cuda.cu",
    text: include_str!("bvh_cuda.cu"),
    constants: || {
        vec![
            ("WIDE", WIDE.to_string()),
            ("WIDE_LEAF", format!("{WIDE_LEAF}u")),
            ("WIDE_EMPTY", format!("{WIDE_EMPTY}u")),
            ("FLAT_ENOUGH", format!("{FLAT_ENOUGH:?}")),
            ("HUGE_BOX", HUGE_BOX.to_string()),
            ("HUGE_BLOCK", HUGE_BLOCK.to_string()),
        ]
    },
    structs: Vec::new,
};

kernels! {
    module KERNELS = "closest_point_build", [&COMMON, &TREE_HEADER, &BVH_CUDA];
    /// Each triangle's Morton code (of its centroid) and its index.
    fn cpb_keys<T>(vx: In<T>, vy: In<T>, vz: In<T>, tris: In<u32>, n: u32, frame: In<T>, keys: Out<u64>, vals: Out<u32>);
    /// The sorted triangles' 12-value records.
    fn cpb_records<T>(vx: In<T>, vy: In<T>, vz: In<T>, tris: In<u32>, ids: In<u32>, n: u32, recs: Out<T>);
    /// The boxes of every internal node, then of every single triangle: those of few
    /// triangles a thread each, then the others a warp each.
    fn cpb_small_boxes<T>(recs: In<T>, other_end: In<u32>, n: u32, boxes: Out<T>);
    /// The middle-sized boxes a warp each; the huge ones listed in `huge` (a count, then nodes).
    fn cpb_large_boxes<T>(recs: In<T>, other_end: In<u32>, n: u32, boxes: Out<T>, huge: Out<u32>);
    /// The listed huge boxes, a block each.
    fn cpb_huge_boxes<T>(recs: In<T>, other_end: In<u32>, n: u32, huge: In<u32>, boxes: Out<T>);
    /// The collapse to `WIDE` children, in one block.
    fn cpb_collapse(
        left: In<u32>,
        right: In<u32>,
        other_end: In<u32>,
        n: u32,
        cap: u32,
        queue: Out<u32>,
        children: Out<u32>,
        slot_ref: Out<u32>,
        out: Out<u32>,
    );
    /// Each wide slot's box.
    fn cpb_wide_boxes<T>(boxes: In<T>, slot_ref: In<u32>, n: u32, values: u64, wide: Out<T>);
}

/// A node of more triangles than this is huge: its box takes a block of `HUGE_BLOCK` threads
/// (a warp alone would scan the root's every triangle); `HUGE_BLOCKS` blocks take turns.
const HUGE_BOX: usize = 2048;
const HUGE_BLOCK: u32 = 512;
const HUGE_BLOCKS: u32 = 264;

/// Threads of the one block that collapses the tree.
const COLLAPSE_BLOCK: u32 = 1024;

/// A `WideBvh` in device memory, in the layout closest_point.cu reads.
pub(crate) struct DeviceWideBvh<T> {
    /// 16 values per slot, `WIDE` slots per node.
    pub boxes: CudaSlice<T>,
    pub children: CudaSlice<u32>,
    /// Nodes on the longest root-to-leaf path.
    pub depth: usize,
}

/// A build queued on the GPU: the sorted triangles are final; the wide tree's boxes are
/// gathered once its size is known on the host (`finish`), which waits for the build, so the
/// host goes on meanwhile (checking and uploading the queries, say).
pub(crate) struct QueuedBuild<T> {
    n: usize,
    /// Every internal node's box, then every triangle's.
    boxes: CudaSlice<T>,
    children: CudaSlice<u32>,
    slot_ref: CudaSlice<u32>,
    cap: usize,
    /// {nodes, depth, overflow} of the collapse, in device memory.
    info: CudaSlice<u32>,
}

/// `WideBvh::of(&TriangleBvh::build(mesh))` queued on the GPU, for a validated mesh of at
/// least one triangle whose vertices' box is `(lo, hi)`: the sorted triangles' records (12
/// values each) and ids, and the rest of the build.
pub(crate) fn build<T: Real>(
    gpu: &Gpu,
    mesh: &Mesh<T>,
    lo: [T; 3],
    hi: [T; 3],
    phases: &mut Phases,
) -> Result<(CudaSlice<T>, CudaSlice<u32>, QueuedBuild<T>)> {
    let n = mesh.triangles.len();
    assert!(n > 0, "an empty mesh's index is made on the host");
    if n as u64 > WIDE_START as u64 {
        return Err(Error::InvalidArgument(format!(
            "the mesh has {n} triangles; the CUDA closest-point index holds fewer than 2^28 (the CPU index holds any number)"
        )));
    }
    let n32 = n as u32;
    let s = gpu.stream();
    let v = DevicePoints::upload(gpu, &mesh.vertices)?;
    let corners = mesh.triangles.as_flattened();
    let mut tris = gpu.alloc_uninit::<u32>(corners.len())?;
    upload(gpu, corners, &mut tris)?;
    let f = MortonFrame::from_bounds(lo, hi);
    let frame = s.clone_htod(&[f.origin[0], f.origin[1], f.origin[2], f.scale]).map_err(cuda_err)?;
    phases.mark_after("mesh up", || gpu.synchronize())?;

    // Triangles sorted by the Morton codes of their centroids (stable: ties in id order).
    let mut keys = gpu.alloc_uninit::<u64>(n)?;
    let mut ids = gpu.alloc_uninit::<u32>(n)?;
    cpb_keys::<T>(gpu, threads(n, 256), &v.x, &v.y, &v.z, &tris, n32, &frame, &mut keys, &mut ids)?;
    sort_pairs(gpu, &mut keys, &mut ids, n, 63)?;
    let mut recs = gpu.alloc_uninit::<T>(12 * n)?;
    cpb_records::<T>(gpu, threads(12 * n, 256), &v.x, &v.y, &v.z, &tris, &ids, n32, &mut recs)?;
    drop((v, tris));
    phases.mark_after("keys, sort, records", || gpu.synchronize())?;

    // The radix tree over the codes, then every node's and every triangle's box.
    let internal = n - 1;
    let (mut left, mut right, mut other_end) =
        (gpu.alloc_uninit::<u32>(internal)?, gpu.alloc_uninit::<u32>(internal)?, gpu.alloc_uninit::<u32>(internal)?);
    if internal > 0 {
        let mut parent = gpu.alloc_uninit::<u32>(internal)?;
        let mut flags = gpu.alloc::<u32>(internal.div_ceil(4))?;
        radix_nodes(
            gpu,
            threads(internal, 256),
            &keys,
            n32,
            &mut left,
            &mut right,
            &mut other_end,
            &mut parent,
            &mut flags,
        )?;
    }
    drop(keys);
    let mut boxes = gpu.alloc_uninit::<T>(16 * (2 * n - 1))?;
    cpb_small_boxes::<T>(gpu, threads(2 * n - 1, 128), &recs, &other_end, n32, &mut boxes)?;
    phases.mark_after("topology, small boxes", || gpu.synchronize())?;
    if internal > 0 {
        // Huge nodes' ranges are disjoint on each level, and a radix tree over 63-bit keys
        // (ties by 32-bit position) has at most 96 levels.
        let mut huge = gpu.alloc::<u32>(1 + internal.min(96 * (n / HUGE_BOX + 1)))?;
        cpb_large_boxes::<T>(gpu, threads(32 * internal, 256), &recs, &other_end, n32, &mut boxes, &mut huge)?;
        let blocks = LaunchConfig { grid_dim: (HUGE_BLOCKS, 1, 1), block_dim: (HUGE_BLOCK, 1, 1), shared_mem_bytes: 0 };
        cpb_huge_boxes::<T>(gpu, blocks, &recs, &other_end, n32, &huge, &mut boxes)?;
    }
    phases.mark_after("large boxes", || gpu.synchronize())?;

    // The collapse. A wide node with no child node covers more than WIDE triangles, one with
    // a single child node WIDE - 1 of its own, and those with several are fewer than the
    // first kind: at most n / 9 + n / 7 + n / 9 + 1 nodes in all.
    let cap = n / 2 + 2;
    let mut queue = gpu.alloc_uninit::<u32>(cap)?;
    let mut children_all = gpu.alloc_uninit::<u32>(cap * WIDE)?;
    let mut slot_ref = gpu.alloc_uninit::<u32>(cap * WIDE)?;
    let mut out = gpu.alloc::<u32>(3)?;
    let one_block = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (COLLAPSE_BLOCK, 1, 1), shared_mem_bytes: 0 };
    cpb_collapse(
        gpu,
        one_block,
        &left,
        &right,
        &other_end,
        n32,
        cap as u32,
        &mut queue,
        &mut children_all,
        &mut slot_ref,
        &mut out,
    )?;
    phases.mark_after("collapse", || gpu.synchronize())?;
    Ok((recs, ids, QueuedBuild { n, boxes, children: children_all, slot_ref, cap, info: out }))
}

impl<T: Real> QueuedBuild<T> {
    /// The wide tree, its boxes gathered into place once its size is known (this waits for
    /// the build).
    pub(crate) fn finish(self, gpu: &Gpu) -> Result<DeviceWideBvh<T>> {
        let (n, cap, s) = (self.n, self.cap, gpu.stream());
        let [nodes, depth, overflow] = s.clone_dtoh(&self.info).map_err(cuda_err)?[..] else {
            unreachable!("three values were asked for")
        };
        if overflow != 0 {
            return Err(Error::Cuda(format!(
                "the wide tree of {n} triangles outgrew its {cap} nodes (a bug: please report it)"
            )));
        }
        let slots = nodes as usize * WIDE;
        let mut wide = gpu.alloc_uninit::<T>(16 * slots)?;
        let values = 16 * slots as u64;
        cpb_wide_boxes::<T>(gpu, threads(16 * slots, 256), &self.boxes, &self.slot_ref, n as u32, values, &mut wide)?;
        let mut children = gpu.alloc_uninit::<u32>(slots)?;
        s.memcpy_dtod(&self.children.slice(..slots), &mut children).map_err(cuda_err)?;
        Ok(DeviceWideBvh { boxes: wide, children, depth: depth as usize })
    }
}
