//! Launches collide.cu: the collision world on the device. The mesh and its grid are
//! uploaded once; body shapes and layers when they change. A tick is a memset and two kernels
//! (one CUDA graph) that read the poses from the world's own page-locked arrays and write the
//! contacts, sorted, and the tick's status into page-locked host memory: no copy either way,
//! one wait per tick. Every buffer is kept and only grows, so a steady world allocates nothing
//! per tick.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, DevicePtr, DeviceRepr, PinnedHostSlice, ValidAsZeroBits};
use rayon::prelude::*;

use super::ColliderOptions;
use crate::closest_point::cuda::TRIANGLE;
use crate::collide::contact_ellipsoid_ellipsoid::{SETTLED, STEPS};
use crate::collide::ellipsoid::{BOX_SLACK, V3};
use crate::collide::hash_grid::{bucket_count, CELL_BITS};
use crate::collide::heightfield::{HeightfieldView, HEIGHTFIELD};
use crate::collide::instance::MeshShape;
use crate::collide::level_grid::{LevelGrid, MAX_LEVELS};
use crate::collide::overlap::{check_queries, Overlap, OverlapShape, Overlaps, OVERLAP_LIMIT_MAX};
use crate::collide::ray_cast::bvh::BvhNode;
use crate::collide::sweep_ellipsoid_ellipsoid as sweep_ee;
use crate::collide::world::{
    ContactKind, InstancePart, PackedContact, Sweep, SweepResult, Versions, World, ID_BITS, KIND_BODY,
    KIND_HEIGHTFIELD, KIND_INSTANCE, NO_ID,
};
use crate::error::{Error, Result};
use crate::runtime::cuda::launch::{c_definition, c_definitions, c_struct, kernels, Address, CStruct, CType, In, Out};
use crate::runtime::cuda::{cuda_err, threads, CudaSource, Gpu, COMMON, LOOKBACK};

static COLLIDE: CudaSource = CudaSource {
    file: "collide.cu",
    text: include_str!("collide.cu"),
    constants: || {
        vec![
            ("CELL_BITS", CELL_BITS.to_string()),
            ("BOX_SLACK", format!("{BOX_SLACK:?}")),
            ("PW_STEPS", STEPS.to_string()),
            ("PW_SETTLED", format!("{SETTLED:?}")),
            ("SWEEP_STEPS", sweep_ee::STEPS.to_string()),
            ("SWEEP_SETTLED", format!("{:?}", sweep_ee::SETTLED)),
            ("REACH_SLACK", format!("{:?}", sweep_ee::REACH_SLACK)),
            ("CELL_GROUP", CELL_GROUP.to_string()),
            ("CELLS_BLOCK", CELLS_BLOCK.to_string()),
            ("KIND_BODY", format!("{KIND_BODY}u")),
            ("KIND_HEIGHTFIELD", format!("{KIND_HEIGHTFIELD}u")),
            ("BATCH_MAX", BATCH_MAX.to_string()),
            ("CONTACT_WARPS", CONTACT_WARPS.to_string()),
            ("MAX_LEVELS", MAX_LEVELS.to_string()),
            ("OVERLAP_LIMIT_MAX", OVERLAP_LIMIT_MAX.to_string()),
            ("SWEEP_VALUES", SWEEP_VALUES.to_string()),
        ]
    },
    structs: c_definitions!(MeshEntry, MeshView, BodyEntry, BodyGridView, BodyView, PackedContact),
};

static INSTANCE: CudaSource = CudaSource {
    file: "instance.cu",
    text: include_str!("instance.cu"),
    constants: || {
        use crate::collide::instance::{MARGIN, SCAN_BELOW};
        use crate::collide::ray_cast::bvh::{EMPTY, LEAF, STACK};
        vec![
            ("INSTANCE_MARGIN", format!("{MARGIN:?}")),
            ("INSTANCE_SCAN_BELOW", SCAN_BELOW.to_string()),
            ("INSTANCE_STACK", STACK.to_string()),
            ("INSTANCE_LEAF", format!("{LEAF}u")),
            ("INSTANCE_EMPTY", format!("{EMPTY}u")),
        ]
    },
    structs: c_definitions!(BvhNode, InstanceView, PlacedCandidate, PlacedContact),
};

c_struct! {
    /// `struct InstanceView` of instance.cu: the instances (`Instances`) on the device, the
    /// live ones numbered as the top level's grid numbers them.
    pub(crate) struct InstanceView as "InstanceView" {
        /// The tree over the live instances' world boxes (`Instances::boxes_meeting`), and
        /// the places in the live list its leaves name.
        nodes: u64 = "const BvhNode*",
        order: u64 = "const u32*",
        /// Each shape's mesh and grid, by shape id.
        shapes: u64 = "const MeshView*",
        /// Each shape's box (lo, hi) and reach: 7 per shape id.
        shape_box: u64 = "const double*",
        /// Rotation, row-major: 9 per instance.
        rot: u64 = "const double*",
        /// Position: 3 per instance.
        pos: u64 = "const double*",
        shape: u64 = "const u32*",
        layer: u64 = "const u32*",
        /// The instance's id.
        id: u64 = "const u32*",
        n: u32 = "u32",
    }
}

c_struct! {
    /// `struct PlacedCandidate` of instance.cu: a body and a triangle of an instance (its
    /// slot in `InstanceView`) whose boxes may meet.
    pub(crate) struct PlacedCandidate as "PlacedCandidate" {
        body: u32 = "u32",
        slot: u32 = "u32",
        triangle: u32 = "u32",
    }
}

c_struct! {
    /// `struct PlacedContact` of instance.cu: a body's contact with an instance's triangle.
    #[derive(Default)]
    pub(crate) struct PlacedContact as "PlacedContact" {
        body: u32 = "u32",
        instance: u32 = "u32",
        triangle: u32 = "u32",
        normal: [f32; 3] = "float[3]",
        depth: f32 = "float",
        offset: [f32; 3] = "float[3]",
    }
}

c_struct! {
    /// `struct MeshView` of collide.cu: the static mesh and its grid's levels (`LevelGrid`).
    pub(crate) struct MeshView as "MeshView" {
        /// 9 per triangle.
        corners: u64 = "const double*",
        /// Bucket b of level l holds entries start[base[l] + b]..start[base[l] + b + 1].
        start: u64 = "const u32*",
        entries: u64 = "const MeshEntry*",
        /// Each level's cell size.
        cell: [f64; MAX_LEVELS] = "double[NK_MAX_LEVELS]",
        /// The bucket of a cell key on level l: bucket_of(key, mask[l]).
        mask: [u64; MAX_LEVELS] = "u64[NK_MAX_LEVELS]",
        /// The heightfield (rows 0: none).
        terrain: HeightfieldView = "HeightfieldView",
        base: [u32; MAX_LEVELS] = "u32[NK_MAX_LEVELS]",
        levels: u32 = "u32",
        n: u32 = "u32",
    }
}

c_struct! {
    /// `struct MeshEntry` of collide.cu: a static grid entry with its triangle's low cell and
    /// box (f32, rounded outwards).
    pub(crate) struct MeshEntry as "MeshEntry" {
        key: u64 = "u64",
        t: u32 = "u32",
        cell: [i32; 3] = "int[3]",
        lo: [f32; 3] = "float[3]",
        hi: [f32; 3] = "float[3]",
    }
}

c_struct! {
    /// `struct BodyEntry` of collide.cu: an entry of the tick's body grid (a bucket's list).
    pub(crate) struct BodyEntry as "BodyEntry" {
        key: u64 = "u64",
        body: u32 = "u32",
        /// 1 + the bucket's entry put before this one, 0 for none.
        next: u32 = "u32",
    }
}

c_struct! {
    /// `struct BodyGridView` of collide.cu: the tick's body grid.
    pub(crate) struct BodyGridView as "BodyGridView" {
        head: u64 = "const u32*",
        entries: u64 = "const BodyEntry*",
        mask: u64 = "u64",
    }
}

c_struct! {
    /// `struct BodyView` of collide.cu.
    pub(crate) struct BodyView as "BodyView" {
        /// 3 per body.
        center: u64 = "const double*",
        /// 3 per body.
        radii: u64 = "const double*",
        /// Rotation and S⁻¹·Rᵀ, row by row: 18 per body (from body_cells).
        shape: u64 = "const double*",
        layer: u64 = "const u32*",
        mask: u64 = "const u32*",
        /// lo, hi: 6 per body.
        bbox: u64 = "const double*",
        /// lo, hi cell: 6 per body.
        cells: u64 = "const int*",
        /// Cells in the grid per body (0: none this tick).
        count: u64 = "const u32*",
        grid: BodyGridView = "BodyGridView",
    }
}

// SAFETY: plain old data, its layout checked against collide.cu's `PackedContact`.
unsafe impl DeviceRepr for PackedContact {}
// SAFETY: all-zero bits are a valid PackedContact.
unsafe impl ValidAsZeroBits for PackedContact {}

