// KeepFreedHostMemory: the trainer's setting of glibc's malloc, made once at start-up, so that a
// training step reuses the host memory the previous step freed instead of faulting in fresh
// pages.
//
// Why: by default glibc serves blocks from 128 KiB up with mmap (the threshold then follows the
// largest block freed, up to 32 MiB) and gives the top of its heap back to the kernel once more
// than twice that is free. A CPU step frees its activations, gradients and optimizer
// temporaries and allocates them again, so every step faulted much of its working set in anew:
// 10 steps of gpt2-tiny at micro-batch 1 took 183,067 minor page faults with glibc's defaults
// and 49,698 without (start-up included), and the profile, which repeats one pass of one
// segment, mostly did not pay them, so the simulator predicted such CPU steps short
// (docs/profiling.md, "Host memory and a noisy machine on the CPU"). With the mmap threshold
// fixed at 32 MiB and freed heap memory kept, both reuse their blocks: CPU steps of gpt2-tiny at
// micro-batch 8 ran 1-13% faster in four interleaved pairs of runs. Blocks of 32 MiB and more
// are still mmapped (glibc's largest threshold), so a large model's largest host tensors still
// fault. The cost: the process keeps up to 2 GiB of freed heap (the largest trim threshold
// mallopt takes) until it exits, which a training loop reaches every step anyway.
//
// Thread safety: call from main() before other threads allocate; mallopt is process-wide.
#ifndef VARUNA_TRAINER_HOST_MALLOC_H_
#define VARUNA_TRAINER_HOST_MALLOC_H_

#include <functional>

namespace trainer {

// Host blocks smaller than this come from malloc's heap, not from mmap (glibc's largest
// automatic threshold).
inline constexpr long kHostMmapThresholdBytes = 32L << 20;

// Reads an environment variable: its value, or null when it is not set.
using EnvironmentLookup = std::function<const char*(const char*)>;

// Whether the environment sets one of the malloc parameters KeepFreedHostMemory sets or whose
// setting turns glibc's automatic thresholds off: through GLIBC_TUNABLES
// (glibc.malloc.mmap_threshold, trim_threshold, top_pad or mmap_max) or glibc's older variables
// (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_, MALLOC_TOP_PAD_, MALLOC_MMAP_MAX_). The
// user's own setting then stands.
bool UserTunesMalloc(const EnvironmentLookup& getenv);

// Sets malloc's mmap threshold to kHostMmapThresholdBytes and its trim threshold to the largest
// value mallopt takes, unless UserTunesMalloc(getenv) or the C library is not glibc. Returns
// whether it set them.
bool KeepFreedHostMemory(const EnvironmentLookup& getenv);

}  // namespace trainer

#endif  // VARUNA_TRAINER_HOST_MALLOC_H_
