#!/usr/bin/env python3
"""Encode and decode text for `stepgraph generate` with Hugging Face `tokenizers`, over stdin/stdout.

  python3 tools/tokenizer_server.py TOKENIZER_DIR

An internal helper: `stepgraph generate` starts it (found next to the binary's checkout, or in
$STEPGRAPH_TOOLS; run with $STEPGRAPH_PYTHON or python3) and talks to it; there is no need to run it by
hand except to see why it fails, typing requests such as {"encode": "The river"} (Ctrl-D ends it).

stepgraph is C++ and the Hugging Face tokenizers library is Rust with Python bindings (a C++ build of
it would need the Rust toolchain), so the CLI runs the same Python package the data tools use, in this
small process, instead of a second tokenizer implementation that could disagree with the one the data
was prepared with.

Protocol: one JSON object per line each way. First the server writes
  {"ready": true, "vocab_size": N, "eos_token": "...", "eos_id": ID}      (eos fields may be null)
or {"error": "..."} and exits 1. Then, per request line:
  {"encode": "text"}          ->  {"ids": [...]}     (add_special_tokens=True, as AutoTokenizer does)
  {"decode": [ids]}           ->  {"text": "..."}    (special tokens skipped)
  {"decode_raw": [ids]}       ->  {"text": "..."}    (special tokens kept)
Decoded text gets transformers' clean-up (no space before punctuation and contractions) where the folder's
tokenizer_config.json sets clean_up_tokenization_spaces, as transformers' decode does.
A bad request (an id outside the vocabulary, say) gets {"error": "..."}, which stepgraph shows as
`tokenizer: ...`; end of input ends the server.
"""
from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sgtools import ToolError  # noqa: E402
from sgtools.tokenizer_files import clean_up_tokenization, load_tokenizer_folder  # noqa: E402


def reply(obj) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def handle(folder, request) -> dict:
    tokenizer, vocab_size = folder.tokenizer, folder.vocab_size
    if not isinstance(request, dict):
        return {"error": "a request is a JSON object"}
    if "encode" in request and isinstance(request["encode"], str):
        return {"ids": tokenizer.encode(request["encode"], add_special_tokens=True).ids}
    for key, skip in (("decode", True), ("decode_raw", False)):
        if key in request:
            ids = request[key]
            if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
                return {"error": f"{key} takes a list of token ids"}
            bad = next((i for i in ids if not 0 <= i < vocab_size), None)
            if bad is not None:
                return {"error": f"token id {bad} is out of range: the vocabulary has {vocab_size:,} tokens "
                                 f"(ids 0..{vocab_size - 1})"}
            text = tokenizer.decode(ids, skip_special_tokens=skip)
            return {"text": clean_up_tokenization(text) if folder.clean_up_tokenization_spaces else text}
    return {"error": "unknown request; use encode, decode or decode_raw"}


def main(argv: list[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__.strip())
        return 0
    if len(argv) != 1:
        reply({"error": "usage: tokenizer_server.py TOKENIZER_DIR"})
        return 2
    try:
        folder = load_tokenizer_folder(argv[0])
    except ToolError as e:
        reply({"error": str(e)})
        return 1
    reply({"ready": True, "vocab_size": folder.vocab_size, "eos_token": folder.eos_token, "eos_id": folder.eod_id})
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except json.JSONDecodeError as e:
            reply({"error": f"not JSON: {e}"})
            continue
        reply(handle(folder, request))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