impl CType for PackedContact {
    fn c_type() -> String {
        "PackedContact".into()
    }
}

impl CStruct for PackedContact {
    fn c_definition() -> String {
        let fields =
            [("body", "u32"), ("other", "u32"), ("normal", "float[3]"), ("depth", "float"), ("offset", "float[3]")];
        let size = std::mem::size_of::<PackedContact>();
        c_definition("PackedContact", &fields, size, size)
    }
}

kernels! {
    module KERNELS = "collide", [&COMMON, &LOOKBACK, &TRIANGLE, &HEIGHTFIELD, &COLLIDE, &INSTANCE];
    /// Each body's shape, box and cells, put into the tick's body grid.
    fn body_cells(
        center_in: In<f64>,
        quat: In<f64>,
        center: Out<f64>,
        radii: In<f64>,
        alive: In<u32>,
        n: u32,
        cell_size: f64,
        bbox: Out<f64>,
        cells: Out<i32>,
        count: Out<u32>,
        shapes: Out<f64>,
        head: Out<u32>,
        entries: Out<BodyEntry>,
        entry_cap: u32,
        mask: u64,
        status: Out<u32>,
    );
    /// The tick's contacts, found, sorted and placed in id order.
    fn body_contacts(
        bv: BodyView,
        mesh: MeshView,
        mesh_layer: u32,
        n: u32,
        batch: u32,
        entry_cap: u32,
        contact_cap: u32,
        status: Out<u32>,
        lookback: Out<u64>,
        spill: Out<PackedContact>,
        out: Out<PackedContact>,
        status_host: Out<u32>,
    );
    /// Each sweep's first hit on the static mesh, the heightfield or a body.
    fn sweep_queries(
        sweeps: In<f64>,
        n: u32,
        cell_size: f64,
        mesh: MeshView,
        bv: BodyView,
        body_layers: u32,
        mesh_layer: u32,
        out_tri: Out<u32>,
        out: Out<f64>,
        error: Out<u32>,
    );
    /// Each overlap query's triangles and bodies (overlap.rs).
    fn overlap_queries(
        queries: In<f64>,
        masks: In<u32>,
        n: u32,
        cell_size: f64,
        mesh: MeshView,
        bv: BodyView,
        bodies: u32,
        mesh_layer: u32,
        limit: u32,
        out_ids: Out<u32>,
        out_total: Out<u32>,
        error: Out<u32>,
    );
    /// The instances' part of a tick, first step: (body, instance) pairs whose boxes meet.
    fn instance_pairs(
        bv: BodyView,
        iv: InstanceView,
        alive: In<u32>,
        n: u32,
        cap: u32,
        out: Out<PlacedCandidate>,
        count: Out<u32>,
    );
    /// Second step: the pairs' candidate (body, instance, triangle)s.
    fn instance_candidates(
        bv: BodyView,
        iv: InstanceView,
        pairs: In<PlacedCandidate>,
        n: u32,
        cap: u32,
        out: Out<PlacedCandidate>,
        count: Out<u32>,
    );
    /// Third step: the candidates' contacts (instance.cu), unsorted.
    fn instance_contacts(
        bv: BodyView,
        iv: InstanceView,
        candidates: In<PlacedCandidate>,
        n: u32,
        cap: u32,
        out: Out<PlacedContact>,
        count: Out<u32>,
    );
    /// The contacts' sort keys, (instance, triangle) and (`with_body`) the body above them.
    fn placed_keys(
        c: In<PlacedContact>,
        n: u32,
        tri_bits: u32,
        body_shift: u32,
        with_body: u32,
        keys: Out<u64>,
        order: Out<u32>,
    );
    /// The bodies of the contacts in `order`'s arrangement.
    fn placed_body_keys(c: In<PlacedContact>, order: In<u32>, n: u32, keys: Out<u64>);
    /// The contacts in `order`'s arrangement.
    fn placed_gather(c: In<PlacedContact>, order: In<u32>, n: u32, out: Out<PlacedContact>);
    /// The instances' part of each sweep (instance.cu).
    fn instance_sweeps(sweeps: In<f64>, n: u32, iv: InstanceView, out_id: Out<u32>, out_tri: Out<u32>, out: Out<f64>);
    /// The instances' part of each overlap query (instance.cu).
    fn instance_overlaps(
        queries: In<f64>,
        masks: In<u32>,
        n: u32,
        iv: InstanceView,
        limit: u32,
        out_ids: Out<u32>,
        out_tris: Out<u32>,
        out_total: Out<u32>,
    );
    /// The narrow phase alone, for the equality tests.
    fn narrow_check(pairs: In<f64>, n_pairs: u32, tris: In<f64>, n_tris: u32, out: Out<f64>);
}

struct DeviceMesh {
    corners: CudaSlice<f64>,
    /// The levels' bucket starts, one level after another (`MeshView::start`).
    start: CudaSlice<u32>,
    /// The levels' entries, one level after another.
    entries: CudaSlice<MeshEntry>,
    cell: [f64; MAX_LEVELS],
    mask: [u64; MAX_LEVELS],
    base: [u32; MAX_LEVELS],
    levels: u32,
    n: u32,
    /// The heightfield's heights, and what `HeightfieldView` holds besides.
    heights: CudaSlice<f64>,
    terrain: HeightfieldView,
}

impl DeviceMesh {
    fn upload(gpu: &Gpu, world: &World) -> Result<Self> {
        let s = gpu.stream();
        let mut dm = DeviceMesh {
            corners: gpu.alloc::<f64>(1)?,
            start: gpu.alloc::<u32>(2)?,
            entries: gpu.alloc_uninit::<MeshEntry>(1)?,
            cell: [1.0; MAX_LEVELS],
            mask: [0; MAX_LEVELS],
            base: [0; MAX_LEVELS],
            levels: 0,
            n: 0,
            heights: gpu.alloc::<f64>(1)?,
            terrain: HeightfieldView::none(),
        };
        if let Some(h) = world.heightfield() {
            dm.heights = s.clone_htod(h.heights()).map_err(cuda_err)?;
            dm.terrain = HeightfieldView::of(h, 0, 0);
        }
        let Some(m) = world.mesh() else { return Ok(dm) };
        dm.grid(gpu, &m.corners, &m.grid, &m.lo, &m.hi)?;
        Ok(dm)
    }

    /// A grid (and its triangles' corners, if any) alone: a shape's, or the instances' top
    /// level (items the instances' boxes).
    fn of_grid(gpu: &Gpu, corners: &[[V3; 3]], grid: &LevelGrid, lo: &[V3], hi: &[V3]) -> Result<Self> {
        let mut dm = DeviceMesh {
            corners: gpu.alloc::<f64>(1)?,
            start: gpu.alloc::<u32>(2)?,
            entries: gpu.alloc_uninit::<MeshEntry>(1)?,
            cell: [1.0; MAX_LEVELS],
            mask: [0; MAX_LEVELS],
            base: [0; MAX_LEVELS],
            levels: 0,
            n: 0,
            heights: gpu.alloc::<f64>(1)?,
            terrain: HeightfieldView::none(),
        };
        dm.grid(gpu, corners, grid, lo, hi)?;
        Ok(dm)
    }

    /// Uploads a level grid over items with boxes (lo, hi), and their corners if any.
    fn grid(&mut self, gpu: &Gpu, corners: &[[V3; 3]], grid: &LevelGrid, lo: &[V3], hi: &[V3]) -> Result<()> {
        let s = gpu.stream();
        let flat9: Vec<f64> = corners.iter().flat_map(|c| c.iter().flatten().copied()).collect();
        let (mut start, mut entries) = (Vec::new(), Vec::with_capacity(grid.entries()));
        for (l, level) in grid.levels.iter().enumerate() {
            let g = &level.grid;
            (self.cell[l], self.mask[l], self.base[l]) = (level.cell, g.mask(), start.len() as u32);
            let first = entries.len() as u32;
            start.extend(g.start.iter().map(|&b| first + b));
            entries.extend(g.keys.iter().zip(&g.items).map(|(&key, &t)| {
                let t = t as usize;
                let (lo, hi) = crate::collide::box_f32::box_f32(&lo[t], &hi[t]);
                MeshEntry { key, t: t as u32, cell: grid.lo_cell[t], lo, hi }
            }));
        }
        if !entries.is_empty() {
            self.start = s.clone_htod(&start).map_err(cuda_err)?;
            self.entries = s.clone_htod(&entries).map_err(cuda_err)?;
        }
        if !flat9.is_empty() {
            self.corners = s.clone_htod(&flat9).map_err(cuda_err)?;
        }
        (self.levels, self.n) = (grid.levels.len() as u32, lo.len() as u32);
        Ok(())
    }

    /// The view of no mesh (a free shape slot's).
    fn empty_view() -> MeshView {
        MeshView {
            corners: 0,
            start: 0,
            entries: 0,
            cell: [1.0; MAX_LEVELS],
            mask: [0; MAX_LEVELS],
            terrain: HeightfieldView::none(),
            base: [0; MAX_LEVELS],
            levels: 0,
            n: 0,
        }
    }

