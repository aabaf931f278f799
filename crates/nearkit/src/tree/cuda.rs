//! Launches tree_build.cu: the `MortonTree` of tree/mod.rs, built on the device; and orders
//! query points along the tree's Morton curve, chunk by chunk.

use std::marker::PhantomData;

use cudarc::driver::{CudaSlice, CudaView, DevicePtr};

use super::search::STACK;
use super::{DEFAULT_LEAF_SIZE, TABLE_BITS};
use crate::error::Result;
use crate::geometry::morton::MORTON3_BITS;
use crate::geometry::real::Real;
use crate::runtime::cuda::launch::{c_definitions, c_struct, kernels, In, Out};
use crate::runtime::cuda::memory::{DevicePoints, PointSource};
use crate::runtime::cuda::radix_sort::sort_pairs;
use crate::runtime::cuda::{cuda_err, threads, CudaSource, Gpu, COMMON};

/// Threads per block of the query-ordering kernels.
const BLOCK: u32 = 256;

/// The tree's layout and search in C (`Tree`, `box_dist2`, Morton codes).
pub(crate) static TREE_HEADER: CudaSource = CudaSource {
    file: "tree.cuh",
    text: include_str!("tree.cuh"),
    constants: || {
        vec![
            ("CHILD_POINT", format!("{}u", super::CHILD_POINT)),
            ("TABLE_BITS", TABLE_BITS.to_string()),
            ("MORTON3_MAX", format!("{}u", (1u32 << MORTON3_BITS) - 1)),
        ]
    },
    structs: c_definitions!(TreeArgs<f32>),
};

/// A query's walk on the device scans nodes of up to this many points whole (search.cuh
/// `scan_whole`).
const GPU_RUN: usize = 16;

/// The tree's k-nearest search (search.rs `knn`) in C.
pub(crate) static TREE_SEARCH: CudaSource = CudaSource {
    file: "search.cuh",
    text: include_str!("search.cuh"),
    constants: || vec![("TREE_STACK", STACK.to_string()), ("GPU_RUN", GPU_RUN.to_string())],
    structs: Vec::new,
};

/// Runs (and nodes still to expand) a warp's shared walk for its 32 queries lists at most; a
/// warp whose list would grow longer walks a query a lane instead.
const GROUP_ITEMS: usize = 256;

/// A warp's 32 queries walking the tree together (group.cuh).
pub(crate) static TREE_GROUP: CudaSource = CudaSource {
    file: "group.cuh",
    text: include_str!("group.cuh"),
    constants: || vec![("GROUP_ITEMS", GROUP_ITEMS.to_string())],
    structs: Vec::new,
};

static TREE_BUILD: CudaSource = CudaSource::plain("tree_build.cu", include_str!("tree_build.cu"));

c_struct! {
    /// `struct Tree<T>` of tree.cuh, passed to kernels by value: the tree's device pointers.
    pub(crate) struct TreeArgs<T> as "Tree<{R}>" {
        lo_x: u64 = "const R*",
        lo_y: u64 = "const R*",
        lo_z: u64 = "const R*",
        hi_x: u64 = "const R*",
        hi_y: u64 = "const R*",
        hi_z: u64 = "const R*",
        min_id: u64 = "const u32*",
        left: u64 = "const u32*",
        right: u64 = "const u32*",
        other_end: u64 = "const u32*",
        x: u64 = "const R*",
        y: u64 = "const R*",
        z: u64 = "const R*",
        id: u64 = "const u32*",
        key_table: u64 = "const u32*",
        /// Origin x, y, z and scale of the Morton frame.
        frame: u64 = "const R*",
        n: u32 = "u32",
        leaf_size: u32 = "u32",
    }
}

