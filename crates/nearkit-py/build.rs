//! Compiles every CUDA kernel module when the package is built (feature `precompiled-kernels`,
//! which maturin turns on), so that a machine with the NVIDIA driver and no CUDA toolkit still
//! gets the GPU, and the first GPU call loads kernels instead of compiling them.
//!
//! NVRTC and CUB's headers come from the `nvidia-cuda-nvrtc` and `nvidia-cuda-cccl` wheels
//! (build requirements in pyproject.toml) or a CUDA toolkit (`CUDA_HOME`, /usr/local/cuda);
//! `NEARKIT_NVRTC_DIR` and `NEARKIT_CCCL_INCLUDE`, or a folder on `LD_LIBRARY_PATH`, come first. Where none is
//! found the package is built without images and compiles its kernels at run time, as the
//! Rust library does. The result is `$OUT_DIR/kernel_images.rs`, which `engines.rs` includes.

use std::fmt::Write as _;
use std::path::PathBuf;

/// PTX for every GPU CUDA 13 supports (the kernels use sm_80 warp reductions), and cubins for
/// the data-centre GPUs, which then need no translation at first use.
#[cfg(feature = "precompiled-kernels")]
const TARGETS: [&str; 3] = ["compute_80", "sm_80", "sm_90"];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    for v in ["NEARKIT_NVRTC_DIR", "NEARKIT_CCCL_INCLUDE", "LD_LIBRARY_PATH", "CUDA_HOME", "PYO3_PYTHON", "PATH"] {
        println!("cargo:rerun-if-env-changed={v}");
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let images = precompile(&out);
    let mut rs = String::from(
        "/// Kernels compiled when the package was built (see build.rs).\n\
         pub static KERNEL_IMAGES: &[nearkit::kernels::KernelImage] = &[\n",
    );
    for (module, hash, target, file) in &images {
        let _ = writeln!(
            rs,
            "    nearkit::kernels::KernelImage {{ module: {module:?}, source_hash: {hash:#018x}, target: {target:?}, \
             bytes: include_bytes!({:?}) }},",
            file.display().to_string()
        );
    }
    rs.push_str("];\n");
    std::fs::write(out.join("kernel_images.rs"), rs).expect("writing kernel_images.rs");
}

#[cfg(not(feature = "precompiled-kernels"))]
fn precompile(_out: &std::path::Path) -> Vec<(&'static str, u64, &'static str, PathBuf)> {
    Vec::new()
}

#[cfg(feature = "precompiled-kernels")]
fn precompile(out: &std::path::Path) -> Vec<(&'static str, u64, &'static str, PathBuf)> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    let Some(cccl) = find_nvrtc() else {
        println!(
            "cargo:warning=nearkit: no NVRTC found (the nvidia-cuda-nvrtc wheel or a CUDA toolkit); the package's \
             CUDA kernels will be compiled at their first use, which needs NVRTC then"
        );
        return Vec::new();
    };
    let jobs: Vec<(nearkit::kernels::KernelSource, &str)> =
        nearkit::kernels::sources().into_iter().flat_map(|s| TARGETS.map(|t| (s.clone(), t))).collect();
    let next = AtomicUsize::new(0);
    let done = Mutex::new(Vec::new());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).min(jobs.len());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((src, target)) = jobs.get(i) else { break };
                let bytes = nearkit::kernels::compile(&src.source, target, &cccl)
                    .unwrap_or_else(|e| panic!("compiling kernel module {} for {target}: {e}", src.module));
                let file = out.join(format!("{}.{target}.bin", src.module));
                std::fs::write(&file, bytes).expect("writing a kernel image");
                let hash = nearkit::kernels::source_hash(&src.source);
                done.lock().unwrap().push((src.module, hash, *target, file));
            });
        }
    });
    let mut images = done.into_inner().unwrap();
    images.sort_by(|a, b| (a.0, a.2).cmp(&(b.0, b.2)));
    images
}

/// Loads NVRTC (by full path, so that cudarc's load by name then finds it) and returns CUB's
/// include folder; `None` if no NVRTC is found.
#[cfg(feature = "precompiled-kernels")]
fn find_nvrtc() -> Option<PathBuf> {
    let env_dir = |v: &str| std::env::var_os(v).map(PathBuf::from);
    // (lib folder, cccl include folder) candidates, in order.
    let mut roots: Vec<(PathBuf, PathBuf)> = Vec::new();
    if let Some(lib) = env_dir("NEARKIT_NVRTC_DIR") {
        let inc = env_dir("NEARKIT_CCCL_INCLUDE").unwrap_or_else(|| lib.join("../include/cccl"));
        roots.push((lib, inc));
    }
    for lib in std::env::split_paths(&std::env::var_os("LD_LIBRARY_PATH").unwrap_or_default()) {
        let inc = env_dir("NEARKIT_CCCL_INCLUDE").unwrap_or_else(|| lib.join("../include/cccl"));
        roots.push((lib, inc));
    }
    for ns in python_nvidia_paths() {
        let cu = ns.join("cu13");
        roots.push((cu.join("lib"), cu.join("include").join("cccl")));
    }
    let home = env_dir("CUDA_HOME").unwrap_or_else(|| PathBuf::from("/usr/local/cuda"));
    roots.push((home.join("lib64"), home.join("include").join("cccl")));
    for (lib, inc) in roots {
        let nvrtc = lib.join("libnvrtc.so.13");
        if !nvrtc.exists() || !inc.join("cub").is_dir() {
            continue;
        }
        // NVRTC opens its builtins library by name: load that first, by path, too.
        let builtins =
            std::fs::read_dir(&lib).into_iter().flatten().filter_map(|e| e.ok()).map(|e| e.path()).find(|p| {
                p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("libnvrtc-builtins.so"))
            });
        // SAFETY: NVIDIA's libraries, loaded for the life of the build script.
        unsafe {
            if let Some(b) = builtins {
                if let Ok(l) = libloading::Library::new(&b) {
                    std::mem::forget(l);
                }
            }
            match libloading::Library::new(&nvrtc) {
                Ok(l) => std::mem::forget(l),
                Err(_) => continue,
            }
        }
        if nearkit::kernels::nvrtc_present() {
            return Some(inc);
        }
    }
    None
}

/// The folders of the `nvidia` namespace package (NVIDIA's CUDA wheels) of the Python the
/// package is built for, and of the first `python3` on the PATH (maturin names the base
/// interpreter of a virtual environment, whose packages the environment's own Python sees).
#[cfg(feature = "precompiled-kernels")]
fn python_nvidia_paths() -> Vec<PathBuf> {
    let script = "import nvidia\nfor p in nvidia.__path__: print(p)";
    let pythons = std::env::var_os("PYO3_PYTHON").into_iter().chain([std::ffi::OsString::from("python3")]);
    let mut paths = Vec::new();
    for python in pythons {
        if let Ok(o) = std::process::Command::new(python).args(["-c", script]).output() {
            if o.status.success() {
                paths.extend(String::from_utf8_lossy(&o.stdout).lines().map(PathBuf::from));
            }
        }
    }
    paths
}
