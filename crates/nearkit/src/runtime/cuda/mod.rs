//! What every capability's CUDA code shares: one context, stream and set of compiled kernels
//! per GPU (`Gpu`), NVRTC compilation with a disk cache (`compile`), device memory
//! (`memory`), and the device-wide radix sort and scans (`radix_sort`).
//!
//! cudarc loads the driver and NVRTC at run time, so the project builds, and the CPU path
//! runs, on machines without CUDA.

pub(crate) mod compile;
pub(crate) mod import;
pub(crate) mod launch;
pub(crate) mod memory;
pub(crate) mod radix_sort;
pub(crate) mod transfer;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use crate::geometry::points::NO_ID;

pub(crate) use launch::{CudaSource, KernelModule};

use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DriverError, LaunchConfig};
use cudarc::nvrtc::Ptx;

pub(crate) use compile::CompileOptions;

pub use memory::DevicePoints;

use crate::error::{Error, Result};

/// One GPU, ready for queries: its context, the stream every query runs on, and the
/// compiled kernels. Shared by every query of the process (`Gpu::shared`).
pub(crate) struct Gpu {
    ordinal: usize,
    name: String,
    arch: String,
    /// Compute capability.
    cc: (u32, u32),
    stream: Arc<CudaStream>,
    compile: CompileOptions,
    /// Each kernel module, compiled (or loaded from the cache) on its first use.
    modules: Mutex<HashMap<&'static str, Arc<CudaModule>>>,
    /// Kernels already looked up, by module and name.
    functions: Mutex<HashMap<(&'static str, String), CudaFunction>>,
    /// One query at a time per device: they share the stream.
    busy: Mutex<()>,
    /// Pinned buffers for copies to and from pageable host memory, made on first use.
    staging: Mutex<Option<transfer::Staging>>,
}

/// The GPU's staging buffers, held for one transfer.
pub(crate) struct StagingGuard<'a>(std::sync::MutexGuard<'a, Option<transfer::Staging>>);

impl std::ops::Deref for StagingGuard<'_> {
    type Target = transfer::Staging;
    fn deref(&self) -> &transfer::Staging {
        self.0.as_ref().expect("made by Gpu::staging")
    }
}

impl std::ops::DerefMut for StagingGuard<'_> {
    fn deref_mut(&mut self) -> &mut transfer::Staging {
        self.0.as_mut().expect("made by Gpu::staging")
    }
}

pub(crate) fn cuda_err(e: DriverError) -> Error {
    Error::Cuda(format!("{e:?}"))
}