kernels! {
    module KERNELS = "tree", [&COMMON, &TREE_HEADER, &TREE_BUILD];
    /// The points' bounds as order-preserving integers: acc = min x, y, z, max x, y, z.
    fn bounds<T>(x: In<T>, y: In<T>, z: In<T>, n: u32, acc: Out<u64>);
    /// `MortonFrame::from_bounds` of `bounds`' result: origin x, y, z and scale.
    fn frame<T>(acc: In<u64>, frame: Out<T>);
    /// Each point's Morton code in `frame`, shifted right by `shift`, and its index.
    fn morton_keys<T>(x: In<T>, y: In<T>, z: In<T>, n: u32, frame: In<T>, shift: u32, keys: Out<u64>, vals: Out<u32>);
    /// Points `perm[i]` to place i.
    fn gather_points<T>(x: In<T>, y: In<T>, z: In<T>, perm: In<u32>, n: u32, sx: Out<T>, sy: Out<T>, sz: Out<T>);
    /// `id[i] = ids[id[i]]`.
    fn rename_ids(ids: In<u32>, n: u32, id: Out<u32>);
    /// Karras's radix tree over sorted codes; `flags` zeroed for `radix_boxes`.
    fn radix_nodes(
        keys: In<u64>,
        n: u32,
        left: Out<u32>,
        right: Out<u32>,
        other_end: Out<u32>,
        parent: Out<u32>,
        flags: Out<u32>,
    );
    /// Node boxes and smallest ids, bottom-up.
    fn radix_boxes<T>(
        x: In<T>,
        y: In<T>,
        z: In<T>,
        id: In<u32>,
        n: u32,
        left: In<u32>,
        right: In<u32>,
        parent: In<u32>,
        flags: Out<u32>,
        lo_x: Out<T>,
        lo_y: Out<T>,
        lo_z: Out<T>,
        hi_x: Out<T>,
        hi_y: Out<T>,
        hi_z: Out<T>,
        min_id: Out<u32>,
    );
    /// `MortonTree::key_table` of the sorted codes.
    fn key_table(codes: In<u64>, n: u32, table: Out<u32>);
}

/// The tree's device buffers, in the layout of `MortonTree`.
pub(crate) struct DeviceTree<T> {
    pub n: u32,
    pub leaf_size: u32,
    pub key_table: CudaSlice<u32>,
    pub x: CudaSlice<T>,
    pub y: CudaSlice<T>,
    pub z: CudaSlice<T>,
    pub id: CudaSlice<u32>,
    pub left: CudaSlice<u32>,
    pub right: CudaSlice<u32>,
    pub other_end: CudaSlice<u32>,
    pub lo: [CudaSlice<T>; 3],
    pub hi: [CudaSlice<T>; 3],
    pub min_id: CudaSlice<u32>,
    /// origin x, y, z and scale of the Morton frame.
    pub frame: CudaSlice<T>,
}

/// The points a tree is built from: the caller's (kept) or a copy the build may free early.
pub enum BuildInput<'a, T> {
    Borrowed(&'a DevicePoints<T>),
    Owned(DevicePoints<T>),
}

impl<T: Real> DeviceTree<T> {
    pub fn build(gpu: &Gpu, b: &DevicePoints<T>) -> Result<Self> {
        Self::build_from(gpu, BuildInput::Borrowed(b))
    }

    /// Builds the tree. Buffers are allocated and freed in an order that keeps the peak low
    /// (an owned input is freed once gathered; full codes before the box pass).
    pub fn build_from(gpu: &Gpu, input: BuildInput<'_, T>) -> Result<Self> {
        Self::build_with_ids(gpu, input, None)
    }

