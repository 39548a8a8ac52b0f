"""Reading text corpora: JSON lines (Megatron's input) and plain text, one document at a time.

Input files are read as bytes and each document is turned into text where it is used (in the worker
processes of preprocess_data), so errors name the file and line: `corpus.jsonl:12: not valid JSON`.

  FILE.jsonl (.json, .ndjson)  one JSON object per line; blank lines are skipped. A key holds a string,
                               or a list of strings (Megatron's sentence-split files: one sequence each).
  FILE.txt (.text, .md)        one document per paragraph (lines up to a blank line), or with
                               txt_document_per_file one document per file.
  Any of them may end in .gz. Suffixes are matched in any case (CORPUS.JSONL.GZ).

A UTF-8 byte order mark at the start of a file is dropped (as Python's utf-8-sig decoding does); texts
must be valid Unicode (a JSON escape of a lone surrogate, "\\ud800", is refused with its place). --input
names files, not patterns: `--input 'in/*.jsonl'` is refused with a hint to let the shell expand it, and a
file given twice is refused (its documents would be duplicated).
"""
from __future__ import annotations

import gzip
import json
import os
import zlib
from dataclasses import dataclass
from typing import Iterator

from . import ToolError

JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
TXT_SUFFIXES = (".txt", ".text", ".md")


@dataclass(frozen=True)
class Record:
    """One document as read from its file, not yet parsed (parsing runs in the worker processes)."""
    where: str       # "corpus.jsonl:12", "book.txt:30-41" (a paragraph's lines) or "book.txt"
    payload: bytes   # the JSON line, or the document's text, as UTF-8 bytes
    is_json: bool
    size: int = 0    # bytes of the input file read since the previous record (compressed bytes for .gz):
                     # what the progress bar counts against check_inputs' total


BOM = b"\xef\xbb\xbf"


def is_gzip(path: str) -> bool:
    return path.lower().endswith(".gz")


def input_format(path: str) -> str:
    """'jsonl' or 'txt', from the file name (a trailing .gz is looked through)."""
    lower = path.lower()
    if lower.endswith(".gz"):
        lower = lower[:-3]
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
    seen: dict[tuple[int, int], str] = {}
    for path in paths:
        if not os.path.exists(path):
            if any(c in path for c in "*?["):
                raise ToolError(f"input file {path} does not exist; the tool does not expand patterns "
                                f"(* ? [...]) itself: leave the pattern unquoted (--input {path}, not "
                                f"--input '{path}') so the shell expands it into file names")
            raise ToolError(f"input file {path} does not exist")
        if not os.path.isfile(path):
            raise ToolError(f"input {path} is not a regular file")
        if not os.access(path, os.R_OK):
            raise ToolError(f"input file {path} is not readable (check its permissions)")
        input_format(path)
        st = os.stat(path)
        same = seen.get((st.st_dev, st.st_ino))
        if same is not None:
            twice = "twice" if same == path else f"twice (as {same} and {path})"
            raise ToolError(f"input file {path} is given {twice}: its documents would be read twice; "
                            f"list each file once")
        seen[(st.st_dev, st.st_ino)] = path
        total += st.st_size
    return total


def check_txt_keys(paths: list[str], json_keys: list[str]) -> None:
    """Plain text has one text per document: it is stored under the single --json-keys name."""
    if len(json_keys) != 1 and any(input_format(p) == "txt" for p in paths):
        raise ToolError(f"--json-keys names {len(json_keys)} keys ({' '.join(json_keys)}), but a .txt input "
                        f"has a single text per document; pass one key (default: text)")


