//! Where queries run: one `Engine` per device per process (a CUDA context costs about 0.4 s
//! to create, so it is made on first use and kept), the CUDA options engines are made with,
//! and the thread pools of the `workers` argument.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use nearkit::{CudaOptions, Device, Engine, EngineOptions};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::arrays::err;

/// With `device="auto"` on a GPU, calls with fewer queries than this run on the CPU: a GPU
/// round trip (uploads, launches, a wait, downloads) costs more than the CPU needs for them.
pub const AUTO_CPU_BELOW: usize = 10_000;

/// CPU queries run in blocks of this many, so that Ctrl-C is noticed between blocks.
pub const CPU_CHUNK: usize = 1 << 20;

struct Engines {
    cuda: CudaOptions,
    /// Whether GPU engines print each call's phase times.
    profile: bool,
    /// By the device asked for (`Auto` is cached as what it resolved to).
    open: Vec<(Device, Engine)>,
}

include!(concat!(env!("OUT_DIR"), "/kernel_images.rs"));

fn engines() -> MutexGuard<'static, Engines> {
    static ENGINES: OnceLock<Mutex<Engines>> = OnceLock::new();
    ENGINES
        .get_or_init(|| {
            let cuda = CudaOptions { kernel_images: KERNEL_IMAGES, ..CudaOptions::default() };
            Mutex::new(Engines { cuda, profile: false, open: Vec::new() })
        })
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// A device as the user wrote it: `auto`, `cpu`, `cuda` or `cuda:N`.
pub fn parse_device(device: &str) -> PyResult<Device> {
    device.parse::<Device>().map_err(err)
}

/// The engine of `device`, opened on first use (with the GIL released: a CUDA start can take
/// seconds) and kept for the life of the process.
pub fn engine(py: Python<'_>, device: Device) -> PyResult<Engine> {
    py.detach(|| {
        let mut e = engines();
        if let Some((_, engine)) = e.open.iter().find(|(d, _)| *d == device) {
            return Ok(engine.clone());
        }
        let engine = if device == Device::Cpu {
            Engine::cpu()
        } else {
            Engine::with_options(device, &EngineOptions { cuda: e.cuda.clone(), profile: e.profile }).map_err(err)?
        };
        e.open.push((device, engine.clone()));
        Ok(engine)
    })
}

/// Sets where the CUDA backend finds CUB's headers and keeps compiled kernels, how many query
/// points go to the GPU at a time, and whether GPU calls print their phase times. Only before
/// the first CUDA use in the process.
#[pyfunction]
#[pyo3(signature = (cccl_include=None, kernel_cache=None, chunk_points=None, profile=None))]
pub fn configure_cuda(
    cccl_include: Option<PathBuf>,
    kernel_cache: Option<PathBuf>,
    chunk_points: Option<usize>,
    profile: Option<bool>,
) -> PyResult<()> {
    let mut e = engines();
    if e.open.iter().any(|(_, engine)| engine.is_cuda()) {
        return Err(PyRuntimeError::new_err(
            "CUDA is already in use in this process: call configure_cuda before the first GPU query",
        ));
    }
    if let Some(p) = cccl_include {
        e.cuda.cccl_include = p;
    }
    if let Some(p) = kernel_cache {
        e.cuda.kernel_cache = Some(p);
    }
    if let Some(n) = chunk_points {
        e.cuda.chunk_points = n.max(1);
    }
    if let Some(p) = profile {
        e.profile = p;
    }
    // Engines opened before (the CPU, or an `auto` that fell back) are opened again.
    e.open.clear();
    Ok(())
}

/// The CUDA kernels built into the package: `(module, target, bytes)` per image, where the
/// target is `sm_XY` (a cubin) or `compute_XY` (PTX). Empty when the package was built without
/// NVRTC; its kernels are then compiled at first use.
#[pyfunction]
pub fn kernel_images() -> Vec<(&'static str, &'static str, usize)> {
    KERNEL_IMAGES.iter().map(|i| (i.module, i.target, i.bytes.len())).collect()
}

/// `(description, note)` of the engine `device` resolves to: what it runs on, and why `auto`
/// is not on the GPU (None if it is, or for an explicit device).
#[pyfunction]
#[pyo3(signature = (device="auto"))]
pub fn device_info(py: Python<'_>, device: &str) -> PyResult<(String, Option<String>)> {
    let engine = engine(py, parse_device(device)?)?;
    Ok((engine.describe(), engine.note().map(str::to_owned)))
}

