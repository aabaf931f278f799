"""The CUDA kernels compiled into the package when it was built (build.rs): every module, as
PTX for any GPU from sm_80 and as cubins for sm_80 and sm_90, so that a machine with only the
NVIDIA driver runs them. Checked without a GPU: the build made them or it did not."""

import sys

import pytest

import nearkit

MODULES = {
    "sort", "import", "tree", "pairs", "grid", "knn", "vectors", "closest_point", "closest_point_build", "radius", "sharded",
    "collide", "ray_cast",
}


@pytest.mark.skipif(sys.platform != "linux", reason="NVIDIA's NVRTC wheel, which the build uses, is Linux-only")
def test_every_kernel_module_is_built_into_the_package():
    images = nearkit.kernel_images()
    for target in ["compute_80", "sm_80", "sm_90"]:
        built = {m for m, t, _ in images if t == target}
        assert built == MODULES, f"{target}: missing {MODULES - built}"
    assert all(size > 1000 for _, _, size in images)
