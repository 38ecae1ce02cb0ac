#!/usr/bin/env bash
# tokenizer.json against our C++ tokenizers on the whole bundled corpus: for a BPE and a unigram
# SentencePiece model trained like //data:train_tokenizer's, and for GPT-2's byte-level BPE
# (data::Gpt2BpeTokenizer), every
# document, and every text of hf_tokenizer_reference's kSpecialTexts (text that spells "</s>",
# "<|endoftext|>", "<0x41>", ...), must encode to the C++ tokenizer's ids and decode to its text
# with Hugging Face's own `tokenizers` (the wheel ./setup.sh unpacks into .deps/site-packages),
# both as tokenizer.json loads and as transformers sets it up (hf_tokenizer_check.py). Needs no
# network. Fails if any id differs, except, for unigram, where two segmentations score exactly
# the same (float32 rounding in SentencePiece picks one, float64 in tokenizers the other; see
# hf_tokenizer_check.py).
set -euo pipefail

runfiles=${RUNFILES_DIR:-$0.runfiles}
ws=$runfiles/${TEST_WORKSPACE:-varuna}
reference=$ws/tests/tools/export_hf/hf_tokenizer_reference
check=$ws/tests/tools/export_hf/hf_tokenizer_check.py
corpus=$ws/data/corpus/fortunes.jsonl
gpt2=$runfiles/gpt2_bpe
site=$runfiles/libtorch
python=${PYTHON:-python3}

if [[ ! -f "$site/tokenizers/__init__.py" ]]; then
  echo "FAIL: no tokenizers package in .deps/site-packages: run ./setup.sh (it unpacks the" \
    "pinned tokenizers==0.22.1 wheel)" >&2
  exit 1
fi
# The model types: "bpe unigram" (train_tokenizer's identity normalization) and "gpt2" (GPT-2's
# files) or, from the command line, e.g. "bpe-nfkc unigram-nfkc" (nmt_nfkc, extra whitespace
# removed).
types=("$@")
((${#types[@]})) || types=(bpe unigram gpt2)
tmp=${TEST_TMPDIR:-$(mktemp -d)}
# One model type per core: the two run side by side, each logging to its own file.
check_type() {
  local type=$1 out=$tmp/$1
  local ties=()
  [[ $type == unigram* ]] && ties=(--unigram-ties-ok) # see hf_tokenizer_check.py
  mkdir -p "$out"
  if [[ $type == gpt2 ]]; then
    "$reference" "$corpus,$ws/tests/data/gpt2_bpe_adversarial.jsonl" "$out" --gpt2 \
      "$gpt2/gpt2-vocab.json" \
      "$gpt2/gpt2-merges.txt"
  else
    "$reference" "$corpus" "$out" "$type" 4096
  fi &&
    PYTHONPATH=$site PYTHONNOUSERSITE=1 "$python" -S "$check" "$out" "$out/expected.jsonl" \
      "${ties[@]}"
}
pids=()
for type in "${types[@]}"; do
  check_type "$type" > "$tmp/$type.log" 2>&1 &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
for type in "${types[@]}"; do
  echo "== $type"
  cat "$tmp/$type.log"
done
((status == 0)) || { echo FAIL; exit 1; }
echo PASS
