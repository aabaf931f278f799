"""cupy-knn (an LBVH on CuPy) as a peer, usable with CuPy 13+.

cupy-knn 0.4 asks NVRTC for C++11, while CuPy 13+'s bundled CCCL needs C++17. `lbvh_index()`
rebuilds its module with that one flag changed (kernels untouched) and returns LBVHIndex.
Raises ImportError when cupy or cupy-knn is missing.
"""


def lbvh_index():
    import cupy as cp
    import cupy_knn.lbvh_index as lbvh  # type: ignore
    from cupy_knn import LBVHIndex  # type: ignore

    if "--std=c++11" in lbvh._compile_flags:
        lbvh._compile_flags = tuple("--std=c++17" if f == "--std=c++11" else f for f in lbvh._compile_flags)
        lbvh._construct_tree_kernels = cp.RawModule(
            code=lbvh._lbvh_src,
            options=lbvh._compile_flags,
            name_expressions=("compute_morton_kernel", "compute_morton_points_kernel", "initialize_tree_kernel",
                              "construct_tree_kernel", "optimize_tree_kernel", "compute_free_indices_kernel",
                              "compact_tree_kernel"),
        )
    return LBVHIndex
