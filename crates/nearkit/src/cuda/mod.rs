//! The CUDA backend: cudarc with run-time loading, so the project builds and the CPU path
//! runs on machines without CUDA. Kernels are compiled by NVRTC on first use (see
//! `compile`) and every heavy step runs on the device.

mod candidate_grid;
mod closest_pairs;
mod closest_point;
mod collide;
pub mod compile;
mod knn;
mod radix_sort;
mod tree_build;
mod vector_knn;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DriverError, LaunchConfig};
use cudarc::nvrtc::Ptx;

pub use closest_pairs::DevicePoints;
pub use closest_point::{DeviceClosestPoints, DeviceTriangleBvh};
pub use collide::CudaCollider;
pub use tree_build::DeviceTree;
pub use vector_knn::{DeviceShiftedCopies, DeviceVectorTree, DeviceVectors};

use crate::backend::Backend;
use crate::closest_point::{ClosestPointOptions, ClosestPoints};
use crate::error::{Error, Result};
use crate::mesh::Mesh;
use crate::points::Points;
use crate::query::{Knn, KnnOptions, Nearest, Pair, PairsOptions};
use crate::real::Real;
use crate::shifted_sort::ShiftedSortOptions;
use crate::vectors::Vectors;

pub struct CudaBackend {
    ordinal: usize,
    name: String,
    arch: String,
    stream: Arc<CudaStream>,
    module: Arc<CudaModule>,
    /// `compile::VECTOR_KERNEL_SOURCE`, compiled when first needed.
    vector_module: OnceLock<Arc<CudaModule>>,
    functions: Mutex<HashMap<String, CudaFunction>>,
    /// One query at a time per device: they share the stream.
    busy: Mutex<()>,
}

pub(crate) fn cuda_err(e: DriverError) -> Error {
    Error::Cuda(format!("{e:?}"))
}

/// Whether libcuda can be loaded at all (cudarc panics on use when it cannot).
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the library.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Lets the device's memory pool keep what queries free instead of returning it to the driver
/// at every synchronisation (its default): a second query of the same size then allocates
/// from the pool in microseconds instead of mapping hundreds of MB afresh.
fn keep_freed_memory(ctx: &CudaContext) -> Result<()> {
    use cudarc::driver::sys::{self, CUmemPool_attribute as A};
    let pool = device_pool(ctx)?;
    let mut keep = u64::MAX;
    // SAFETY: the context's own device pool; a 64-bit in-parameter.
    unsafe {
        sys::cuMemPoolSetAttribute(pool, A::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &mut keep as *mut u64 as *mut _)
            .result()
            .map_err(cuda_err)?;
    }
    Ok(())
}

/// The default memory pool of the context's device (the context bound to this thread).
fn device_pool(ctx: &CudaContext) -> Result<cudarc::driver::sys::CUmemoryPool> {
    let mut pool = std::ptr::null_mut();
    ctx.bind_to_thread().map_err(cuda_err)?;
    // SAFETY: an out-parameter for the context's own device.
    unsafe { cudarc::driver::sys::cuDeviceGetMemPool(&mut pool, ctx.cu_device()) }.result().map_err(cuda_err)?;
    Ok(pool)
}

impl CudaBackend {
    /// The process-wide backend for GPU `ordinal`, created (context + kernels) on first use.
    pub fn shared(ordinal: usize) -> Result<Arc<CudaBackend>> {
        static BACKENDS: OnceLock<Mutex<HashMap<usize, Arc<CudaBackend>>>> = OnceLock::new();
        let mut map = BACKENDS.get_or_init(Default::default).lock().unwrap();
        if let Some(b) = map.get(&ordinal) {
            return Ok(b.clone());
        }
        let b = Arc::new(CudaBackend::new(ordinal)?);
        map.insert(ordinal, b.clone());
        Ok(b)
    }

