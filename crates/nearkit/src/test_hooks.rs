//! Internals the integration tests check directly (built with the `test-hooks` feature only;
//! not part of the API).

use std::path::Path;

pub use crate::closest_point::bvh::{TriangleBvh, WideBvh, WIDE, WIDE_EMPTY, WIDE_LEAF, WIDE_START};
pub use crate::closest_point::triangle::{closest_point_triangle, TrianglePoint};
pub use crate::collide::contact_ellipsoid_ellipsoid::contact_ellipsoid_ellipsoid;
pub use crate::collide::contact_ellipsoid_triangle::{contact_ellipsoid_triangle, ContactGeometry};
pub use crate::collide::ellipsoid::{dot, sub, Shape, V3};
pub use crate::collide::overlap_cuboid::{cuboid_meets_ellipsoid, cuboid_meets_triangle};
pub use crate::collide::sweep_ellipsoid_ellipsoid::sweep_ellipsoid_ellipsoid;
pub use crate::collide::sweep_ellipsoid_triangle::{sweep_ellipsoid_triangle, SweepHit};
pub use crate::geometry::vectors::{dist2_nd, MAX_DIM};
pub use crate::knn::grid::{CandidateGrid, GridFrame, GridOptions};
pub use crate::knn::grid_top8::knn_packed as knn_packed_top8;
pub use crate::knn::vectors::cpu::embedded_grid;
pub use crate::knn::vectors::tree::VectorTree;
pub use crate::runtime::cuda::compile::nvrtc_present;
pub use crate::tree::{MortonTree, DEFAULT_LEAF_SIZE};

use crate::device::Engine;
use crate::error::Result;
use crate::geometry::real::Real;
use crate::geometry::{Points, Vectors};
use crate::runtime::cuda::compile::{compile_cubin, CompileOptions};
use crate::runtime::cuda::radix_sort;
use crate::runtime::cuda::{cuda_err, DevicePoints};
use crate::tree::cuda::DeviceTree;

/// The CPU searches of the point tree.
pub mod search {
    pub use crate::tree::search::{knn, nearest_hinted, NO_POSITION};
}

/// Every kernel module: its name and the source NVRTC compiles (constants, files, checks).
pub fn kernel_modules() -> Vec<(&'static str, String)> {
    crate::kernels::sources().into_iter().map(|k| (k.module, k.source)).collect()
}

/// Compiles `source` for `arch` with NVRTC, without the disk cache.
pub fn compile_kernels(source: &str, arch: &str, cccl_include: &Path) -> Result<Vec<u8>> {
    compile_cubin(
        source,
        arch,
        &CompileOptions { cccl_include: cccl_include.to_path_buf(), cache_dir: None, images: &[] },
    )
}

/// `points`' tree built on the engine's GPU, brought back.
pub fn tree_on_device<T: Real>(engine: &Engine, points: &Points<T>) -> Result<MortonTree<T>> {
    crate::point_index::PointIndex::new(points, engine)?.tree_to_host()
}

/// Each of `rows`' nearest point of `data` on the engine's GPU, from host rows `chunk` at a
/// time (`PointIndex::nearest_rows_into` picks its own chunks, mostly one).
pub fn nearest_rows_in_chunks<T: Real>(
    engine: &Engine,
    data: &Points<T>,
    rows: &[T],
    max_distance: Option<T>,
    chunk: usize,
) -> Result<crate::pairs::Nearest<T>> {
    let gpu = engine.need_gpu("")?;
    let _busy = gpu.lock();
    let tree = DeviceTree::build(gpu, &DevicePoints::upload(gpu, data)?)?;
    let n = rows.len() / 3;
    let (mut b, mut distance) = (vec![0u32; n], vec![T::ZERO; n]);
    // SAFETY: initialised values viewed as possibly uninitialised ones, all overwritten.
    let (bs, ds) = unsafe {
        (
            &mut *(b.as_mut_slice() as *mut [u32] as *mut [std::mem::MaybeUninit<u32>]),
            &mut *(distance.as_mut_slice() as *mut [T] as *mut [std::mem::MaybeUninit<T>]),
        )
    };
    let job = crate::sharded::NearestRows {
        pieces: &[rows],
        r2: crate::geometry::radius2(max_distance)?,
        chunk,
        profile: false,
    };
    crate::sharded::nearest_rows_on_gpu(gpu, &tree, &tree.frame, &job, ds, bs, &|id| id)?;
    Ok(crate::pairs::Nearest { b, distance })
}

/// The kNN candidate grid of `data` built on the engine's GPU, brought back; `None` where it
/// would not be used.
pub fn knn_grid_on_device<T: Real>(
    engine: &Engine,
    data: &Points<T>,
    n_queries: usize,
    k_list: usize,
    r2: T,
) -> Result<Option<CandidateGrid<T>>> {
    let gpu = engine.need_gpu("")?;
    let _busy = gpu.lock();
    let db = DevicePoints::upload(gpu, data)?;
    let tree = DeviceTree::build(gpu, &db)?;
    crate::knn::grid_cuda::DeviceGrid::build(gpu, &tree, n_queries, k_list, r2, &GridOptions::default())?
        .map(|g| g.to_host(gpu))
        .transpose()
}

/// The 6-D candidate grid of triangle-box queries built on the engine's GPU, brought back.
pub fn aabb6_grid_on_device<T: Real>(
    engine: &Engine,
    data: &Vectors<T>,
    queries: &Vectors<T>,
    k_list: usize,
    r2: T,
) -> Result<Option<CandidateGrid<T>>> {
    let gpu = engine.need_gpu("")?;
    let _busy = gpu.lock();
    crate::knn::vectors::cuda::aabb6_grid_to_host(gpu, data, queries, k_list, r2)
}

