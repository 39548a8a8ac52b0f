#!/usr/bin/env python3
"""Tokenize text into a Megatron indexed dataset (.bin/.idx) that stepgraph and Megatron-LM train on.

  python3 tools/preprocess_data.py --input corpus.jsonl --json-keys text --output-prefix data/corpus \\
      --tokenizer-type HuggingFaceTokenizer --tokenizer-model tok/ --append-eod --workers 4

writes data/corpus_text_document.bin and data/corpus_text_document.idx (one pair per --json-keys key,
named PREFIX_<key>_document as Megatron-LM's tools/preprocess_data.py names them); train on them with
dataset.data_path=[data/corpus_text_document]. Check them with
`build/src/stepgraph data inspect data/corpus_text_document`.

Flags and output follow Megatron-LM's tools/preprocess_data.py; the files are Megatron's MMIDIDX format
(uint16 tokens below a vocabulary of 65500, else int32; docs/data-and-checkpoints.md), one sequence per
document (one per list item for a key holding a list of strings). Documents stay in input order with
any number of workers. Documents that encode to no tokens are skipped; none left is an error.

Inputs: .jsonl (one JSON object per line) or, as a convenience, .txt: one document per paragraph
(lines up to a blank line), or one per file with --txt-document-per-file (give several files). Either
may be gzipped (.gz). --input names files (the shell expands patterns such as in/*.jsonl; the tool
does not, as Megatron's does with --partitions); a file given twice is refused.

Megatron-LM's other flags: --keep-sequential-samples, --partitions, --keep-newlines and --lang are
accepted and change nothing here (order is always kept, --workers alone sets the parallelism, texts are
never split into sentences); --split-sentences, --vocab-file, --merge-file, --vocab-size and the
--find-optimal-num-workers flags are refused with a message saying what to do instead.

--tokenizer-model is a folder with tokenizer.json (tools/train_tokenizer.py writes one; any Hugging Face
fast-tokenizer folder works). --append-eod appends its eos_token (from tokenizer_config.json, else
special_tokens_map.json, as stepgraph's trainer reads it) to every document: the EOD token, id 0 for
tokenizers from train_tokenizer.py.

Ctrl-C or SIGTERM stops the run and removes its unfinished outputs (exit status 130, or 143).
"""
from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import textwrap

import numpy as np

from sgtools import ToolError, run_tool
from sgtools.corpus import Record, check_inputs, check_txt_keys, document_texts, read_records
from sgtools.indexed_dataset import IndexedDatasetWriter, output_prefix, token_dtype_for_vocab
from sgtools.ordered_workers import OrderedWorkers
from sgtools.progress import Progress, human_bytes, human_seconds
from sgtools.tokenizer_files import (CONFIG_FILE, SPECIAL_TOKENS_FILE, TOKENIZER_FILE, load_tokenizer_folder,
                                     open_tokenizer_file)

SUPPORTED_TOKENIZER_TYPES = ("HuggingFaceTokenizer",)
BATCH_DOCUMENTS = 256        # documents per task sent to a worker
BATCH_BYTES = 1 << 20        # ... or fewer, once they hold this much text
TASKS_IN_FLIGHT_PER_WORKER = 4
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}  # what stops the tool (sgtools.run_tool); workers ignore/die on them

# Flags of Megatron-LM's tools/preprocess_data.py with no counterpart here: parsed (argparse alone would
# answer "unrecognized arguments"), then refused by check_args with what this tool does instead.
# flag: (nargs, metavar, why and what to do).
CONVERT_GPT2 = ("GPT-2's vocab.json and merges.txt convert into one, with the same ids: python3 "
                "tools/convert_tokenizer.py --vocab-file VOCAB --merge-file MERGES --output DIR, then pass "
                "--tokenizer-type HuggingFaceTokenizer --tokenizer-model DIR and drop --vocab-file/--merge-file "
                "(tools/train_tokenizer.py trains a new tokenizer instead)")
