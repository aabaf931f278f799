//! Compiling kernel modules with NVRTC at run time, cached on disk as cubin.
//!
//! The cache key covers the source, the options, the NVRTC version and the architecture, so
//! a changed kernel or toolkit recompiles by itself. A second start costs milliseconds instead
//! of the seconds CUB's headers take to compile.

use std::ffi::{c_char, c_int, CString};
use std::path::PathBuf;

use cudarc::nvrtc::{result, sys};

use crate::error::{Error, Result};

/// Where NVRTC finds CUB's headers and where compiled kernels are kept (`CudaOptions`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CompileOptions {
    /// CUB's headers (the CUDA toolkit's `include/cccl`).
    pub cccl_include: PathBuf,
    /// Compiled kernels are kept here between runs; `None`: compile in every process.
    pub cache_dir: Option<PathBuf>,
    /// Kernels compiled ahead of time, used before NVRTC where one fits the GPU.
    pub images: &'static [KernelImage],
}

/// One kernel module compiled ahead of time for one target.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct KernelImage {
    /// The module's name ([`KernelSource::module`](crate::kernels::KernelSource::module)).
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

/// The hash [`KernelImage::source_hash`] holds (FNV-1a of the program text).
pub fn source_hash(source: &str) -> u64 {
    fnv1a(&[source.as_bytes()])
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

/// The modules of `images` with no image that runs on a GPU of capability `cc` (all of them
/// where there are no images), whatever source the images were compiled from.
pub(crate) fn uncovered(images: &[KernelImage], cc: (u32, u32)) -> Vec<&'static str> {
    if images.is_empty() {
        return vec!["all"];
    }
    let mut modules: Vec<&'static str> = images.iter().map(|i| i.module).collect();
    modules.sort_unstable();
    modules.dedup();
    modules.retain(|&m| {
        let hash = images.iter().find(|i| i.module == m).map_or(0, |i| i.source_hash);
        pick(images, m, hash, cc).is_none()
    });
    modules
}

/// Whether libnvrtc can be loaded (cudarc panics on use when it cannot).
pub fn nvrtc_present() -> bool {
    // SAFETY: only tries to dlopen the library.
    unsafe { sys::is_culib_present() }
}

pub fn options(arch: &str, cccl_include: &std::path::Path) -> Vec<String> {
    vec![
        "-std=c++17".into(),
        // No fused multiply-add: the CPU rounds every product and sum separately.
        "--fmad=false".into(),
        format!("--gpu-architecture={arch}"),
        format!("-I{}", cccl_include.display()),
        "-DCUB_DISABLE_BF16_SUPPORT".into(),
    ]
}

fn nvrtc_version() -> (c_int, c_int) {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: plain out-parameters.
    unsafe {
        let _ = sys::nvrtcVersion(&mut major, &mut minor);
    }
    (major, minor)
}

