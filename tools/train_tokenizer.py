#!/usr/bin/env python3
"""Train a byte-level BPE tokenizer on your text with Hugging Face `tokenizers` (offline).

  python3 tools/train_tokenizer.py --input corpus.jsonl --vocab-size 8000 --output tok/

writes tok/tokenizer.json, tok/tokenizer_config.json and tok/special_tokens_map.json, which
`transformers.AutoTokenizer.from_pretrained("tok")` loads and tools/preprocess_data.py uses
(--tokenizer-type HuggingFaceTokenizer --tokenizer-model tok).

The tokenizer is GPT-2 style: text is split into words and punctuation, each word's UTF-8 bytes are
merged into tokens, so any text encodes (no unknown tokens) and decodes back exactly. Special tokens
come first: "<|endoftext|>" is id 0, the end-of-document (EOD) token preprocess_data --append-eod
appends, and the tokenizer's eos/bos token. The vocabulary size counts the special tokens; set the
model's vocab_size to at least this (stepgraph pads it as Megatron's make_vocab_size_divisible_by does).

--output must not hold a tokenizer already (datasets made with that one would no longer match the
folder); --force replaces it. The files are written under temporary names and renamed into place only
when all are complete, so a full disk or a crash leaves the folder as it was. Ctrl-C (or SIGTERM) stops
at once, also while the merges are computed, and writes nothing (exit status 130, or 143).
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
import time

from sgtools import Stopped, ToolError, run_tool
from sgtools.corpus import check_inputs, check_txt_keys, document_texts, read_records
from sgtools.progress import Progress, human_bytes, human_seconds
from sgtools.stop import StopRequest
from sgtools.tokenizer_files import (DEFAULT_EOS, add_output_arguments, check_output_folder, import_tokenizers,
                                     write_tokenizer_folder)

BYTE_ALPHABET = 256       # the byte-level alphabet: every byte is a token before any merge
SAMPLE_BYTES = 4_000_000  # text kept to measure the trained tokenizer's bytes per token


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="train_tokenizer.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--input", nargs="+", required=True, metavar="FILE",
                   help="training text: .jsonl (one JSON object per line) or .txt (plain text), optionally .gz; "
                        "several files may be given")
    p.add_argument("--json-keys", nargs="+", default=["text"], metavar="KEY",
                   help="keys of the .jsonl objects whose text is trained on (default: text)")
    p.add_argument("--vocab-size", type=int, required=True, metavar="N",
                   help=f"vocabulary size including special tokens (at least {BYTE_ALPHABET} + the special tokens)")
    add_output_arguments(p)
    p.add_argument("--min-frequency", type=int, default=2, metavar="F",
                   help="merge only pairs seen at least F times (default: 2)")
    p.add_argument("--eos-token", default=DEFAULT_EOS, metavar="TOKEN",
                   help=f"end-of-document token, id 0; also bos and unk token (default: {DEFAULT_EOS})")
    p.add_argument("--special-tokens", nargs="+", default=[], metavar="TOKEN",
                   help="more special tokens (ids 1, 2, ...), e.g. <|pad|>; never split, never merged")
    p.add_argument("--txt-document-per-file", action="store_true",
                   help=".txt inputs: each file is one document (default: each blank-line-separated paragraph)")
    p.add_argument("--log-interval", type=int, default=10000, metavar="N",
                   help="documents between progress lines when stderr is not a terminal (default: 10000)")
    return p.parse_args(argv)


def check_args(args: argparse.Namespace) -> list[str]:
    special = [args.eos_token] + [t for t in args.special_tokens if t != args.eos_token]
    if len(set(special)) != len(special):
        raise ToolError(f"--special-tokens lists a token twice: {' '.join(args.special_tokens)}")
    if any(not t for t in special):
        raise ToolError("special tokens must not be empty strings")
    if args.vocab_size < BYTE_ALPHABET + len(special):
        raise ToolError(f"--vocab-size {args.vocab_size} is too small: a byte-level BPE needs {BYTE_ALPHABET} "
                        f"byte tokens + {len(special)} special token(s) = {BYTE_ALPHABET + len(special)} before "
                        f"it learns any merge")
    if args.min_frequency < 1:
        raise ToolError(f"--min-frequency must be at least 1 (got {args.min_frequency})")
    if args.log_interval < 1:
        raise ToolError(f"--log-interval must be at least 1 (got {args.log_interval})")
    if os.path.exists(args.output) and not os.path.isdir(args.output):
        raise ToolError(f"--output {args.output} exists and is not a folder")
    check_output_folder(args.output, args.force)
    return special


class TextStream:
    """The documents' texts for the trainer, counting what was read and keeping a sample."""

    def __init__(self, args: argparse.Namespace, progress: Progress, stop: StopRequest):
        self.args = args
        self.progress = progress
        self.stop = stop
        self.sample: list[str] = []
        self.sample_bytes = 0
        self.text_chars = 0  # characters of the texts trained on: 0 when every text is empty
        self.error: ToolError | None = None
        self.read_seconds = 0.0

    def __iter__(self):
        # A Rust thread of the trainer runs this: signals reach it only through self.stop (sgtools/stop.py).
        try:
            for record in read_records(self.args.input, self.args.txt_document_per_file):
                if self.stop.signum is not None:
                    return
                texts = [t for ts in document_texts(record, self.args.json_keys).values() for t in ts]
                for text in texts:
                    self.text_chars += len(text)
                    if self.sample_bytes < SAMPLE_BYTES:
                        self.sample.append(text)
                        self.sample_bytes += len(text.encode("utf-8"))
                    yield text
                self.progress.update(1, record.size)
            self.progress.finish()
            if self.text_chars:
                # The trainer shows no progress of its own here (its show_progress would draw over the
                # progress line above, and cannot be switched on once reading has begun).
                print(f"train_tokenizer: read {self.progress.documents:,} documents; training merges "
                      f"(vocabulary {self.args.vocab_size:,})...", file=sys.stderr, flush=True)
        except ToolError as e:
            # Raised through the Rust trainer the error would lose its type: keep it, end the stream.
            self.progress.finish()
            self.error = e
        finally:
            self.read_seconds = self.progress.elapsed()
            self.stop.stream_ended()


