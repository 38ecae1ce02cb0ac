"""cc_test_with_gpu_twin: one test source as two targets.

  <name>      the test on the CPU; runs in the default `bazel test //...`.
  <name>_gpu  the same source compiled with `define` (the source then runs its cases on
              CUDA); tagged `gpu` (so the GPU bundle carries it), built only under
              --config=cuda, linked with LibTorch's CUDA libraries. The source must skip its
              cases where no GPU is usable.
"""

load("//patches:cuda.bzl", "CUDA_ONLY")

def cc_test_with_gpu_twin(name, srcs, define, deps, **kwargs):
    native.cc_test(
        name = name,
        srcs = srcs,
        deps = deps + ["@libtorch//:torch_cpu"],
        **kwargs
    )
    native.cc_test(
        name = name + "_gpu",
        srcs = srcs,
        local_defines = [define],
        tags = ["gpu"],
        target_compatible_with = CUDA_ONLY,
        deps = deps + ["@libtorch//:torch_cuda"],
        **kwargs
    )