pub(crate) fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for p in parts {
        for &b in *p {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
        h = (h ^ 0xff).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Compiles `source` for `arch` (e.g. `sm_90`), through the disk cache when there is one.
pub(crate) fn compile_cubin(source: &str, arch: &str, opts: &CompileOptions) -> Result<Vec<u8>> {
    if !nvrtc_present() {
        return Err(Error::CudaUnavailable(
            "libnvrtc was not found (install the CUDA toolkit or add its lib folder to LD_LIBRARY_PATH)".into(),
        ));
    }
    let flags = options(arch, &opts.cccl_include);
    let (major, minor) = nvrtc_version();
    let key = fnv1a(&[source.as_bytes(), flags.join(" ").as_bytes(), &major.to_le_bytes(), &minor.to_le_bytes()]);
    let path = opts.cache_dir.as_ref().map(|d| d.join(format!("{arch}-{key:016x}.cubin")));
    if let Some(bytes) = path.as_deref().and_then(load_cached) {
        return Ok(bytes);
    }
    let cubin = nvrtc_compile(source, &flags, false)?;
    if let Some(p) = path {
        store_cached(&p, &cubin);
    }
    Ok(cubin)
}

/// A cached image as stored: the image, then its FNV-1a hash and its length (little-endian
/// u64s), so that a file cut short, or one written by an older version, reads as absent.
fn sealed(image: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(image.len() + 16);
    out.extend_from_slice(image);
    out.extend_from_slice(&fnv1a(&[image]).to_le_bytes());
    out.extend_from_slice(&(image.len() as u64).to_le_bytes());
    out
}

/// The image a cache file holds, if it is whole (see `sealed`).
fn unsealed(mut bytes: Vec<u8>) -> Option<Vec<u8>> {
    let n = bytes.len().checked_sub(16)?;
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let (hash, len) = (word(n), word(n + 8));
    if len != n as u64 || hash != fnv1a(&[&bytes[..n]]) {
        return None;
    }
    bytes.truncate(n);
    Some(bytes)
}

fn load_cached(path: &std::path::Path) -> Option<Vec<u8>> {
    unsealed(std::fs::read(path).ok()?)
}

/// Writes `image` to the cache at `path`: into a file of its own, renamed into place, so
/// that threads and processes compiling the same kernels at once never read one another's
/// half-written file. A failed write only costs a later start a compile.
fn store_cached(path: &std::path::Path, image: &[u8]) {
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp{}-{n}", std::process::id()));
    if std::fs::write(&tmp, sealed(image)).is_ok() && std::fs::rename(&tmp, path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// Compiles `source` for `target` without the cache: PTX for `compute_XY`, else a cubin.
pub(crate) fn compile_uncached(source: &str, target: &str, cccl_include: &std::path::Path) -> Result<Vec<u8>> {
    if !nvrtc_present() {
        return Err(Error::CudaUnavailable("libnvrtc was not found".into()));
    }
    nvrtc_compile(source, &options(target, cccl_include), target.starts_with("compute_"))
}

fn nvrtc_compile(source: &str, opts: &[String], ptx: bool) -> Result<Vec<u8>> {
    let src = CString::new(source).map_err(|e| Error::Cuda(e.to_string()))?;
    let prog = result::create_program(&src, Some(c"nearkit.cu")).map_err(|e| Error::Cuda(format!("NVRTC: {e:?}")))?;
    // SAFETY: `prog` is live until destroyed at the end of this function.
    let out = unsafe {
        let compiled = result::compile_program(prog, opts);
        let log = result::get_program_log(prog)
            .map(|l| {
                let bytes: Vec<u8> = l.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
                String::from_utf8_lossy(&bytes).into_owned()
            })
            .unwrap_or_default();
        match compiled {
            Err(e) => Err(Error::Cuda(format!("NVRTC could not compile the kernels ({e:?}):\n{log}"))),
            Ok(()) => {
                let nvrtc = |e: result::NvrtcError| Error::Cuda(format!("NVRTC: {e:?}"));
                let mut size = 0usize;
                if ptx {
                    sys::nvrtcGetPTXSize(prog, &mut size).result().map_err(nvrtc)?;
                } else {
                    sys::nvrtcGetCUBINSize(prog, &mut size).result().map_err(nvrtc)?;
                }
                let mut buf = vec![0u8; size];
                if ptx {
                    sys::nvrtcGetPTX(prog, buf.as_mut_ptr() as *mut c_char).result().map_err(nvrtc)?;
                    // The driver reads PTX as a C string: keep its terminating NUL.
                } else {
                    sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr() as *mut c_char).result().map_err(nvrtc)?;
                }
                Ok(buf)
            }
        }
    };
    // SAFETY: created above, destroyed once.
    unsafe {
        let _ = result::destroy_program(prog);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Threads storing and loading the same cache entry at once (as tests and Python threads
    /// opening engines on a cold cache do) only ever read a whole image or none.
    #[test]
    fn cache_entries_written_at_once_read_whole_or_absent() {
        let dir = std::env::temp_dir().join(format!("nearkit-cache-test-{}", std::process::id()));
        let path = dir.join("sm_90-0123456789abcdef.cubin");
        let images: Vec<Vec<u8>> = (0..8u8).map(|t| vec![t; 1000 + 250_000 * t as usize]).collect();
        std::thread::scope(|s| {
            for t in 0..8 {
                let (path, images) = (&path, &images);
                s.spawn(move || {
                    for _ in 0..40 {
                        store_cached(path, &images[t]);
                        if let Some(got) = load_cached(path) {
                            assert!(images.contains(&got), "a partial image of {} bytes", got.len());
                        }
                    }
                });
            }
        });
        assert!(images.contains(&load_cached(&path).expect("stored")));
        // Cut short, or unsealed (an older version's file): absent.
        let whole = std::fs::read(&path).unwrap();
        std::fs::write(&path, &whole[..whole.len() - 1]).unwrap();
        assert_eq!(load_cached(&path), None);
        std::fs::write(&path, &images[3]).unwrap();
        assert_eq!(load_cached(&path), None);
        assert_eq!(unsealed(sealed(b"")), Some(Vec::new()));
        let _ = std::fs::remove_dir_all(&dir);
    }

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

    #[test]
    fn names_the_modules_no_image_runs_for() {
        let images = [
            KernelImage { module: "m", source_hash: 7, target: "sm_90", bytes: A },
            KernelImage { module: "n", source_hash: 5, target: "compute_80", bytes: B },
        ];
        assert!(uncovered(&images, (9, 0)).is_empty());
        assert_eq!(uncovered(&images, (8, 6)), vec!["m"]);
        assert_eq!(uncovered(&images, (7, 5)), vec!["m", "n"]);
        assert_eq!(uncovered(&[], (9, 0)), vec!["all"]);
    }
}