    fn new(ordinal: usize) -> Result<CudaBackend> {
        if !driver_present() {
            return Err(Error::CudaUnavailable("no NVIDIA driver (libcuda) on this machine".into()));
        }
        if !compile::nvrtc_present() {
            return Err(Error::CudaUnavailable(
                "libnvrtc was not found (install the CUDA toolkit or add its lib folder to LD_LIBRARY_PATH)".into(),
            ));
        }
        let count = CudaContext::device_count().map_err(|e| Error::CudaUnavailable(format!("{e:?}")))?;
        if ordinal >= count.max(0) as usize {
            return Err(Error::CudaUnavailable(format!("GPU {ordinal} asked for, but {count} found")));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| Error::CudaUnavailable(format!("{e:?}")))?;
        // One stream per backend: cross-stream event tracking would only add overhead.
        // SAFETY: no other stream of this context touches our buffers.
        unsafe { ctx.disable_event_tracking() };
        keep_freed_memory(&ctx)?;
        let (major, minor) = ctx.compute_capability().map_err(cuda_err)?;
        let arch = format!("sm_{major}{minor}");
        let cubin = compile::compile_cubin(compile::KERNEL_SOURCE, &arch, true)?;
        let module = ctx.load_module(Ptx::from_binary(cubin)).map_err(cuda_err)?;
        let name = ctx.name().unwrap_or_else(|_| "unknown GPU".into());
        Ok(CudaBackend {
            ordinal,
            name,
            arch,
            // A stream of our own, not the legacy default one: collision ticks are captured
            // into CUDA graphs, which the default stream cannot do.
            stream: ctx.new_stream().map_err(cuda_err)?,
            module,
            vector_module: OnceLock::new(),
            functions: Mutex::new(HashMap::new()),
            busy: Mutex::new(()),
        })
    }

    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    pub(crate) fn func(&self, name: &str) -> Result<CudaFunction> {
        let mut map = self.functions.lock().unwrap();
        if let Some(f) = map.get(name) {
            return Ok(f.clone());
        }
        let f = match self.module.load_function(name) {
            Ok(f) => f,
            Err(_) => {
                self.vector_module()?.load_function(name).map_err(|e| Error::Cuda(format!("kernel {name}: {e:?}")))?
            }
        };
        map.insert(name.to_string(), f.clone());
        Ok(f)
    }

    fn vector_module(&self) -> Result<&Arc<CudaModule>> {
        if let Some(m) = self.vector_module.get() {
            return Ok(m);
        }
        let cubin = compile::compile_cubin(compile::VECTOR_KERNEL_SOURCE, &self.arch, true)?;
        let m = self.stream.context().load_module(Ptx::from_binary(cubin)).map_err(cuda_err)?;
        Ok(self.vector_module.get_or_init(|| m))
    }

    /// The kernel `base` instantiated for `T` (`base_f32` / `base_f64`).
    pub(crate) fn func_t<T: Real>(&self, base: &str) -> Result<CudaFunction> {
        self.func(&format!("{base}_{}", T::NAME))
    }

    pub(crate) fn alloc<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
        &self,
        n: usize,
    ) -> Result<CudaSlice<T>> {
        self.stream.alloc_zeros::<T>(n.max(1)).map_err(cuda_err)
    }

    /// Device memory the caller fully writes before any read (no zero-fill pass).
    pub(crate) fn alloc_uninit<T: cudarc::driver::DeviceRepr>(&self, n: usize) -> Result<CudaSlice<T>> {
        // SAFETY: every use site writes each element before reading it.
        unsafe { self.stream.alloc::<T>(n.max(1)) }.map_err(cuda_err)
    }

    /// High-water marks of this device's memory pool, in bytes: `(used, reserved)` — live
    /// allocations, and what the pool held from the device (fragmentation included).
    /// `reset` starts new marks (for measuring one query).
    pub fn memory_high_water(&self, reset: bool) -> Result<(u64, u64)> {
        use cudarc::driver::sys::{self, CUmemPool_attribute as A};
        self.synchronize()?;
        let pool = device_pool(self.stream.context())?;
        let (mut used, mut reserved) = (0u64, 0u64);
        // SAFETY: driver queries on this context's own device pool; 64-bit out-parameters.
        unsafe {
            sys::cuMemPoolGetAttribute(pool, A::CU_MEMPOOL_ATTR_USED_MEM_HIGH, &mut used as *mut u64 as *mut _)
                .result()
                .map_err(cuda_err)?;
            sys::cuMemPoolGetAttribute(pool, A::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &mut reserved as *mut u64 as *mut _)
                .result()
                .map_err(cuda_err)?;
            if reset {
                let mut zero = 0u64;
                for a in [A::CU_MEMPOOL_ATTR_USED_MEM_HIGH, A::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH] {
                    sys::cuMemPoolSetAttribute(pool, a, &mut zero as *mut u64 as *mut _).result().map_err(cuda_err)?;
                }
            }
        }
        Ok((used, reserved))
    }

    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().map_err(cuda_err)
    }
}

/// A 1-D launch of `n` threads in blocks of `block`.
pub(crate) fn grid(n: usize, block: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: ((n.div_ceil(block as usize)).max(1) as u32, 1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    }
}

