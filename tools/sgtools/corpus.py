"""Reading text corpora: JSON lines (Megatron's input) and plain text, one document at a time.

Input files are read as bytes and each document is turned into text where it is used (in the worker
processes of preprocess_data), so errors name the file and line: `corpus.jsonl:12: not valid JSON`.

  FILE.jsonl (.json, .ndjson)  one JSON object per line; blank lines are skipped. A key holds a string,
                               or a list of strings (Megatron's sentence-split files: one sequence each).
  FILE.txt (.text, .md)        one document per paragraph (lines up to a blank line), or with
                               txt_document_per_file one document per file.
  Any of them may end in .gz.
"""
from __future__ import annotations

import gzip
import json
import os
import zlib
from dataclasses import dataclass
from typing import BinaryIO, Iterator

from . import ToolError

JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
TXT_SUFFIXES = (".txt", ".text", ".md")


@dataclass(frozen=True)
class Record:
    """One document as read from its file, not yet parsed (parsing runs in the worker processes)."""
    where: str       # "corpus.jsonl:12", "book.txt:30-41" (a paragraph's lines) or "book.txt"
    payload: bytes   # the JSON line, or the document's text, as UTF-8 bytes
    is_json: bool


def input_format(path: str) -> str:
    """'jsonl' or 'txt', from the file name (a trailing .gz is looked through)."""
    name = path[:-3] if path.endswith(".gz") else path
    lower = name.lower()
    if lower.endswith(JSONL_SUFFIXES):
        return "jsonl"
    if lower.endswith(TXT_SUFFIXES):
        return "txt"
    raise ToolError(f"input {path}: cannot tell its format from the name; use a name ending in "
                    f"{', '.join(JSONL_SUFFIXES)} (JSON lines) or {', '.join(TXT_SUFFIXES)} (plain text), "
                    f"optionally followed by .gz")


def check_inputs(paths: list[str]) -> int:
    """Fails with a clear message unless every input is a readable file of a known format.

    Returns the total size in bytes (compressed size for .gz inputs), for the progress bar."""
    total = 0
    for path in paths:
        if not os.path.exists(path):
            raise ToolError(f"input file {path} does not exist")
        if not os.path.isfile(path):
            raise ToolError(f"input {path} is not a regular file")
        if not os.access(path, os.R_OK):
            raise ToolError(f"input file {path} is not readable (check its permissions)")
        input_format(path)
        total += os.path.getsize(path)
    return total


def check_txt_keys(paths: list[str], json_keys: list[str]) -> None:
    """Plain text has one text per document: it is stored under the single --json-keys name."""
    if len(json_keys) != 1 and any(input_format(p) == "txt" for p in paths):
        raise ToolError(f"--json-keys names {len(json_keys)} keys ({' '.join(json_keys)}), but a .txt input "
                        f"has a single text per document; pass one key (default: text)")


def _open(path: str) -> BinaryIO:
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")


def _decode(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ToolError(f"{where}: not valid UTF-8 (byte {e.start} of the document); "
                        f"convert the file to UTF-8 first") from None


def read_records(paths: list[str], txt_document_per_file: bool = False) -> Iterator[Record]:
    """Yields the documents of all inputs in order (files in the order given).

    A file that cannot be read (a corrupt or truncated .gz, an I/O error) raises ToolError naming it."""
    for path in paths:
        fmt = input_format(path)
        try:
            with _open(path) as f:
                if fmt == "jsonl":
                    for line_no, line in enumerate(f, start=1):
                        if line.strip():
                            yield Record(f"{path}:{line_no}", line, True)
                elif txt_document_per_file:
                    text = f.read().rstrip(b"\r\n")
                    if text.strip():
                        yield Record(path, text, False)
                else:
                    yield from _paragraphs(path, f)
        except (OSError, EOFError, zlib.error) as e:
            raise _read_error(path, e) from None


def _read_error(path: str, e: Exception) -> ToolError:
    if path.endswith(".gz") and not (isinstance(e, OSError) and e.errno is not None):
        # gzip.BadGzipFile (not gzip data), EOFError (cut short), zlib.error (damaged data).
        return ToolError(f"{path}: not a valid gzip file ({e}); check it with `gzip -t {path}` and compress "
                         f"the text again, or give it uncompressed under a name without .gz")
    reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
    return ToolError(f"cannot read input {path}: {reason}")


def _paragraphs(path: str, f: BinaryIO) -> Iterator[Record]:
    lines: list[bytes] = []
    first = 0
    for line_no, line in enumerate(f, start=1):
        if line.strip():
            if not lines:
                first = line_no
            lines.append(line)
        elif lines:
            yield Record(f"{path}:{first}-{line_no - 1}", b"".join(lines).rstrip(b"\r\n"), False)
            lines = []
    if lines:
        yield Record(f"{path}:{first}-{first + len(lines) - 1}", b"".join(lines).rstrip(b"\r\n"), False)


def _json_type(value) -> str:
    names = {dict: "object", list: "array", str: "string", int: "number", float: "number", bool: "boolean"}
    return names.get(type(value), "null")


def document_texts(record: Record, json_keys: list[str]) -> dict[str, list[str]]:
    """The texts of one document per key: a list of one string, or several for a JSON list of strings."""
    if not record.is_json:
        return {json_keys[0]: [_decode(record.payload, record.where)]}
    text = _decode(record.payload, record.where)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise ToolError(f"{record.where}: not valid JSON ({e.msg} at column {e.colno}); each line of a "
                        f".jsonl file must be one JSON object such as {{\"text\": \"...\"}}") from None
    if not isinstance(obj, dict):
        raise ToolError(f"{record.where}: expected a JSON object such as {{\"text\": \"...\"}}, "
                        f"got a JSON {_json_type(obj)}")
    out: dict[str, list[str]] = {}
    for key in json_keys:
        if key not in obj:
            present = ", ".join(repr(k) for k in list(obj)[:10]) or "none"
            raise ToolError(f"{record.where}: no key {key!r} in this JSON object (its keys: {present}); "
                            f"name the text's key with --json-keys")
        value = obj[key]
        if isinstance(value, str):
            out[key] = [value]
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            out[key] = value
        else:
            raise ToolError(f"{record.where}: key {key!r} holds a JSON {_json_type(value)}; "
                            f"expected a string (or an array of strings)")
    return out