/// The exclusive prefix sums of each of `arrays`, computed on the GPU one after another with
/// one scan state, as a collider's tick does.
pub fn exclusive_scans_on_device(engine: &Engine, arrays: &[Vec<u32>]) -> Result<Vec<Vec<u32>>> {
    let gpu = engine.need_gpu("")?;
    let _busy = gpu.lock();
    let longest = arrays.iter().map(Vec::len).max().unwrap_or(0);
    let mut state = gpu.alloc::<u64>(radix_sort::scan_state_len(longest))?;
    let mut out = Vec::new();
    for values in arrays {
        let mut d = gpu.stream().clone_htod(values).map_err(cuda_err)?;
        radix_sort::exclusive_scan_with(gpu, &mut d, values.len(), &mut state)?;
        out.push(gpu.stream().clone_dtoh(&d).map_err(cuda_err)?);
    }
    Ok(out)
}

/// `(keys, values)` sorted on the GPU by key, stably (the keys below `2^bits`).
pub fn sort_pairs_on_device(engine: &Engine, keys: &[u64], values: &[u32], bits: u32) -> Result<(Vec<u64>, Vec<u32>)> {
    let gpu = engine.need_gpu("")?;
    let _busy = gpu.lock();
    let mut k = gpu.stream().clone_htod(keys).map_err(cuda_err)?;
    let mut v = gpu.stream().clone_htod(values).map_err(cuda_err)?;
    radix_sort::sort_pairs(gpu, &mut k, &mut v, keys.len(), bits)?;
    Ok((gpu.stream().clone_dtoh(&k).map_err(cuda_err)?, gpu.stream().clone_dtoh(&v).map_err(cuda_err)?))
}

/// The collider's narrow phase alone on the engine's GPU: `pairs` of (radii a, orientation
/// a, radii b, orientation b, r) and `tris` of (radii, orientation, corners as offsets from
/// the center); one result per input, pairs first.
pub fn narrow_phase_on_device(
    engine: &Engine,
    pairs: &[[f64; 17]],
    tris: &[[f64; 16]],
) -> Result<Vec<Option<ContactGeometry>>> {
    let gpu = engine.need_gpu("")?;
    let _busy = gpu.lock();
    crate::collide::cuda::narrow_phase(gpu, pairs, tris)
}

/// The contact of `body` (centered at `center`) from the narrow phase's geometry, as the
/// colliders report it.
pub fn contact(
    body: u32,
    kind: crate::collide::ContactKind,
    other: u32,
    center: V3,
    g: &ContactGeometry,
) -> crate::collide::Contact {
    crate::collide::Contact::new(body, kind, other, 0, center, g)
}

/// The contact of `body` with triangle `triangle` of instance `instance`, as the colliders
/// report it.
pub fn instance_contact(
    body: u32,
    instance: u32,
    triangle: u32,
    center: V3,
    g: &ContactGeometry,
) -> crate::collide::Contact {
    crate::collide::Contact::new(body, crate::collide::ContactKind::Instance, instance, triangle, center, g)
}

/// Every hit of `ray` in `world`, sorted by (distance, kind, id): a brute force over every
/// triangle and body with the ray casts' own tests.
pub fn ray_hits_brute_force(
    world: &crate::collide::World,
    ray: &crate::collide::Ray,
) -> Result<Vec<crate::collide::RayHit>> {
    crate::collide::ray_cast::cpu::brute_force(world, ray)
}

/// A copy of `values` in the engine's GPU memory, standing for another library's array.
pub struct ForeignArray<T>(cudarc::driver::CudaSlice<T>);

impl<T> ForeignArray<T> {
    /// Its GPU address.
    pub fn address(&self) -> u64 {
        use cudarc::driver::DevicePtr;
        self.0.device_ptr(self.0.stream()).0
    }
}

/// `values` copied to the engine's GPU, as another library would hold them.
pub fn foreign_array<T: Real>(engine: &Engine, values: &[T]) -> Result<ForeignArray<T>> {
    let gpu = engine.need_gpu("")?;
    gpu.stream().clone_htod(values).map(ForeignArray).map_err(cuda_err)
}

/// A mesh's closest-point index on the engine's GPU, as its arrays (box records, children,
/// triangle records, ids, stack size): built on the host and uploaded, then built on the
/// device. `mesh` must be valid (`Mesh::validate`).
#[allow(clippy::type_complexity)]
pub fn mesh_index_host_and_device<T: Real>(
    engine: &Engine,
    mesh: &crate::geometry::mesh::Mesh<T>,
) -> Result<[(Vec<T>, Vec<u32>, Vec<T>, Vec<u32>, usize); 2]> {
    use crate::closest_point::cuda::DeviceTriangleBvh;
    let gpu = engine.need_gpu("")?;
    let _busy = gpu.lock();
    let (lo, hi) = mesh.vertices.bounds();
    let host = DeviceTriangleBvh::upload(gpu, &TriangleBvh::build(mesh), lo, hi)?.to_host(gpu)?;
    let off = &mut crate::runtime::profile::Phases::new("", false);
    let device = DeviceTriangleBvh::build(gpu, mesh, lo, hi, off)?.to_host(gpu)?;
    Ok([host, device])
}

/// The staging uploads' copy (`transfer::copy_streaming`: non-temporal AVX2 stores where the
/// CPU has them), for the copy probe.
///
/// # Safety
/// Both ranges are valid for `bytes` bytes and do not overlap.
pub unsafe fn copy_streaming(src: *const u8, dst: *mut u8, bytes: usize) {
    // SAFETY: as the caller promises.
    unsafe { crate::runtime::cuda::transfer::copy_streaming(src, dst, bytes) }
}
