#!/usr/bin/env python3
"""GPT-2 BPE encoding speed of tiktoken and Hugging Face's `tokenizers`, one thread each.

    gpt2_bpe_speed.py GPT2_DIR TEXTS REPEATS

The Python side of //tests/data:preprocess_benchmark, which runs it as a subprocess and prints
its rows in its table. GPT2_DIR holds gpt2-vocab.json, gpt2-merges.txt and gpt2.tiktoken
(./setup.sh's .deps/gpt2); TEXTS holds the documents' texts as preprocess_benchmark read them,
each as its length in bytes (decimal), a newline and its UTF-8 bytes.
Each encoder is built the way gpt2_bpe_check.py builds it (the parity test's references, so
they give the C++ tokenizer's ids), afresh for every repeat so no cache is warm, and only the
encoding is timed, after the texts are read:
  - tiktoken: an Encoding of the ranks file with GPT-2's pattern, encode_ordinary per text;
  - tokenizers, encode_batch: one call over all texts, on one thread (RAYON_NUM_THREADS=1 and
    TOKENIZERS_PARALLELISM=false, set before the import);
  - tokenizers, encode: one call per text.
Prints one tab-separated line per encoder on stdout,
    row <TAB> name <TAB> median seconds <TAB> text bytes (UTF-8) <TAB> tokens <TAB> CPU/wall
(CPU/wall: the process's CPU time over the wall time, about 1 on one thread), after a line
    versions <TAB> tiktoken X <TAB> tokenizers Y
Exits 2 on a bad command line, 1 if an encoder gives a different number of tokens in two
repeats. Needs no network.
"""
import os
import statistics
import sys
import time

# One thread for `tokenizers` (Rust's rayon pool); read when the package is imported.
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_references  # noqa: E402  (beside this file)


def tiktoken_encoder(folder):
    """A fresh tiktoken Encoding's encode_ordinary, and the package's version."""
    import tiktoken

    return gpt2_references.tiktoken_encoding(folder).encode_ordinary, tiktoken.__version__


def hugging_face_tokenizer(folder):
    """A fresh `tokenizers` byte-level BPE of the vocab and merges, and the package's version."""
    import tokenizers

    return gpt2_references.hf_byte_level_bpe(folder), tokenizers.__version__


def tiktoken_run(folder, texts):
    encode, _ = tiktoken_encoder(folder)
    start = time.perf_counter(), time.process_time()
    tokens = sum(len(encode(text)) for text in texts)
    return time.perf_counter() - start[0], time.process_time() - start[1], tokens


def hf_batch_run(folder, texts):
    tok, _ = hugging_face_tokenizer(folder)
    start = time.perf_counter(), time.process_time()
    tokens = sum(len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False))
    return time.perf_counter() - start[0], time.process_time() - start[1], tokens


def hf_single_run(folder, texts):
    tok, _ = hugging_face_tokenizer(folder)
    start = time.perf_counter(), time.process_time()
    tokens = sum(len(tok.encode(text, add_special_tokens=False).ids) for text in texts)
    return time.perf_counter() - start[0], time.process_time() - start[1], tokens


def read_texts(path):
    """The texts of TEXTS: "<bytes>\\n<text>" after one another."""
    with open(path, "rb") as f:
        data = f.read()
    texts, at = [], 0
    while at < len(data):
        newline = data.index(b"\n", at)
        size = int(data[at:newline])
        texts.append(data[newline + 1:newline + 1 + size].decode("utf-8"))
        at = newline + 1 + size
    return texts


def main(argv):
    if len(argv) != 4 or not argv[3].isdigit() or int(argv[3]) < 1:
        print(__doc__, file=sys.stderr)
        return 2
    folder, texts_file, repeats = argv[1], argv[2], int(argv[3])
    texts = read_texts(texts_file)
    text_bytes = sum(len(text.encode("utf-8")) for text in texts)
    print(f"versions\ttiktoken {tiktoken_encoder(folder)[1]}\t"
          f"tokenizers {hugging_face_tokenizer(folder)[1]}", flush=True)
    for name, run in (("tiktoken encode_ordinary", tiktoken_run),
                      ("tokenizers encode_batch", hf_batch_run),
                      ("tokenizers encode", hf_single_run)):
        results = [run(folder, texts) for _ in range(repeats)]
        counts = {tokens for _, _, tokens in results}
        if len(counts) != 1:
            print(f"{name} gave different token counts in {repeats} repeats: {sorted(counts)}",
                  file=sys.stderr)
            return 1
        wall = statistics.median(w for w, _, _ in results)
        cpu = sum(c for _, c, _ in results) / sum(w for w, _, _ in results)
        print(f"row\t{name}\t{wall:.6f}\t{text_bytes}\t{counts.pop()}\t{cpu:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