    fn view(&self, gpu: &Gpu) -> MeshView {
        let s = gpu.stream();
        MeshView {
            corners: self.corners.device_ptr(s).0,
            start: self.start.device_ptr(s).0,
            entries: self.entries.device_ptr(s).0,
            cell: self.cell,
            mask: self.mask,
            terrain: HeightfieldView { heights: self.heights.device_ptr(s).0, ..self.terrain },
            base: self.base,
            levels: self.levels,
            n: self.n,
        }
    }
}

/// The instances on the device: each shape's mesh and grid (kept while the world holds the
/// same shape), the top level's grid and the live instances' placements.
struct DeviceInstances {
    /// Each shape slot's mesh (by the shape's identity), `None` for a free slot.
    shapes: Vec<Option<(std::sync::Weak<MeshShape>, DeviceMesh)>>,
    views: CudaSlice<MeshView>,
    shape_box: CudaSlice<f64>,
    nodes: CudaSlice<BvhNode>,
    order: CudaSlice<u32>,
    rot: CudaSlice<f64>,
    pos: CudaSlice<f64>,
    shape: CudaSlice<u32>,
    layer: CudaSlice<u32>,
    id: CudaSlice<u32>,
    n: u32,
    /// The bits of the instance contacts' sort keys: instance ids, shapes' triangles.
    instance_bits: u32,
    triangle_bits: u32,
}

impl DeviceInstances {
    /// Uploads `world`'s instances, reusing the meshes of shapes `kept` holds.
    fn upload(gpu: &Gpu, world: &World, kept: Option<DeviceInstances>) -> Result<Self> {
        let s = gpu.stream();
        let inst = world.instances();
        let mut old = kept.map(|k| k.shapes).unwrap_or_default();
        let mut shapes = Vec::new();
        let (mut views, mut shape_box) = (Vec::new(), Vec::new());
        for (k, slot) in inst.shape_slots().iter().enumerate() {
            let Some(shape) = slot else {
                shapes.push(None);
                views.push(DeviceMesh::empty_view());
                shape_box.extend([0.0; 7]);
                continue;
            };
            let same =
                old.get_mut(k).and_then(Option::take).filter(|(w, _)| std::ptr::eq(w.as_ptr(), Arc::as_ptr(shape)));
            let dm = match same {
                Some((_, dm)) => dm,
                None => {
                    let m = &shape.mesh;
                    DeviceMesh::of_grid(gpu, &m.corners, &m.grid, &m.lo, &m.hi)?
                }
            };
            views.push(dm.view(gpu));
            shape_box.extend(shape.lo.iter().chain(&shape.hi).copied().chain([shape.reach]));
            shapes.push(Some((Arc::downgrade(shape), dm)));
        }
        let live: Vec<&crate::collide::instance::Instance> =
            inst.live.iter().map(|&i| inst.slots()[i as usize].as_ref().expect("live")).collect();
        let tree = inst.tree();
        let empty = BvhNode { bounds: [0.0; 12], child: [u32::MAX; 2], layers: [0; 2] };
        let nodes = if tree.nodes.is_empty() { vec![empty] } else { tree.nodes.clone() };
        let rot: Vec<f64> = live.iter().flat_map(|x| x.rot.iter().flatten().copied()).collect();
        let pos: Vec<f64> = live.iter().flat_map(|x| x.placement.position).collect();
        let shape: Vec<u32> = live.iter().map(|x| x.placement.shape.0).collect();
        let layer: Vec<u32> = live.iter().map(|x| x.placement.layer).collect();
        let pad = |v: Vec<f64>| if v.is_empty() { vec![0.0] } else { v };
        let pad32 = |v: Vec<u32>| if v.is_empty() { vec![0u32] } else { v };
        Ok(DeviceInstances {
            views: s.clone_htod(&views).map_err(cuda_err)?,
            shape_box: s.clone_htod(&pad(shape_box)).map_err(cuda_err)?,
            shapes,
            nodes: s.clone_htod(&nodes).map_err(cuda_err)?,
            order: s.clone_htod(&pad32(tree.order.clone())).map_err(cuda_err)?,
            rot: s.clone_htod(&pad(rot)).map_err(cuda_err)?,
            pos: s.clone_htod(&pad(pos)).map_err(cuda_err)?,
            shape: s.clone_htod(&pad32(shape)).map_err(cuda_err)?,
            layer: s.clone_htod(&pad32(layer)).map_err(cuda_err)?,
            id: s.clone_htod(&pad32(inst.live.clone())).map_err(cuda_err)?,
            n: live.len() as u32,
            instance_bits: bits_below(inst.slots().len()),
            triangle_bits: bits_below(
                inst.shape_slots().iter().flatten().map(|s| s.mesh.corners.len()).max().unwrap_or(0),
            ),
        })
    }

    fn view(&self, gpu: &Gpu) -> InstanceView {
        let s = gpu.stream();
        InstanceView {
            nodes: self.nodes.device_ptr(s).0,
            order: self.order.device_ptr(s).0,
            shapes: self.views.device_ptr(s).0,
            shape_box: self.shape_box.device_ptr(s).0,
            rot: self.rot.device_ptr(s).0,
            pos: self.pos.device_ptr(s).0,
            shape: self.shape.device_ptr(s).0,
            layer: self.layer.device_ptr(s).0,
            id: self.id.device_ptr(s).0,
            n: self.n,
        }
    }
}

struct DeviceBodies {
    /// x, y, z per body.
    center: CudaSlice<f64>,
    /// Quaternion x, y, z, w per body.
    orientation: CudaSlice<f64>,
    radii: CudaSlice<f64>,
    layer: CudaSlice<u32>,
    mask: CudaSlice<u32>,
    alive: CudaSlice<u32>,
    n: usize,
    /// Bodies a warp of `body_contacts` takes (`bodies_per_warp`).
    batch: usize,
}

/// Bodies a warp of `body_contacts` takes: about 32 cells' worth, so that its lanes have work
/// (the crater scene: 2 bodies of about 12 cells; the stress scene's small bodies: 7), from each
/// body's largest radius; `chosen` (`ColliderOptions::bodies_per_warp`) overrides it.
fn bodies_per_warp(world: &World, chosen: Option<usize>) -> usize {
    if let Some(b) = chosen {
        return b.clamp(1, BATCH_MAX);
    }
    let b = world.bodies();
    let cell = world.cell_size();
    let (mut cells, mut alive) = (0.0, 0usize);
    for (r, &a) in b.radii.iter().zip(&b.alive) {
        if a {
            let side = 2.0 * r[0].max(r[1]).max(r[2]) / cell + 1.0;
            cells += side * side * side;
            alive += 1;
        }
    }
    let mean = if alive > 0 { cells / alive as f64 } else { 1.0 };
    ((32.0 / mean) as usize).clamp(1, BATCH_MAX)
}

/// A device buffer that only grows.
struct Grow<T: DeviceRepr> {
    buf: Option<CudaSlice<T>>,
}

impl<T: DeviceRepr> Grow<T> {
    fn new() -> Self {
        Grow { buf: None }
    }

    /// At least `n` elements (grown by a quarter more when it must grow).
    fn at_least(&mut self, gpu: &Gpu, n: usize) -> Result<&mut CudaSlice<T>> {
        if self.buf.as_ref().is_none_or(|b| b.len() < n) {
            self.buf = Some(gpu.alloc_uninit::<T>((n + n / 4).max(64))?);
        }
        Ok(self.buf.as_mut().expect("allocated"))
    }

    fn ptr(&self, gpu: &Gpu) -> u64 {
        self.get().device_ptr(gpu.stream()).0
    }

    fn get(&self) -> &CudaSlice<T> {
        self.buf.as_ref().expect("allocated by at_least")
    }
}

/// Pinned host memory that only grows (`write`: write-combined, for uploads).
struct Pinned<T: DeviceRepr> {
    buf: Option<PinnedHostSlice<T>>,
    write: bool,
}

impl<T: DeviceRepr + Default + Copy> Pinned<T> {
    fn new(write: bool) -> Self {
        Pinned { buf: None, write }
    }

    fn at_least(&mut self, gpu: &Gpu, n: usize) -> Result<&mut PinnedHostSlice<T>> {
        if self.buf.as_ref().is_none_or(|b| b.len() < n) {
            let len = (n + n / 4).max(64);
            let flags = if self.write { cudarc::driver::sys::CU_MEMHOSTALLOC_WRITECOMBINED } else { 0 };
            // SAFETY: every use writes the elements it reads (uploads fill, downloads copy in).
            let b = unsafe { gpu.stream().context().alloc_pinned_with_flags::<T>(len, flags) }.map_err(cuda_err)?;
            self.buf = Some(b);
        }
        Ok(self.buf.as_mut().expect("allocated"))
    }
}

