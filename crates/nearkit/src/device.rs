//! Where queries run: [`Device`] is what the caller asks for (`auto`, `cpu`, `cuda[:N]`),
//! [`Engine`] what it resolved to (the CPU, or one GPU with its context and kernels), with its
//! options.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::geometry::points::Points;
use crate::geometry::real::Real;
use crate::runtime::cuda::{CompileOptions, DevicePoints, Gpu};

/// Where to run, as the user asks for it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Device {
    /// CUDA when a usable GPU is there, else the CPU.
    #[default]
    Auto,
    /// The CPU, all cores.
    Cpu,
    /// GPU number N.
    Cuda(usize),
}

impl Device {
    /// How many CUDA GPUs this process can see (0 without the NVIDIA driver). Creates no
    /// context: for choosing devices, one worker per GPU, say.
    pub fn cuda_count() -> usize {
        crate::runtime::cuda::device_count()
    }
}

impl FromStr for Device {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(Self::Auto),
            "cpu" => Ok(Self::Cpu),
            "cuda" | "gpu" => Ok(Self::Cuda(0)),
            _ => {
                s.strip_prefix("cuda:").and_then(|n| n.parse().ok()).map(Self::Cuda).ok_or_else(|| {
                    Error::InvalidArgument(format!("unknown device '{s}': use auto, cpu, cuda or cuda:N"))
                })
            }
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => f.write_str("auto"),
            Self::Cpu => f.write_str("cpu"),
            Self::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

/// How the CUDA backend runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaOptions {
    /// Where compiled kernels are kept between runs (default: `nearkit/kernels` in the user's
    /// cache folder); `None` compiles them in every process.
    pub kernel_cache: Option<PathBuf>,
    /// CUB's headers, which NVRTC needs to compile the kernels (the CUDA toolkit's
    /// `include/cccl`; default `/usr/local/cuda/include/cccl`).
    pub cccl_include: PathBuf,
    /// Query points per GPU chunk: larger inputs are streamed through in chunks, so they need
    /// not fit in GPU memory at once. Nearest-neighbour queries from host rows
    /// (`PointIndex::nearest_rows_into`) take larger chunks where a quarter of the free memory
    /// holds them: queries sorted together search faster the more there are.
    pub chunk_points: usize,
    /// Most neighbours a radius query holds in GPU memory at once (`None`: what a third of
    /// the free memory holds); larger results are counted and filled batch after batch.
    pub radius_batch: Option<usize>,
    /// Kernels compiled ahead of time ([`kernels`](crate::kernels)): a module loads the image
    /// that fits the GPU, and NVRTC compiles only the modules no image fits. With images for
    /// every module, NVRTC need not be installed.
    pub kernel_images: &'static [crate::runtime::cuda::compile::KernelImage],
}

impl Default for CudaOptions {
    fn default() -> Self {
        Self {
            kernel_cache: dirs::cache_dir().map(|d| d.join("nearkit").join("kernels")),
            cccl_include: PathBuf::from("/usr/local/cuda/include/cccl"),
            chunk_points: 1 << 24,
            radius_batch: None,
            kernel_images: &[],
        }
    }
}

/// How an [`Engine`] runs its queries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineOptions {
    /// How the GPU runs.
    pub cuda: CudaOptions,
    /// Print the time of each phase of a query to stderr (a GPU waits between phases).
    pub profile: bool,
}

/// Where queries run, resolved: the CPU (all cores, through rayon) or one GPU, whose context,
/// stream and compiled kernels are shared by every engine of the process. Cheap to clone.
///
/// ```
/// use nearkit::{Device, Engine};
/// let engine = Engine::open(Device::Auto).unwrap(); // the GPU if one is usable, else the CPU
/// println!("running on {}", engine.describe());
/// if let Some(why) = engine.note() {
///     println!("{why}"); // why not the GPU
/// }
/// ```
#[derive(Clone)]
pub struct Engine {
    gpu: Option<Arc<Gpu>>,
    opts: EngineOptions,
    note: Option<String>,
}

impl Engine {
    /// The CPU, with default options.
    pub fn cpu() -> Engine {
        Engine { gpu: None, opts: EngineOptions::default(), note: None }
    }

    /// Resolves `device` with default options. `Auto` falls back to the CPU when CUDA is not
    /// usable ([`Engine::note`] says why); an explicit `cuda` that is not usable is an error.
    pub fn open(device: Device) -> Result<Engine> {
        Self::with_options(device, &EngineOptions::default())
    }

    /// [`Engine::open`] with options.
    pub fn with_options(device: Device, opts: &EngineOptions) -> Result<Engine> {
        let compile = CompileOptions {
            cccl_include: opts.cuda.cccl_include.clone(),
            cache_dir: opts.cuda.kernel_cache.clone(),
            images: opts.cuda.kernel_images,
        };
        let cpu = |note: Option<String>| Engine { gpu: None, opts: opts.clone(), note };
        match device {
            Device::Cpu => Ok(cpu(None)),
            Device::Cuda(n) => Ok(Engine { gpu: Some(Gpu::shared(n, &compile)?), opts: opts.clone(), note: None }),
            Device::Auto => match Gpu::shared(0, &compile) {
                Ok(gpu) => Ok(Engine { gpu: Some(gpu), opts: opts.clone(), note: None }),
                Err(Error::CudaUnavailable(why)) => {
                    Ok(cpu(Some(format!("using the CPU, as CUDA is not usable here: {why}"))))
                }
                Err(e) => Ok(cpu(Some(format!("using the CPU, as CUDA failed to start: {e}")))),
            },
        }
    }