/// Whether libcuda can be loaded at all (cudarc panics on use when it cannot).
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the library.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// GPUs visible to this process; 0 where there is no driver or it cannot start.
pub fn device_count() -> usize {
    if !driver_present() {
        return 0;
    }
    CudaContext::device_count().map_or(0, |n| n.max(0) as usize)
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
pub(crate) fn device_pool(ctx: &CudaContext) -> Result<cudarc::driver::sys::CUmemoryPool> {
    let mut pool = std::ptr::null_mut();
    ctx.bind_to_thread().map_err(cuda_err)?;
    // SAFETY: an out-parameter for the context's own device.
    unsafe { cudarc::driver::sys::cuDeviceGetMemPool(&mut pool, ctx.cu_device()) }.result().map_err(cuda_err)?;
    Ok(pool)
}

impl Gpu {
    /// The process-wide context of GPU `ordinal`, created (context + kernels) on first use.
    pub fn shared(ordinal: usize, opts: &CompileOptions) -> Result<Arc<Gpu>> {
        static BACKENDS: OnceLock<Mutex<HashMap<usize, Arc<Gpu>>>> = OnceLock::new();
        let mut map = BACKENDS.get_or_init(Default::default).lock().unwrap();
        if let Some(b) = map.get(&ordinal) {
            return Ok(b.clone());
        }
        let b = Arc::new(Gpu::new(ordinal, opts)?);
        map.insert(ordinal, b.clone());
        Ok(b)
    }

    fn new(ordinal: usize, opts: &CompileOptions) -> Result<Gpu> {
        if !driver_present() {
            return Err(Error::CudaUnavailable("no NVIDIA driver (libcuda) on this machine".into()));
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
        let cc = (major as u32, minor as u32);
        if !compile::nvrtc_present() {
            // Without NVRTC every module needs an image compiled ahead of time for this GPU
            // (the images are of every module, built with the library's own sources; an image
            // of another source is refused when its module loads).
            let missing = compile::uncovered(opts.images, cc);
            if !missing.is_empty() {
                let why = if opts.images.is_empty() {
                    String::new()
                } else {
                    format!(", and the precompiled kernels do not cover {arch} (modules {})", missing.join(", "))
                };
                return Err(Error::CudaUnavailable(format!(
                    "libnvrtc was not found (install the CUDA toolkit or add its lib folder to LD_LIBRARY_PATH){why}"
                )));
            }
        }
        let name = ctx.name().unwrap_or_else(|_| "unknown GPU".into());
        Ok(Gpu {
            ordinal,
            name,
            arch,
            cc,
            // A stream of our own, not the legacy default one: collision ticks are captured
            // into CUDA graphs, which the default stream cannot do.
            stream: ctx.new_stream().map_err(cuda_err)?,
            compile: opts.clone(),
            modules: Mutex::new(HashMap::new()),
            functions: Mutex::new(HashMap::new()),
            busy: Mutex::new(()),
            staging: Mutex::new(None),
        })
    }

    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The staging buffers of `transfer`, made on first use.
    pub(crate) fn staging(&self) -> Result<StagingGuard<'_>> {
        let mut g = self.staging.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_none() {
            *g = Some(transfer::Staging::new(self)?);
        }
        Ok(StagingGuard(g))
    }

    /// Holds the GPU for one query: queries share the stream, so they run one at a time.
    pub fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.busy.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `cuda:N (name, sm_XY)`.
    pub fn describe(&self) -> String {
        format!("cuda:{} ({}, {})", self.ordinal, self.name, self.arch)
    }

    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// Kernel `name` of `module`, which is compiled (or loaded from the disk cache) the first
    /// time one of its kernels is asked for.
    pub(crate) fn function(&self, module: &'static KernelModule, name: &str) -> Result<CudaFunction> {
        let key = (module.name, name.to_string());
        if let Some(f) = self.functions.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return Ok(f.clone());
        }
        let m = self.module(module)?;
        let f = m.load_function(name).map_err(|e| Error::Cuda(format!("kernel {name} of {}: {e:?}", module.name)))?;
        self.functions.lock().unwrap_or_else(|e| e.into_inner()).insert(key, f.clone());
        Ok(f)
    }

    fn module(&self, module: &'static KernelModule) -> Result<Arc<CudaModule>> {
        let mut modules = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = modules.get(module.name) {
            return Ok(m.clone());
        }
        let source = module.source();
        let image = compile::pick(self.compile.images, module.name, compile::source_hash(&source), self.cc);
        let bytes = match image {
            Some(b) => b.to_vec(),
            None => compile::compile_cubin(&source, &self.arch, &self.compile)?,
        };
        let m = self.stream.context().load_module(Ptx::from_binary(bytes)).map_err(cuda_err)?;
        modules.insert(module.name, m.clone());
        Ok(m)
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

    /// The device's (free, total) memory in bytes.
    pub(crate) fn memory_info(&self) -> Result<(usize, usize)> {
        self.stream.context().mem_get_info().map_err(cuda_err)
    }

    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().map_err(cuda_err)
    }
}

/// Types, helpers and the instantiation macro every module starts with.
pub(crate) static COMMON: CudaSource = CudaSource {
    file: "common.cuh",
    text: include_str!("common.cuh"),
    constants: || vec![("NO_ID", format!("{NO_ID}u"))],
    structs: Vec::new,
};

/// The decoupled look-back of single-pass scans (`radix_sort.cu`, `collide.cu`).
pub(crate) static LOOKBACK: CudaSource = CudaSource::plain("lookback.cuh", include_str!("lookback.cuh"));

/// A 1-D launch of (at least) `n` threads in blocks of `block`.
pub(crate) fn threads(n: usize, block: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: ((n.div_ceil(block as usize)).max(1) as u32, 1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    }
}
