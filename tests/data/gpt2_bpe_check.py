#!/usr/bin/env python3
"""Checks data::Gpt2BpeTokenizer's ids against Hugging Face's `tokenizers` and OpenAI's tiktoken.

    gpt2_bpe_check.py GPT2_DIR EXPECTED_JSONL

GPT2_DIR holds gpt2-vocab.json, gpt2-merges.txt and gpt2.tiktoken (./setup.sh's .deps/gpt2);
EXPECTED_JSONL is gpt2_bpe_reference's output, one document per line with the C++ tokenizer's
"ids" and "decoded". Two references encode every "text" on their own:
  - `tokenizers`: a byte-level BPE built from the two files, GPT-2's regex pre-tokenizer
    (ByteLevel(add_prefix_space=False, use_regex=True)) and the ByteLevel decoder, with no
    special tokens, so "<|endoftext|>" in a text is ordinary text;
  - tiktoken: an Encoding of the ranks file with GPT-2's pattern (r50k_base's), encode_ordinary.
A document passes when all three give the same ids and all three decode them back to the text.
Also requires "Hello world" -> [15496, 995] from all three (the reference must contain it).
Prints the first differing documents with the three id lists and exits 1 if any document
fails, 0 if all pass, 2 on a bad command line. Needs no network.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_references  # noqa: E402  (beside this file)
HELLO_WORLD = ("Hello world", [15496, 995])
MAX_REPORTED = 5  # documents printed in full detail
MAX_IDS_SHOWN = 40


def hugging_face(folder):
    import tokenizers

    tok = gpt2_references.hf_byte_level_bpe(folder)
    print(f"tokenizers {tokenizers.__version__}: {tok.get_vocab_size()} entries")
    return (lambda text: tok.encode(text, add_special_tokens=False).ids,
            lambda ids: tok.decode(ids, skip_special_tokens=False))


def tiktoken_gpt2(folder):
    import tiktoken

    enc = gpt2_references.tiktoken_encoding(folder)
    print(f"tiktoken {tiktoken.__version__}: {enc.n_vocab} entries")
    # decode_bytes: a wrong split of a multi-byte character must not hide behind U+FFFD.
    return enc.encode_ordinary, lambda ids: enc.decode_bytes(ids).decode("utf-8", "replace")


def shown(ids, start):
    """ids[start:start + MAX_IDS_SHOWN] as text, marked where cut."""
    part = ids[start:start + MAX_IDS_SHOWN]
    return (f"[{'... ' if start else ''}{', '.join(map(str, part))}"
            f"{' ...' if start + MAX_IDS_SHOWN < len(ids) else ''}] ({len(ids)} ids)")


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    folder, expected_path = argv[1:]
    encoders = {"huggingface": hugging_face(folder), "tiktoken": tiktoken_gpt2(folder)}

    failures = []
    for name, (encode, _) in encoders.items():
        if encode(HELLO_WORLD[0]) != HELLO_WORLD[1]:
            failures.append(f"{name} encodes {HELLO_WORLD[0]!r} as {encode(HELLO_WORLD[0])}, "
                            f"expected {HELLO_WORLD[1]}")
    documents = tokens = id_mismatches = text_mismatches = 0
    hello_seen = False
    with open(expected_path, encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            where = f"{doc['source']} document {doc['document']}"
            text, want = doc["text"], doc["ids"]
            documents += 1
            tokens += len(want)
            if text == HELLO_WORLD[0]:
                hello_seen = True
                if want != HELLO_WORLD[1]:
                    failures.append(f"C++ encodes {text!r} as {want}, expected {HELLO_WORLD[1]}")
            got = {name: encode(text) for name, (encode, _) in encoders.items()}
            if any(ids != want for ids in got.values()):
                id_mismatches += 1
                if id_mismatches <= MAX_REPORTED:
                    lists = [want] + list(got.values())
                    first = next((i for i in range(max(map(len, lists)))
                                  if len({tuple(l[i:i + 1]) for l in lists}) > 1), 0)
                    start = max(0, first - 5)
                    print(f"{where}: ids differ from token {first} (text {text[:80]!r}"
                          f"{'...' if len(text) > 80 else ''}):")
                    print(f"  c++          {shown(want, start)}")
                    for name, ids in got.items():
                        print(f"  {name:12} {shown(ids, start)}")
            decodings = {"c++": doc["decoded"]}
            decodings.update({name: decode(want) for name, (_, decode) in encoders.items()})
            wrong = {name: d for name, d in decodings.items() if d != text}
            if wrong:
                text_mismatches += 1
                if text_mismatches <= MAX_REPORTED:
                    print(f"{where}: decode(encode(text)) != text {text[:80]!r} for "
                          + ", ".join(f"{name} ({d[:80]!r})" for name, d in wrong.items()))
    if not hello_seen:
        failures.append(f"no document {HELLO_WORLD[0]!r} in {expected_path}")
    for failure in failures:
        print("FAIL:", failure)
    print(f"{documents} documents, {tokens} tokens: {id_mismatches} with ids that differ, "
          f"{text_mismatches} that do not decode back to their text")
    if documents == 0:
        print("FAIL: no documents in", expected_path)
        return 1
    return 1 if failures or id_mismatches or text_mismatches else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
