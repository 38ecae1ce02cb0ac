#!/usr/bin/env python3
"""Checks a Hugging Face tokenizer against SentencePiece's reference ids.

    hf_tokenizer_check.py TOKENIZER_DIR EXPECTED_JSONL [--transformers]

TOKENIZER_DIR holds tokenizer.json and tokenizer_config.json (an export folder, or
hf_tokenizer_reference's OUT_DIR); EXPECTED_JSONL is hf_tokenizer_reference's expected.jsonl.
For every document the tokenizer must give exactly the C++ tokenizer's ids (SentencePiece's or
GPT-2 BPE's; no special tokens added) and decode them to exactly its decoding. Text that spells
a special token ("</s>", "<|endoftext|>") must stay text, as in the training data.

By default it loads tokenizer.json with the `tokenizers` library alone, and checks it twice:
as Tokenizer.from_file loads it, and as transformers' fast tokenizer sets it up (the special
tokens of tokenizer_config.json's added_tokens_decoder added as special tokens, and
encode_special_tokens from its "split_special_tokens", which must be true).
--transformers loads the folder with transformers' AutoTokenizer.from_pretrained instead and
also checks it is a fast tokenizer whose size and special tokens match tokenizer.json.
Prints the first mismatches and exits 1 if any document differs, 0 if all match.

--unigram-ties-ok: for a unigram model, a document whose ids differ still passes if both
segmentations have the same total score (within 1e-4 per token) and decode to the same text:
SentencePiece sums the scores of a segmentation in float32 and `tokenizers` in float64, so
where two segmentations score exactly the same (e.g. "__" "_" against "_" "__"), rounding
picks one in SentencePiece and the other in `tokenizers`. Such ties are counted and printed.
"""
import json
import os
import sys


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    use_transformers = "--transformers" in argv[1:]
    ties_ok = "--unigram-ties-ok" in argv[1:]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    folder, expected_path = args
    if use_transformers:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(folder)
        if not tok.is_fast:
            print(f"FAIL: AutoTokenizer loaded {type(tok).__name__}, not a fast tokenizer")
            return 1
        with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
            size = len(json.load(f)["model"]["vocab"])
        print(f"AutoTokenizer: {type(tok).__name__}, {len(tok)} entries, eos {tok.eos_token!r}="
              f"{tok.eos_token_id}, bos {tok.bos_token!r}={tok.bos_token_id}, unk "
              f"{tok.unk_token!r}={tok.unk_token_id}, pad {tok.pad_token!r}={tok.pad_token_id}")
        if len(tok) != size:
            print(f"FAIL: AutoTokenizer has {len(tok)} entries, tokenizer.json {size}")
            return 1
        encode = lambda text: tok(text, add_special_tokens=False)["input_ids"]
        decode = lambda ids: tok.decode(ids, skip_special_tokens=False,
                                        clean_up_tokenization_spaces=False)
        return check(folder, expected_path, encode, decode, ties_ok)
    import tokenizers

    tok = tokenizers.Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    print(f"tokenizers {tokenizers.__version__}: {tok.get_vocab_size()} entries")
    encode = lambda text: tok.encode(text, add_special_tokens=False).ids
    decode = lambda ids: tok.decode(ids, skip_special_tokens=False)
    status = check(folder, expected_path, encode, decode, ties_ok)

    # As transformers' PreTrainedTokenizerFast sets the tokenizer up from tokenizer_config.json.
    with open(os.path.join(folder, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    if config.get("split_special_tokens") is not True:
        print("FAIL: tokenizer_config.json lacks \"split_special_tokens\": true")
        return 1
    added = config.get("added_tokens_decoder", {})
    specials = {int(i): t["content"] for i, t in added.items() if t.get("special")}
    for name in ("bos_token", "eos_token", "unk_token", "pad_token"):
        if name in config and config[name] not in specials.values():
            print(f"FAIL: tokenizer_config.json's {name} {config[name]!r} is not a special token "
                  "of its added_tokens_decoder")
            return 1
    tok.add_special_tokens([tokenizers.AddedToken(content, special=True, normalized=False)
                            for _, content in sorted(specials.items())])
    for i, content in specials.items():
        if tok.token_to_id(content) != i:
            print(f"FAIL: special token {content!r} has id {tok.token_to_id(content)}, "
                  f"tokenizer_config.json says {i}")
            return 1
    tok.encode_special_tokens = True
    print(f"as transformers sets it up: {len(specials)} special tokens, split_special_tokens")
    status |= check(folder, expected_path, encode, decode, ties_ok)
    # And decode(skip_special_tokens=True) drops them, as the C++ tokenizers' Decode does.
    eos = config["eos_token"]
    text, want = (tok.decode(encode("a b") + [tok.token_to_id(eos)] + encode("c")),
                  tok.decode(encode("a b") + encode("c")))
    if text != want:
        print(f"FAIL: decoding 'a b', {eos}, 'c' skipping special tokens gives {text!r}, "
              f"not {want!r}")
        return 1
    return status


def check(folder, expected_path, encode, decode, ties_ok):
    """Encodes and decodes every document of expected_path; 0 if all match, else 1."""
    with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
        model = json.load(f)["model"]
    scores = [score for _, score in model["vocab"]] if model["type"] == "Unigram" else None
    if ties_ok and scores is None:
        print("FAIL: --unigram-ties-ok given for a", model["type"], "model")
        return 1

    def is_tie(got, want, text):
        if not ties_ok or decode(got) != text:
            return False
        return abs(sum(scores[i] for i in got) - sum(scores[i] for i in want)) <= 1e-4 * len(want)

    documents = tokens = id_mismatches = text_mismatches = ties = 0
    with open(expected_path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            doc = json.loads(line)
            documents += 1
            tokens += len(doc["ids"])
            got = encode(doc["text"])
            if got != doc["ids"] and is_tie(got, doc["ids"], doc["decoded"]):
                ties += 1
            elif got != doc["ids"]:
                id_mismatches += 1
                if id_mismatches <= 5:
                    first = next((i for i, (a, b) in enumerate(zip(got, doc["ids"])) if a != b),
                                 min(len(got), len(doc["ids"])))
                    print(f"document {number}: ids differ from token {first}: "
                          f"c++ {doc['ids'][first:first + 8]}, "
                          f"hugging face {got[first:first + 8]} (text {doc['text'][:60]!r})")
            text = decode(doc["ids"])
            if text != doc["decoded"]:
                text_mismatches += 1
                if text_mismatches <= 5:
                    print(f"document {number}: decoding differs: c++ "
                          f"{doc['decoded'][:80]!r}, hugging face {text[:80]!r}")
    print(f"{documents} documents, {tokens} tokens: {id_mismatches} with other ids, "
          f"{text_mismatches} decoded differently"
          + (f", {ties} equal-score ties segmented differently" if ties_ok else ""))
    if documents == 0:
        print("FAIL: no documents in", expected_path)
        return 1
    return 1 if id_mismatches or text_mismatches else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
