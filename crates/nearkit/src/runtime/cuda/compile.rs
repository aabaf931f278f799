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
    pub images: &'static [crate::kernels::KernelImage],
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
    if let Some(bytes) = path.as_ref().and_then(|p| std::fs::read(p).ok()) {
        return Ok(bytes);
    }
    let cubin = nvrtc_compile(source, &flags, false)?;
    if let Some(p) = path {
        // A failed cache write only costs the next start a compile.
        if let Some(dir) = p.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let tmp = p.with_extension(format!("tmp{}", std::process::id()));
        if std::fs::write(&tmp, &cubin).is_ok() {
            let _ = std::fs::rename(&tmp, &p);
        }
    }
    Ok(cubin)
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
