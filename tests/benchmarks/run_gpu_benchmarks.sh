#!/usr/bin/env bash
# GPT-2 training throughput on one GPU: the Varuna engine (gpt2_throughput_benchmark) against
# the same model and batch in PyTorch (gpt2_pytorch_reference.py: eager with AMP, then
# torch.compile), run one after the other on the same device, for every preset and dtype.
# Writes OUT_DIR/results.jsonl (one JSON line per run), OUT_DIR/<preset>-<dtype>-<impl>.log
# (each run's full output: per-step losses and, with --profile-ops, the per-op table) and
# OUT_DIR/table.md, the markdown table it prints at the end: tokens/s, TFLOP/s, MFU, and the
# ratios of each implementation's tokens/s to PyTorch eager's and torch.compile's.
#
#   run_gpu_benchmarks.sh [--quick] [--profile-ops] [--sweep-micro-batch] [--out-dir=DIR]
#                         [--presets="gpt2-355m gpt2-1.5b"] [--dtypes="fp16 bf16"]
#                         [--modes="eager compile"] [--steps=50] [--warmup-steps=5]
#                         [--device=cuda|cpu]
#
#   In the GPU bundle (tests/gpu/bundle.sh):  gpu_bundle/bench/run_gpu_benchmarks.sh --profile-ops
#   From the workspace:  bazel run -c opt //tests/benchmarks:run_gpu_benchmarks -- --quick
#
# --sweep-micro-batch: every implementation runs micro-batches 1, 2, 4, ... up to the batch
# (until one runs out of memory; both programs' --sweep-micro-batch) and is compared at its own
# best one; table.md then also lists each sweep (tokens/s and peak GB per micro-batch).
#
# Batch sizes (sequences per step) and micro-batch sizes, per preset, from the environment:
#   BATCH_355M=16 CHUNK_355M=8 BATCH_1_5B=8 CHUNK_1_5B=4 (sequence length: the preset's, 1024)
# Other environment: BENCH_BIN (the C++ benchmark; default: the bundle's bin/, else next to this
# script, else bazel-bin), PYTHON (default python3), ATTENTION (the C++ --attention-backend,
# default auto), EXTRA_ARGS (appended to every run of both programs).
#
# --quick: gpt2-tiny, fp32, batch 4 in micro-batches of 2, sequence 64, 3 timed steps after 1,
# dropout 0, on whatever device there is; also checks that the first and last losses of the C++
# engine and of PyTorch eager agree (same weights, same tokens, same optimizer), which shows
# both train the same model.
# Exit status: non-zero if any run failed or the quick check disagreed.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
quick=0
profile=""
sweep=""
out_dir=gpt2_throughput_results
presets="gpt2-355m gpt2-1.5b"
dtypes="fp16 bf16"
modes="eager compile"
steps=50
warmup=5
device=""
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    --profile-ops) profile="--profile-ops" ;;
    --sweep-micro-batch) sweep="--sweep-micro-batch" ;;
    --out-dir=*) out_dir=${arg#*=} ;;
    --presets=*) presets=${arg#*=} ;;
    --dtypes=*) dtypes=${arg#*=} ;;
    --modes=*) modes=${arg#*=} ;;
    --steps=*) steps=${arg#*=} ;;
    --warmup-steps=*) warmup=${arg#*=} ;;
    --device=*) device=${arg#*=} ;;
    -h | --help)
      sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "run_gpu_benchmarks.sh: unknown argument \"$arg\" (see --help)" >&2
      exit 2
      ;;
  esac
done
for mode in $modes; do
  [[ "$mode" == eager || "$mode" == compile ]] ||
    { echo "run_gpu_benchmarks.sh: --modes holds \"$mode\": use eager and/or compile" >&2; exit 2; }
