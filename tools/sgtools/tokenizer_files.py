"""The tokenizer folder: what tools/train_tokenizer.py and tools/convert_tokenizer.py write and
tools/preprocess_data.py reads.

  tokenizer.json           the Hugging Face `tokenizers` model (byte-level BPE), read by both tools
  tokenizer_config.json    for transformers.AutoTokenizer: tokenizer_class PreTrainedTokenizerFast,
                           bos/eos/unk token "<|endoftext|>" (GPT-2's convention), no BOS added on encode
  special_tokens_map.json  the same special tokens, for transformers versions that read this file

The EOD id (what --append-eod appends, and what a model sees between documents) is the id of the
eos_token that tokenizer_config.json names, else the one special_tokens_map.json names (a layout
transformers writes): the order stepgraph's trainer reads them in (src/data/hf_tokenizer.cpp). A key
that is absent, null or not a token counts as not naming one. train_tokenizer puts "<|endoftext|>"
first, so it is id 0.

write_tokenizer_folder writes each file under a temporary name in the folder, syncs it to disk, and
renames them into place only when all three are complete: a full disk, an error or a signal leaves the
folder as it was (an earlier tokenizer included) and no temporary file behind.
"""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass

from . import ToolError

TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_FILE = "special_tokens_map.json"
DEFAULT_EOS = "<|endoftext|>"
# Other files of a tokenizer folder that hold a vocabulary (data::kTokenizerFiles, less the chat templates):
# beside a new tokenizer.json they would describe another tokenizer, and checkpoints copy them.
OTHER_TOKENIZER_FILES = ("added_tokens.json", "tokenizer.model", "vocab.json", "merges.txt", "vocab.txt",
                         "spiece.model", "sentencepiece.bpe.model")


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
    eos_source: str | None   # the file that names eos_token
    # tokenizer_config.json's clean_up_tokenization_spaces (absent: False, transformers' default): decoded text gets
    # clean_up_tokenization, as transformers' decode gives it
    clean_up_tokenization_spaces: bool = False


def _token_text(value) -> str | None:
    # transformers writes special tokens as strings or as {"content": "...", ...} (AddedToken).
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def open_tokenizer_file(tokenizer_json: str):
    """The tokenizers.Tokenizer of a tokenizer.json, with any truncation or padding it saved turned off.

    A tokenizer.json written after enable_truncation / enable_padding keeps them, and the raw library applies them:
    documents would be cut to max_length, or pad ids written as text. transformers' tokenizer (Megatron's
    HuggingFaceTokenizer) turns both off on a default call, so the tools encode as it does."""
    tokenizer = import_tokenizers().Tokenizer.from_file(tokenizer_json)
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def load_tokenizer_folder(path: str) -> TokenizerFolder:
    import_tokenizers()  # a missing package is said first
    if not os.path.isdir(path):
        raise ToolError(f"tokenizer folder {path} does not exist (train one with "
                        f"`python3 tools/train_tokenizer.py --input FILE --vocab-size N --output {path}`)")
    tokenizer_json = os.path.join(path, TOKENIZER_FILE)
    if not os.path.isfile(tokenizer_json):
        raise ToolError(f"tokenizer folder {path} has no {TOKENIZER_FILE}: give a folder written by "
                        f"tools/train_tokenizer.py or a Hugging Face tokenizer folder with a fast tokenizer "
                        f"({TOKENIZER_FILE})")
    try:
        tokenizer = open_tokenizer_file(tokenizer_json)
    except Exception as e:  # the Rust side raises a plain Exception with its parse error
        raise ToolError(f"{tokenizer_json} is not a valid tokenizers file: {e}") from None
    eos, source = None, None
    for name in (CONFIG_FILE, SPECIAL_TOKENS_FILE):  # hf_tokenizer.cpp's order
        source = os.path.join(path, name)
        eos = special_token_in(source, "eos_token")
        if eos is not None:
            break
    # token_to_id looks at the added tokens, then the model's vocabulary, as transformers does.
    eod_id = tokenizer.token_to_id(eos) if eos is not None else None
    if eos is not None and eod_id is None:
        raise ToolError(f"{source} names eos_token {eos!r}, but {tokenizer_json} has no such token; correct the "
                        f"name, or add the token to its added_tokens")
    clean_up = json_object_in(os.path.join(path, CONFIG_FILE)).get("clean_up_tokenization_spaces") is True
    return TokenizerFolder(path, tokenizer, tokenizer.get_vocab_size(with_added_tokens=True), eos, eod_id,
                           source if eos is not None else None, clean_up)


