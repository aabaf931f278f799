//! The CUDA kernels compiled ahead of time, for machines with the NVIDIA driver but no CUDA
//! toolkit (no NVRTC).
//!
//! Every GPU compiles its kernel modules on first use with NVRTC (cached on disk). A program
//! that ships to users instead compiles them when it is built ([`sources`], [`compile`]) and
//! hands the images to [`CudaOptions::kernel_images`](crate::CudaOptions::kernel_images): the
//! first GPU query then loads a cubin (or has the driver translate PTX) in milliseconds, and
//! NVRTC is needed only for a GPU no image fits. The Python package does this in its build
//! script.
//!
//! An image is used only for the exact source it was compiled from ([`KernelImage::source_hash`]),
//! so a stale one is never loaded. Images and NVRTC compile the same source with the same
//! options (no fused multiply-add), so results stay bitwise identical to the CPU's.

use std::path::Path;

use crate::error::Result;
use crate::runtime::cuda::compile;
pub use crate::runtime::cuda::compile::{source_hash, KernelImage};
use crate::runtime::cuda::KernelModule;

/// A kernel module's name and the full program NVRTC compiles for it.
#[derive(Clone, Debug)]
pub struct KernelSource {
    /// The module's name.
    pub module: &'static str,
    /// The program: generated constants and structs, the `.cu` files, the signature checks.
    pub source: String,
}

/// Every kernel module the library launches.
pub fn sources() -> Vec<KernelSource> {
    MODULES.iter().map(|m| KernelSource { module: m.name, source: m.source() }).collect()
}

/// Every kernel module, in the order [`sources`] lists them: each capability's own, and the
/// runtime's shared ones.
pub(crate) static MODULES: [&KernelModule; 13] = [
    &crate::runtime::cuda::radix_sort::KERNELS,
    &crate::runtime::cuda::import::KERNELS,
    &crate::tree::cuda::KERNELS,
    &crate::pairs::cuda::KERNELS,
    &crate::knn::grid_cuda::KERNELS,
    &crate::knn::cuda::KERNELS,
    &crate::knn::vectors::cuda::KERNELS,
    &crate::closest_point::cuda::KERNELS,
    &crate::closest_point::bvh_cuda::KERNELS,
    &crate::radius::cuda::KERNELS,
    &crate::sharded::KERNELS,
    &crate::collide::cuda::KERNELS,
    &crate::collide::ray_cast::cuda::KERNELS,
];

/// Compiles `source` with NVRTC for `target`: a cubin for `sm_XY`, PTX for `compute_XY`.
/// `cccl_include` is CUB's header folder. NVRTC must be loadable (it is found as the CUDA
/// libraries are: `LD_LIBRARY_PATH`, the loader's cache, or a copy already loaded).
pub fn compile(source: &str, target: &str, cccl_include: &Path) -> Result<Vec<u8>> {
    compile::compile_uncached(source, target, cccl_include)
}

/// Whether NVRTC can be loaded here.
pub fn nvrtc_present() -> bool {
    compile::nvrtc_present()
}