REFUSED_MEGATRON_FLAGS = {
    "--split-sentences": (0, None, "--split-sentences is not supported (it needs NLTK and writes sentence-level "
                          "datasets); stepgraph trains on document-level datasets: drop the flag"),
    "--vocab-file": (1, "FILE", "--vocab-file is for Megatron's GPT2BPETokenizer and BERT tokenizers; this tool "
                     "reads a Hugging Face tokenizer folder: " + CONVERT_GPT2),
    "--merge-file": (1, "FILE", "--merge-file is for Megatron's GPT2BPETokenizer; this tool reads a Hugging Face "
                     "tokenizer folder: " + CONVERT_GPT2),
    "--vocab-size": (1, "N", "--vocab-size is for Megatron's NullTokenizer; here the vocabulary is the tokenizer "
                     "folder's (--tokenizer-model): drop the flag"),
    "--find-optimal-num-workers": (0, None, "--find-optimal-num-workers is not supported; the output does not "
                                   "depend on --workers, so time a few values: the closing report gives tokens/s"),
    "--workers-to-check": ("+", "N", "--workers-to-check only works with --find-optimal-num-workers, which is not "
                           "supported; pass --workers N (the closing report gives tokens/s)"),
    "--max-documents": (1, "N", "--max-documents only works with --find-optimal-num-workers, which is not "
                        "supported; drop the flag"),
    "--performance-dir": (1, "DIR", "--performance-dir only works with --find-optimal-num-workers, which is not "
                          "supported; drop the flag"),
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="preprocess_data.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("tokenizer")
    g.add_argument("--tokenizer-type", required=True, metavar="TYPE",
                   help="HuggingFaceTokenizer (the only type here; Megatron-LM's tool has the others)")
    g.add_argument("--tokenizer-model", metavar="DIR",  # required: checked after --tokenizer-type and
                   # the refused tokenizer flags, whose messages say more than "required"
                   help=f"(required) tokenizer folder with {TOKENIZER_FILE} (from tools/train_tokenizer.py or "
                        f"Hugging Face)")
    g = p.add_argument_group("input data")
    g.add_argument("--input", nargs="+", required=True, metavar="FILE",
                   help=".jsonl or .txt file(s), optionally .gz, processed in the order given (patterns are "
                        "left to the shell: in/*.jsonl, unquoted)")
    g.add_argument("--json-keys", nargs="+", default=["text"], metavar="KEY",
                   help="keys to tokenize, one output dataset each (default: text); for .txt the one key "
                        "names the output")
    g.add_argument("--txt-document-per-file", action="store_true",
                   help=".txt inputs: each file is one document (default: each blank-line-separated paragraph)")
    g = p.add_argument_group("tokenization process")
    g.add_argument("--append-eod", action="store_true",
                   help="append the tokenizer's eos token (EOD) to every document")
    g = p.add_argument_group("output data")
    g.add_argument("--output-prefix", required=True, metavar="PREFIX",
                   help="path prefix of the outputs: writes PREFIX_<key>_document.{bin,idx}")
    g = p.add_argument_group("runtime")
    g.add_argument("--workers", type=int, default=1, metavar="N",
                   help="tokenizer processes (default: 1); output order does not depend on it")
    g.add_argument("--log-interval", type=int, default=1000, metavar="N",
                   help="documents between progress lines when stderr is not a terminal (default: 1000)")
    g.add_argument("--documents-per-task", type=int, default=BATCH_DOCUMENTS, metavar="N",
                   help=f"documents a worker encodes at a time (default: {BATCH_DOCUMENTS}; fewer when they "
                        f"exceed {BATCH_BYTES >> 20} MiB)")
    g = p.add_argument_group("Megatron-LM flags accepted with no effect here")
    g.add_argument("--keep-sequential-samples", action="store_true",
                   help="documents always stay in input order here")
    g.add_argument("--partitions", type=int, default=1, metavar="N",
                   help="the input is never split into partition files here; --workers sets the parallelism")
    g.add_argument("--keep-newlines", action="store_true",
                   help="for --split-sentences (not supported); texts are tokenized as they are, newlines kept")
    g.add_argument("--lang", metavar="LANG",
                   help="NLTK language for --split-sentences (not supported)")
    g = p.add_argument_group("Megatron-LM flags refused here (the message says what to do instead)",
                             textwrap.fill(" ".join(REFUSED_MEGATRON_FLAGS), 78, break_on_hyphens=False))
    for flag, (nargs, metavar, _) in REFUSED_MEGATRON_FLAGS.items():
        if nargs == 0:
            g.add_argument(flag, action="store_true", help=argparse.SUPPRESS)
        else:
            g.add_argument(flag, nargs=None if nargs == 1 else nargs, metavar=metavar, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def check_args(args: argparse.Namespace) -> None:
    if args.tokenizer_type == "GPT2BPETokenizer":
        raise ToolError(f"--tokenizer-type GPT2BPETokenizer is not read here; {CONVERT_GPT2}")
    if args.tokenizer_type not in SUPPORTED_TOKENIZER_TYPES:
        raise ToolError(f"--tokenizer-type {args.tokenizer_type} is not supported here; use HuggingFaceTokenizer "
                        f"with a tokenizer folder (tools/train_tokenizer.py makes one), or Megatron-LM's "
                        f"tools/preprocess_data.py, whose .bin/.idx stepgraph reads as they are")
    for flag, (nargs, _, message) in REFUSED_MEGATRON_FLAGS.items():
        value = getattr(args, flag[2:].replace("-", "_"))
        if value if nargs == 0 else value is not None:
            raise ToolError(message)
    if args.tokenizer_model is None:
        raise ToolError(f"--tokenizer-model DIR is required: a tokenizer folder with {TOKENIZER_FILE} "
                        f"(tools/train_tokenizer.py makes one; any Hugging Face fast-tokenizer folder works)")
    if args.partitions < 1:
        raise ToolError(f"--partitions must be at least 1 (got {args.partitions})")
    if args.workers < 1:
        raise ToolError(f"--workers must be at least 1 (got {args.workers})")
    for flag in ("log_interval", "documents_per_task"):
        if getattr(args, flag) < 1:
            raise ToolError(f"--{flag.replace('_', '-')} must be at least 1 (got {getattr(args, flag)})")
    if not os.path.basename(args.output_prefix):
        raise ToolError(f"--output-prefix {args.output_prefix} names a folder; give a file prefix inside it, "
                        f"e.g. {os.path.join(args.output_prefix, 'corpus')}")
    if len(set(args.json_keys)) != len(args.json_keys):
        raise ToolError(f"--json-keys lists a key twice: {' '.join(args.json_keys)}")


# ---------------------------------------------------------------------------------------------------
# Worker side: a process-global encoder, set up once per worker by init_worker.

_encoder: dict = {}


def init_worker(tokenizer_json: str, json_keys: list[str], eod_id: int | None) -> None:
    _encoder.update(tokenizer=open_tokenizer_file(tokenizer_json), keys=json_keys, eod=eod_id)


def init_pool_worker(*init_args) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle (it stops the workers)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's handler (its exception would print a
    # traceback here); SIGTERM to the parent stops the workers, SIGTERM to the process group ends workers quietly
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # blocked from the fork until now: see encoded_batches
    init_worker(*init_args)


def encode_batch(records: list[Record]) -> tuple[int, int, dict]:
    """Tokenizes a batch of documents. Returns (documents, bytes, {key: (tokens, lengths, empty)}) where
    tokens are the non-empty documents' tokens back to back, lengths[i] their sequence lengths, and
    empty the number of documents skipped for having no tokens."""
    tokenizer, keys, eod = _encoder["tokenizer"], _encoder["keys"], _encoder["eod"]
    docs = [document_texts(r, keys) for r in records]
    out = {}
    for key in keys:
        texts = [t for d in docs for t in d[key]]
        encodings = iter(tokenizer.encode_batch(texts, add_special_tokens=True)) if texts else iter(())
        ids: list[int] = []
        lengths: list[list[int]] = []
        empty = 0
        for d in docs:
            seq_lengths = []
            for _ in d[key]:
                seq = next(encodings).ids
                if seq:  # as Megatron: empty sequences are dropped
                    ids.extend(seq)
                    seq_lengths.append(len(seq))
            if not seq_lengths:
                empty += 1
                continue
            if eod is not None:
                ids.append(eod)
                seq_lengths[-1] += 1
            lengths.append(seq_lengths)
        out[key] = (np.asarray(ids, dtype=np.int64), lengths, empty)  # the writer checks the dtype fits
    return len(records), sum(r.size for r in records), out  # input-file bytes, for the progress bar


def batches(records, max_documents: int, max_bytes: int = BATCH_BYTES):
    batch, size = [], 0
    for r in records:
        batch.append(r)
        size += len(r.payload)
        if len(batch) >= max_documents or size >= max_bytes:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def encoded_batches(args: argparse.Namespace, init_args: tuple):
    """Encoded batches in input order; with several workers at most workers * 4 tasks are queued, so
    memory stays bounded however large the input."""
    tasks = batches(read_records(args.input, args.txt_document_per_file), args.documents_per_task)
    if args.workers == 1:
        init_worker(*init_args)
        yield from map(encode_batch, tasks)
        return
    # Not multiprocessing.Pool, whose terminate() can hang on a stop (sgtools/ordered_workers.py says how). The workers
    # are forked with the stop signals blocked, so the parent's handler (which raises) never runs in a worker that has
    # not reached init_pool_worker yet: workers stopped early (a bad input file) would print that worker's traceback.
    # A signal that arrives meanwhile stays pending in the parent, which takes it next.
    workers = OrderedWorkers(args.workers, encode_batch, init_pool_worker, init_args, blocked=STOP_SIGNALS)
    try:
        yield from workers.map(tasks, TASKS_IN_FLIGHT_PER_WORKER)
    except BaseException:  # a signal, an error or the consumer's close(): the workers end now
        workers.kill()
        raise
    workers.close()


# ---------------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    check_args(args)
    total_bytes = check_inputs(args.input)
    check_txt_keys(args.input, args.json_keys)
    # One process per --workers, each encoding on one thread (tokenizers' own thread pool off).
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    folder = load_tokenizer_folder(args.tokenizer_model)
    if args.append_eod and folder.eod_id is None:
        raise ToolError(f"--append-eod needs an end-of-document token, but {args.tokenizer_model} names no "
                        f"eos_token in {CONFIG_FILE} or {SPECIAL_TOKENS_FILE}; add one or drop --append-eod")
    dtype = token_dtype_for_vocab(folder.vocab_size)
    eod = folder.eod_id if args.append_eod else None

    print(f"preprocess_data: {len(args.input)} input file(s), {human_bytes(total_bytes)}; tokenizer "
          f"{args.tokenizer_model} (vocabulary {folder.vocab_size:,}, {dtype.name} tokens); "
          f"{args.workers} worker(s)", file=sys.stderr)
    if args.partitions > 1:
        print(f"preprocess_data: --partitions {args.partitions}: the input is not split into partitions here; "
              f"{args.workers} worker(s) encode it (--workers sets the parallelism), the output is the same",
              file=sys.stderr)
    writers: dict[str, IndexedDatasetWriter] = {}
    stats = {key: {"documents": 0, "sequences": 0, "empty": 0} for key in args.json_keys}
    progress = Progress(total_bytes, args.log_interval)
    init_args = (os.path.join(args.tokenizer_model, TOKENIZER_FILE), args.json_keys, eod)
    results = encoded_batches(args, init_args)
    try:
        for key in args.json_keys:  # in the try: a later key's failure removes the earlier keys' .tmp files
            writers[key] = IndexedDatasetWriter(output_prefix(args.output_prefix, key), dtype)
        for documents, nbytes, per_key in results:
            tokens = 0
            for key, (ids, lengths, empty) in per_key.items():
                writers[key].add_documents(ids, lengths)
                stats[key]["documents"] += len(lengths)
                stats[key]["sequences"] += sum(len(x) for x in lengths)
                stats[key]["empty"] += empty
                tokens += ids.size
            progress.update(documents, nbytes, tokens)
        check_not_empty(args, stats, progress.documents)
        for writer in writers.values():
            writer.finalize()
    except BaseException:
        results.close()  # stops the workers now
        for writer in writers.values():
            writer.abort()
        raise
    progress.finish()
    report(args, folder, dtype, writers, stats, progress)
    return 0


def check_not_empty(args: argparse.Namespace, stats: dict, documents: int) -> None:
    """An empty dataset is an error (as train_tokenizer refuses empty text): nothing would train on it."""
    inputs = " ".join(args.input)
    if documents == 0:
        raise ToolError(f"no documents in {inputs}: nothing to write (give the file(s) holding the text)")
    for key, s in stats.items():
        if s["documents"] == 0:
            raise ToolError(f"the {documents:,} document(s) of {inputs} all have empty texts under key {key!r} "
                            f"(no tokens): nothing to write; check the input, or name the text's key with "
                            f"--json-keys")


def report(args, folder, dtype, writers, stats, progress: Progress) -> None:
    seconds = progress.elapsed()
    total_tokens = sum(w.num_tokens for w in writers.values())
    print(f"preprocess_data: done in {human_seconds(seconds)}")
    print(f"  input:      {progress.documents:,} documents, {human_bytes(progress.bytes)} from "
          f"{', '.join(args.input)}")
    for key, writer in writers.items():
        s = stats[key]
        skipped = f", {s['empty']:,} empty skipped" if s["empty"] else ""
        print(f"  {key + ':':<11} {s['documents']:,} documents{skipped}, {s['sequences']:,} "
              f"sequences, {writer.num_tokens:,} tokens")
    print(f"  speed:      {total_tokens / seconds:,.0f} tokens/s, {progress.bytes / seconds / 1e6:.2f} MB/s "
          f"({args.workers} worker(s))")
    eod = f"EOD id {folder.eod_id} ({folder.eos_token}) appended" if args.append_eod else \
        "no EOD appended (documents run into each other; --append-eod separates them)"
    print(f"  tokens:     {dtype.name}, vocabulary {folder.vocab_size:,}; {eod}")
    for key, writer in writers.items():
        print(f"  wrote:      {writer.bin_path} ({os.path.getsize(writer.bin_path):,} bytes), "
              f"{writer.idx_path} ({os.path.getsize(writer.idx_path):,} bytes)")
    first = output_prefix(args.output_prefix, args.json_keys[0])
    print(f"  next:       {stepgraph_binary()} data inspect {shlex.quote(first)} --vocab-size {folder.vocab_size}")


def stepgraph_binary() -> str:
    """The checkout's build/src/stepgraph, relative to the current folder when inside it (as
    train_tokenizer.py names this script in its `next:` line), else absolute."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    binary = os.path.join(root, "build", "src", "stepgraph")
    relative = os.path.relpath(binary)
    return shlex.quote(binary if relative.startswith("..") else relative)


if __name__ == "__main__":
    run_tool(main, "no output written")
