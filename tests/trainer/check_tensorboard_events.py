#!/usr/bin/env python3
"""Loads a --tensorboard-dir with TensorBoard's own reader and checks the trainer's scalars.

  python3 tests/trainer/check_tensorboard_events.py DIR [--metrics-file=FILE] [--train-iters=N]

Needs the `tensorboard` package (pip install tensorboard). Uses
tensorboard.backend.event_processing.event_accumulator.EventAccumulator, as TensorBoard's
server does, and asserts: the per-step tags exist with one value per iteration 1..N (when
--train-iters is given), the values are finite, and, with --metrics-file (written with
--log-interval=1), that "lm loss" equals the metrics file's lm_loss at every iteration (to
float32 precision). Prints a table of the tags and exits 0 when all hold, 1 otherwise.
"""
import argparse
import json
import math
import sys

try:
    from tensorboard.backend.event_processing import event_accumulator
except ImportError:
    print("check_tensorboard_events: the tensorboard package is missing: pip install tensorboard")
    sys.exit(2)

PER_STEP = ["lm loss", "lm loss vs samples", "learning-rate", "learning-rate vs samples",
            "loss-scale", "grad-norm", "skipped-iterations"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("--metrics-file")
    parser.add_argument("--train-iters", type=int)
    args = parser.parse_args()
    acc = event_accumulator.EventAccumulator(args.dir, size_guidance={"scalars": 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]
    failures = []
    for tag in sorted(tags):
        events = acc.Scalars(tag)
        print(f"{tag:32s} {len(events):5d} values, steps {events[0].step}..{events[-1].step}, "
              f"last {events[-1].value:.6g}")
        if not all(math.isfinite(e.value) for e in events):
            failures.append(f"{tag}: a value is not finite")
    for tag in PER_STEP:
        if tag not in tags:
            failures.append(f"missing tag {tag!r}")
    if args.train_iters and "lm loss" in tags:
        steps = [e.step for e in acc.Scalars("lm loss")]
        if steps != list(range(1, args.train_iters + 1)):
            failures.append(f"lm loss steps {steps} are not 1..{args.train_iters}")
    if args.metrics_file and "lm loss" in tags:
        logged = {}
        with open(args.metrics_file) as f:
            for line in f:
                record = json.loads(line)
                if "lm_loss" in record:
                    logged[record["iteration"]] = record["lm_loss"]
        board = {e.step: e.value for e in acc.Scalars("lm loss")}
        compared = 0
        for step, loss in logged.items():
            if step in board:
                compared += 1
                if abs(board[step] - loss) > 1e-6 * max(1.0, abs(loss)):
                    failures.append(f"lm loss at {step}: TensorBoard {board[step]}, metrics {loss}")
        print(f"lm loss equals the metrics file at {compared} iterations")
        if compared == 0:
            failures.append("no iteration of the metrics file is in TensorBoard's lm loss")
    for failure in failures:
        print("FAIL:", failure)
    print("OK" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