/// `py.detach(f)` for a call on `engine`; on a GPU, `f` runs with that GPU to itself, taken on
/// this thread before `f` starts any parallel work.
///
/// Why: the library holds a GPU's lock for a whole query, its host-side loops on rayon's
/// threads included, and a rayon thread that waits inside such a loop may pick up any job
/// queued meanwhile. Were that another thread's query of the same GPU (a Dask worker runs many
/// tasks at once), it would wait for the lock its own stack holds: a deadlock. Taken here,
/// outside rayon, no second call on a GPU is ever queued in rayon while one runs.
pub fn detach_on<R: Send>(py: Python<'_>, engine: &Engine, f: impl FnOnce() -> R + Send) -> R {
    py.detach(|| {
        let _gpu = gpu_section(engine);
        f()
    })
}

/// [`detach_on`] for a call on several engines: their GPUs' sections taken in ordinal order
/// (so two such calls never wait for each other's).
pub fn detach_on_all<R: Send>(py: Python<'_>, engines: &[Engine], f: impl FnOnce() -> R + Send) -> R {
    py.detach(|| {
        let mut order: Vec<&Engine> = engines.iter().collect();
        let ordinal = |e: &&Engine| match e.device() {
            Device::Cuda(n) => n,
            _ => usize::MAX,
        };
        order.sort_by_key(ordinal);
        order.dedup_by_key(|e| ordinal(e));
        let _gpus: Vec<_> = order.into_iter().map(gpu_section).collect();
        f()
    })
}

/// The calling thread's hold on `engine`'s GPU for one call (none on the CPU).
fn gpu_section(engine: &Engine) -> Option<MutexGuard<'static, ()>> {
    let Device::Cuda(ordinal) = engine.device() else { return None };
    static SECTIONS: OnceLock<Mutex<HashMap<usize, &'static Mutex<()>>>> = OnceLock::new();
    let section: &'static Mutex<()> = SECTIONS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(ordinal)
        .or_insert_with(|| Box::leak(Box::new(Mutex::new(()))));
    Some(section.lock().unwrap_or_else(|e| e.into_inner()))
}

/// How many CUDA GPUs this process sees (0 without the driver); opens none of them.
#[pyfunction]
pub fn cuda_device_count() -> usize {
    nearkit::Device::cuda_count()
}

/// Runs `f` on a rayon pool of `workers` threads (0: the global pool, all cores). Pools are
/// kept, one per size, as starting threads on every call would cost more than small queries.
///
/// `f` runs on one of the pool's threads: every parallel loop inside it (converting the
/// input, the query, converting the output) then starts from a worker, where handing work
/// out is cheap; from the Python thread each would wake the pool and wait for it (tens of
/// microseconds each, which was most of the binding's overhead on small calls). A call of
/// fewer than `INLINE_BELOW` rows stays on the calling thread: its loops do not split, and
/// the hand-over would cost more than the call.
pub fn with_workers<R: Send>(workers: usize, rows: usize, f: impl FnOnce() -> R + Send) -> R {
    const INLINE_BELOW: usize = 256;
    if workers == 0 {
        return if rows < INLINE_BELOW { f() } else { rayon::scope(|_| f()) };
    }
    static POOLS: Mutex<Option<HashMap<usize, Arc<rayon::ThreadPool>>>> = Mutex::new(None);
    let pool = {
        let mut pools = POOLS.lock().unwrap_or_else(|e| e.into_inner());
        let pools = pools.get_or_insert_with(HashMap::new);
        match pools.get(&workers) {
            Some(p) => p.clone(),
            None => match rayon::ThreadPoolBuilder::new().num_threads(workers).build() {
                Ok(p) => pools.entry(workers).or_insert(Arc::new(p)).clone(),
                // Threads could not be started: run on the global pool rather than fail.
                Err(_) => return f(),
            },
        }
    };
    pool.install(f)
}

/// What moving `bytes` across `device`'s bus costs, measured now, in seconds: `pinned_up`,
/// `pinned_down` (the floor an end-to-end call cannot beat), `staged_up`, `staged_down`
/// (through nearkit's pinned staging buffers, from and to ordinary memory), `plain_up`,
/// `fresh_down` (through the driver alone) and `registered_down` (into fresh memory
/// page-locked in place). None on the CPU.
#[pyfunction]
#[pyo3(signature = (device, bytes))]
pub fn bus_floor(py: Python<'_>, device: &str, bytes: usize) -> PyResult<Option<HashMap<&'static str, f64>>> {
    let engine = engine(py, parse_device(device)?)?;
    let floor = detach_on(py, &engine, || engine.bus_floor(bytes)).map_err(err)?;
    Ok(floor.map(|f| {
        HashMap::from([
            ("pinned_up", f.pinned_up.as_secs_f64()),
            ("pinned_down", f.pinned_down.as_secs_f64()),
            ("staged_up", f.staged_up.as_secs_f64()),
            ("staged_down", f.staged_down.as_secs_f64()),
            ("fresh_down", f.fresh_down.as_secs_f64()),
            ("plain_up", f.plain_up.as_secs_f64()),
            ("registered_down", f.registered_down.as_secs_f64()),
        ])
    }))
}
