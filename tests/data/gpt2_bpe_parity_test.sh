#!/usr/bin/env bash
# data::Gpt2BpeTokenizer against Hugging Face's `tokenizers` and OpenAI's tiktoken: every
# document of the bundled corpus and of gpt2_bpe_adversarial.jsonl (whitespace, contractions,
# digits, accents, scripts, emoji, Unicode spaces, "<|endoftext|>" as text, 3,000-character
# words) must encode to the same ids in all three and decode back to its text. The GPT-2 files
# are ./setup.sh's .deps/gpt2 (@gpt2_bpe), the Python packages the wheels it unpacks into
# .deps/site-packages (@libtorch). Needs no network.
set -euo pipefail

runfiles=${RUNFILES_DIR:-$0.runfiles}
ws=$runfiles/${TEST_WORKSPACE:-varuna}
reference=$ws/tests/data/gpt2_bpe_reference
check=$ws/tests/data/gpt2_bpe_check.py
adversarial=$ws/tests/data/gpt2_bpe_adversarial.jsonl
corpus=$ws/data/corpus/fortunes.jsonl
gpt2=$runfiles/gpt2_bpe
site=$runfiles/libtorch
python=${PYTHON:-python3}

for package in tokenizers tiktoken regex; do
  if [[ ! -f "$site/$package/__init__.py" ]]; then
    echo "FAIL: no $package package in .deps/site-packages: run ./setup.sh (it unpacks the" \
      "pinned tokenizers, tiktoken and regex wheels)" >&2
    exit 1
  fi
done
# tiktoken's and regex's wheels are CPython 3.11 builds (Debian 12's python3).
if ! "$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
  echo "FAIL: $python is not Python 3.11, which the pinned tiktoken and regex wheels are built" \
    "for; run the test with PYTHON=/usr/bin/python3 (Debian 12's)" >&2
  exit 1
fi

tmp=${TEST_TMPDIR:-$(mktemp -d)}
"$reference" "$gpt2/gpt2-vocab.json" "$gpt2/gpt2-merges.txt" "$tmp/expected.jsonl" \
  "$corpus" "$adversarial"
if ! PYTHONPATH=$site PYTHONNOUSERSITE=1 "$python" -S "$check" "$gpt2" "$tmp/expected.jsonl"; then
  echo FAIL
  exit 1
fi
echo PASS
