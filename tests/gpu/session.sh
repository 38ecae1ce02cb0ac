#!/usr/bin/env bash
# Every GPU check of the project, in phases that each finish well inside 9 minutes on one
# H100, run from the bundle (tests/gpu/bundle.sh copies this file to its root):
#
#   session.sh tests        every gpu-tagged test not in a phase below (kernels, smoke)
#   session.sh parity       the multi-process GPU tests: the host-staged transport, P x D parity
#                           with one process (every layout on the GPUs there are), checkpoints
#                           across layouts and devices
#   session.sh determinism  --deterministic: two runs and a resumed run are bitwise equal (a
#                           tiny model, and two gpt2-355m runs); its cost in tokens/s against
#                           the default (a ratio, same run)
#   session.sh kernels      kernel_benchmark in fp16 and bf16 (markdown tables)
#   session.sh training     gpt2-355m in one process (fp16, bf16) and as 2 stages x 2 replicas
#                           over host-staged Gloo (4 ranks on however many GPUs there are): the
#                           loss falls, no step is lost to a hang
#   session.sh planning     profile gpt2-355m, let the launcher choose a configuration, run it:
#                           the predicted step time against the measured one (within 5%), the
#                           second-ranked candidate run too (did the ranking hold?), the planned
#                           memory against training's peak (within 10%); then
#                           the per-segment profile against one stage (stage_overhead)
#   session.sh planning_8_3b_layers  the prediction, ranking and memory checks on 4 layers of
#                           gpt2-8.3b's shape (about one stage of its plans)
#   session.sh plan_8_3b    profile gpt2-8.3b on this GPU, one segment at a time, and dry-run
#                           plans for 8-64 GPUs
#   session.sh throughput [PRESET]  the C++ engine against PyTorch under torch.compile (bf16),
#                           at the same micro-batch and at each one's best
#   session.sh fusions [PRESET]  each of the engine's fusions measured on its own, in one call:
#                           every fusion off, the default (all on), then the default with one
#                           switch off at a time (fused cross entropy, gradient-accumulation
#                           fusion, bias-dropout-add + LayerNorm, bias-dropout-add), the default
#                           with the MLP's GEMM epilogues on (--bias-gelu-gemm-fusion), and the
#                           default with FP8
#                           (--fp8-format=hybrid); tokens/s ratios to both ends
#   session.sh fp8 [PRESET]  FP8 (hybrid) against bf16 at 1.5B: 200 steps each, same seed and
#                           data; tokens/s ratio and the loss difference after 200 steps
#   session.sh all          every phase above in turn, then the table
#   session.sh report       the table: one PASS/FAIL/SKIP line per check run so far
#
# One call may name several phases, run in that order: `session.sh tests fusions gpt2-355m fp8
# gpt2-1.5b` (a preset after throughput, fusions or fp8 is theirs). A name that is not a phase
# is refused, with the usage, before any phase runs.
#
# Logs go to $RESULTS (default ./results), packed into one archive when the script exits,
# $ARCHIVE (default results.tar.gz beside $RESULTS); each check appends its line (PASS, FAIL, or SKIP for
# a test that skipped every case) to $RESULTS/checks.txt, so phases run in separate calls add up
# to one table. Exit status: non-zero if a check of the phase failed or skipped.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
bin=$here/bin
results=${RESULTS:-$PWD/results}
mkdir -p "$results"
checks=$results/checks.txt
status=0

# check NAME COMMAND...: runs COMMAND with its output in $results/NAME.log (and on the
# terminal), and records "PASS NAME", "FAIL NAME" or, for a test whose every case skipped,
# "SKIP NAME" (which also fails the phase: a GPU check that did not run proves nothing).
check() {
  local name=$1
  shift
  local start=$SECONDS rc=0
  echo "==== $name: $*"
  "$@" 2>&1 | tee "$results/$name.log" || rc=$?
  local line
  if ((rc == 0)) && grep -q '^\[  PASSED  \] 0 tests' "$results/$name.log"; then
    # A test binary whose every case skipped (no usable GPU, or too few for the case).
    line="SKIP  $name  ($((SECONDS - start)) s; every case skipped, see the log)"
    status=1
  elif ((rc == 0)); then
    line="PASS  $name  ($((SECONDS - start)) s)"
  else
    line="FAIL  $name  ($((SECONDS - start)) s, exit $rc; log: $results/$name.log)"
    status=1
  fi
  echo "$line" | tee -a "$checks"
}