class _Input:
    """An input file opened for reading, with the position in the file itself (compressed for .gz)."""

    def __init__(self, path: str):
        self.raw = open(path, "rb")
        self.f = gzip.GzipFile(fileobj=self.raw, mode="rb") if is_gzip(path) else self.raw
        self._last = 0

    def lines(self) -> Iterator[bytes]:
        """The file's lines, a UTF-8 byte order mark dropped from the first (utf-8-sig's decoding)."""
        first = True
        for line in self.f:
            if first:
                first = False
                if line.startswith(BOM):
                    line = line[len(BOM):]
            yield line

    def read(self) -> bytes:
        data = self.f.read()
        return data[len(BOM):] if data.startswith(BOM) else data

    def consumed(self) -> int:
        """Bytes of the file read since the last call (for a .gz, the compressed bytes decompressed so far)."""
        pos = self.raw.tell()
        n, self._last = pos - self._last, pos
        return n

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.f is not self.raw:
            self.f.close()
        self.raw.close()


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
            with _Input(path) as inp:
                if fmt == "jsonl":
                    for line_no, line in enumerate(inp.lines(), start=1):
                        if line.strip():
                            yield Record(f"{path}:{line_no}", line, True, inp.consumed())
                elif txt_document_per_file:
                    text = inp.read().rstrip(b"\r\n")
                    if text.strip():
                        yield Record(path, text, False, inp.consumed())
                else:
                    yield from _paragraphs(path, inp)
        except (OSError, EOFError, zlib.error) as e:
            raise _read_error(path, e) from None


def _read_error(path: str, e: Exception) -> ToolError:
    if is_gzip(path) and not (isinstance(e, OSError) and e.errno is not None):
        # gzip.BadGzipFile (not gzip data), EOFError (cut short), zlib.error (damaged data).
        return ToolError(f"{path}: not a valid gzip file ({e}); check it with `gzip -t {path}` and compress "
                         f"the text again, or give it uncompressed under a name without .gz")
    reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
    return ToolError(f"cannot read input {path}: {reason}")


def _paragraphs(path: str, inp: _Input) -> Iterator[Record]:
    lines: list[bytes] = []
    first = 0
    for line_no, line in enumerate(inp.lines(), start=1):
        if line.strip():
            if not lines:
                first = line_no
            lines.append(line)
        elif lines:
            yield Record(f"{path}:{first}-{line_no - 1}", b"".join(lines).rstrip(b"\r\n"), False, inp.consumed())
            lines = []
    if lines:
        yield Record(f"{path}:{first}-{first + len(lines) - 1}", b"".join(lines).rstrip(b"\r\n"), False,
                     inp.consumed())


def _json_type(value) -> str:
    names = {dict: "object", list: "array", str: "string", int: "number", float: "number", bool: "boolean"}
    return names.get(type(value), "null")


def _check_unicode(text: str, where: str, key: str, item: int | None) -> str:
    """JSON's \\uXXXX escapes can spell lone surrogates, which are not Unicode and no tokenizer encodes."""
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            what = f"key {key!r}" if item is None else f"item {item} of key {key!r}"
            raise ToolError(f"{where}: {what} holds text that is not valid Unicode (lone surrogate "
                            f"\\u{ord(e.object[e.start]):04x}); correct or drop this document") from None
    return text


def document_texts(record: Record, json_keys: list[str]) -> dict[str, list[str]]:
    """The texts of one document per key: a list of one string, or several for a JSON list of strings."""
    if not record.is_json:
        return {json_keys[0]: [_decode(record.payload, record.where)]}  # UTF-8 holds no surrogates
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
            out[key] = [_check_unicode(value, record.where, key, None)]
        elif isinstance(value, list):
            for i, v in enumerate(value):
                if not isinstance(v, str):
                    raise ToolError(f"{record.where}: key {key!r} holds an array whose item {i} is a JSON "
                                    f"{_json_type(v)}; expected a string or an array of strings")
                _check_unicode(v, record.where, key, i)
            out[key] = value
        else:
            raise ToolError(f"{record.where}: key {key!r} holds a JSON {_json_type(value)}; "
                            f"expected a string (or an array of strings)")
    return out