/// A world's pose arrays, page-locked and mapped (`cuMemHostRegister`), so that the device
/// reads them directly: for a million bodies a staging copy cost 1.3 ms of host memory
/// bandwidth, and for the crater scene's 4,000 the copies about 6 µs of a 0.1 ms tick.
/// Registered by allocation: a world's arrays only move when a body is added at full
/// capacity, and then their capacity grows, so (world, address, capacity) names one
/// allocation. One world is held at a time.
#[derive(Default)]
struct WorldPoses {
    key: Option<[u64; 5]>,
    /// Registered base addresses, and the context they were registered in.
    registered: Vec<usize>,
    ctx: Option<Arc<cudarc::driver::CudaContext>>,
    /// The device's addresses of the centers and orientations.
    mapped: [u64; 2],
}

impl WorldPoses {
    /// The device's addresses of `world`'s pose arrays (centers, orientations), registered
    /// here if they can be; `None` if they cannot.
    fn hold(&mut self, gpu: &Gpu, world: &World) -> Option<[u64; 2]> {
        let b = world.bodies();
        let (c, o) = (&b.center, &b.orientation);
        let key = [world.id(), c.as_ptr() as u64, c.capacity() as u64, o.as_ptr() as u64, o.capacity() as u64];
        if self.key == Some(key) {
            return (!self.registered.is_empty()).then_some(self.mapped);
        }
        self.release();
        // A failure is not retried for the same allocation.
        self.key = Some(key);
        let ctx = gpu.stream().context().clone();
        if ctx.bind_to_thread().is_err() {
            return None;
        }
        self.ctx = Some(ctx);
        let ranges = [(c.as_ptr() as usize, c.capacity() * 24), (o.as_ptr() as usize, o.capacity() * 32)];
        for (k, (p, bytes)) in ranges.into_iter().enumerate() {
            let flags = cudarc::driver::sys::CU_MEMHOSTREGISTER_DEVICEMAP;
            // SAFETY: the range is the world's live allocation; it is unregistered before any
            // other is registered, and when the collider drops.
            let registered = unsafe { cudarc::driver::sys::cuMemHostRegister_v2(p as *mut _, bytes, flags) };
            if registered.result().is_ok() {
                self.registered.push(p);
            }
            // SAFETY: a device address is asked for only of a range registered just above.
            let mapped = registered.result().is_ok()
                && unsafe { cudarc::driver::sys::cuMemHostGetDevicePointer_v2(&mut self.mapped[k], p as *mut _, 0) }
                    .result()
                    .is_ok();
            if !mapped {
                // Pages shared with another registration, or a locked-memory limit: stage.
                self.release();
                self.key = Some(key);
                return None;
            }
        }
        Some(self.mapped)
    }

    fn release(&mut self) {
        if let Some(ctx) = &self.ctx {
            if ctx.bind_to_thread().is_ok() {
                for p in self.registered.drain(..) {
                    // SAFETY: registered by `hold`; a failure leaves nothing to undo.
                    let _ = unsafe { cudarc::driver::sys::cuMemHostUnregister(p as *mut _) };
                }
            }
        }
        self.registered.clear();
        self.key = None;
    }
}

impl Drop for WorldPoses {
    fn drop(&mut self) {
        self.release();
    }
}

/// Per-tick device buffers, kept between ticks.
struct TickBuffers {
    bbox: Grow<f64>,
    /// Each body's rotation and unit-space map (18 values), made once per tick.
    shape: Grow<f64>,
    cells: Grow<i32>,
    /// Cells each body put into the grid (0: none this tick).
    count: Grow<u32>,
    /// The body grid's entries.
    entries: Grow<BodyEntry>,
    /// Zeroed before each tick (`ZeroedLayout`): the status, the look-back state of
    /// `body_contacts`, and the body grid's bucket heads.
    zeroed: Grow<u32>,
    /// Where a body with more contacts than a warp keeps sorts them (`body_contacts`).
    spill: Grow<PackedContact>,
    out: Grow<PackedContact>,
    /// For the sweeps: a sweep out of range (+1).
    sweep_error: Grow<u32>,
    /// Grid entries and contacts the buffers hold room for (from the last tick that fit).
    entry_cap: usize,
    contact_cap: usize,
}

/// Where things lie in `TickBuffers::zeroed`, in 32-bit words: the status (8 words: contacts,
/// grid entries, a body out of range + 1), the look-back state (ticket, spare, and a word per
/// block of `body_contacts`, each 64 bits), and a head per bucket of the body grid.
struct ZeroedLayout {
    tiles: usize,
    buckets: usize,
}

impl ZeroedLayout {
    const STATUS: usize = 0;
    const LOOKBACK: usize = 8;

    fn new(n: usize, batch: usize, entry_cap: usize) -> Self {
        // Two buckets per entry keep the lists short.
        ZeroedLayout { tiles: n.div_ceil(CONTACT_WARPS * batch), buckets: bucket_count(2 * entry_cap) }
    }

    fn heads(&self) -> usize {
        Self::LOOKBACK + 2 * (2 + self.tiles)
    }

    fn len(&self) -> usize {
        self.heads() + self.buckets
    }
}

/// Warps per block of `body_contacts` (collide.cu's CONTACT_WARPS).
const CONTACT_WARPS: usize = 4;

/// Bodies a warp of `body_contacts` takes at most (collide.cu's BATCH_MAX).
const BATCH_MAX: usize = 8;

/// Threads per body, and per block, in `body_cells` (collide.cu's CELL_GROUP, CELLS_BLOCK).
const CELL_GROUP: usize = 8;
const CELLS_BLOCK: u32 = 256;
/// Values per sweep uploaded: radii, quaternion, from, to, mask, ignored body.
const SWEEP_VALUES: usize = 15;

// SAFETY: all-zero bits are a valid PlacedContact (plain numbers).
unsafe impl ValidAsZeroBits for PlacedContact {}

/// The bits that hold every value below `n`.
fn bits_below(n: usize) -> u32 {
    if n <= 1 {
        0
    } else {
        usize::BITS - (n - 1).leading_zeros()
    }
}

/// Appends an instance contact, packed with `KIND_INSTANCE` and its pair's index.
fn push_placed(p: &PlacedContact, merged: &mut Vec<PackedContact>, parts: &mut Vec<InstancePart>) {
    merged.push(PackedContact {
        body: p.body,
        other: KIND_INSTANCE | parts.len() as u32,
        normal: p.normal,
        depth: p.depth,
        offset: p.offset,
    });
    parts.push([p.instance, p.triangle]);
}

/// What the kernels read of the bodies and the tick's body grid (`heads`: its buckets).
fn body_view(gpu: &Gpu, d: &DeviceBodies, t: &TickBuffers, heads: u64, bmask: u64) -> BodyView {
    let s = gpu.stream();
    BodyView {
        center: d.center.device_ptr(s).0,
        radii: d.radii.device_ptr(s).0,
        shape: t.shape.ptr(gpu),
        layer: d.layer.device_ptr(s).0,
        mask: d.mask.device_ptr(s).0,
        bbox: t.bbox.ptr(gpu),
        cells: t.cells.ptr(gpu),
        count: t.count.ptr(gpu),
        grid: BodyGridView { head: heads, entries: t.entries.ptr(gpu), mask: bmask },
    }
}

/// A world's resident copy on one GPU. Switching a world between colliders is free: each
/// one uploads what changed since it last saw the world (by `World::versions`).
pub(crate) struct CudaCollider {
    gpu: Arc<Gpu>,
    opts: ColliderOptions,
    /// The world (by id) and its versions as last uploaded.
    held: Option<(u64, Versions)>,
    mesh: Option<DeviceMesh>,
    bodies: Option<DeviceBodies>,
    pose_host: Pinned<f64>,
    world_poses: WorldPoses,
    /// Where the tick reads the poses: the world's mapped arrays, or the device's copies.
    pose_src: [u64; 2],
    status_host: Pinned<u32>,
    contacts_host: Pinned<PackedContact>,
    tick: TickBuffers,
    sweep_in: Grow<f64>,
    sweep_tri: Grow<u32>,
    sweep_out: Grow<f64>,
    sweep_in_host: Pinned<f64>,
    sweep_tri_host: Pinned<u32>,
    sweep_out_host: Pinned<f64>,
    /// Contacts of the last tick, and how many of this tick's came down with its status.
    expect: usize,
    fetched: usize,
    /// The last tick, captured as a CUDA graph, and what it was captured for.
    graph: Option<(GraphKey, cudarc::driver::CudaGraph)>,
    /// The sizes of the last tick run: a tick is captured when they repeat.
    last_key: Option<GraphKey>,
    /// The world (by id) and versions the body grid of the last tick was made for.
    grid_for: Option<(u64, Versions)>,
    /// The world's instances on the device (`None`: it has none).
    instances: Option<DeviceInstances>,
    /// The instances' part of a tick: its contacts on the device, their count, and room.
    placed_out: Grow<PlacedContact>,
    placed_host: Pinned<PlacedContact>,
    placed_count: Option<CudaSlice<u32>>,
    placed_cap: usize,
    candidates: Grow<PlacedCandidate>,
    candidate_cap: usize,
    pairs: Grow<PlacedCandidate>,
    pair_cap: usize,
    /// The instances' contacts of the tick sorted on the device: keys, places, contacts.
    placed_keys: Grow<u64>,
    placed_order: Grow<u32>,
    placed_sorted: Grow<PlacedContact>,
    /// A tick's contacts with the instances' merged in, and their (instance, triangle) pairs.
    merged: Vec<PackedContact>,
    parts: Vec<InstancePart>,
}