done
# Under `bazel run` the working directory is the runfiles tree: write where the user ran it.
if [[ -n "${BUILD_WORKING_DIRECTORY:-}" && "$out_dir" != /* ]]; then
  out_dir="$BUILD_WORKING_DIRECTORY/$out_dir"
fi

# The first of the candidates that exists.
find_file() {
  local candidate
  for candidate in "$@"; do
    [[ -n "$candidate" && -f "$candidate" ]] && { echo "$candidate"; return 0; }
  done
  return 1
}
bench_bin=$(find_file "${BENCH_BIN:-}" "$here/../bin/gpt2_throughput_benchmark" \
  "$here/gpt2_throughput_benchmark" "$PWD/tests/benchmarks/gpt2_throughput_benchmark" \
  "$here/../../bazel-bin/tests/benchmarks/gpt2_throughput_benchmark") || {
  echo "run_gpu_benchmarks.sh: the C++ benchmark was not found: set BENCH_BIN, or build it with" \
    "bazel build -c opt --config=cuda //tests/benchmarks:gpt2_throughput_benchmark" >&2
  exit 2
}
reference=$(find_file "$here/gpt2_pytorch_reference.py" \
  "$PWD/tests/benchmarks/gpt2_pytorch_reference.py") || {
  echo "run_gpu_benchmarks.sh: gpt2_pytorch_reference.py was not found next to this script" >&2
  exit 2
}
# The bundle's binaries need its env.sh (LD_LIBRARY_PATH onto the host's PyTorch libraries).
if [[ "$bench_bin" == "$here/../bin/gpt2_throughput_benchmark" && -f "$here/../env.sh" ]]; then
  # shellcheck disable=SC1091
  source "$here/../env.sh"
fi
python=${PYTHON:-python3}
"$python" -c "import torch" 2> /dev/null || {
  echo "run_gpu_benchmarks.sh: '$python' cannot import torch: set PYTHON to a python3 with" \
    "PyTorch 2.11" >&2
  exit 2
}

common=(--steps="$steps" --warmup-steps="$warmup")
[[ -n "$device" ]] && common+=(--device="$device")
if ((quick)); then
  presets="gpt2-tiny"
  dtypes="fp32"
  common=(--steps=3 --warmup-steps=1 --seq-length=64 --dropout=0)
  [[ -n "$device" ]] && common+=(--device="$device")
fi
batch_of() {
  case "$1" in
    gpt2-tiny) echo "4 2" ;;
    gpt2-355m) echo "${BATCH_355M:-16} ${CHUNK_355M:-8}" ;;
    gpt2-1.5b) echo "${BATCH_1_5B:-8} ${CHUNK_1_5B:-4}" ;;
    *) echo "${BATCH_OTHER:-8} ${CHUNK_OTHER:-2}" ;;
  esac
}

[[ -n "$profile" ]] && common+=("$profile")
[[ -n "$sweep" ]] && common+=("$sweep")
extra=()
read -r -a extra <<< "${EXTRA_ARGS:-}"

mkdir -p "$out_dir" || exit 2
results="$out_dir/results.jsonl"
: > "$results"
status=0
torch_version=$("$python" -c 'import torch; print(torch.__version__)')
echo "run_gpu_benchmarks.sh: $bench_bin against $reference (torch $torch_version)," \
  "output in $out_dir"

# run NAME COMMAND...: runs one benchmark, keeps its log, appends its JSON line (or a line
# recording the failure) to the results.
run() {
  local impl=$1 preset=$2 dtype=$3
  shift 3
  local log="$out_dir/$preset-$dtype-$impl.log"
  echo "==== $impl $preset $dtype: $*"
  "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local line
  line=$(grep '^{"impl":' "$log" | tail -n 1)
  if ((rc != 0)) || [[ -z "$line" ]]; then
    echo "run_gpu_benchmarks.sh: $impl $preset $dtype failed (exit $rc); see $log" >&2
    line=$(printf '{"impl":"%s","preset":"%s","dtype":"%s","error":"exit %s, see %s"}' \
      "$impl" "$preset" "$dtype" "$rc" "$(basename "$log")")
    status=1
  fi
  echo "$line" >> "$results"
}

for preset in $presets; do
  read -r batch chunk <<< "$(batch_of "$preset")"
  for dtype in $dtypes; do
    args=(--preset="$preset" --dtype="$dtype" --batch-size="$batch" --chunk-size="$chunk"
      "${common[@]}" "${extra[@]}")
    run varuna-cpp "$preset" "$dtype" "$bench_bin" "${args[@]}" \
      --attention-backend="${ATTENTION:-auto}"
    for mode in $modes; do
      run "pytorch-$mode" "$preset" "$dtype" "$python" "$reference" --mode="$mode" "${args[@]}"
    done
  done
done

"$python" - "$results" "$quick" > "$out_dir/table.md" << 'EOF_TABLE'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
quick = sys.argv[2] == "1"
def find(preset, dtype, impl):
    for r in rows:
        if (r["preset"], r["dtype"], r["impl"]) == (preset, dtype, impl) and "error" not in r:
            return r
    return None
def fmt(value, spec):
    return "n/a" if value is None else format(value, spec)
device = next((r["device"] for r in rows if "device" in r), "?")
torch_version = next((r["torch"] for r in rows if "torch" in r), "?")
print(f"GPT-2 training throughput on {device} (PyTorch {torch_version}); model FLOPs by "
      "Megatron's formula, MFU = TFLOP/s / peak; ratios are tokens/s over PyTorch's.\n")
print("| preset | dtype | impl | batch x seq (micro) | tokens/s | TFLOP/s | MFU | step ms | "
      "peak GB | loss first -> last | skipped | vs eager | vs compile |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    if "error" in r:
        print(f"| {r['preset']} | {r['dtype']} | {r['impl']} | failed: {r['error']} "
              "| | | | | | | | | |")
        continue
    ratios = []
    for ref in ("pytorch-eager", "pytorch-compile"):
        other = find(r["preset"], r["dtype"], ref)
        ratios.append(f"{r['tokens_per_s'] / other['tokens_per_s']:.2f}x" if other else "n/a")
    mfu = None if r["mfu"] is None else 100 * r["mfu"]
    print(f"| {r['preset']} | {r['dtype']} | {r['impl']} | {r['batch']} x {r['seq']} "
          f"({r['micro_batch']}) | {r['tokens_per_s']:.0f} | {r['tflops']:.3g} | "
          f"{fmt(mfu, '.1f')}{'%' if mfu is not None else ''} | {r['step_ms']:.1f} | "
          f"{fmt(r['peak_memory_gb'], '.1f')} | {r['losses'][0]:.3f} -> {r['losses'][1]:.3f} | "
          f"{r['skipped']} (last {r['last_skipped_step']}) | {ratios[0]} | {ratios[1]} |")
swept = [r for r in rows if "sweep" in r]
if swept:
    print("\nMicro-batch sweeps (each implementation is compared above at its best micro-batch): "
          "tokens/s (peak GB) per micro-batch.\n")
    print("| preset | dtype | impl | sweep | best |")
    print("|---|---|---|---|---|")
    for r in swept:
        cells = []
        for s in r["sweep"]:
            if "error" in s:
                cells.append(f"{s['micro_batch']}: {s['error']}")
            else:
                cells.append(f"{s['micro_batch']}: {s['tokens_per_s']:.0f} "
                             f"({fmt(s['peak_memory_gb'], '.1f')})")
        print(f"| {r['preset']} | {r['dtype']} | {r['impl']} | {'; '.join(cells)} | "
              f"{r['micro_batch']} |")
busy = [r for r in rows if r.get("device_busy_fraction") is not None]
if busy:
    print("\nDevice busy fraction under --profile-ops (device activity / wall time of the "
          "profiled steps; a lower bound, the profiler slows the host):\n")
    for r in busy:
        syncs = r.get("host_syncs_per_step")
        print(f"- {r['preset']} {r['dtype']} {r['impl']}: {100 * r['device_busy_fraction']:.1f}% "
              f"busy, host waits per step: {fmt(syncs, '.1f')}")
if quick:
    cpp = find("gpt2-tiny", "fp32", "varuna-cpp")
    eager = find("gpt2-tiny", "fp32", "pytorch-eager")
    if cpp is None or eager is None:
        print("\nquick check: FAILED, a run is missing")
        sys.exit(1)
    ok = True
    for index, what, limit in ((0, "first", 1e-4), (1, "last", 1e-3)):
        diff = abs(cpp["losses"][index] - eager["losses"][index])
        ok = ok and diff < limit
        print(f"\nquick check: {what}-step loss varuna-cpp {cpp['losses'][index]:.6f}, "
              f"pytorch-eager {eager['losses'][index]:.6f}: |difference| {diff:.2e}, "
              f"{'agree' if diff < limit else 'DISAGREE'} (limit {limit:g})")
    sys.exit(0 if ok else 1)
EOF_TABLE
table_status=$?
cat "$out_dir/table.md"
((table_status == 0)) || status=1
exit $status