    /// Why `Device::Auto` resolved to the CPU, if it did.
    pub fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// `cpu (N threads)` or `cuda:N (name, sm_XY)`.
    pub fn describe(&self) -> String {
        match &self.gpu {
            None => format!("cpu ({} threads)", rayon::current_num_threads()),
            Some(g) => g.describe(),
        }
    }

    /// The device it resolved to (`Cpu` or `Cuda(n)`).
    pub fn device(&self) -> Device {
        self.gpu.as_ref().map_or(Device::Cpu, |g| Device::Cuda(g.ordinal()))
    }

    /// Whether it runs on a GPU.
    pub fn is_cuda(&self) -> bool {
        self.gpu.is_some()
    }

    /// Its options.
    pub fn options(&self) -> &EngineOptions {
        &self.opts
    }

    /// Copies a point set into GPU memory, for queries on data already there
    /// ([`PointIndex::from_device`](crate::PointIndex::from_device) and the `*_device` queries).
    pub fn upload<T: Real>(&self, points: &Points<T>) -> Result<DevicePoints<T>> {
        if self.gpu.is_none() {
            points.validate(crate::error::Role::Data)?;
        }
        // Checked on the way up, as `validate` checks.
        let (up, _) = DevicePoints::upload_checked(self.need_gpu("upload")?, points, crate::error::Role::Data)?;
        Ok(DevicePoints { bounds: Some(points.bounds()), ..up })
    }

    /// Points that another library holds in this engine's GPU memory (a CuPy array, a PyTorch
    /// tensor, …), given as rows of three coordinates: element `(i, c)` is the `T` at
    /// `address + (i * row_stride + c * col_stride) * size_of::<T>()`. They are copied into
    /// columns on the device and checked as host input is (no NaN or infinity; `role` names
    /// the set in errors); nothing goes through host memory. The call first waits for all of
    /// the GPU's queued work, on every stream, so rows another library is still writing are
    /// complete.
    ///
    /// # Safety
    /// `address` must hold `len` such rows in memory this GPU can read (device or managed
    /// memory), and nothing may free or write them until this returns. Addresses that are not
    /// memory of this GPU are refused with an error.
    pub unsafe fn import_rows<T: Real>(
        &self,
        address: u64,
        len: usize,
        strides: (isize, isize),
        role: crate::error::Role,
    ) -> Result<DevicePoints<T>> {
        let gpu = self.need_gpu("points in GPU memory")?;
        let _busy = gpu.lock();
        // SAFETY: the caller's promise, passed on.
        unsafe { crate::runtime::cuda::import::rows_to_columns(gpu, address, len, strides, role) }
    }

    /// Points given as rows `[x0, y0, z0, x1, …]` in host memory (a numpy array's layout),
    /// copied to the GPU as they are and turned into columns there, checked as
    /// [`Engine::import_rows`] checks them: the host makes no pass over them of its own.
    pub fn upload_rows<T: Real>(&self, rows: &[T], role: crate::error::Role) -> Result<DevicePoints<T>> {
        if rows.len() % 3 != 0 {
            return Err(Error::InvalidArgument(format!("{} values are not rows of three", rows.len())));
        }
        let gpu = self.need_gpu("points in GPU memory")?;
        let _busy = gpu.lock();
        crate::runtime::cuda::import::upload_rows(gpu, rows, role)
    }

    /// Waits for all of the GPU's queued work, on every stream of the process (other
    /// libraries' too), where [`Engine::synchronize`] waits for nearkit's own. Before memory
    /// handed to another library is freed, this makes sure that library is done with it.
    pub fn synchronize_device(&self) -> Result<()> {
        match &self.gpu {
            None => Ok(()),
            Some(g) => g.stream().context().synchronize().map_err(crate::runtime::cuda::cuda_err),
        }
    }

    /// Measures the bus now for `bytes` (see [`BusFloor`](crate::BusFloor)); `None` on the CPU.
    /// Benchmarks print end-to-end times beside it.
    pub fn bus_floor(&self, bytes: usize) -> Result<Option<crate::BusFloor>> {
        match &self.gpu {
            None => Ok(None),
            Some(g) => {
                let _busy = g.lock();
                crate::runtime::cuda::transfer::measure_bus(g, bytes).map(Some)
            }
        }
    }

    /// Waits for the GPU's queued work (nothing to wait for on the CPU).
    pub fn synchronize(&self) -> Result<()> {
        self.gpu.as_ref().map_or(Ok(()), |g| g.synchronize())
    }

    /// The GPU memory pool's high-water marks in bytes, `(used, reserved)`: live allocations,
    /// and what the pool held from the device. `reset` starts new marks. `None` on the CPU.
    pub fn memory_high_water(&self, reset: bool) -> Result<Option<(u64, u64)>> {
        self.gpu.as_ref().map(|g| g.memory_high_water(reset)).transpose()
    }

    pub(crate) fn gpu(&self) -> Option<&Arc<Gpu>> {
        self.gpu.as_ref()
    }

    /// The GPU, or an error saying that `what` needs one.
    pub(crate) fn need_gpu(&self, what: &str) -> Result<&Arc<Gpu>> {
        self.gpu
            .as_ref()
            .ok_or_else(|| Error::InvalidArgument(format!("{what} needs a CUDA engine, but this one runs on the CPU")))
    }
}
