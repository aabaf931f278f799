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

/// One kernel module compiled ahead of time for one target.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct KernelImage {
    /// The module's name ([`KernelSource::module`]).
    pub module: &'static str,
    /// [`source_hash`] of the source it was compiled from.
    pub source_hash: u64,
    /// `sm_XY` for a cubin (runs on compute capability X.Y to X.9), `compute_XY` for PTX (the
    /// driver translates it for any GPU of capability X.Y or later).
    pub target: &'static str,
    /// The cubin or PTX.
    pub bytes: &'static [u8],
}

impl std::fmt::Debug for KernelImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KernelImage({} {} {:016x}, {} bytes)", self.module, self.target, self.source_hash, self.bytes.len())
    }
}

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
    crate::runtime::cuda::MODULES.iter().map(|m| KernelSource { module: m.name, source: m.source() }).collect()
}

/// The hash [`KernelImage::source_hash`] holds (FNV-1a of the program text).
pub fn source_hash(source: &str) -> u64 {
    compile::fnv1a(&[source.as_bytes()])
}

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

/// The image to load on a GPU of compute capability `(major, minor)` for a module whose source
/// hashes to `hash`: a cubin for that capability, else one for an earlier minor version of the
/// same major, else the PTX of the highest capability the GPU has.
pub(crate) fn pick(images: &[KernelImage], module: &str, hash: u64, cc: (u32, u32)) -> Option<&'static [u8]> {
    let parse = |t: &str, prefix: &str| -> Option<(u32, u32)> {
        let digits = t.strip_prefix(prefix)?;
        let n: u32 = digits.parse().ok()?;
        Some((n / 10, n % 10))
    };
    let fits = images.iter().filter(|i| i.module == module && i.source_hash == hash);
    let cubin = fits
        .clone()
        .filter_map(|i| parse(i.target, "sm_").map(|c| (c, i)))
        .filter(|(c, _)| c.0 == cc.0 && c.1 <= cc.1)
        .max_by_key(|(c, _)| *c);
    let ptx = || {
        fits.clone()
            .filter_map(|i| parse(i.target, "compute_").map(|c| (c, i)))
            .filter(|(c, _)| *c <= cc)
            .max_by_key(|(c, _)| *c)
    };
    cubin.or_else(ptx).map(|(_, i)| i.bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &[u8] = b"a";
    const B: &[u8] = b"b";
    const C: &[u8] = b"c";

    #[test]
    fn picks_the_cubin_of_the_gpu_then_of_its_family_then_ptx() {
        let images = [
            KernelImage { module: "m", source_hash: 7, target: "sm_80", bytes: A },
            KernelImage { module: "m", source_hash: 7, target: "sm_90", bytes: B },
            KernelImage { module: "m", source_hash: 7, target: "compute_80", bytes: C },
        ];
        assert_eq!(pick(&images, "m", 7, (9, 0)), Some(B));
        assert_eq!(pick(&images, "m", 7, (8, 6)), Some(A));
        assert_eq!(pick(&images, "m", 7, (12, 0)), Some(C));
        assert_eq!(pick(&images, "m", 7, (7, 5)), None, "no image runs on an older GPU");
        assert_eq!(pick(&images, "m", 8, (9, 0)), None, "an image of another source is never used");
        assert_eq!(pick(&images, "n", 7, (9, 0)), None);
    }
}
