// KeepFreedHostMemory: the trainer's setting of glibc's malloc, made once at start-up, so that a
// training step reuses the host memory the previous step freed instead of faulting in fresh
// pages.
//
// Why: by default glibc serves blocks from 128 KiB up with mmap (the threshold then follows the
// largest block freed, up to 32 MiB) and gives the top of its heap back to the kernel once more
// than twice that is free. A CPU step frees its activations, gradients and optimizer
// temporaries and allocates them again, so every step faulted its working set in anew: about
// 18,000 page faults a step for gpt2-tiny at micro-batch 1, and the profile, which repeats one
// pass of one segment, mostly did not, so the simulator predicted CPU steps 5-14% short
// (docs/profiling.md, "Host memory on the CPU"). With the mmap threshold fixed at 32 MiB and
// freed memory kept, both reuse their blocks: CPU steps of gpt2-tiny run 10% faster at
// micro-batch 8, and the predictions came within 3%. The cost is that the process keeps its
// peak host memory until it exits, which a training loop reaches every step anyway.
//
// Thread safety: call from main() before other threads allocate; mallopt is process-wide.
#ifndef VARUNA_TRAINER_HOST_MALLOC_H_
#define VARUNA_TRAINER_HOST_MALLOC_H_

namespace trainer {

// Host blocks smaller than this come from malloc's heap, not from mmap (glibc's largest
// automatic threshold).
inline constexpr long kHostMmapThresholdBytes = 32L << 20;

// Whether `glibc_tunables` (the GLIBC_TUNABLES environment variable, may be null) sets any of
// malloc's tunables ("glibc.malloc."): the user's own setting, which KeepFreedHostMemory leaves.
bool UserTunesMalloc(const char* glibc_tunables);

// Sets malloc's mmap threshold to kHostMmapThresholdBytes and its trim threshold to the largest
// value (freed heap memory is not returned to the kernel), unless UserTunesMalloc(glibc_tunables)
// or the C library is not glibc. Returns whether it set them.
bool KeepFreedHostMemory(const char* glibc_tunables);

}  // namespace trainer

#endif  // VARUNA_TRAINER_HOST_MALLOC_H_