/// The device's address of page-locked host memory (the same under unified addressing).
fn host_device_ptr<T: DeviceRepr + ValidAsZeroBits + Default + Copy>(p: &Pinned<T>) -> Result<u64> {
    let buf = p.buf.as_ref().expect("allocated");
    let host = buf.as_ptr().map_err(cuda_err)? as *mut std::ffi::c_void;
    let mut dev = 0u64;
    // SAFETY: `host` is page-locked memory of this context, alive as long as `p`.
    unsafe { cudarc::driver::sys::cuMemHostGetDevicePointer_v2(&mut dev, host, 0) }.result().map_err(cuda_err)?;
    Ok(dev)
}

/// Everything a captured tick depends on besides the poses (which it reads from a buffer
/// that stays put): a tick with another key is captured afresh.
#[derive(Clone, Copy, PartialEq, Eq)]
struct GraphKey {
    world: u64,
    n: usize,
    caps: [usize; 2],
    mesh: u64,
    shapes: u64,
    cell_size: u64,
    mesh_layer: u32,
    poses: [u64; 2],
}

impl CudaCollider {
    pub fn new(gpu: Arc<Gpu>, opts: &ColliderOptions) -> Result<Self> {
        Ok(CudaCollider {
            gpu,
            opts: opts.clone(),
            held: None,
            mesh: None,
            bodies: None,
            pose_host: Pinned::new(true),
            world_poses: WorldPoses::default(),
            pose_src: [0; 2],
            status_host: Pinned::new(false),
            contacts_host: Pinned::new(false),
            sweep_in: Grow::new(),
            sweep_tri: Grow::new(),
            sweep_out: Grow::new(),
            sweep_in_host: Pinned::new(true),
            sweep_tri_host: Pinned::new(false),
            sweep_out_host: Pinned::new(false),
            expect: 0,
            fetched: 0,
            graph: None,
            last_key: None,
            grid_for: None,
            instances: None,
            placed_out: Grow::new(),
            placed_host: Pinned::new(false),
            placed_count: None,
            placed_cap: 1 << 12,
            candidates: Grow::new(),
            candidate_cap: 1 << 16,
            pairs: Grow::new(),
            pair_cap: 1 << 14,
            placed_keys: Grow::new(),
            placed_order: Grow::new(),
            placed_sorted: Grow::new(),
            merged: Vec::new(),
            parts: Vec::new(),
            tick: TickBuffers {
                bbox: Grow::new(),
                shape: Grow::new(),
                cells: Grow::new(),
                count: Grow::new(),
                entries: Grow::new(),
                zeroed: Grow::new(),
                spill: Grow::new(),
                out: Grow::new(),
                sweep_error: Grow::new(),
                entry_cap: 1 << 12,
                contact_cap: 1 << 12,
            },
        })
    }

    pub fn describe(&self) -> String {
        self.gpu.describe()
    }

    fn sync(&mut self, world: &World) -> Result<()> {
        let gpu = &*self.gpu;
        let s = gpu.stream();
        let v = world.versions();
        let held = match self.held {
            Some((id, v)) if id == world.id() => v,
            _ => Versions { mesh: u64::MAX, poses: u64::MAX, shapes: u64::MAX, instances: u64::MAX },
        };
        if held.mesh != v.mesh || self.mesh.is_none() {
            self.mesh = Some(DeviceMesh::upload(gpu, world)?);
        }
        let b = world.bodies();
        let n = b.len();
        let resized = self.bodies.as_ref().is_none_or(|d| d.n != n);
        if resized || held.shapes != v.shapes {
            let radii: Vec<f64> = b.radii.iter().flatten().copied().collect();
            let alive: Vec<u32> = b.alive.iter().map(|&a| a as u32).collect();
            let pad = |v: Vec<f64>| if v.is_empty() { vec![0.0] } else { v };
            let pad32 = |v: &[u32]| if v.is_empty() { vec![0u32] } else { v.to_vec() };
            let (center, orientation) = match self.bodies.take() {
                Some(d) if d.n == n => (d.center, d.orientation),
                _ => (gpu.alloc_uninit::<f64>(3 * n.max(1))?, gpu.alloc_uninit::<f64>(4 * n.max(1))?),
            };
            self.bodies = Some(DeviceBodies {
                center,
                orientation,
                radii: s.clone_htod(&pad(radii)).map_err(cuda_err)?,
                layer: s.clone_htod(&pad32(&b.layer)).map_err(cuda_err)?,
                mask: s.clone_htod(&pad32(&b.mask)).map_err(cuda_err)?,
                alive: s.clone_htod(&pad32(&alive)).map_err(cuda_err)?,
                n,
                batch: bodies_per_warp(world, self.opts.bodies_per_warp),
            });
        }
        if n > 0 {
            let d = self.bodies.as_mut().expect("bodies uploaded above");
            if let Some(mapped) = self.world_poses.hold(gpu, world) {
                // The tick reads the world's own arrays (page-locked and mapped) across the
                // bus: no copy to queue (the crater tick: 6 µs less).
                self.pose_src = mapped;
            } else {
                if resized || held.poses != v.poses {
                    // Centers are checked on the device (body_cells flags a center that is not
                    // finite or beyond the grid's range; read_status names the body): a host
                    // pass over a million bodies took 1.4 ms on 16 cores.
                    let (center, orientation) = (b.center.as_flattened(), b.orientation.as_flattened());
                    let host = self.pose_host.at_least(gpu, 7 * n)?;
                    let buf = &mut host.as_mut_slice().map_err(cuda_err)?[..7 * n];
                    buf[..3 * n].copy_from_slice(center);
                    buf[3 * n..].copy_from_slice(orientation);
                    s.memcpy_htod(&buf[..3 * n], &mut d.center).map_err(cuda_err)?;
                    s.memcpy_htod(&buf[3 * n..], &mut d.orientation).map_err(cuda_err)?;
                }
                self.pose_src = [d.center.device_ptr(s).0, d.orientation.device_ptr(s).0];
            }
        }
        if held.instances != v.instances {
            let kept = self.instances.take();
            if !world.instances().is_empty() {
                self.instances = Some(DeviceInstances::upload(gpu, world, kept)?);
            }
        }
        self.held = Some((world.id(), v));
        Ok(())
    }

    /// Every contact of the world, sorted by (body, kind, other), and the instance contacts'
    /// (instance, triangle) pairs, as the CPU collider gives: views of this collider's
    /// buffers, valid until its next tick.
    pub fn contacts_packed(&mut self, world: &World) -> Result<(&[PackedContact], &[InstancePart])> {
        let count = self.tick_contacts(world)?;
        if self.instances.is_none() || world.bodies().is_empty() {
            let host = match count {
                0 => &[][..],
                _ => &self.contacts_host.buf.as_ref().expect("allocated").as_slice().map_err(cuda_err)?[..count],
            };
            return Ok((host, &[]));
        }
        let found = self.placed_contacts(world)?;
        let placed = match found {
            0 => &[][..],
            _ => &self.placed_host.buf.as_ref().expect("allocated").as_slice().map_err(cuda_err)?[..found],
        };
        let host = match count {
            0 => &[][..],
            _ => &self.contacts_host.buf.as_ref().expect("allocated").as_slice().map_err(cuda_err)?[..count],
        };
        // Per body, the tick's contacts, then its instance contacts in (instance, triangle)
        // order, numbered in that order.
        let (merged, parts) = (&mut self.merged, &mut self.parts);
        merged.clear();
        parts.clear();
        merged.reserve(host.len() + placed.len());
        let mut j = 0;
        for c in host {
            while j < placed.len() && placed[j].body < c.body {
                push_placed(&placed[j], merged, parts);
                j += 1;
            }
            merged.push(*c);
        }
        for p in &placed[j..] {
            push_placed(p, merged, parts);
        }
        Ok((&self.merged, &self.parts))
    }