    /// [`DeviceTree::build_from`] where point i's id is `ids[i]` (else i). The ids must be
    /// distinct: searches break distance ties by them, and node boxes keep their smallest.
    pub fn build_with_ids(gpu: &Gpu, input: BuildInput<'_, T>, ids: Option<&CudaSlice<u32>>) -> Result<Self> {
        let b = match &input {
            BuildInput::Borrowed(b) => *b,
            BuildInput::Owned(b) => b,
        };
        let n = b.len;
        let n32 = n as u32;
        let s = gpu.stream();

        // Bounds -> frame, with exact float min/max through order-preserving integers.
        let mut frame = gpu.alloc_uninit::<T>(4)?;
        let blocks = n.div_ceil(256).min(1024);
        let mut acc = s.clone_htod(&[u64::MAX, u64::MAX, u64::MAX, 0, 0, 0]).map_err(cuda_err)?;
        bounds::<T>(gpu, threads(blocks * 256, 256), &b.x, &b.y, &b.z, n32, &mut acc)?;
        self::frame::<T>(gpu, threads(1, 1), &acc, &mut frame)?;

        // Morton keys, sorted with the ids as values (stable, so ties stay in id order).
        let mut codes = gpu.alloc_uninit::<u64>(n)?;
        let mut id = gpu.alloc_uninit::<u32>(n)?;
        morton_keys::<T>(gpu, threads(n, 256), &b.x, &b.y, &b.z, n32, &frame, 0, &mut codes, &mut id)?;
        sort_pairs(gpu, &mut codes, &mut id, n, 63)?;
        let table_len = (1usize << TABLE_BITS) + 1;
        let mut key_table = gpu.alloc_uninit::<u32>(table_len)?;
        self::key_table(gpu, threads(table_len, 256), &codes, n32, &mut key_table)?;

        let (mut x, mut y, mut z) = (gpu.alloc_uninit::<T>(n)?, gpu.alloc_uninit::<T>(n)?, gpu.alloc_uninit::<T>(n)?);
        gather_points::<T>(gpu, threads(n, 256), &b.x, &b.y, &b.z, &id, n32, &mut x, &mut y, &mut z)?;
        drop(input);
        if let Some(ids) = ids {
            rename_ids(gpu, threads(n, 256), ids, n32, &mut id)?;
        }

        // Radix tree topology, then boxes bottom-up.
        let internal = n.saturating_sub(1);
        let (mut left, mut right, mut other_end) = (
            gpu.alloc_uninit::<u32>(internal)?,
            gpu.alloc_uninit::<u32>(internal)?,
            gpu.alloc_uninit::<u32>(internal)?,
        );
        let mut parent = gpu.alloc_uninit::<u32>(internal)?;
        let mut flags = gpu.alloc::<u32>(internal.div_ceil(4))?; // zeroed byte counters
        if internal > 0 {
            let cfg = threads(internal, 256);
            radix_nodes(gpu, cfg, &codes, n32, &mut left, &mut right, &mut other_end, &mut parent, &mut flags)?;
        }
        // The full codes are needed no more: free them before the box pass, the memory peak.
        drop(codes);
        let mut lo =
            [gpu.alloc_uninit::<T>(internal)?, gpu.alloc_uninit::<T>(internal)?, gpu.alloc_uninit::<T>(internal)?];
        let mut hi =
            [gpu.alloc_uninit::<T>(internal)?, gpu.alloc_uninit::<T>(internal)?, gpu.alloc_uninit::<T>(internal)?];
        let mut min_id = gpu.alloc_uninit::<u32>(internal)?;
        if internal > 0 {
            let [lx, ly, lz] = &mut lo;
            let [hx, hy, hz] = &mut hi;
            let cfg = threads(internal, 256);
            radix_boxes::<T>(
                gpu,
                cfg,
                &x,
                &y,
                &z,
                &id,
                n32,
                &left,
                &right,
                &parent,
                &mut flags,
                lx,
                ly,
                lz,
                hx,
                hy,
                hz,
                &mut min_id,
            )?;
        }
        drop((parent, flags));
        let leaf_size = DEFAULT_LEAF_SIZE;
        Ok(DeviceTree { n: n32, leaf_size, key_table, x, y, z, id, left, right, other_end, lo, hi, min_id, frame })
    }

    pub(crate) fn args(&self, gpu: &Gpu) -> TreeArgs<T> {
        let s = gpu.stream();
        let p = |c: &CudaSlice<T>| c.device_ptr(s).0;
        let u = |c: &CudaSlice<u32>| c.device_ptr(s).0;
        TreeArgs {
            lo_x: p(&self.lo[0]),
            lo_y: p(&self.lo[1]),
            lo_z: p(&self.lo[2]),
            hi_x: p(&self.hi[0]),
            hi_y: p(&self.hi[1]),
            hi_z: p(&self.hi[2]),
            min_id: u(&self.min_id),
            left: u(&self.left),
            right: u(&self.right),
            other_end: u(&self.other_end),
            x: p(&self.x),
            y: p(&self.y),
            z: p(&self.z),
            id: u(&self.id),
            key_table: u(&self.key_table),
            frame: p(&self.frame),
            n: self.n,
            leaf_size: self.leaf_size,
            _real: PhantomData,
        }
    }

    #[cfg(feature = "test-hooks")]
    pub fn to_host(&self, gpu: &Gpu) -> Result<super::MortonTree<T>> {
        use crate::geometry::morton::MortonFrame;
        let s = gpu.stream();
        let n = self.n as usize;
        let internal = n.saturating_sub(1);
        let v = |c: &CudaSlice<T>, len: usize| s.clone_dtoh(&c.slice(0..len)).map_err(cuda_err);
        let u = |c: &CudaSlice<u32>, len: usize| s.clone_dtoh(&c.slice(0..len)).map_err(cuda_err);
        let frame = v(&self.frame, 4)?;
        Ok(super::MortonTree {
            frame: MortonFrame { origin: [frame[0], frame[1], frame[2]], scale: frame[3] },
            leaf_size: self.leaf_size,
            key_table: s.clone_dtoh(&self.key_table).map_err(cuda_err)?,
            x: v(&self.x, n)?,
            y: v(&self.y, n)?,
            z: v(&self.z, n)?,
            id: u(&self.id, n)?,
            left: u(&self.left, internal)?,
            right: u(&self.right, internal)?,
            other_end: u(&self.other_end, internal)?,
            lo: [v(&self.lo[0], internal)?, v(&self.lo[1], internal)?, v(&self.lo[2], internal)?],
            hi: [v(&self.hi[0], internal)?, v(&self.hi[1], internal)?, v(&self.hi[2], internal)?],
            min_id: u(&self.min_id, internal)?,
        })
    }
}

