"""Makes the Hugging Face GPT-2 fixture of import_hf_test (testdata/), once, with transformers.

The fixture is a small GPT2LMHeadModel with random weights (fixed seed), saved as transformers
saves it (config.json, model.safetensors), and transformers' own fp32 loss on a fixed batch of
token ids (testdata/reference_loss.json). The test imports the folder with //tools/import_hf and
checks that the trainer's evaluation of the imported checkpoint gives the same loss.

The vocabulary (1024) is a multiple of 128, the trainer's default --make-vocab-size-divisible-by,
so the import adds no padded rows: the loss is then the same function in both programs (padded
rows would take part in the trainer's softmax; docs/checkpoints.md).

Weights are drawn larger than GPT-2's initialisation (initializer_range 0.2) and the LayerNorm and
bias parameters are perturbed away from 1 and 0, so that a transposed matrix, a swapped name or a
wrong epsilon changes the loss far beyond the test's tolerance.

How it was run (2026-11-27, in a throwaway environment; the test itself needs no Python), with
transformers 5.24.0 and the project's pinned torch 2.11.0 wheel (the one ./setup.sh caches in
~/.cache/varuna/wheels; installed without its CUDA packages, whose libraries .deps provides):

    python3 -m venv /tmp/hfenv && /tmp/hfenv/bin/pip install transformers safetensors numpy
    /tmp/hfenv/bin/pip install --no-deps ~/.cache/varuna/wheels/torch-2.11.0-cp311-*.whl
    /tmp/hfenv/bin/pip install sympy networkx jinja2 filelock fsspec typing_extensions
    N=.deps/site-packages/nvidia
    LD_LIBRARY_PATH=$N/cu13/lib:$N/cusparselt/lib:$N/nvshmem/lib /tmp/hfenv/bin/python \
        tests/tools/import_hf/make_fixture.py tests/tools/import_hf/testdata
"""

import json
import os
import sys

import torch
import transformers
from transformers import GPT2Config, GPT2LMHeadModel

SEED = 1234
BATCH = 4
TOKENS = 33  # each row: 32 inputs, the labels are the row shifted by one


def main(out_dir):
    torch.manual_seed(SEED)
    config = GPT2Config(
        vocab_size=1024,
        n_positions=64,
        n_embd=64,
        n_layer=2,
        n_head=4,
        activation_function="gelu_new",
        layer_norm_epsilon=1e-5,
        initializer_range=0.2,
        resid_pdrop=0.1,
        embd_pdrop=0.1,
        attn_pdrop=0.1,
        bos_token_id=1023,
        eos_token_id=1023,
    )
    model = GPT2LMHeadModel(config)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith(".bias"):
                parameter.copy_(0.1 * torch.randn_like(parameter))
            elif ".ln_" in name or "ln_f" in name:
                parameter.copy_(1.0 + 0.1 * torch.randn_like(parameter))
    model.eval()
    model.save_pretrained(out_dir, safe_serialization=True)

    generator = torch.Generator().manual_seed(SEED + 1)
    ids = torch.randint(0, config.vocab_size, (BATCH, TOKENS), generator=generator)
    with torch.no_grad():
        logits = model(input_ids=ids[:, :-1]).logits.float()
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, config.vocab_size), ids[:, 1:].reshape(-1))
    reference = {
        "comment": "transformers' fp32 loss of GPT2LMHeadModel (eval mode) on this batch: the "
                   "mean cross entropy of predicting tokens[:, 1:] from tokens[:, :-1]",
        "tokens": ids.tolist(),
        "loss": float(loss.item()),
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "seed": SEED,
    }
    with open(os.path.join(out_dir, "reference_loss.json"), "w") as f:
        json.dump(reference, f, indent=1)
        f.write("\n")
    print(f"loss {reference['loss']!r}, transformers {transformers.__version__}")


if __name__ == "__main__":
    main(sys.argv[1])