    /// The instances' contacts of the tick just run (its body shapes and boxes), sorted by
    /// (body, instance, triangle) on the device, into `placed_host`; how many.
    fn placed_contacts(&mut self, world: &World) -> Result<usize> {
        let be_arc = self.gpu.clone();
        let gpu = &*be_arc;
        let s = gpu.stream();
        let n = world.bodies().len();
        let iv = self.instances.as_ref().expect("instances uploaded").view(gpu);
        let d = self.bodies.as_ref().expect("synced");
        let bv = body_view(gpu, d, &self.tick, 0, 0);
        if self.placed_count.is_none() {
            self.placed_count = Some(gpu.alloc::<u32>(2)?);
        }
        let t0 = std::time::Instant::now();
        // Pairs, candidates, then contacts; a buffer too small grows and its step runs again.
        let pairs = loop {
            let cap = self.pair_cap;
            let out = self.pairs.at_least(gpu, cap)?;
            let count = self.placed_count.as_mut().expect("allocated");
            s.memset_zeros(count).map_err(cuda_err)?;
            instance_pairs(gpu, threads(n, 64), bv, iv, &d.alive, n as u32, cap as u32, out, &mut *count)?;
            let found = s.clone_dtoh(&*count).map_err(cuda_err)?[0] as usize;
            if found <= cap {
                break found;
            }
            self.pair_cap = found + found / 4;
        };
        let candidates = loop {
            if pairs == 0 {
                break 0;
            }
            let cap = self.candidate_cap;
            let out = self.candidates.at_least(gpu, cap)?;
            let count = self.placed_count.as_mut().expect("allocated");
            s.memset_zeros(count).map_err(cuda_err)?;
            let p = self.pairs.get();
            instance_candidates(gpu, threads(pairs, 64), bv, iv, p, pairs as u32, cap as u32, out, &mut *count)?;
            let found = s.clone_dtoh(&*count).map_err(cuda_err)?[0] as usize;
            if found <= cap {
                break found;
            }
            self.candidate_cap = found + found / 4;
        };
        let t1 = t0.elapsed();
        let found = loop {
            if candidates == 0 {
                break 0;
            }
            let cap = self.placed_cap;
            let out = self.placed_out.at_least(gpu, cap)?;
            let count = self.placed_count.as_mut().expect("allocated");
            s.memset_zeros(count).map_err(cuda_err)?;
            let cand = self.candidates.get();
            instance_contacts(
                gpu,
                threads(candidates, 128),
                bv,
                iv,
                cand,
                candidates as u32,
                cap as u32,
                out,
                &mut *count,
            )?;
            let found = s.clone_dtoh(&*count).map_err(cuda_err)?[0] as usize;
            if found <= cap {
                break found;
            }
            self.placed_cap = found + found / 4;
        };
        let t2 = t0.elapsed();
        let inst = self.instances.as_ref().expect("instances uploaded");
        let host = self.placed_host.at_least(gpu, found.max(1))?;
        if found > 0 {
            // Sorted by (body, instance, triangle): one radix sort of the three packed when
            // they fit in 64 bits, else by (instance, triangle), then stably by body.
            let (tri_bits, rest_bits) = (inst.triangle_bits, inst.triangle_bits + inst.instance_bits);
            let body_bits = bits_below(n);
            let one = rest_bits + body_bits <= 64;
            let keys = self.placed_keys.at_least(gpu, found)?;
            let order = self.placed_order.at_least(gpu, found)?;
            let placed = self.placed_out.get();
            let cfg = threads(found, 256);
            let n32 = found as u32;
            placed_keys(gpu, cfg, placed, n32, tri_bits, rest_bits, one as u32, &mut *keys, &mut *order)?;
            let first_bits = if one { rest_bits + body_bits } else { rest_bits };
            crate::runtime::cuda::radix_sort::sort_pairs(gpu, keys, order, found, first_bits)?;
            if !one {
                placed_body_keys(gpu, cfg, placed, &*order, n32, &mut *keys)?;
                crate::runtime::cuda::radix_sort::sort_pairs(gpu, keys, order, found, body_bits)?;
            }
            let sorted = self.placed_sorted.at_least(gpu, found)?;
            placed_gather(gpu, cfg, placed, &*order, n32, &mut *sorted)?;
            s.memcpy_dtoh(&sorted.slice(0..found), &mut *host).map_err(cuda_err)?;
            s.synchronize().map_err(cuda_err)?;
        }
        if self.opts.profile {
            eprintln!(
                "profile cuda instances: candidates {t1:?} ({candidates}), contacts {:?} ({found}), sort and download {:?}",
                t2 - t1,
                t0.elapsed() - t2,
            );
        }
        Ok(found)
    }

    /// The tick on the device; its contact count (they are in `contacts_host`).
    fn tick_contacts(&mut self, world: &World) -> Result<usize> {
        let be_arc = self.gpu.clone();
        let gpu = &*be_arc;
        let _busy = gpu.lock();
        let t0 = std::time::Instant::now();
        self.sync(world)?;
        if world.bodies().is_empty() {
            return Ok(0);
        }
        let t_sync = t0.elapsed();
        let count = loop {
            match self.launch_tick(world)? {
                Some(c) => break c,
                None => continue, // a buffer grew: run the tick again
            }
        };
        let t_kernels = t0.elapsed();
        if count == 0 {
            return Ok(0);
        }
        self.expect = count;
        if count > self.fetched {
            // More than the guess that came down with the status: all of them, again.
            let s = gpu.stream();
            let host = self.contacts_host.at_least(gpu, count)?;
            s.memcpy_dtoh(&self.tick.out.get().slice(0..count), &mut *host).map_err(cuda_err)?;
            // Event tracking is off (see Gpu::new), so pinned reads wait on the stream.
            s.synchronize().map_err(cuda_err)?;
        }
        if self.opts.profile {
            eprintln!(
                "profile cuda collider: upload {:?}, kernels {:?}, download {:?} ({count} contacts)",
                t_sync,
                t_kernels - t_sync,
                t0.elapsed() - t_kernels
            );
        }
        Ok(count)
    }

    /// Sizes every tick buffer for the current capacities (nothing is allocated while a
    /// tick is captured into a graph).
    fn prepare_tick(&mut self, n: usize) -> Result<()> {
        let gpu = &*self.gpu;
        let t = &mut self.tick;
        t.bbox.at_least(gpu, 6 * n)?;
        t.shape.at_least(gpu, 18 * n)?;
        t.cells.at_least(gpu, 6 * n)?;
        t.count.at_least(gpu, n)?;
        t.entries.at_least(gpu, t.entry_cap)?;
        let batch = self.bodies.as_ref().map_or(1, |d| d.batch);
        t.zeroed.at_least(gpu, ZeroedLayout::new(n, batch, t.entry_cap).len())?;
        t.spill.at_least(gpu, t.contact_cap)?;
        t.out.at_least(gpu, t.contact_cap)?;
        let contact_cap = t.contact_cap;
        self.status_host.at_least(gpu, 4)?;
        if self.opts.zero_copy {
            self.contacts_host.at_least(gpu, contact_cap)?;
        }
        Ok(())
    }

    /// One tick on the device: runs it (through a CUDA graph when one fits), then reads the
    /// status. `None` when the grid entries or the contacts overflowed their buffers (which
    /// have grown, so the caller runs it again), else the contact count.
    fn launch_tick(&mut self, world: &World) -> Result<Option<usize>> {
        self.grid_for = None;
        let n = world.bodies().len();
        self.prepare_tick(n)?;
        let t = &self.tick;
        let v = world.versions();
        let key = GraphKey {
            world: world.id(),
            n,
            caps: [t.entry_cap, t.contact_cap],
            mesh: v.mesh,
            shapes: v.shapes,
            cell_size: world.cell_size().to_bits(),
            mesh_layer: world.mesh_layer(),
            poses: self.pose_src,
        };
        let be_arc = self.gpu.clone();
        let s = be_arc.stream();
        if self.graph.as_ref().is_some_and(|(k, _)| *k == key) {
            self.graph.as_ref().expect("checked").1.launch().map_err(cuda_err)?;
        } else if self.opts.cuda_graphs && self.last_key == Some(key) {
            // The second tick with the same sizes: capture it, and replay it from now on.
            self.graph = None;
            let mode = cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
            let captured = s.begin_capture(mode).map_err(cuda_err).and_then(|()| {
                let queued = self.enqueue_tick(world);
                let graph = s.end_capture(cudarc::driver::sys::CUgraphInstantiate_flags(0)).map_err(cuda_err);
                queued.and(graph)
            });
            match captured {
                Ok(Some(g)) => {
                    g.launch().map_err(cuda_err)?;
                    self.graph = Some((key, g));
                }
                _ => {
                    // No graph (capture refused here): launch directly from now on.
                    self.opts.cuda_graphs = false;
                    self.enqueue_tick(world)?;
                }
            }
        } else {
            self.graph = None;
            self.enqueue_tick(world)?;
        }
        self.last_key = Some(key);
        let status = self.read_status(world)?;
        if status.is_some() {
            self.grid_for = Some((world.id(), world.versions()));
        }
        Ok(status)
    }