/// One chunk of A, sorted into Morton order on the device: `ids[i]` is sorted point i's
/// index within the chunk.
pub(crate) struct SortedChunk<T> {
    pub points: DevicePoints<T>,
    pub ids: CudaSlice<u32>,
    pub offset: usize,
    pub last: bool,
}

/// Runs `f` on each chunk of A, sorted in Morton order (in `tree`'s frame) so that
/// neighbouring threads search neighbouring parts of the tree.
pub(crate) fn for_each_chunk<T: Real>(
    gpu: &Gpu,
    a: &PointSource<'_, T>,
    tree: &DeviceTree<T>,
    chunk: usize,
    f: impl FnMut(&SortedChunk<T>) -> Result<()>,
) -> Result<()> {
    // The top 32 bits of the code order queries well enough for coherence, in half the passes.
    for_each_chunk_sorted_by(gpu, a, tree, chunk, 32, f)
}

/// `for_each_chunk` with the top `key_bits` bits of the Morton code as the sort key.
pub(crate) fn for_each_chunk_sorted_by<T: Real>(
    gpu: &Gpu,
    a: &PointSource<'_, T>,
    tree: &DeviceTree<T>,
    chunk: usize,
    key_bits: u32,
    mut f: impl FnMut(&SortedChunk<T>) -> Result<()>,
) -> Result<()> {
    let order = |x: &CudaView<'_, T>, y: &CudaView<'_, T>, z: &CudaView<'_, T>, len| {
        sort_chunk(gpu, tree, x, y, z, len, key_bits)
    };
    for_each_chunk_ordered(gpu, a, chunk, order, |offset, last, c| f(&SortedChunk { offset, last, ..c }))
}

/// The chunks of `a`, each put in order by `order(x, y, z, len)` on the device, to
/// `f(offset, last, ordered)`.
pub(crate) fn for_each_chunk_ordered<T: Real, C>(
    gpu: &Gpu,
    a: &PointSource<'_, T>,
    chunk: usize,
    order: impl Fn(&CudaView<'_, T>, &CudaView<'_, T>, &CudaView<'_, T>, usize) -> Result<C>,
    mut f: impl FnMut(usize, bool, C) -> Result<()>,
) -> Result<()> {
    let (n, c) = (a.len(), chunk.max(1));
    let mut s = 0;
    while s < n {
        let e = (s + c).min(n);
        let chunk = match a {
            PointSource::Host(p) => {
                let d = DevicePoints::upload_range(gpu, p, s, e)?;
                order(&d.x.as_view(), &d.y.as_view(), &d.z.as_view(), e - s)?
            }
            PointSource::Device(d) => order(&d.x.slice(s..e), &d.y.slice(s..e), &d.z.slice(s..e), e - s)?,
        };
        f(s, e == n, chunk)?;
        s = e;
    }
    Ok(())
}

fn sort_chunk<T: Real>(
    gpu: &Gpu,
    tree: &DeviceTree<T>,
    x: &CudaView<'_, T>,
    y: &CudaView<'_, T>,
    z: &CudaView<'_, T>,
    len: usize,
    key_bits: u32,
) -> Result<SortedChunk<T>> {
    let len32 = len as u32;
    let mut keys = gpu.alloc_uninit::<u64>(len)?;
    let mut ids = gpu.alloc_uninit::<u32>(len)?;
    let cfg = threads(len, BLOCK);
    morton_keys::<T>(gpu, cfg, x, y, z, len32, &tree.frame, 63 - key_bits, &mut keys, &mut ids)?;
    sort_pairs(gpu, &mut keys, &mut ids, len, key_bits)?;
    drop(keys);
    let (mut sx, mut sy, mut sz) =
        (gpu.alloc_uninit::<T>(len)?, gpu.alloc_uninit::<T>(len)?, gpu.alloc_uninit::<T>(len)?);
    gather_points::<T>(gpu, cfg, x, y, z, &ids, len32, &mut sx, &mut sy, &mut sz)?;
    Ok(SortedChunk {
        points: DevicePoints { x: sx, y: sy, z: sz, len, bounds: None, magnitudes: None },
        ids,
        offset: 0,
        last: false,
    })
}
