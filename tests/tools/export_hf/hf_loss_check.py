"""The check of export_loss_test with transformers itself (by hand: the test needs no Python).

export_loss_test trains a tiny GPT-2 with pretrain_gpt2, exports it whole and with
--trim-padded-vocab, and leaves both folders, its fixed batch and the losses it computed in its
undeclared outputs. This script loads each folder with transformers' AutoModelForCausalLM
(GPT2LMHeadModel), computes its loss on the batch in float32, and prints it against the
trainer's loss. It exits 1 if the whole export's loss differs from the trainer's by more than
1e-6 relative, or the trimmed export's does not differ.

  bazel test //tests/tools/export_hf:export_loss_test
  unzip -o bazel-testlogs/tests/tools/export_hf/export_loss_test/test.outputs/outputs.zip \\
      -d /tmp/export_loss
  PYTHONPATH=<a directory with torch and transformers> \\
      python3 tests/tools/export_hf/hf_loss_check.py /tmp/export_loss
"""

import json
import os
import sys


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    outputs = argv[1]
    import torch
    import transformers

    with open(os.path.join(outputs, "loss_check.json")) as f:
        record = json.load(f)
    input_ids = torch.tensor(record["input_ids"])
    labels = torch.tensor(record["labels"])
    trainer_loss = record["trainer_loss"]
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    print(f"trainer loss (Gpt2Stage, float32):       {trainer_loss:.9f}")
    losses = {}
    for name in ("hf_whole", "hf_trimmed"):
        model = transformers.AutoModelForCausalLM.from_pretrained(
            os.path.join(outputs, name))  # config.json says float32
        model.eval()
        with torch.no_grad():
            logits = model(input_ids=input_ids).logits
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.size(-1)), labels.reshape(-1)).item()
        losses[name] = loss
        relative = abs(loss - trainer_loss) / trainer_loss
        print(f"{name}: transformers' loss {loss:.9f} (vocab_size "
              f"{model.config.vocab_size}), relative difference {relative:.2e}; "
              f"the test's computation gave "
              f"{record['whole_loss' if name == 'hf_whole' else 'trimmed_loss']:.9f}")
    ok = True
    if abs(losses["hf_whole"] - trainer_loss) > 1e-6 * trainer_loss:
        print("FAIL: the whole export's loss is not the trainer's")
        ok = False
    if abs(losses["hf_trimmed"] - trainer_loss) <= 1e-6 * trainer_loss:
        print("FAIL: the trimmed export's loss should differ from the trainer's")
        ok = False
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