    /// Queues a tick (no allocation, no synchronisation: it may be captured): a memset and
    /// two kernels (collide.cu).
    fn enqueue_tick(&mut self, world: &World) -> Result<()> {
        let gpu = &*self.gpu;
        let s = gpu.stream();
        let n = world.bodies().len();
        let (n32, cell_size) = (n as u32, world.cell_size());
        let mesh = self.mesh.as_ref().expect("synced").view(gpu);
        let d = self.bodies.as_mut().expect("synced");
        let zero_copy = self.opts.zero_copy;
        let t = &mut self.tick;
        let (e32, c32) = (t.entry_cap as u32, t.contact_cap as u32);
        let batch = d.batch as u32;
        let layout = ZeroedLayout::new(n, d.batch, t.entry_cap);
        let bmask = (layout.buckets - 1) as u64;
        let mesh_layer = world.mesh_layer();
        s.memset_zeros(&mut t.zeroed.buf.as_mut().expect("prepared").slice_mut(0..layout.len())).map_err(cuda_err)?;
        let zeroed = t.zeroed.ptr(gpu);
        let word = |k: usize| zeroed + 4 * k as u64;
        let (status, lookback, heads) =
            (word(ZeroedLayout::STATUS), word(ZeroedLayout::LOOKBACK), word(layout.heads()));
        {
            let [center_in, orientation_in] = self.pose_src.map(Address::raw);
            let entries = Address::raw(t.entries.ptr(gpu));
            body_cells(
                gpu,
                threads(CELL_GROUP * n, CELLS_BLOCK),
                center_in,
                orientation_in,
                &mut d.center,
                &d.radii,
                &d.alive,
                n32,
                cell_size,
                t.bbox.buf.as_mut().expect("prepared"),
                t.cells.buf.as_mut().expect("prepared"),
                t.count.buf.as_mut().expect("prepared"),
                t.shape.buf.as_mut().expect("prepared"),
                Address::raw(heads),
                entries,
                e32,
                bmask,
                Address::raw(status),
            )?;
        }
        let view = body_view(gpu, d, t, heads, bmask);
        let (out, status_host) = if zero_copy {
            (host_device_ptr(&self.contacts_host)?, host_device_ptr(&self.status_host)?)
        } else {
            (t.out.ptr(gpu), 0)
        };
        let cfg = cudarc::driver::LaunchConfig {
            grid_dim: (layout.tiles as u32, 1, 1),
            block_dim: (32 * CONTACT_WARPS as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        body_contacts(
            gpu,
            cfg,
            view,
            mesh,
            mesh_layer,
            n32,
            batch,
            e32,
            c32,
            Address::raw(status),
            Address::raw(lookback),
            t.spill.buf.as_mut().expect("prepared"),
            Address::raw(out),
            Address::raw(status_host),
        )
    }

    /// Reads the tick's status: the contact count, or `None` after growing a buffer.
    fn read_status(&mut self, world: &World) -> Result<Option<usize>> {
        let zero_copy = self.opts.zero_copy;
        let gpu = &*self.gpu;
        let s = gpu.stream();
        let t = &mut self.tick;
        if !zero_copy {
            let host = self.status_host.at_least(gpu, 4)?;
            let status = ZeroedLayout::STATUS..ZeroedLayout::STATUS + 4;
            s.memcpy_dtoh(&t.zeroed.get().slice(status), &mut *host).map_err(cuda_err)?;
        }
        // Unless the tick wrote them to the host itself, the contacts, as many as the last tick
        // had and a margin, come down with the status: one wait on the device instead of two.
        self.fetched =
            if zero_copy { t.contact_cap } else { (self.expect + self.expect / 32 + 256).min(t.contact_cap) };
        if self.fetched > 0 && !zero_copy {
            let contacts = self.contacts_host.at_least(gpu, self.fetched)?;
            s.memcpy_dtoh(&t.out.get().slice(0..self.fetched), &mut *contacts).map_err(cuda_err)?;
        }
        s.synchronize().map_err(cuda_err)?;
        let host = self.status_host.buf.as_ref().expect("allocated above");
        let st = host.as_slice().map_err(cuda_err)?;
        let (contacts, entries, bad) = (st[0] as usize, st[1] as usize, st[2]);
        if bad != 0 {
            let c = world.bodies().center[bad as usize - 1];
            crate::collide::world::check_center(bad as usize - 1, c)?;
            return Err(Error::InvalidArgument(format!(
                "body {} at {c:?} is beyond ±{} cells of {}, or spans too many: use larger cells",
                bad - 1,
                crate::collide::hash_grid::CELL_LIMIT - 1,
                world.cell_size()
            )));
        }
        if entries > t.entry_cap || contacts > t.contact_cap {
            t.entry_cap = t.entry_cap.max(entries + entries / 4);
            t.contact_cap = t.contact_cap.max(contacts + contacts / 4);
            return Ok(None);
        }
        Ok(Some(contacts))
    }

    /// The bodies as the last tick gridded them (what overlap queries and sweeps read); a tick
    /// runs first unless the last one was for this world as it is now. `needed` false: an
    /// empty view (no tick).
    fn current_body_view(&mut self, world: &World, needed: bool) -> Result<BodyView> {
        let bodies = if needed { world.bodies().len() } else { 0 };
        if bodies > 0 && self.grid_for != Some((world.id(), world.versions())) {
            while self.launch_tick(world)?.is_none() {}
        }
        let gpu = &*self.gpu;
        Ok(match self.bodies.as_ref() {
            Some(d) if bodies > 0 => {
                let t = &self.tick;
                let layout = ZeroedLayout::new(bodies, d.batch, t.entry_cap);
                let heads = t.zeroed.ptr(gpu) + 4 * layout.heads() as u64;
                body_view(gpu, d, t, heads, (layout.buckets - 1) as u64)
            }
            _ => BodyView {
                center: 0,
                radii: 0,
                shape: 0,
                layer: 0,
                mask: 0,
                bbox: 0,
                cells: 0,
                count: 0,
                grid: BodyGridView { head: 0, entries: 0, mask: 0 },
            },
        })
    }

    /// Each sweep's first hit on the static mesh, the heightfield or a body, as the CPU
    /// collider gives.
    pub fn sweeps(&mut self, world: &World, sweeps: &[Sweep]) -> Result<Vec<Option<SweepResult>>> {
        let cell_size = world.cell_size();
        sweeps
            .par_iter()
            .with_min_len(4096)
            .enumerate()
            .try_for_each(|(i, s)| s.check(cell_size).map_err(|e| crate::collide::cpu::sweep_error(i, e)))?;
        let mut body_layers = world.bodies().layers_present();
        let nothing = world.mesh().is_none() && world.heightfield().is_none() && world.instances().is_empty();
        if (nothing && body_layers == 0) || sweeps.is_empty() {
            return Ok(vec![None; sweeps.len()]);
        }
        let be_arc = self.gpu.clone();
        let gpu = &*be_arc;
        let _busy = gpu.lock();
        self.sync(world)?;
        if !sweeps.iter().any(|s| s.mask & body_layers != 0) {
            body_layers = 0;
        }
        let view = self.current_body_view(world, body_layers != 0)?;
        let s = gpu.stream();
        let n = sweeps.len();
        let t0 = std::time::Instant::now();
        // Inputs through pinned memory: SWEEP_VALUES per sweep (the mask and the ignored body
        // as f64, which holds any u32 exactly; -1: none).
        let host = self.sweep_in_host.at_least(gpu, SWEEP_VALUES * n)?;
        host.as_mut_slice().map_err(cuda_err)?[..SWEEP_VALUES * n]
            .par_chunks_mut(SWEEP_VALUES)
            .zip(sweeps.par_iter())
            .with_min_len(4096)
            .for_each(|(d, w)| {
                d[..3].copy_from_slice(&w.radii);
                d[3..7].copy_from_slice(&w.orientation);
                d[7..10].copy_from_slice(&w.from);
                d[10..13].copy_from_slice(&w.to);
                d[13] = w.mask as f64;
                d[14] = w.ignore.map_or(-1.0, |b| b.0 as f64);
            });
        let input = self.sweep_in.at_least(gpu, SWEEP_VALUES * n)?;
        s.memcpy_htod(&host.as_slice().map_err(cuda_err)?[..SWEEP_VALUES * n], input).map_err(cuda_err)?;
        let t_up = t0.elapsed();
        self.sweep_tri.at_least(gpu, n)?;
        self.sweep_out.at_least(gpu, 7 * n)?;
        let error = self.tick.sweep_error.at_least(gpu, 4)?;
        s.memset_zeros(error).map_err(cuda_err)?;
        let mesh = self.mesh.as_ref().expect("synced").view(gpu);
        let (n32, cell_size) = (n as u32, world.cell_size());
        sweep_queries(
            gpu,
            threads(n, 128),
            self.sweep_in.get(),
            n32,
            cell_size,
            mesh,
            view,
            body_layers,
            world.mesh_layer(),
            self.sweep_tri.buf.as_mut().expect("allocated above"),
            self.sweep_out.buf.as_mut().expect("allocated above"),
            self.tick.sweep_error.buf.as_mut().expect("allocated above"),
        )?;
        let status = self.status_host.at_least(gpu, 4)?;
        s.memcpy_dtoh(&self.tick.sweep_error.get().slice(0..4), &mut *status).map_err(cuda_err)?;
        s.synchronize().map_err(cuda_err)?;
        let bad = status.as_slice().map_err(cuda_err)?[0];
        let t_kernel = t0.elapsed();
        if bad != 0 {
            return Err(Error::InvalidArgument(format!(
                "sweep {} leaves the grid's range (±{} cells): use larger cells",
                bad - 1,
                crate::collide::hash_grid::CELL_LIMIT - 1
            )));
        }
        let tri = self.sweep_tri_host.at_least(gpu, n)?;
        s.memcpy_dtoh(&self.sweep_tri.get().slice(0..n), &mut *tri).map_err(cuda_err)?;
        let out = self.sweep_out_host.at_least(gpu, 7 * n)?;
        s.memcpy_dtoh(&self.sweep_out.get().slice(0..7 * n), &mut *out).map_err(cuda_err)?;
        s.synchronize().map_err(cuda_err)?;
        let t_down = t0.elapsed();
        let tri = &self.sweep_tri_host.buf.as_ref().expect("allocated").as_slice().map_err(cuda_err)?[..n];
        let out = &self.sweep_out_host.buf.as_ref().expect("allocated").as_slice().map_err(cuda_err)?[..7 * n];
        let mut results: Vec<Option<SweepResult>> = tri
            .par_iter()
            .zip(out.par_chunks_exact(7))
            .with_min_len(4096)
            .map(|(&t, v)| {
                (t != crate::geometry::points::NO_ID).then(|| SweepResult {
                    toi: v[0],
                    kind: ContactKind::of_tagged(t),
                    other: t & ID_BITS,
                    triangle: if t & KIND_BODY != 0 { NO_ID } else { t & ID_BITS },
                    point: [v[1], v[2], v[3]],
                    normal: [v[4], v[5], v[6]],
                })
            })
            .collect();
        if let Some(inst) = &self.instances {
            // The instances' hits; on equal times the others come first.
            let mut ids = gpu.alloc_uninit::<u32>(n)?;
            let mut tris = gpu.alloc_uninit::<u32>(n)?;
            let mut vals = gpu.alloc_uninit::<f64>(7 * n)?;
            let iv = inst.view(gpu);
            instance_sweeps(gpu, threads(n, 128), self.sweep_in.get(), n as u32, iv, &mut ids, &mut tris, &mut vals)?;
            let (ids, tris, vals) = (
                s.clone_dtoh(&ids).map_err(cuda_err)?,
                s.clone_dtoh(&tris).map_err(cuda_err)?,
                s.clone_dtoh(&vals).map_err(cuda_err)?,
            );
            results.par_iter_mut().enumerate().with_min_len(4096).for_each(|(i, r)| {
                if ids[i] == NO_ID {
                    return;
                }
                let v = &vals[7 * i..7 * i + 7];
                if r.is_none_or(|r| v[0] < r.toi) {
                    *r = Some(SweepResult {
                        toi: v[0],
                        kind: ContactKind::Instance,
                        other: ids[i],
                        triangle: tris[i],
                        point: [v[1], v[2], v[3]],
                        normal: [v[4], v[5], v[6]],
                    });
                }
            });
        }
        if self.opts.profile {
            eprintln!(
                "profile cuda sweeps: upload {t_up:?}, kernel {:?}, download {:?}, unpack {:?} ({n} sweeps)",
                t_kernel - t_up,
                t_down - t_kernel,
                t0.elapsed() - t_down
            );
        }
        Ok(results)
    }

    /// Each query's overlaps, as the CPU gives them. The bodies come from the body grid of
    /// a tick, run first unless the last one was for this world as it is now.
    pub fn overlaps(&mut self, world: &World, queries: &[Overlap], limit: usize) -> Result<Overlaps> {
        check_queries(queries, limit, world.cell_size())?;
        let n = queries.len();
        if n == 0 {
            return Ok(Overlaps::from_tagged(Vec::new()));
        }
        let be_arc = self.gpu.clone();
        let gpu = &*be_arc;
        let _busy = gpu.lock();
        self.sync(world)?;
        let bodies = world.bodies().len();
        let view = self.current_body_view(world, true)?;
        let s = gpu.stream();
        // 11 values a query: radii, quaternion, center, and 1 for a box (0: an ellipsoid).
        let flat: Vec<f64> = queries
            .iter()
            .flat_map(|q| {
                let cuboid = if q.shape == OverlapShape::Cuboid { 1.0 } else { 0.0 };
                q.radii.into_iter().chain(q.orientation).chain(q.center).chain([cuboid])
            })
            .collect();
        let masks: Vec<u32> = queries.iter().map(|q| q.mask).collect();
        let d_queries = s.clone_htod(&flat).map_err(cuda_err)?;
        let d_masks = s.clone_htod(&masks).map_err(cuda_err)?;
        let mut ids = gpu.alloc_uninit::<u32>(n * limit)?;
        let mut total = gpu.alloc_uninit::<u32>(n)?;
        let mut error = gpu.alloc::<u32>(1)?;
        let mesh = self.mesh.as_ref().expect("synced").view(gpu);
        overlap_queries(
            gpu,
            threads(n, 128),
            &d_queries,
            &d_masks,
            n as u32,
            world.cell_size(),
            mesh,
            view,
            bodies as u32,
            world.mesh_layer(),
            limit as u32,
            &mut ids,
            &mut total,
            &mut error,
        )?;
        let bad = s.clone_dtoh(&error).map_err(cuda_err)?[0];
        if bad != 0 {
            return Err(Error::InvalidArgument(format!(
                "overlap query {}: it leaves the grid's range (±{} cells): use larger cells",
                bad - 1,
                crate::collide::hash_grid::CELL_LIMIT - 1
            )));
        }
        let ids = s.clone_dtoh(&ids).map_err(cuda_err)?;
        let total = s.clone_dtoh(&total).map_err(cuda_err)?;
        let rows = (0..n)
            .map(|i| {
                let kept = (total[i] as usize).min(limit);
                (ids[i * limit..i * limit + kept].to_vec(), total[i])
            })
            .collect();
        let found = Overlaps::from_tagged(rows);
        let Some(inst) = &self.instances else { return Ok(found) };
        // The instances' overlaps, after the others in each row.
        let mut ids = gpu.alloc_uninit::<u32>(n * limit)?;
        let mut tris = gpu.alloc_uninit::<u32>(n * limit)?;
        let mut total = gpu.alloc_uninit::<u32>(n)?;
        let iv = inst.view(gpu);
        instance_overlaps(
            gpu,
            threads(n, 128),
            &d_queries,
            &d_masks,
            n as u32,
            iv,
            limit as u32,
            &mut ids,
            &mut tris,
            &mut total,
        )?;
        let (ids, tris, total) = (
            s.clone_dtoh(&ids).map_err(cuda_err)?,
            s.clone_dtoh(&tris).map_err(cuda_err)?,
            s.clone_dtoh(&total).map_err(cuda_err)?,
        );
        let rows = (0..n)
            .map(|i| {
                let kept = (total[i] as usize).min(limit);
                let keys =
                    (i * limit..i * limit + kept).map(|k| ((KIND_INSTANCE | ids[k]) as u64) << 32 | tris[k] as u64);
                (keys.collect(), total[i])
            })
            .collect();
        Ok(found.merged(&Overlaps::from_keys(rows), limit))
    }
}

#[cfg(feature = "test-hooks")]
/// The narrow phase alone on the device, for the equality tests: `pairs` of
/// (radii a, orientation a, radii b, orientation b, r) and `tris` of (radii, orientation,
/// corners as offsets from the center); one result per input, pairs first.
pub(crate) fn narrow_phase(
    gpu: &Gpu,
    pairs: &[[f64; 17]],
    tris: &[[f64; 16]],
) -> Result<Vec<Option<crate::collide::contact_ellipsoid_triangle::ContactGeometry>>> {
    let s = gpu.stream();
    let (np, nt) = (pairs.len(), tris.len());
    let p = s.clone_htod(&pairs.iter().flatten().copied().chain([0.0]).collect::<Vec<f64>>()).map_err(cuda_err)?;
    let t = s.clone_htod(&tris.iter().flatten().copied().chain([0.0]).collect::<Vec<f64>>()).map_err(cuda_err)?;
    let mut out = gpu.alloc::<f64>(8 * (np + nt))?;
    narrow_check(gpu, threads(np + nt, 128), &p, np as u32, &t, nt as u32, &mut out)?;
    let out = s.clone_dtoh(&out).map_err(cuda_err)?;
    Ok(out
        .chunks_exact(8)
        .take(np + nt)
        .map(|o| {
            (o[0] != 0.0).then(|| crate::collide::contact_ellipsoid_triangle::ContactGeometry {
                normal: [o[1], o[2], o[3]],
                depth: o[4],
                point: [o[5], o[6], o[7]],
            })
        })
        .collect())
}
