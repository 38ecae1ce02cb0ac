"""GPT-2's byte-level BPE as the two references build it from ./setup.sh's files.

Shared by gpt2_bpe_check.py (the parity test) and gpt2_bpe_speed.py (the benchmark), so that
the encoders the benchmark times are the ones the parity test holds data::Gpt2BpeTokenizer to.
GPT2_DIR holds gpt2-vocab.json, gpt2-merges.txt and gpt2.tiktoken (.deps/gpt2). Needs no
network.
"""
import base64
import os

# GPT-2's pre-tokenization pattern as tiktoken writes it for r50k_base and gpt2
# (tiktoken_ext/openai_public.py): equivalent to the original
#   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
EOD = "<|endoftext|>"


def tiktoken_encoding(folder):
    """A fresh tiktoken Encoding of the ranks file, GPT-2's pattern and <|endoftext|> = 50256."""
    import tiktoken

    ranks = {}
    with open(os.path.join(folder, "gpt2.tiktoken"), "rb") as f:
        for line in f:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return tiktoken.Encoding(name="gpt2", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                             special_tokens={EOD: 50256})


def hf_byte_level_bpe(folder):
    """A fresh `tokenizers` byte-level BPE of the vocab and merges: GPT-2's regex
    pre-tokenizer, the ByteLevel decoder, no special tokens (so "<|endoftext|>" in a text is
    ordinary text)."""
    import tokenizers
    from tokenizers import decoders, models, pre_tokenizers

    tok = tokenizers.Tokenizer(models.BPE.from_file(os.path.join(folder, "gpt2-vocab.json"),
                                                    os.path.join(folder, "gpt2-merges.txt")))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    return tok
