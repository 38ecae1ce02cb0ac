#!/usr/bin/env bash
# The GPU checks of the fused-kernel milestone, in phases that each fit a 10-minute slot on a
# GPU host, run from the bundle (tests/gpu/bundle.sh copies this file to its root):
#
#   session.sh tests             every GPU test (run.sh)
#   session.sh kernels           kernel_benchmark in fp16 and bf16 (markdown tables)
#   session.sh train PRESET      50 steps of PRESET (gpt2-355m, gpt2-1.5b) on the bundled corpus,
#                                fp16 then bf16, a log line per step (falling loss, skips)
#   session.sh throughput PRESET the C++ benchmark against PyTorch eager and compile, with the
#                                per-op profile (bench/run_gpu_benchmarks.sh)
#   session.sh determinism PRESET the cost of --deterministic: the C++ benchmark in bf16, default
#                                then deterministic in one process, tokens/s ratio last
#
# Logs and tables go to $RESULTS (default ./results). Exit status: non-zero if a phase failed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
results=${RESULTS:-$PWD/results}
mkdir -p "$results"
phase=${1:-}
status=0
case "$phase" in
  tests)
    "$here/run.sh" 2>&1 | tee "$results/tests.log" || status=1
    ;;
  kernels)
    for dtype in fp16 bf16; do
      kernel_benchmark --dtype=$dtype 2>&1 | tee "$results/kernels_$dtype.md" || status=1
    done
    ;;
  train)
    preset=${2:?"session.sh train PRESET (gpt2-355m or gpt2-1.5b)"}
    batch=8
    [[ "$preset" == gpt2-1.5b ]] && batch=4
    for precision in fp16 bf16; do
      (cd "$results" && pretrain_gpt2 --preset="$preset" --$precision --train-iters=50 \
        --batch-size=$batch --lr=1.5e-4 --warmup=0.02 --log-interval=1 --eval-interval=0 \
        --metrics-file="train_${preset}_$precision.jsonl") 2>&1 |
        tee "$results/train_${preset}_$precision.log" || status=1
    done
    ;;
  throughput)
    preset=${2:?"session.sh throughput PRESET (gpt2-355m or gpt2-1.5b)"}
    "$here/bench/run_gpu_benchmarks.sh" --profile-ops --presets="$preset" \
      --out-dir="$results/throughput_$preset" || status=1
    ;;
  determinism)
    preset=${2:?"session.sh determinism PRESET (gpt2-355m or gpt2-1.5b)"}
    batch=8
    [[ "$preset" == gpt2-1.5b ]] && batch=4
    gpt2_throughput_benchmark --preset="$preset" --dtype=bf16 --batch-size=$batch --steps=30 \
      --deterministic 2>&1 | tee "$results/determinism_$preset.log" || status=1
    ;;
  *)
    echo "usage: session.sh tests | kernels | train PRESET | throughput PRESET |" \
      "determinism PRESET" >&2
    exit 2
    ;;
esac
exit $status
