"""kernel_library: one fused op of varuna/kernels, its LibTorch reference and its CUDA kernels."""

load("//patches:cuda.bzl", "cuda_library")

def kernel_library(name, srcs, hdrs, cuda_srcs = [], cuda_hdrs = [], deps = []):
    """A fused op: `srcs`/`hdrs` (g++) hold the public API and the LibTorch reference.

    Under --config=cuda the library also links `cuda_srcs` (nvcc; raw pointers and streams, no
    LibTorch headers, so they compile fast) and defines VARUNA_WITH_CUDA_KERNELS for `srcs`,
    which then dispatch CUDA tensors to the kernels. Without it, a CUDA tensor cannot exist
    (the build links libtorch_cpu only) and every call takes the reference path.
    """
    cuda_deps = []
    if cuda_srcs:
        cuda_library(
            name = name + "_cuda",
            srcs = cuda_srcs,
            hdrs = cuda_hdrs,
            private_hdrs = ["//varuna/kernels/cuda:device_headers"],
            deps = ["@cuda//:headers"],
        )
        cuda_deps = [":" + name + "_cuda"]
    native.cc_library(
        name = name,
        srcs = srcs,
        hdrs = hdrs,
        local_defines = select({
            "//:cuda_enabled": ["VARUNA_WITH_CUDA_KERNELS"],
            "//conditions:default": [],
        }),
        deps = deps + select({
            "//:cuda_enabled": cuda_deps + [
                "//varuna/kernels:cuda_launch",
                "@libtorch//:torch_cuda",
            ],
            "//conditions:default": [],
        }) + ["@libtorch//:torch_cpu"],
    )
