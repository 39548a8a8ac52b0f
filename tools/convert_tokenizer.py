#!/usr/bin/env python3
"""Convert Megatron-LM's GPT2BPETokenizer files (vocab.json + merges.txt) into a tokenizer folder (offline).

  python3 tools/convert_tokenizer.py --vocab-file gpt2-vocab.json --merge-file gpt2-merges.txt --output tok/

writes tok/tokenizer.json, tok/tokenizer_config.json and tok/special_tokens_map.json: the same byte-level BPE
(GPT-2's pre-tokenization and byte alphabet, the merges ranked in their file order, the ids of the vocab
file), which stepgraph reads (tokenizer.tokenizer_type=HuggingFaceTokenizer tokenizer.tokenizer_model=tok),
tools/preprocess_data.py tokenizes with and transformers.AutoTokenizer loads. The ids are the vocab file's, so
a dataset Megatron-LM's tools/preprocess_data.py made with these files is a dataset of this folder.

The end-of-document (EOD) token is "<|endoftext|>", Megatron's eod (also the folder's bos, eos and unk token,
GPT-2's convention); --eos-token names another. It must be in the vocabulary. One difference from Megatron's
encoder: text that spells the EOD token literally becomes that one token here (as with transformers'
GPT2Tokenizer), where Megatron's encoder splits it into pieces.

--output must not hold a tokenizer already; --force replaces it. The files are written under temporary names
and renamed into place only when all are complete, so a full disk or a crash leaves the folder as it was.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex

from sgtools import ToolError, run_tool
from sgtools.tokenizer_files import (DEFAULT_EOS, add_output_arguments, check_output_folder, import_tokenizers,
                                     write_tokenizer_folder)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="convert_tokenizer.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vocab-file", required=True, metavar="FILE",
                   help="GPT-2's vocab.json: a JSON object {token: id} (Megatron-LM's --vocab-file)")
    p.add_argument("--merge-file", required=True, metavar="FILE",
                   help="GPT-2's merges.txt: one merge 'a b' a line, highest priority first, after an optional "
                        "'#version' line (Megatron-LM's --merge-file)")
    add_output_arguments(p)
    p.add_argument("--eos-token", default=DEFAULT_EOS, metavar="TOKEN",
                   help=f"end-of-document token, in the vocabulary (default: {DEFAULT_EOS}, Megatron's eod)")
    return p.parse_args(argv)


def read_vocab(path: str) -> dict[str, int]:
    try:
        with open(path, encoding="utf-8") as f:
            vocab = json.load(f)
    except OSError as e:
        raise ToolError(f"--vocab-file {path}: {e.strerror or e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ToolError(f"--vocab-file {path} is not JSON ({e}); give GPT-2's vocab.json") from None
    if not isinstance(vocab, dict) or not vocab:
        raise ToolError(f"--vocab-file {path} holds no {{token: id}} object; give GPT-2's vocab.json")
    owner: dict[int, str] = {}
    for token, i in vocab.items():
        if not isinstance(i, int) or isinstance(i, bool) or i < 0:
            raise ToolError(f"--vocab-file {path}: token {token!r} has id {i!r}; every id must be an integer >= 0")
        if i in owner:
            raise ToolError(f"--vocab-file {path}: id {i} belongs to both {owner[i]!r} and {token!r}")
        owner[i] = token
    return vocab


def read_merges(path: str, vocab: dict[str, int]) -> list[tuple[str, str]]:
    """The merges in rank order; each pair and its result must be tokens of the vocabulary (file:line otherwise)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
    except OSError as e:
        raise ToolError(f"--merge-file {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise ToolError(f"--merge-file {path} is not UTF-8 text ({e}); give GPT-2's merges.txt") from None
    merges = []
    for number, line in enumerate(lines, start=1):
        if not line or (number == 1 and line.startswith("#version")):
            continue
        parts = line.split(" ")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise ToolError(f"{path}:{number}: {line!r} is not a merge 'a b' (two tokens and one space)")
        for token in (parts[0], parts[1], parts[0] + parts[1]):
            if token not in vocab:
                raise ToolError(f"{path}:{number}: the merge {line!r} needs {token!r}, which --vocab-file does "
                                f"not hold: the two files are not one tokenizer's")
        merges.append((parts[0], parts[1]))
    if not merges:
        raise ToolError(f"--merge-file {path} holds no merges; give GPT-2's merges.txt")
    return merges


def build_tokenizer(tokenizers, vocab: dict[str, int], merges: list[tuple[str, str]], eos_token: str):
    from tokenizers import decoders, models, pre_tokenizers, processors
    tokenizer = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=merges))
    # GPT-2's byte-level scheme, as tools/train_tokenizer.py writes it: no prefix space, so decode(encode(text))
    # gives the text back exactly.
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    tokenizer.add_special_tokens([eos_token])  # already in the vocabulary: keeps its id
    return tokenizer


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if os.path.exists(args.output) and not os.path.isdir(args.output):
        raise ToolError(f"--output {args.output} exists and is not a folder")
    check_output_folder(args.output, args.force)
    vocab = read_vocab(args.vocab_file)
    merges = read_merges(args.merge_file, vocab)
    if args.eos_token not in vocab:
        raise ToolError(f"--eos-token {args.eos_token!r} is not in --vocab-file {args.vocab_file}: name the "
                        f"vocabulary's end-of-document token with --eos-token")
    tokenizers = import_tokenizers()
    tokenizer = build_tokenizer(tokenizers, vocab, merges, args.eos_token)
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    if size != max(vocab.values()) + 1 or tokenizer.token_to_id(args.eos_token) != vocab[args.eos_token]:
        raise ToolError(f"the converted tokenizer has {size} ids and EOD id {tokenizer.token_to_id(args.eos_token)}, "
                        f"the vocab file {max(vocab.values()) + 1} and {vocab[args.eos_token]}: not converted")
    files = write_tokenizer_folder(args.output, tokenizer, args.eos_token, [])
    print(f"convert_tokenizer: byte-level BPE from {args.vocab_file} and {args.merge_file}")
    print(f"  vocabulary:  {size:,} ids ({len(vocab):,} tokens), {len(merges):,} merges")
    print(f"  EOD:         {args.eos_token} = id {vocab[args.eos_token]}")
    print(f"  wrote:       {', '.join(files)}")
    print(f"  next:        use it as tokenizer.tokenizer_type=HuggingFaceTokenizer "
          f"tokenizer.tokenizer_model={shlex.quote(args.output)} (datasets Megatron-LM made with these files "
          f"keep their ids); new text: tools/preprocess_data.py --tokenizer-type HuggingFaceTokenizer "
          f"--tokenizer-model {shlex.quote(args.output)}")
    return 0


if __name__ == "__main__":
    run_tool(main, "no tokenizer written")