impl Backend for CudaBackend {
    fn describe(&self) -> String {
        format!("cuda:{} ({}, {})", self.ordinal, self.name, self.arch)
    }

    fn nearest<T: Real>(&self, a: &Points<T>, b: &Points<T>, max_distance: Option<T>) -> Result<Nearest<T>> {
        let _guard = self.busy.lock().unwrap();
        closest_pairs::nearest(self, a, b, max_distance)
    }

    fn closest_pairs<T: Real>(&self, a: &Points<T>, b: &Points<T>, opts: &PairsOptions<T>) -> Result<Vec<Pair<T>>> {
        let _guard = self.busy.lock().unwrap();
        closest_pairs::closest_pairs(self, a, b, opts)
    }

    fn knn<T: Real>(&self, data: &Points<T>, queries: &Points<T>, opts: &KnnOptions<T>) -> Result<Knn<T>> {
        let _guard = self.busy.lock().unwrap();
        knn::knn(self, data, queries, opts)
    }

    fn knn_vectors<T: Real>(&self, data: &Vectors<T>, queries: &Vectors<T>, opts: &KnnOptions<T>) -> Result<Knn<T>> {
        let _guard = self.busy.lock().unwrap();
        vector_knn::knn(self, data, queries, opts)
    }

    fn closest_points<T: Real>(
        &self,
        mesh: &Mesh<T>,
        queries: &Points<T>,
        opts: &ClosestPointOptions<T>,
    ) -> Result<ClosestPoints<T>> {
        let _guard = self.busy.lock().unwrap();
        closest_point::closest_points(self, mesh, queries, opts)
    }

    fn approx_knn<T: Real>(
        &self,
        data: &Vectors<T>,
        queries: &Vectors<T>,
        opts: &ShiftedSortOptions,
    ) -> Result<Knn<T>> {
        let _guard = self.busy.lock().unwrap();
        vector_knn::approx_knn(self, data, queries, opts)
    }
}

impl CudaBackend {
    /// Copies a point set to the device (for timing queries on device-resident data).
    pub fn upload<T: Real>(&self, p: &Points<T>) -> Result<DevicePoints<T>> {
        DevicePoints::upload(self, p)
    }

    /// `closest_pairs` on data already on the device: tree build, queries and top-k all run
    /// there; only the k result rows come back.
    pub fn closest_pairs_resident<T: Real>(
        &self,
        a: &DevicePoints<T>,
        b: &DevicePoints<T>,
        opts: &PairsOptions<T>,
    ) -> Result<Vec<Pair<T>>> {
        let _guard = self.busy.lock().unwrap();
        closest_pairs::closest_pairs_resident(self, a, b, opts)
    }

    /// `knn` on data already on the device, results left there (queries × k, row-major, in
    /// `ids` and `distances`, which must hold that many). Returns the effective k.
    pub fn knn_resident<T: Real>(
        &self,
        data: &DevicePoints<T>,
        queries: &DevicePoints<T>,
        opts: &KnnOptions<T>,
        ids: &mut CudaSlice<u32>,
        distances: &mut CudaSlice<T>,
    ) -> Result<usize> {
        let _guard = self.busy.lock().unwrap();
        knn::knn_resident(self, data, queries, opts, ids, distances)
    }

    /// Builds a mesh's closest-point index (on the host) and uploads it.
    pub fn triangle_bvh<T: Real>(&self, mesh: &Mesh<T>) -> Result<DeviceTriangleBvh<T>> {
        mesh.validate()?;
        let (lo, hi) = mesh.vertices.bounds();
        DeviceTriangleBvh::upload(self, &crate::triangle_bvh::TriangleBvh::build(mesh), lo, hi)
    }

    /// `closest_points` on an uploaded index and queries, results left on the device. `slack`:
    /// `closest_point::rounding_slack` of the mesh's box and the queries.
    pub fn closest_points_resident<T: Real>(
        &self,
        bvh: &DeviceTriangleBvh<T>,
        queries: &DevicePoints<T>,
        opts: &ClosestPointOptions<T>,
        slack: T,
        out: &mut DeviceClosestPoints<T>,
    ) -> Result<()> {
        let _guard = self.busy.lock().unwrap();
        let r2 = crate::query::radius2(opts.max_distance)?;
        closest_point::closest_points_resident(self, bvh, queries, r2, slack, out)
    }

    /// Copies vectors to the device.
    pub fn upload_vectors<T: Real>(&self, v: &Vectors<T>) -> Result<DeviceVectors<T>> {
        DeviceVectors::upload(self, v)
    }