# A gpu-tagged test binary in a fresh temporary directory.
run_test() {
  TEST_TMPDIR=$(mktemp -d) "$bin/$1"
}

# The tests that phases other than `tests` run.
parity_tests="host_staged_process_group_test_gpu pipeline_parity_test_gpu gpu_resume_test"
determinism_tests="deterministic_gpu_test"

# loss_falls METRICS: the last logged lm_loss is below the first, and no value is NaN.
loss_falls() {
  python3 - "$1" << 'EOF_PY'
import json, math, sys
losses = [json.loads(l)["lm_loss"] for l in open(sys.argv[1]) if '"lm_loss"' in l]
print(f"{len(losses)} iterations logged; lm_loss {losses[0]:.4f} -> {losses[-1]:.4f}")
ok = len(losses) >= 2 and all(math.isfinite(x) for x in losses) and losses[-1] < losses[0]
sys.exit(0 if ok else 1)
EOF_PY
}

# train NAME LAUNCHER_FLAGS... -- TRAINER_FLAGS...: a sample run of gpt2-355m (one process
# when LAUNCHER_FLAGS is empty), then loss_falls on its metrics.
train() {
  local name=$1 launcher=() trainer=()
  shift
  while (($#)) && [[ "$1" != -- ]]; do launcher+=("$1"); shift; done
  shift
  trainer=("$@")
  local dir=$results/$name
  rm -rf "$dir" && mkdir -p "$dir"
  local common=(--preset=gpt2-355m --lr=1.5e-4 --warmup=0.02 --log-interval=1 --eval-interval=0
    --metrics-file="$dir/metrics.jsonl")
  if ((${#launcher[@]})); then
    (cd "$dir" && "$bin/launch" "${launcher[@]}" --master_port=0 -- "$bin/pretrain_gpt2" \
      "${common[@]}" "${trainer[@]}") || return 1
  else
    (cd "$dir" && "$bin/pretrain_gpt2" "${common[@]}" "${trainer[@]}") || return 1
  fi
  loss_falls "$dir/metrics.jsonl"
}

# stop PID: ends a background process and waits for it (nothing when PID is empty).
stop() {
  [[ -z "${1:-}" ]] && return 0
  kill "$1" 2> /dev/null
  wait "$1" 2> /dev/null
  return 0
}

# prediction_error [FLAGS...]: profiles gpt2-355m in bf16 (FLAGS added, e.g. to shrink it), lets
# the launcher choose from the profile for one GPU and a global batch of 32, trains 30
# iterations, and compares the launcher's predicted step time with the measured median (within
# 5%). Then trains the launcher's second-ranked candidate the same way (planning_ranking and
# planning_memory read both runs). The runs go to $results/$PLANNING_NAME (default planning).
prediction_error() {
  local dir=$results/${PLANNING_NAME:-planning}
  rm -rf "$dir" && mkdir -p "$dir"
  local model=(--preset=gpt2-355m --bf16 "$@")
  local train=(--train-iters=30 --log-interval=1 --eval-interval=0)
  # The device's clocks, power and temperature every 200 ms while the profile and the runs go
  # (gpu_clocks.csv): a profile of short passes and a training run of 30 steps may not run at
  # the same clocks under a power limit.
  # Bounded by `timeout`, in case a signal ends this function before it stops the sampler.
  local sampler=""
  if command -v nvidia-smi > /dev/null; then
    timeout 900 nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu \
      --format=csv -lms 200 > "$dir/gpu_clocks.csv" 2>&1 &
    sampler=$!
  fi
  (cd "$dir" && "$bin/pretrain_gpt2" --profiling "${model[@]}" \
    --profile-micro-batches=1,2,4,8,16 --profile-dir="$dir/prof") || { stop "$sampler"; return 1; }
  # The chosen configuration also trains iterations 31-33 under LibTorch's profiler (--profile):
  # the log's summary says how much of a step the device was busy, its longest idle stretches
  # and what the host waited for, i.e. whether what training pays beyond the prediction is
  # device work or idle time. The median and the peak stay over iterations 6-30; both runs
  # write TensorBoard events (--tensorboard-dir), so that they pay the same per-step costs.
  (cd "$dir" && "$bin/launch" --profile_dir="$dir/prof" --gpu_memory_gb=75 --gpus_per_node=1 \
    --batch_size=32 --master_port=0 -- "$bin/pretrain_gpt2" "${model[@]}" "${train[@]}" \
    --train-iters=33 --profile --use-pytorch-profiler --profile-step-start=30 \
    --profile-step-end=33 --tensorboard-dir="$dir/trace" \
    --metrics-file="$dir/metrics.jsonl") | tee "$dir/launch.log" || { stop "$sampler"; return 1; }
  # The second row of the launcher's table: rank P D b m time_ms bubble peak_GiB stages.
  # Its stages column ("0-2|3") becomes --stage-segments (3,1), the split the plan assumed.
  local second
  second=$(awk '$1 == "[launch]" && $2 == "2" { print $3, $5, $NF; exit }' "$dir/launch.log")
  if [[ -n "$second" ]]; then
    local p2 b2 stages2 split2
    read -r p2 b2 stages2 <<< "$second"
    split2=$(python3 -c 'import sys
print(",".join(str(int(r.split("-")[-1]) - int(r.split("-")[0]) + 1) for r in sys.argv[1].split("|")))' \
      "$stages2")
    mkdir -p "$dir/second"
    (cd "$dir/second" && "$bin/launch" --nstages="$p2" --chunk_size="$b2" --gpus_per_node=1 \
      --batch_size=32 --master_port=0 -- "$bin/pretrain_gpt2" "${model[@]}" "${train[@]}" \
      --stage-segments="$split2" --tensorboard-dir="$dir/second/trace" \
      --metrics-file="$dir/second/metrics.jsonl") \
      > "$dir/second/launch.log" 2>&1 ||
      echo "the second-ranked candidate (P=$p2, micro-batch $b2) failed: $dir/second/launch.log"
  fi
  # The chosen configuration once more, 12 iterations with its phases timed
  # (--timing-log-level=2: the device synchronised around each phase, so this run is not the
  # measured one): training's own forward + backward per micro-batch and step work, beside the
  # profile's R + B and step work (planning_report prints both).
  mkdir -p "$dir/timed"
  (cd "$dir/timed" && "$bin/launch" --profile_dir="$dir/prof" --gpu_memory_gb=75 \
    --gpus_per_node=1 --batch_size=32 --master_port=0 -- "$bin/pretrain_gpt2" "${model[@]}" \
    "${train[@]}" --train-iters=12 --timing-log-level=2 \
    --metrics-file="$dir/timed/metrics.jsonl") > "$dir/timed/launch.log" 2>&1 ||
    echo "the timed run failed: $dir/timed/launch.log"
  stop "$sampler"
  planning_report prediction "$dir"
}

# planning_report WHAT DIR: reads prediction_error's runs. WHAT: prediction (the chosen
# configuration's predicted step time against the measured median of iterations 6-30, within
# 5%), ranking (the second-ranked candidate not measured faster than the chosen one by more
# than 2%, the noise of a 30-iteration median),
# memory (the launcher's peak GiB for the chosen configuration against the caching allocator's
# peak in training, within 10%).
planning_report() {
  python3 - "$@" << 'EOF_PY'
import json, os, re, statistics, sys
what, d = sys.argv[1], sys.argv[2]
# The table's rows after the rank: P D b m time_ms bubble peak_GiB stages.
rows = [l.split()[2:] for l in open(f"{d}/launch.log") if re.match(r"\[launch\]\s+\d+\s+\d+\s+\d+", l)]
def run(path):
    lines = [json.loads(l) for l in open(path) if '"ms_per_iteration"' in l] if os.path.exists(path) else []
    times = [r["ms_per_iteration"] for r in lines if 5 < r["iteration"] <= 30]
    # Iterations 31-33 of the chosen run are profiled (--profile): left out of both.
    peak = max((r.get("max_allocated_bytes", 0) for r in lines if r["iteration"] <= 30),
               default=0) / 2**30
    return (statistics.median(times) if times else None), peak
predicted = float(rows[0][4])
measured, peak = run(f"{d}/metrics.jsonl")
if what == "prediction":
    error = (predicted - measured) / measured
    print(f"chosen P={rows[0][0]} D={rows[0][1]} b={rows[0][2]} m={rows[0][3]}: predicted "
          f"{predicted:.1f} ms per step, measured {measured:.1f} ms (median of iterations 6-30): "
          f"error {100 * error:+.1f}%")
    # The profiled iterations 31-33 (--profile): the device's busy time and the host's waits.
    for line in open(f"{d}/launch.log"):
        if "--profile: " in line or "device busy fraction" in line or "host waits" in line:
            print(line.rstrip())
    # The timed run (--timing-log-level=2, iterations 6-12) beside the profile's terms, for the
    # chosen micro-batch size b (one GPU: P = 1, the whole model on one stage).
    timed = f"{d}/timed/metrics.jsonl"
    if os.path.exists(timed):
        lines = [json.loads(l) for l in open(timed) if '"timers_ms"' in l]
        lines = [l for l in lines if l["iteration"] > 5]
        b, m = int(rows[0][2]), int(rows[0][3])
        rb = work = 0.0
        for name in sorted(os.listdir(f"{d}/prof")):
            if not name.startswith("segment_"):
                continue
            seg = json.load(open(f"{d}/prof/{name}"))
            mb = [x for x in seg["micro_batches"] if x["micro_batch_size"] == b]
            if mb:
                rb += mb[0]["recompute_ms"] + mb[0]["backward_ms"]
            else:
                print(f"terms: {name} has no measurement at micro-batch {b}")
            work += seg.get("gradient_ms", 0) + seg.get("optimizer_ms", 0)
        if lines and rows[0][0] != "1":
            print(f"terms: not compared (P = {rows[0][0]}: the profile's sums are for one stage)")
        elif lines:
            t = lambda n: statistics.median(l["timers_ms"].get(n, [0, 0])[1] for l in lines)
            step = statistics.median(l["ms_per_iteration"] for l in lines)
            fb = t("forward-compute") + t("backward-compute")
            print(f"terms (timed run, medians of iterations 6-12; profile): forward + backward "
                  f"per micro-batch {fb / m:.2f} ms (profile R + B {rb:.2f}); step work "
                  f"{t('all-grads-sync') + t('optimizer'):.2f} ms (profile {work:.2f}); "
                  f"forward-backward {t('forward-backward'):.2f} ms for m = {m}; timed step "
                  f"{step:.2f} ms")
    sys.exit(0 if abs(error) <= 0.05 else 1)
if what == "ranking":
    if len(rows) < 2:
        print("one candidate only: no ranking to check"); sys.exit(0)
    second, _ = run(f"{d}/second/metrics.jsonl")
    if second is None:
        print("the second-ranked candidate did not train (see second/launch.log)"); sys.exit(1)
    p2 = float(rows[1][4])
    print(f"second P={rows[1][0]} D={rows[1][1]} b={rows[1][2]} m={rows[1][3]}: predicted "
          f"{p2:.1f} ms, measured {second:.1f} ms (error {100 * (p2 - second) / second:+.1f}%); "
          f"chosen: predicted {predicted:.1f}, measured {measured:.1f}")
    # Within 2% of each other the two are a tie: a 30-iteration median moves about that much.
    held = measured <= second * 1.02
    print("the ranking held" + (" (a tie within 2%)" if measured > second else "")
          if held else "the ranking did NOT hold: the second was faster by more than 2%")
    sys.exit(0 if held else 1)
if what == "memory":
    planned = float(rows[0][6])
    if peak == 0:
        print("the training run logged no max_allocated_bytes (not a CUDA run?)"); sys.exit(1)
    print(f"chosen configuration: planned peak {planned:.2f} GiB per GPU, training's caching-"
          f"allocator peak {peak:.2f} GiB: {100 * (planned - peak) / peak:+.1f}%")
    sys.exit(0 if peak > 0 and abs(planned - peak) <= 0.10 * peak else 1)
EOF_PY
}

# deterministic_pair [FLAGS...]: two 12-step gpt2-355m runs (bf16, sdpa, dropout 0.1; FLAGS
# added) with --deterministic give bitwise-equal losses (the H100 runs of 2026-11-25 without
# the mode differed by up to 4.4e-4).
deterministic_pair() {
  local dir=$results/deterministic_355m
  rm -rf "$dir" && mkdir -p "$dir"
  for run in first second; do
    (cd "$dir" && "$bin/pretrain_gpt2" --preset=gpt2-355m --bf16 --attention-backend=sdpa \
      --deterministic --train-iters=12 --batch-size=8 --log-interval=1 --eval-interval=0 \
      --metrics-file="$dir/$run.jsonl" "$@") || return 1
  done
  python3 - "$dir/first.jsonl" "$dir/second.jsonl" << 'EOF_PY'
import json, sys
a, b = ([json.loads(l)["lm_loss"] for l in open(f) if '"lm_loss"' in l] for f in sys.argv[1:])
print("first: ", a)
print("second:", b)
ok = len(a) == 12 and a == b
print("bitwise equal" if ok else "DIFFERENT")
sys.exit(0 if ok else 1)
EOF_PY
}

phase_tests() {
  while read -r test; do
    case " $parity_tests $determinism_tests " in *" $test "*) continue ;; esac
    check "test_$test" run_test "$test"
  done < "$here/tests.txt"
}

phase_parity() {
  for test in $parity_tests; do check "test_$test" run_test "$test"; done
}

phase_determinism() {
  for test in $determinism_tests; do check "test_$test" run_test "$test"; done
  check deterministic_355m_pair deterministic_pair
  # The default, then --deterministic, in one process on the same batches: tokens/s ratio.
  check deterministic_cost "$bin/gpt2_throughput_benchmark" --preset=gpt2-355m --dtype=bf16 \
    --batch-size=8 --steps=30 --deterministic
}

phase_kernels() {
  for dtype in fp16 bf16; do check "kernels_$dtype" "$bin/kernel_benchmark" --dtype=$dtype; done
}

phase_training() {
  check train_355m_fp16 train train_355m_fp16 -- --fp16 --train-iters=50 --batch-size=8
  check train_355m_bf16 train train_355m_bf16 -- --bf16 --train-iters=50 --batch-size=8
  # 2 stages x 2 replicas: on a one-GPU host all four ranks share it (host-staged Gloo).
  check train_355m_2x2_gloo train train_355m_2x2_gloo --nstages=2 --gpus_per_node=4 \
    --batch_size=16 --chunk_size=4 -- --bf16 --train-iters=30 --p2p-backend=gloo \
    --dp-backend=gloo
}

# plan_8_3b: profiles gpt2-8.3b (bf16) on this one GPU, one segment at a time (memory bounded
# by the largest segment, the embeddings or the LM head with one layer: about 5.5 GB of state),
# at micro-batch sizes 1, 2 and 4, then the launcher's dry run plans it for 8, 16, 32 and 64
# GPUs of 80 GiB (8 per node, 7200 Gbit/s within a node, 400 Gbit/s between nodes). Passes when
# every cluster gets a plan; the tables are in $results/plan_8_3b/plan_<gpus>.txt.
plan_8_3b() {
  local dir=$results/plan_8_3b
  rm -rf "$dir" && mkdir -p "$dir"
  local timer=()
  [[ -x /usr/bin/time ]] && timer=(/usr/bin/time -v)
  (cd "$dir" && ${timer[@]+"${timer[@]}"} "$bin/pretrain_gpt2" --profiling --preset=gpt2-8.3b \
    --vocab-size=50257 --bf16 --profile-micro-batches=1,2,4 --profile-dir="$dir/prof") \
    2>&1 | tee "$dir/profile.log" || return 1
  grep -E "Maximum resident|Elapsed \(wall|profile written" "$dir/profile.log" || true
  local gpus
  for gpus in 8 16 32 64; do
    "$bin/launch" --dry_run --profile_dir="$dir/prof" --gpu_memory_gb=80 --batch_size=128 \
      --gpus_per_node=8 --nnodes=$((gpus / 8)) --intra_node_gbps=7200 --inter_node_gbps=400 |
      tee "$dir/plan_$gpus.txt" || return 1
    grep -q "chosen: " "$dir/plan_$gpus.txt" || return 1
  done
}

phase_planning() {
  check planning_prediction prediction_error
  check planning_ranking planning_report ranking "$results/planning"
  check planning_memory planning_report memory "$results/planning"
  # What the per-segment profile charges beyond one stage run back to back (docs/profiling.md,
  # "The H100 over-prediction of 2026-11-26"): the table, no pass/fail threshold.
  check stage_overhead "$bin/stage_overhead" --preset=gpt2-355m --device=cuda --dtype=bf16 \
    --micro-batch=16 --attention=sdpa
}

# The prediction, ranking and memory checks on gpt2-8.3b's layer shape (hidden 3072, 32 heads), 4 layers deep so that
# one process trains it: about the size of one stage of the 8.3B plans (P = 16 puts 4 or 5 of
# its 72 layers on a stage); the predicted step time and the planned memory against training's.
phase_planning_8_3b_layers() {
  local flags=(--num-layers=4 --hidden-size=3072 --num-attention-heads=32)
  PLANNING_NAME=planning_8_3b_layers check planning_8_3b_layers_prediction prediction_error \
    "${flags[@]}"
  check planning_8_3b_layers_ranking planning_report ranking "$results/planning_8_3b_layers"
  check planning_8_3b_layers_memory planning_report memory "$results/planning_8_3b_layers"
}

phase_plan_8_3b() {
  check plan_8_3b plan_8_3b
}

# The engine against PyTorch under torch.compile on PRESET in bf16: at the same micro-batch (the
# preset's, with the per-op tables), then each at its own best micro-batch (both sweep 1, 2,
# 4, ... up to the batch). Issue 26's goal is 1.10x in both.
phase_throughput() {
  local preset=${1:-gpt2-355m}
  local common=(--presets="$preset" --dtypes=bf16 --modes=compile --steps=30)
  check "throughput_$preset" "$here/bench/run_gpu_benchmarks.sh" --profile-ops "${common[@]}" \
    --out-dir="$results/throughput_$preset"
  check "throughput_${preset}_best" "$here/bench/run_gpu_benchmarks.sh" --sweep-micro-batch \
    "${common[@]}" --out-dir="$results/throughput_${preset}_best"
}

# The C++ benchmark on PRESET (bf16, batch 16 x 1024 in micro-batches of 8, as the throughput
# table) once per variant, then each variant's tokens/s against the unfused baseline (every
# fusion off) and against the default (every fusion on). Each no_* variant is the default with
# one switch off, so default / no_X is what switch X alone is worth (no_bias_dropout also turns
# off the bias-dropout-add-LayerNorm fusion, which needs it); gelu_gemm is the default plus the
# MLP's GEMM epilogues (--bias-gelu-gemm-fusion, off by default until measured); fp8 is the
# default with FP8 in all four linears, fp8_auto with FP8 where each measured faster at start-up.
phase_fusions() {
  local preset=${1:-gpt2-355m}
  local common=(--preset="$preset" --dtype=bf16 --batch-size=16 --chunk-size=8 --steps=30
    --warmup-steps=5 --profile-ops)
  local variants=(unfused default no_fused_ce no_grad_accum_fusion no_bias_dropout_add_ln
    no_bias_dropout gelu_gemm fp8 fp8_auto)
  local -A flags=(
    [unfused]="--no-bias-dropout-fusion --no-bias-dropout-add-layernorm-fusion --no-cross-entropy-loss-fusion --no-gradient-accumulation-fusion"
    [default]=""
    [no_fused_ce]="--no-cross-entropy-loss-fusion"
    [no_grad_accum_fusion]="--no-gradient-accumulation-fusion"
    [no_bias_dropout_add_ln]="--no-bias-dropout-add-layernorm-fusion"
    [no_bias_dropout]="--no-bias-dropout-fusion"
    [gelu_gemm]="--bias-gelu-gemm-fusion"
    [fp8]="--fp8-format=hybrid"
    [fp8_auto]="--fp8-format=hybrid --fp8-linears=auto")
  local v
  for v in "${variants[@]}"; do
    # shellcheck disable=SC2086  # the flags are whole words, or none
    check "fusions_${preset}_$v" "$bin/gpt2_throughput_benchmark" "${common[@]}" ${flags[$v]}
  done
  local base default_tps
  base=$(grep -ho '"tokens_per_s":[0-9.]*' "$results/fusions_${preset}_unfused.log" | tail -1 |
    cut -d: -f2)
  default_tps=$(grep -ho '"tokens_per_s":[0-9.]*' "$results/fusions_${preset}_default.log" |
    tail -1 | cut -d: -f2)
  for v in "${variants[@]}"; do
    local tps
    tps=$(grep -ho '"tokens_per_s":[0-9.]*' "$results/fusions_${preset}_$v.log" | tail -1 |
      cut -d: -f2)
    [[ -n "$base" && -n "$default_tps" && -n "$tps" ]] &&
      awk -v p="$preset" -v v="$v" -v t="$tps" -v b="$base" -v d="$default_tps" \
        'BEGIN { printf "fusions %s %s: %.0f tokens/s, %.3fx unfused, %.3fx default\n", p, v, t,
          t / b, t / d }'
  done | tee -a "$results/fusions_$preset.txt"
}

# FP8 against bf16 on PRESET (default gpt2-1.5b, batch 16 x 1024 in micro-batches of 8): 200
# steps of each from the same seed on the same batches in one process, then the ratio of
# tokens/s (issue 26's goal: at least 1.25) and the relative difference of the loss after the
# 200 steps (goal: within 1%); each run's per-op table follows its timed steps.
phase_fp8() {
  local preset=${1:-gpt2-1.5b}
  check "fp8_${preset}" "$bin/gpt2_throughput_benchmark" --preset="$preset" --dtype=bf16 \
    --batch-size=16 --chunk-size=8 --warmup-steps=10 --steps=190 --fp8-format=hybrid \
    --fp8-compare --profile-ops
  # The same with each linear in FP8 only where it measured faster at start-up (its start-up
  # line gives the timings): tokens/s only, 35 steps.
  check "fp8_${preset}_auto" "$bin/gpt2_throughput_benchmark" --preset="$preset" --dtype=bf16 \
    --batch-size=16 --chunk-size=8 --warmup-steps=5 --steps=30 --fp8-format=hybrid \
    --fp8-linears=auto --fp8-compare
  grep -h -e '^fp8 ' -e 'fp8 linears:' "$results/fp8_${preset}.log" \
    "$results/fp8_${preset}_auto.log" | tee -a "$results/fp8_$preset.txt"
}

report() {
  echo "==== GPU checks ($checks)"
  [[ -f "$checks" ]] && cat "$checks"
  ! grep -qE '^(FAIL|SKIP)' "$checks" 2> /dev/null
}

# Everything under $results also goes into one archive, $ARCHIVE (default: results.tar.gz
# beside $results), written when this script exits (after its phase, or after `all`), so that a
# GPU session brings one file back whatever ran.
archive() {
  local to=${ARCHIVE:-$(dirname "$results")/results.tar.gz}
  tar czf "$to" -C "$(dirname "$results")" "$(basename "$results")" &&
    echo "==== archive: $to"
}
trap archive EXIT

usage() {
  echo "usage: session.sh PHASE [PHASE...]; PHASE: tests | parity | determinism | kernels |" \
    "training | planning | planning_8_3b_layers | plan_8_3b | throughput [PRESET] |" \
    "fusions [PRESET] | fp8 [PRESET] | all | report (PRESET: gpt2-...)" >&2
  exit 2
}

# One call may name several phases, run in order (`session.sh tests fusions gpt2-355m fp8
# gpt2-1.5b`); throughput, fusions and fp8 take the preset that follows them, if one does. Every
# name is checked before any phase runs.
phases=()
presets=()
while (($# > 0)); do
  case "$1" in
    tests | parity | determinism | kernels | training | planning | planning_8_3b_layers | \
      plan_8_3b | all | report)
      phases+=("$1")
      presets+=("")
      shift
      ;;
    throughput | fusions | fp8)
      phases+=("$1")
      if [[ "${2:-}" == gpt2-* ]]; then
        presets+=("$2")
        shift 2
      else
        presets+=("")
        shift
      fi
      ;;
    *)
      echo "session.sh: '$1' is not a phase" >&2
      usage
      ;;
  esac
done
((${#phases[@]} > 0)) || usage

# One phase whose name the loop above accepted.
run_phase() {
  local phase=$1 preset=$2
  case "$phase" in
  throughput | fusions | fp8) "phase_$phase" "$preset" ;;
  all)
    for p in tests parity determinism kernels training planning planning_8_3b_layers plan_8_3b; do
      "phase_$p"
      archive  # after each phase too: a call cut off at its limit still leaves the rest
    done
    phase_throughput gpt2-355m
    phase_fusions gpt2-355m
    phase_fp8 gpt2-1.5b
    report || status=1
    ;;
  report) report || status=1 ;;
  *) "phase_$phase" ;;
  esac
}

for i in "${!phases[@]}"; do
  run_phase "${phases[$i]}" "${presets[$i]}"
  ((i + 1 < ${#phases[@]})) && archive  # a call cut off at its limit still leaves the rest
done
exit $status