def prepare_output(path: str) -> list[str]:
    """Creates the --output folder and checks it is writable, before hours of training; returns the
    folders it created (removed again if the run fails while they are empty)."""
    created = []
    parent = os.path.abspath(path)
    while not os.path.exists(parent):
        created.append(parent)
        parent = os.path.dirname(parent)
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.TemporaryFile(dir=path, prefix=".train_tokenizer_write_test"):
            pass
    except OSError as e:
        remove_empty_folders(created)
        raise ToolError(f"cannot write the tokenizer to {path}: {e.strerror} (choose a writable --output)") from None
    return created


def remove_empty_folders(folders: list[str]) -> None:
    for folder in folders:  # innermost first
        try:
            os.rmdir(folder)
        except OSError:
            return


def preprocess_command(args: argparse.Namespace) -> str:
    """The preprocess_data.py command for the same text, with the options given here (paths as given, so
    it runs from the same folder)."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "preprocess_data.py")
    if not os.path.relpath(script).startswith(".."):
        script = os.path.relpath(script)  # tools/preprocess_data.py from the checkout
    cmd = ["python3", script, "--input", *args.input]
    if args.json_keys != ["text"]:
        cmd += ["--json-keys", *args.json_keys]
    if args.txt_document_per_file:
        cmd.append("--txt-document-per-file")
    cmd += ["--output-prefix", "PREFIX", "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model",
            args.output, "--append-eod", "--workers", "2"]
    return " ".join(shlex.quote(c) for c in cmd)


def build_tokenizer(tokenizers, args: argparse.Namespace, special: list[str]):
    from tokenizers import decoders, models, pre_tokenizers, processors, trainers
    tokenizer = tokenizers.Tokenizer(models.BPE())
    # GPT-2's byte-level scheme; no prefix space, so decode(encode(text)) == text exactly.
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=args.vocab_size, min_frequency=args.min_frequency,
                                  special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    return tokenizer, trainer


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    special = check_args(args)
    total_bytes = check_inputs(args.input)
    check_txt_keys(args.input, args.json_keys)
    tokenizers = import_tokenizers()
    created = prepare_output(args.output)
    try:
        return train(tokenizers, args, special, total_bytes, created)
    except BaseException:
        remove_empty_folders(created)
        raise


def train(tokenizers, args: argparse.Namespace, special: list[str], total_bytes: int, created: list[str]) -> int:
    tokenizer, trainer = build_tokenizer(tokenizers, args, special)

    print(f"train_tokenizer: byte-level BPE, vocabulary {args.vocab_size}, min frequency {args.min_frequency}, "
          f"from {len(args.input)} file(s), {human_bytes(total_bytes)}", file=sys.stderr)
    progress = Progress(total_bytes, args.log_interval, show_tokens=False)
    with StopRequest(on_exit=lambda: remove_empty_folders(created), outcome="no tokenizer written") as stop:
        stream = TextStream(args, progress, stop)
        tokenizer.train_from_iterator(stream, trainer)
    if stop.signum is not None:  # a signal as training returned: the watcher had no time to exit
        raise Stopped(stop.signum)
    if stream.error is not None:
        raise stream.error
    read_seconds = stream.read_seconds
    if progress.documents == 0:
        raise ToolError(f"no documents in {' '.join(args.input)}: nothing to train on")
    if stream.text_chars == 0:
        raise ToolError(f"the {progress.documents:,} document(s) of {' '.join(args.input)} all have empty texts: "
                        f"nothing to train on; check the input, or name the text's key with --json-keys")

    # In slices, so that a signal (handled between them) stops this too before anything is written.
    sample_tokens = sum(len(e.ids) for i in range(0, len(stream.sample), 1000)
                        for e in tokenizer.encode_batch(stream.sample[i:i + 1000]))
    files = write_tokenizer_folder(args.output, tokenizer, args.eos_token, special[1:])
    vocab = tokenizer.get_vocab_size(with_added_tokens=True)
    ids = ", ".join(f"{t} = {tokenizer.token_to_id(t)}" for t in special)
    print(f"train_tokenizer: done in {human_seconds(time.monotonic() - progress.start)}")
    print(f"  read:        {progress.documents:,} documents, {human_bytes(progress.bytes)} "
          f"in {human_seconds(read_seconds)}")
    print(f"  vocabulary:  {vocab:,} tokens ({BYTE_ALPHABET} bytes, {len(special)} special, "
          f"{vocab - BYTE_ALPHABET - len(special):,} merges)")
    if vocab < args.vocab_size:
        print(f"  note:        {args.vocab_size:,} were asked for; the text has no more pairs seen "
              f"{args.min_frequency}+ times (more text or a lower --min-frequency gives more)")
    print(f"  special:     {ids}; EOD id {tokenizer.token_to_id(args.eos_token)}")
    if sample_tokens:
        print(f"  compression: {stream.sample_bytes / sample_tokens:.2f} bytes/token on "
              f"{human_bytes(stream.sample_bytes)} of the training text")
    print(f"  wrote:       {', '.join(files)}")
    print(f"  next:        {preprocess_command(args)}")
    return 0


if __name__ == "__main__":
    run_tool(main, "no tokenizer written")
