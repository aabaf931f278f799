//! Compiles every CUDA kernel module through the project's own NVRTC path. Each module's source
//! holds the shared structs as generated from their Rust declarations (with size checks) and
//! ends with static_asserts that its kernels' parameters are those the Rust code declares, so
//! this also checks every launch. Needs libnvrtc and CUB's
//! headers, not a GPU: CI gets both from PyPI wheels (see .ci/run). Where NVRTC is missing the
//! test says so and passes, unless NEARKIT_REQUIRE_NVRTC=1 makes that an error.

use std::path::PathBuf;

use nearkit::test_hooks::{compile_kernels, kernel_modules, nvrtc_present};

/// CUB's headers: NEARKIT_CCCL_INCLUDE, else $CUDA_HOME/include/cccl, else the toolkit's
/// default place.
fn cccl_include() -> PathBuf {
    if let Some(p) = std::env::var_os("NEARKIT_CCCL_INCLUDE") {
        return PathBuf::from(p);
    }
    let home = std::env::var_os("CUDA_HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/usr/local/cuda"));
    home.join("include").join("cccl")
}

fn nvrtc_or_skip() -> bool {
    if nvrtc_present() {
        return true;
    }
    assert!(
        std::env::var("NEARKIT_REQUIRE_NVRTC").as_deref() != Ok("1"),
        "NEARKIT_REQUIRE_NVRTC=1 but libnvrtc was not found on LD_LIBRARY_PATH"
    );
    eprintln!("skipped: libnvrtc not found, CUDA kernels not compile-checked");
    false
}

#[test]
fn every_kernel_module_compiles_for_hopper_and_matches_its_rust_declarations() {
    if !nvrtc_or_skip() {
        return;
    }
    let modules = kernel_modules();
    assert_eq!(modules.len(), 13);
    for (name, source) in modules {
        let cubin = compile_kernels(&source, "sm_90", &cccl_include()).unwrap_or_else(|e| panic!("module {name}: {e}"));
        assert!(cubin.len() > 1000, "module {name}: cubin suspiciously small: {} bytes", cubin.len());
        assert!(source.contains("static_assert(nk_same<decltype("), "module {name}: no signature checks");
    }
}

/// The checks can fail: a module whose kernel takes other parameters than its declaration
/// says does not compile, and the error names the kernel.
#[test]
fn a_kernel_that_differs_from_its_declaration_does_not_compile() {
    if !nvrtc_or_skip() {
        return;
    }
    let (_, source) = kernel_modules().into_iter().find(|(n, _)| *n == "sort").expect("the sort module");
    let broken = source.replace("void iota_u32(u32* v, u32 n)", "void iota_u32(u32* v, u64 n)");
    assert_ne!(broken, source, "the test's edit must change the kernel");
    let err = compile_kernels(&broken, "sm_90", &cccl_include()).unwrap_err().to_string();
    assert!(err.contains("iota_u32") && err.contains("Rust declaration"), "{err}");
    // And a struct whose size differs from the Rust one's (the generated definition, edited).
    let (_, source) = kernel_modules().into_iter().find(|(n, _)| *n == "tree").expect("the tree module");
    let broken = source.replacen("    u32 leaf_size;\n", "    u32 leaf_size;\n    u32 extra;\n", 1);
    assert_ne!(broken, source, "the test's edit must change the struct");
    let err = compile_kernels(&broken, "sm_90", &cccl_include()).unwrap_err().to_string();
    assert!(err.contains("Tree<float>: its size differs"), "{err}");
}
