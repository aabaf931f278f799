//! Compiles every CUDA kernel through the project's own NVRTC path. Needs libnvrtc and CUB's
//! headers, not a GPU: CI gets both from PyPI wheels (see .ci/run). Where NVRTC is missing
//! the test says so and passes, unless NEARKIT_REQUIRE_NVRTC=1 makes that an error.

use std::path::PathBuf;

use nearkit::test_hooks::{compile_kernels, nvrtc_present, KERNEL_SOURCE, VECTOR_KERNEL_SOURCE};

/// CUB's headers: NEARKIT_CCCL_INCLUDE, else $CUDA_HOME/include/cccl, else the toolkit's
/// default place.
fn cccl_include() -> PathBuf {
    if let Some(p) = std::env::var_os("NEARKIT_CCCL_INCLUDE") {
        return PathBuf::from(p);
    }
    let home = std::env::var_os("CUDA_HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/usr/local/cuda"));
    home.join("include").join("cccl")
}

fn compile_cubin(source: &str, arch: &str) -> nearkit::Result<Vec<u8>> {
    compile_kernels(source, arch, &cccl_include())
}

#[test]
fn every_kernel_compiles_for_hopper() {
    if !nvrtc_present() {
        assert!(
            std::env::var("NEARKIT_REQUIRE_NVRTC").as_deref() != Ok("1"),
            "NEARKIT_REQUIRE_NVRTC=1 but libnvrtc was not found on LD_LIBRARY_PATH"
        );
        eprintln!("skipped: libnvrtc not found, CUDA kernels not compile-checked");
        return;
    }
    let cubin = compile_cubin(KERNEL_SOURCE, "sm_90").unwrap_or_else(|e| panic!("{e}"));
    assert!(cubin.len() > 1000, "cubin suspiciously small: {} bytes", cubin.len());
    // Every kernel the launchers name must be in the image.
    let image = String::from_utf8_lossy(&cubin);
    for name in [
        "radix_upsweep",
        "radix_downsweep",
        "scan_lookback",
        "scan_single_block",
        "gather_u64",
        "gather_u32_as_u64",
        "iota_u32",
        "permute_candidates",
        "radix_nodes",
        "key_table",
        "select_threshold_sums",
        "body_cells",
        "body_contacts",
        "sweep_queries",
        "narrow_check",
    ] {
        assert!(image.contains(name), "kernel {name} missing from the cubin");
    }
    for base in [
        "bounds",
        "frame",
        "morton_keys",
        "gather_points",
        "radix_boxes",
        "window_bound",
        "select_threshold",
        "nearest_all",
        "nearest_candidates",
        "knn_candidates",
        "knn_rows",
        "grid_level_count",
        "grid_level_fill",
        "root_box",
        "knn_grid_rows8",
        "knn_grid_rows16",
        "knn_grid_rows32",
        "closest_points",
        "cp_query_keys",
    ] {
        for t in ["f32", "f64"] {
            let name = format!("{base}_{t}");
            assert!(image.contains(&name), "kernel {name} missing from the cubin");
        }
    }
}

/// The vector kernels are a second module, compiled on first use.
#[test]
fn every_vector_kernel_compiles_for_hopper() {
    if !nvrtc_present() {
        assert!(
            std::env::var("NEARKIT_REQUIRE_NVRTC").as_deref() != Ok("1"),
            "NEARKIT_REQUIRE_NVRTC=1 but no libnvrtc"
        );
        eprintln!("skipped: libnvrtc not found, CUDA kernels not compile-checked");
        return;
    }
    let cubin = compile_cubin(VECTOR_KERNEL_SOURCE, "sm_90").unwrap_or_else(|e| panic!("{e}"));
    let image = String::from_utf8_lossy(&cubin);
    let mut names = vec!["gather_u32".to_string(), "gather_cols_f32".into(), "gather_cols_f64".into()];
    for d in 1..=8 {
        for t in ["f32", "f64"] {
            names.push(format!("shift_keys_d{d}_{t}"));
            names.push(format!("vector_order_keys_d{d}_{t}"));
            for k in [0, 8, 32] {
                names.push(format!("vector_knn_d{d}_k{k}_{t}"));
                names.push(format!("shifted_knn_d{d}_k{k}_{t}"));
            }
        }
    }
    for e in ["mm", "me"] {
        for t in ["f32", "f64"] {
            names.push(format!("aabb6_grid_level_count_{e}_{t}"));
            names.push(format!("aabb6_grid_level_fill_{e}_{t}"));
            names.push(format!("aabb6_grid_rows_{e}_k8_{t}"));
            names.push(format!("aabb6_grid_rows_{e}_k32_{t}"));
        }
    }
    for name in names {
        assert!(image.contains(&name), "kernel {name} missing from the cubin");
    }
}
