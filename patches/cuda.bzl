"""Build macros for CUDA code: nvcc inside Bazel 4.2 (no rules_cuda offline)."""

# target_compatible_with value for targets that exist only under --config=cuda: the default
# build skips them (`bazel build //...` runs no nvcc), --config=cuda builds them.
CUDA_ONLY = select({
    "//:cuda_enabled": [],
    "//conditions:default": ["//:incompatible"],
})

# Real and virtual architectures: A100 (sm_80) and H100/H200 (sm_90) as machine code, plus
# compute_90 PTX that newer GPUs compile at load time.
_GENCODE = [
    "-gencode arch=compute_80,code=sm_80",
    "-gencode arch=compute_90,code=sm_90",
    "-gencode arch=compute_90,code=compute_90",
]

# The flags PyTorch uses for its own C++/CUDA extensions, so that LibTorch headers
# (c10::Half, at::Tensor) compile under nvcc as they do under g++.
_TORCH_NVCC_FLAGS = [
    "-std=c++17",
    "-O3",
    "--expt-relaxed-constexpr",
    "-Xcompiler -fPIC",
    "-D_GLIBCXX_USE_CXX11_ABI=1",
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
    "-Iexternal/libtorch/torch/include",
    "-Iexternal/libtorch/torch/include/torch/csrc/api/include",
    "-I.",
    "-I$(GENDIR)",
]

def cuda_library(name, srcs, hdrs = [], private_hdrs = [], deps = [], nvcc_flags = [], **kwargs):
    """A cc_library of .cu files compiled by nvcc; exists only under --config=cuda.

    The .cu files may include LibTorch headers and the headers in `hdrs` and `private_hdrs`
    (by workspace path); `private_hdrs` (device code, e.g. .cuh) are seen by nvcc only.
    They link against the shared CUDA runtime that LibTorch uses, so streams, devices and
    the caching allocator are the same ones the rest of the program sees.
    """
    objects = []
    commands = []
    for src in srcs:
        # A source in another package (a label "//pkg:file.cu") gets its file name.
        obj = "_%s_objs/%s.o" % (name, src.rsplit(":", 1)[-1].rsplit(".", 1)[0])
        objects.append(obj)
        commands.append(" ".join(
            # nvcc finds its include/ and nvvm/ relative to its own path: call it by the real
            # path, and list @cuda//:bin/nvcc in srcs so a toolkit change rebuilds.
            ["/usr/local/cuda/bin/nvcc"] + _TORCH_NVCC_FLAGS + _GENCODE + nvcc_flags +
            ["-c $(location %s)" % src, "-o $(@D)/%s" % obj],
        ))
    archive = "lib%s_cu.a" % name
    native.genrule(
        name = name + "_nvcc",
        srcs = srcs + hdrs + private_hdrs + [
            "@cuda//:bin/nvcc",
            "@cuda//:header_files",
            "@libtorch//:header_files",
        ],
        outs = [archive],
        cmd = " && ".join(
            ["mkdir -p $(@D)/_%s_objs" % name] + commands +
            ["ar rcs $@ " + " ".join(["$(@D)/" + o for o in objects])],
        ),
        message = "nvcc %s" % name,
        target_compatible_with = CUDA_ONLY,
    )
    native.cc_library(
        name = name,
        srcs = [":" + archive],
        hdrs = hdrs,
        linkstatic = 1,
        alwayslink = 1,
        target_compatible_with = CUDA_ONLY,
        deps = deps + ["@libtorch//:torch_cuda"],
        **kwargs
    )