# transformers' clean-up of decoded text (PreTrainedTokenizerBase.clean_up_tokenization): the space a word-level
# tokenization left before punctuation and English contractions, removed in this order.
CLEAN_UP_REPLACEMENTS = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                         (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


def clean_up_tokenization(text: str) -> str:
    for before, after in CLEAN_UP_REPLACEMENTS:
        text = text.replace(before, after)
    return text


def special_token_in(path: str, key: str) -> str | None:
    """The special token `key` the JSON file at `path` names; None when the file or the key is absent, or
    the key is null or not a token (as special_token_in in src/data/hf_tokenizer.cpp)."""
    return _token_text(json_object_in(path).get(key))


def json_object_in(path: str) -> dict:
    """The JSON object in the file at `path`; {} when the file is absent; ToolError naming it when it is not one."""
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ToolError(f"{path} is not valid JSON ({e}); correct it, or remove it") from None
    except OSError as e:
        raise ToolError(f"cannot read {path}: {e.strerror}") from None
    if not isinstance(obj, dict):
        raise ToolError(f"{path} is not a JSON object; correct it, or remove it")
    return obj


def add_output_arguments(p) -> None:
    """--output and --force of a tool that writes a tokenizer folder (checked by check_output_folder)."""
    p.add_argument("--output", required=True, metavar="DIR",
                   help="folder to write the tokenizer files into; refused when it already holds tokenizer "
                        "files, unless --force")
    p.add_argument("--force", action="store_true",
                   help=f"replace the tokenizer in --output ({TOKENIZER_FILE}, {CONFIG_FILE}, "
                        f"{SPECIAL_TOKENS_FILE}); datasets made with the old one no longer match it")


def check_output_folder(path: str, force: bool) -> None:
    """Refuses to replace a tokenizer without --force: datasets made with it would silently disagree with
    the new one. Other tokenizers' files (vocab.json, tokenizer.model, ...) are refused even with --force:
    they would stay beside the new tokenizer, and checkpoints copy them."""
    if not os.path.isdir(path):
        return
    ours = [n for n in (TOKENIZER_FILE, CONFIG_FILE, SPECIAL_TOKENS_FILE) if os.path.lexists(os.path.join(path, n))]
    others = [n for n in OTHER_TOKENIZER_FILES if os.path.lexists(os.path.join(path, n))]
    if others:
        raise ToolError(f"--output {path} holds another tokenizer's files ({', '.join(ours + others)}); "
                        f"{', '.join(others)} would stay beside the new tokenizer (checkpoints copy them): "
                        f"choose a new folder, or remove them first")
    if ours and not force:
        raise ToolError(f"--output {path} already holds a tokenizer ({', '.join(ours)}); datasets made with it "
                        f"would no longer match: choose a new folder, or pass --force to replace it")


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
    contents = {
        # What tokenizer.save(path) writes (pretty JSON), written here so every error is an OSError.
        TOKENIZER_FILE: tokenizer.to_str(pretty=True),
        CONFIG_FILE: json.dumps(config, indent=2, ensure_ascii=False) + "\n",
        SPECIAL_TOKENS_FILE: json.dumps(special, indent=2, ensure_ascii=False) + "\n",
    }
    return write_files_atomically(path, contents)


def write_files_atomically(folder: str, contents: dict[str, str]) -> list[str]:
    """Writes folder/NAME for each NAME: text, all or none: temporary files first (synced to disk), then
    renamed into place. On any failure, a signal included, the temporary files are removed and the
    folder keeps what it held; an OSError becomes one ToolError line. Returns the paths written."""
    temps: dict[str, str] = {}
    replaced: list[str] = []
    try:
        os.makedirs(folder, exist_ok=True)
        for name, text in contents.items():
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
            temps[name] = tmp
            with open(fd, "w", encoding="utf-8", newline="") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())  # a full disk may only show here
        for name, tmp in temps.items():
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; the files are meant to be shared
        for name in list(temps):
            os.replace(temps.pop(name), os.path.join(folder, name))
            replaced.append(name)
        _fsync_folder(folder)
    except BaseException as e:
        for tmp in temps.values():
            try:
                os.remove(tmp)
            except OSError:
                pass
        if isinstance(e, OSError):
            changed = (f"{', '.join(replaced)} replaced already, the rest not: write it again" if replaced
                       else "nothing in it was changed")
            raise ToolError(f"cannot write the tokenizer to {folder}: {e.strerror or e} ({changed}); free "
                            f"space or choose a writable --output") from None
        raise
    return [os.path.join(folder, name) for name in contents]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_folder(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems cannot sync a folder; the files themselves are synced
    finally:
        os.close(fd)