    /// Builds the exact vector index (on the host) and uploads it.
    pub fn vector_tree<T: Real>(&self, data: &Vectors<T>) -> Result<DeviceVectorTree<T>> {
        DeviceVectorTree::upload(self, &crate::vector_tree::VectorTree::build(data), data)
    }

    /// `knn_vectors` on an uploaded index and queries, results left on the device.
    pub fn knn_vectors_resident<T: Real>(
        &self,
        tree: &DeviceVectorTree<T>,
        queries: &DeviceVectors<T>,
        opts: &KnnOptions<T>,
        ids: &mut CudaSlice<u32>,
        distances: &mut CudaSlice<T>,
    ) -> Result<usize> {
        let _guard = self.busy.lock().unwrap();
        vector_knn::knn_resident(self, tree, queries, opts, ids, distances)
    }

    /// Keys and sorts the shifted copies of uploaded data on the device.
    pub fn shifted_copies<T: Real>(
        &self,
        data: &DeviceVectors<T>,
        frame: crate::shifted_sort::ShiftFrame,
        shifts: usize,
    ) -> Result<DeviceShiftedCopies<T>> {
        let _guard = self.busy.lock().unwrap();
        DeviceShiftedCopies::build(self, data, frame, shifts)
    }

    /// `approx_knn` on uploaded copies and queries, results left on the device.
    pub fn approx_knn_resident<T: Real>(
        &self,
        copies: &DeviceShiftedCopies<T>,
        queries: &DeviceVectors<T>,
        opts: &ShiftedSortOptions,
        ids: &mut CudaSlice<u32>,
        distances: &mut CudaSlice<T>,
    ) -> Result<usize> {
        let _guard = self.busy.lock().unwrap();
        vector_knn::approx_knn_resident(self, copies, queries, opts, ids, distances)
    }

    /// Device memory for `n` values (for results of resident queries).
    pub fn alloc_zeroed<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
        &self,
        n: usize,
    ) -> Result<CudaSlice<T>> {
        self.alloc(n)
    }

    /// Builds the kNN candidate grid for `data` on the device and brings it back (tests
    /// compare it with the CPU build); `None` where the grid would not be used.
    pub fn build_knn_grid_to_host<T: Real>(
        &self,
        data: &Points<T>,
        n_queries: usize,
        k_list: usize,
        r2: T,
    ) -> Result<Option<crate::grid::CandidateGrid<T>>> {
        let _guard = self.busy.lock().unwrap();
        let db = DevicePoints::upload(self, data)?;
        let tree = DeviceTree::build(self, &db)?;
        candidate_grid::DeviceGrid::build(self, &tree, n_queries, k_list, r2)?.map(|g| g.to_host(self)).transpose()
    }

    /// Builds the 6-D candidate grid of triangle-box queries on the device and brings it back
    /// (tests compare it with the CPU build); `None` where it would not be used.
    pub fn build_aabb6_grid_to_host<T: Real>(
        &self,
        data: &Vectors<T>,
        queries: &Vectors<T>,
        k_list: usize,
        r2: T,
    ) -> Result<Option<crate::grid::CandidateGrid<T>>> {
        let _guard = self.busy.lock().unwrap();
        vector_knn::aabb6_grid_to_host(self, data, queries, k_list, r2)
    }

    /// The exclusive prefix sums of each of `arrays`, computed on the device one after
    /// another with one scan state, as a collider's tick does (tests compare them with a host
    /// loop).
    pub fn exclusive_scans_to_host(&self, arrays: &[Vec<u32>]) -> Result<Vec<Vec<u32>>> {
        let _guard = self.busy.lock().unwrap();
        let longest = arrays.iter().map(Vec::len).max().unwrap_or(0);
        let mut state = self.alloc::<u64>(radix_sort::scan_state_len(longest))?;
        let mut out = Vec::new();
        for values in arrays {
            let mut d = self.stream.clone_htod(values).map_err(cuda_err)?;
            radix_sort::exclusive_scan_with(self, &mut d, values.len(), &mut state)?;
            out.push(self.stream.clone_dtoh(&d).map_err(cuda_err)?);
        }
        Ok(out)
    }

    /// Builds B's tree on the device and brings it back (tests compare it with the CPU build).
    pub fn build_tree_to_host<T: Real>(&self, b: &Points<T>) -> Result<crate::tree::MortonTree<T>> {
        let _guard = self.busy.lock().unwrap();
        let db = DevicePoints::upload(self, b)?;
        DeviceTree::build(self, &db)?.to_host(self)
    }
}
