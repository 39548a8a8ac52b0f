"""The tokenizer folder: what tools/train_tokenizer.py writes and tools/preprocess_data.py reads.

  tokenizer.json           the Hugging Face `tokenizers` model (byte-level BPE), read by both tools
  tokenizer_config.json    for transformers.AutoTokenizer: tokenizer_class PreTrainedTokenizerFast,
                           bos/eos/unk token "<|endoftext|>" (GPT-2's convention), no BOS added on encode
  special_tokens_map.json  the same special tokens, for transformers versions that read this file

The EOD id (what --append-eod appends, and what a model sees between documents) is the id of the
eos_token named in tokenizer_config.json. train_tokenizer puts "<|endoftext|>" first, so it is id 0.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

from . import ToolError

TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_FILE = "special_tokens_map.json"
DEFAULT_EOS = "<|endoftext|>"


def import_tokenizers():
    try:
        import tokenizers
    except ImportError:
        raise ToolError("the Python package `tokenizers` (Hugging Face) is not installed; run "
                        "`bash scripts/setup.sh` (or `python3 -m pip install tokenizers`)") from None
    return tokenizers


@dataclass
class TokenizerFolder:
    path: str
    tokenizer: object        # tokenizers.Tokenizer
    vocab_size: int          # including added/special tokens: len(AutoTokenizer.from_pretrained(path))
    eos_token: str | None
    eod_id: int | None       # id of eos_token


def _token_text(value) -> str | None:
    # transformers writes special tokens as strings or as {"content": "...", ...} (AddedToken).
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def load_tokenizer_folder(path: str) -> TokenizerFolder:
    tokenizers = import_tokenizers()
    if not os.path.isdir(path):
        raise ToolError(f"tokenizer folder {path} does not exist (train one with "
                        f"`python3 tools/train_tokenizer.py --input FILE --vocab-size N --output {path}`)")
    tokenizer_json = os.path.join(path, TOKENIZER_FILE)
    if not os.path.isfile(tokenizer_json):
        raise ToolError(f"tokenizer folder {path} has no {TOKENIZER_FILE}: --tokenizer-model must be a folder "
                        f"written by tools/train_tokenizer.py or a Hugging Face tokenizer folder with a fast "
                        f"tokenizer ({TOKENIZER_FILE})")
    try:
        tokenizer = tokenizers.Tokenizer.from_file(tokenizer_json)
    except Exception as e:  # the Rust side raises a plain Exception with its parse error
        raise ToolError(f"{tokenizer_json} is not a valid tokenizers file: {e}") from None
    eos = None
    config_path = os.path.join(path, CONFIG_FILE)
    if os.path.isfile(config_path):
        try:
            with open(config_path, encoding="utf-8") as f:
                eos = _token_text(json.load(f).get("eos_token"))
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as e:
            raise ToolError(f"{config_path} is not a valid JSON object: {e}") from None
    eod_id = tokenizer.token_to_id(eos) if eos is not None else None
    if eos is not None and eod_id is None:
        raise ToolError(f"{config_path} names eos_token {eos!r}, but {tokenizer_json} has no such token")
    return TokenizerFolder(path, tokenizer, tokenizer.get_vocab_size(with_added_tokens=True), eos, eod_id)


def write_tokenizer_folder(path: str, tokenizer, eos_token: str, extra_special_tokens: list[str]) -> list[str]:
    """Writes the three files; returns their paths."""
    special = {"bos_token": eos_token, "eos_token": eos_token, "unk_token": eos_token}
    if extra_special_tokens:
        special["additional_special_tokens"] = list(extra_special_tokens)
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **special,
        # Byte-level BPE decodes back to the exact text; transformers' default clean-up would not.
        "clean_up_tokenization_spaces": False,
        "add_bos_token": False,
        "add_eos_token": False,
    }
    files = [os.path.join(path, name) for name in (TOKENIZER_FILE, CONFIG_FILE, SPECIAL_TOKENS_FILE)]
    try:
        os.makedirs(path, exist_ok=True)
        tokenizer.save(files[0])
        for file, content in ((files[1], config), (files[2], special)):
            with open(file, "w", encoding="utf-8") as f:
                json.dump(content, f, indent=2, ensure_ascii=False)
                f.write("\n")
    except OSError as e:
        raise ToolError(f"cannot write the tokenizer to {path}: {e.strerror} (choose a writable --output)") from None
    return files
