#!/usr/bin/env python3
"""Writes GPT-2's byte-level BPE files from the ranks file in openai-whisper's sdist.

    gpt2_bpe_files.py SDIST OUT_DIR

./setup.sh runs this on the pinned openai-whisper sdist (PyPI; sha256 checked by setup.sh),
which ships GPT-2's 50,256 BPE ranks as whisper/assets/gpt2.tiktoken, one line per token,
`base64(token bytes) rank` (rank = id). It writes into OUT_DIR (shared/formats.md section 4):

  gpt2.tiktoken     the ranks file itself (what tiktoken loads);
  gpt2-vocab.json   token string -> id, the strings being the token's bytes mapped through
                    GPT-2's bytes_to_unicode, plus "<|endoftext|>": 50256 (50,257 entries);
  gpt2-merges.txt   "#version: 0.2", then the 50,000 merges in rank order: the merge that makes
                    the token of rank r >= 256 is found by running BPE on its bytes with only
                    the ranks below r until no merge applies, which leaves exactly two parts
                    (the standard recovery of merges from tiktoken ranks).

The two derived files come out byte for byte as OpenAI's published encoder.json and vocab.bpe
(what Megatron's GPT2BPETokenizer and Hugging Face's gpt2 load); this script checks that
against the sha256s tiktoken itself pins for them (tiktoken_ext/openai_public.py), and the
ranks file against tiktoken's pin for r50k_base.tiktoken, and fails otherwise.

Licence: GPT-2's vocabulary is OpenAI's and MIT-licensed: the sdist it comes from is under the
MIT License (Copyright (c) 2022 OpenAI, its LICENSE file), and GPT-2's own repository
(github.com/openai/gpt-2) publishes encoder.json and vocab.bpe under its "Modified MIT
License", the MIT terms plus a request to use GPT-2 responsibly.

Standard library only; takes about a second. Idempotent: a file already holding the right
bytes is left alone, others are written atomically (a temporary file, then a rename).
Exit status 0 on success, 1 on an error (printed), 2 on a bad command line.
"""
import base64
import hashlib
import json
import os
import sys
import tarfile

ASSET = "whisper/assets/gpt2.tiktoken"
NUM_RANKS = 50256
EOD = "<|endoftext|>"

# sha256 of each output file, as pinned by tiktoken 0.14.0 (tiktoken_ext/openai_public.py):
# r50k_base.tiktoken, and GPT-2's encoder.json and vocab.bpe.
EXPECTED_SHA256 = {
    "gpt2.tiktoken": "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
    "gpt2-vocab.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
    "gpt2-merges.txt": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
}


class Error(Exception):
    pass


def bytes_to_unicode():
    """GPT-2's byte -> character map: printable bytes map to themselves, the 68 others (in
    increasing order) to U+0100, U+0101, ..."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def read_ranks(sdist):
    """The ranks file's bytes from the sdist."""
    try:
        with tarfile.open(sdist, "r:gz") as tar:
            members = [m for m in tar.getmembers() if m.isfile() and m.name.endswith("/" + ASSET)]
            if len(members) != 1:
                raise Error(f"{sdist} has {len(members)} members named */{ASSET}, expected 1")
            return tar.extractfile(members[0]).read()
    except (OSError, tarfile.TarError) as e:
        raise Error(f"cannot read {sdist} as a .tar.gz sdist: {e}") from e


def parse_ranks(data):
    """token bytes -> rank, checked to be ranks 0..NUM_RANKS-1, each once, 0..255 one byte."""
    ranks = {}
    for number, line in enumerate(data.splitlines(), 1):
        fields = line.split()
        try:
            if len(fields) != 2:
                raise ValueError
            token, rank = base64.b64decode(fields[0], validate=True), int(fields[1])
        except ValueError:  # binascii.Error is one
            raise Error(f"{ASSET} line {number}: expected 'base64 rank', got {line[:80]!r}")
        if token in ranks:
            raise Error(f"{ASSET} line {number}: token {token!r} appears twice")
        ranks[token] = rank
    if sorted(ranks.values()) != list(range(NUM_RANKS)):
        raise Error(f"{ASSET} has {len(ranks)} tokens; expected the ranks 0..{NUM_RANKS - 1} once each")
    if sorted(t for t, r in ranks.items() if r < 256) != [bytes([b]) for b in range(256)]:
        raise Error(f"{ASSET}: ranks 0..255 are not the 256 single bytes")
    return ranks


def merge_of(token, rank, ranks):
    """The two parts BPE joins to make `token`: BPE on its bytes with the ranks below `rank`."""
    parts = [bytes([b]) for b in token]
    while True:
        best = None  # (rank, index) of the adjacent pair merged next
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < rank and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            break
        i = best[1]
        parts[i:i + 2] = [parts[i] + parts[i + 1]]
    if len(parts) != 2:
        raise Error(f"the token {token!r} of rank {rank} is not the merge of two lower-ranked "
                    f"tokens (BPE with the lower ranks leaves {len(parts)} parts)")
    return parts


def gpt2_files(ranks_data):
    """File name -> bytes of the three files."""
    ranks = parse_ranks(ranks_data)
    to_unicode = bytes_to_unicode()
    text = lambda token: "".join(to_unicode[b] for b in token)
    by_rank = sorted(ranks, key=ranks.get)
    vocab = {text(token): ranks[token] for token in by_rank}
    vocab[EOD] = NUM_RANKS
    merges = [" ".join(text(p) for p in merge_of(token, ranks[token], ranks))
              for token in by_rank[256:]]
    # Spot checks with readable failures (the hashes below decide).
    for key, want in [("Ġworld", 995), ("Hello", 15496), ("Ġthe", 262), ("Ċ", 198), (EOD, 50256)]:
        if vocab.get(key) != want:
            raise Error(f"vocab[{key!r}] = {vocab.get(key)}, expected {want}")
    if merges[0] != "Ġ t":
        raise Error(f"the first merge is {merges[0]!r}, expected 'Ġ t'")
    # OpenAI's encoder.json is json.dumps' default output (ASCII, ", " and ": ").
    return {
        "gpt2.tiktoken": ranks_data,
        "gpt2-vocab.json": json.dumps(vocab).encode("ascii"),
        "gpt2-merges.txt": ("#version: 0.2\n" + "\n".join(merges) + "\n").encode("utf-8"),
    }


def write_if_changed(path, data):
    try:
        with open(path, "rb") as f:
            if f.read() == data:
                return
    except FileNotFoundError:
        pass
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    sdist, out_dir = argv[1], argv[2]
    try:
        files = gpt2_files(read_ranks(sdist))
        for name, data in files.items():
            got = hashlib.sha256(data).hexdigest()
            if got != EXPECTED_SHA256[name]:
                raise Error(f"{name} from {sdist} has sha256 {got}, expected "
                            f"{EXPECTED_SHA256[name]} (OpenAI's published file)")
        os.makedirs(out_dir, exist_ok=True)
        for name, data in files.items():
            write_if_changed(os.path.join(out_dir, name), data)
    except (Error, OSError) as e:
        print(f"gpt2_bpe_files.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
