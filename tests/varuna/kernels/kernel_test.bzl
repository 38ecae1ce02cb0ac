"""kernel_test: a kernel equivalence test as two targets from one source.

  <name>      the op on the CPU (its LibTorch reference path) against the test's own naive
              composition; runs in the default `bazel test //...`.
  <name>_gpu  the same test cases with the op on CUDA (the fused kernels); tagged `gpu`, built
              only under --config=cuda, skips every case where no GPU is usable.
"""

load("//patches:cuda.bzl", "CUDA_ONLY")

def kernel_test(name, srcs, deps = [], size = "small"):
    native.cc_test(
        name = name,
        size = size,
        srcs = srcs,
        deps = deps + [
            "//tests/varuna/kernels:kernel_test_util",
            "@debian//:gtest_main",
        ],
    )
    native.cc_test(
        name = name + "_gpu",
        size = size,
        srcs = srcs,
        tags = ["gpu"],
        target_compatible_with = CUDA_ONLY,
        deps = deps + [
            "//tests/varuna/kernels:kernel_test_util_gpu",
            "@debian//:gtest_main",
        ],
    )
