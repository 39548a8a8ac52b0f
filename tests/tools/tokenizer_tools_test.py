#!/usr/bin/env python3
"""Text -> tokenizer -> .bin/.idx, checked end to end on the CPU (ctest tools/tokenizer_tools_test, label cpu).

Trains a byte-level BPE (vocabulary <= 2000) on tests/data/public_domain_sample.jsonl with
tools/train_tokenizer.py, tokenizes the sample with tools/preprocess_data.py on 2 workers, then checks:
  - `stepgraph data inspect` (the C++ reader, every check it makes) accepts the dataset and its counts,
    dtype and first tokens are the ones the tokenizer gives;
  - the .idx is Megatron's layout byte for byte, its offsets tile the .bin exactly;
  - every document decodes back to its text, EOD last; 1 and 2 workers write identical files;
  - transformers.AutoTokenizer loads the folder and agrees (skipped with a notice without transformers);
  - .txt and .gz input (paragraphs, one document per file) and the error messages of both tools (corrupt
    .gz, empty input, unwritable outputs checked before the work, Megatron-LM's flags);
  - train_tokenizer's closing `next:` command runs as printed, preprocess_data's names the checkout's binary;
  - stop signals: train_tokenizer stops at once while the trainer reads (its iterator runs on a Rust thread),
    preprocess_data cleans up on SIGTERM as on Ctrl-C; both exit 128 + N and write nothing;
  - the tokenizer folder is written all or nothing (a full disk simulated), never over a tokenizer without
    --force; the EOD comes from tokenizer_config.json, else special_tokens_map.json (as the C++ trainer);
  - input details: lone surrogates, a byte order mark, .GZ suffixes in capitals, files given twice, quoted
    patterns, arrays with a non-string item, the progress count of .gz inputs (compressed bytes);
  - tools/tokenizer_server.py (what `stepgraph generate` runs): --help, errors for ids outside the vocabulary.

    python3 tests/tools/tokenizer_tools_test.py --stepgraph build/src/stepgraph [-v]
"""
from __future__ import annotations

import gzip
import json
import os
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import tool_test_common

import numpy as np

try:
    from tokenizers import Tokenizer
except ImportError:  # main() reports it
    Tokenizer = None

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = os.path.join(ROOT, "tools", "train_tokenizer.py")
PREPROCESS = os.path.join(ROOT, "tools", "preprocess_data.py")
SERVER = os.path.join(ROOT, "tools", "tokenizer_server.py")
SAMPLE = os.path.join(ROOT, "tests", "data", "public_domain_sample.jsonl")
TOKENIZER_FILES = ["special_tokens_map.json", "tokenizer.json", "tokenizer_config.json"]
# Runs a tool with os.fsync failing as on a full disk at its SG_FAIL_FSYNC_AT-th call (1 = the first file).
FULL_DISK_WRAPPER = """
import errno, os, runpy, sys
calls, fail_at, real_fsync = [0], int(os.environ["SG_FAIL_FSYNC_AT"]), os.fsync
def fsync(fd):
    calls[0] += 1
    if calls[0] == fail_at:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    real_fsync(fd)
os.fsync = fsync
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")
"""
VOCAB = 2000
STEPGRAPH = ""  # set from --stepgraph


def run(*cmd: str, expect_rc: int = 0) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=120)
    if proc.returncode != expect_rc:
        raise AssertionError(f"{' '.join(cmd)}\nexited {proc.returncode}, expected {expect_rc}\n"
                             f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


def preprocess(tokenizer_dir: str, prefix: str, *extra: str, inputs=(SAMPLE,), expect_rc: int = 0):
    return run(sys.executable, PREPROCESS, "--input", *inputs, "--output-prefix", prefix,
               "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", tokenizer_dir, *extra,
               expect_rc=expect_rc)


def run_and_signal(cmd: list[str], signum: int, cwd: str | None = None) -> tuple[int, str, float]:
    """Starts cmd, sends signum once it printed its first progress line, returns (exit status, stderr,
    seconds from the signal to the exit). A run still going 10 s after the signal is killed (a hang guard)."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            # a shell's background job would have SIGINT ignored, and keep it ignored
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    err = []
    for line in proc.stderr:
        err.append(line)
        if line.startswith("processed"):
            break
    proc.send_signal(signum)
    start = time.monotonic()
    try:
        rest = proc.communicate(timeout=10)[1]
    except subprocess.TimeoutExpired:
        proc.kill()
        rest = proc.communicate()[1] + "\n[still running 10 s after the signal: killed]"
    return proc.returncode, "".join(err) + rest, time.monotonic() - start


def sgtools_module(name: str):
    """tools/sgtools/<name>, imported as the tools import it (without leaving tools/ on sys.path)."""
    import importlib
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    try:
        return importlib.import_module(f"sgtools.{name}")
    finally:
        sys.path.pop(0)


def read_folder(folder: str) -> dict[str, bytes]:
    out = {}
    for name in TOKENIZER_FILES:
        with open(os.path.join(folder, name), "rb") as f:
            out[name] = f.read()
    return out


def read_index(prefix: str) -> dict:
    """Parses PREFIX.idx independently of the tools (struct + numpy, the layout in docs/)."""
    with open(prefix + ".idx", "rb") as f:
        raw = f.read()
    magic, version, code, seqs, docs = raw[:9], *struct.unpack_from("<QBQQ", raw, 9)
    body = 34
    lengths = np.frombuffer(raw, "<i4", seqs, body)
    offsets = np.frombuffer(raw, "<i8", seqs, body + 4 * seqs)
    doc_index = np.frombuffer(raw, "<i8", docs, body + 12 * seqs)
    return dict(magic=magic, version=version, code=code, lengths=lengths, offsets=offsets, doc_index=doc_index,
                size=len(raw), expected_size=body + 12 * seqs + 8 * docs)


def read_documents(prefix: str) -> list[np.ndarray]:
    idx = read_index(prefix)
    dtype = np.dtype({8: "<u2", 4: "<i4"}[idx["code"]])
    data = np.fromfile(prefix + ".bin", dtype=dtype)
    step = dtype.itemsize
    return [data[o // step: o // step + n] for o, n in zip(idx["offsets"], idx["lengths"])]


class TokenizerTools(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="sg_tokenizer_tools_")
        cls.dir = cls.tmp.name
        cls.tok = os.path.join(cls.dir, "tok")
        cls.train_out = run(sys.executable, TRAIN, "--input", SAMPLE, "--vocab-size", str(VOCAB),
                            "--output", cls.tok).stdout
        cls.tokenizer = Tokenizer.from_file(os.path.join(cls.tok, "tokenizer.json"))
        cls.vocab = cls.tokenizer.get_vocab_size(with_added_tokens=True)
        with open(SAMPLE, encoding="utf-8") as f:
            cls.texts = [json.loads(line)["text"] for line in f if line.strip()]
        cls.prefix = os.path.join(cls.dir, "out", "sample")
        cls.dataset = cls.prefix + "_text_document"
        # Small tasks so the two workers really interleave.
        cls.pre_out = preprocess(cls.tok, cls.prefix, "--json-keys", "text", "--append-eod", "--workers", "2",
                                 "--documents-per-task", "7", "--log-interval", "50").stdout

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def expected_documents(self) -> list[list[int]]:
        return [self.tokenizer.encode(t).ids + [0] for t in self.texts]

    def test_tokenizer_folder(self):
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
            self.assertTrue(os.path.isfile(os.path.join(self.tok, name)), name)
        with open(os.path.join(self.tok, "tokenizer_config.json")) as f:
            config = json.load(f)
        self.assertEqual(config["eos_token"], "<|endoftext|>")
        self.assertEqual(self.tokenizer.token_to_id("<|endoftext|>"), 0)  # the EOD id the docs promise
        self.assertLessEqual(self.vocab, VOCAB)
        self.assertGreater(self.vocab, 256 + 1 + 500, "the sample should teach hundreds of merges")
        self.assertIn(f"vocabulary:  {self.vocab:,} tokens", self.train_out)
        self.assertIn("EOD id 0", self.train_out)

    def test_sample_is_what_its_generator_writes(self):
        # The sample's provenance is its generator (tests/data/make_public_domain_sample.py): keep them equal.
        sys.path.insert(0, os.path.dirname(SAMPLE))
        try:
            import make_public_domain_sample as generator
        finally:
            sys.path.pop(0)
        with open(SAMPLE, encoding="utf-8") as f:
            self.assertEqual(f.read(), "\n".join(generator.generate()) + "\n")

    def test_training_is_deterministic(self):
        again = os.path.join(self.dir, "tok_again")
        run(sys.executable, TRAIN, "--input", SAMPLE, "--vocab-size", str(VOCAB), "--output", again)
        for name in ("tokenizer.json", "tokenizer_config.json"):
            with open(os.path.join(self.tok, name), "rb") as a, open(os.path.join(again, name), "rb") as b:
                self.assertEqual(a.read(), b.read(), f"{name} differs between two identical trainings")

    def test_cpp_reader_accepts_and_counts_match(self):
        out = run(STEPGRAPH, "data", "inspect", self.dataset, "--json", "--vocab-size", str(self.vocab),
                  "--documents", "5", "--tokens-per-document", "1000").stdout
        info = json.loads(out)
        expected = self.expected_documents()
        self.assertEqual(info["dtype"], "uint16")
        self.assertEqual(info["documents"], len(self.texts))
        self.assertEqual(info["sequences"], len(self.texts))
        self.assertEqual(info["tokens"], sum(len(d) for d in expected))
        self.assertEqual(info["min_token"], 0)  # EOD
        self.assertLess(info["max_token"], self.vocab)
        for doc in info["first_documents"]:
            self.assertEqual(doc["first_tokens"], expected[doc["document"]])
        self.assertIn(f"{len(self.texts)} documents", self.pre_out)
        self.assertIn(f"{info['tokens']:,} tokens", self.pre_out)

    def test_index_is_megatron_layout_and_tiles_bin(self):
        idx = read_index(self.dataset)
        self.assertEqual(idx["magic"], b"MMIDIDX\x00\x00")
        self.assertEqual(idx["version"], 1)
        self.assertEqual(idx["code"], 8)  # uint16: vocabulary < 65500
        self.assertEqual(idx["size"], idx["expected_size"], ".idx has trailing or missing bytes")
        lengths, offsets = idx["lengths"].astype(np.int64), idx["offsets"]
        self.assertEqual(offsets[0], 0)
        np.testing.assert_array_equal(offsets[1:], offsets[:-1] + 2 * lengths[:-1])
        self.assertEqual(offsets[-1] + 2 * lengths[-1], os.path.getsize(self.dataset + ".bin"))
        np.testing.assert_array_equal(idx["doc_index"], np.arange(len(lengths) + 1))

    def test_documents_round_trip(self):
        docs = read_documents(self.dataset)
        self.assertEqual(len(docs), len(self.texts))
        for i, (ids, text) in enumerate(zip(docs, self.texts)):
            self.assertEqual(ids[-1], 0, f"document {i} does not end with EOD")
            self.assertNotIn(0, ids[:-1].tolist())
            self.assertEqual(self.tokenizer.decode(ids[:-1].tolist(), skip_special_tokens=False), text)

    def test_workers_do_not_change_the_output(self):
        one = os.path.join(self.dir, "one", "sample")
        preprocess(self.tok, one, "--append-eod", "--workers", "1")
        for ext in (".bin", ".idx"):
            with open(self.dataset + ext, "rb") as a, open(one + "_text_document" + ext, "rb") as b:
                self.assertEqual(a.read(), b.read(), f"{ext} differs between 1 and 2 workers")

    def test_auto_tokenizer_loads_the_folder(self):
        try:
            from transformers import AutoTokenizer
        except ImportError:
            print("\nNOTICE: transformers is not installed: the AutoTokenizer check is skipped "
                  "(SG_SETUP_TRANSFORMERS=1 bash scripts/setup.sh installs it)", file=sys.stderr)
            self.skipTest("transformers not installed")
        tok = AutoTokenizer.from_pretrained(self.tok)
        self.assertEqual(len(tok), self.vocab)
        self.assertEqual(tok.eos_token, "<|endoftext|>")
        self.assertEqual(tok.eos_token_id, 0)
        docs = read_documents(self.dataset)
        for text, ids in list(zip(self.texts, docs))[:20]:
            self.assertEqual(tok(text).input_ids, ids[:-1].tolist())  # no BOS added, same ids as the .bin
            self.assertEqual(tok.decode(ids[:-1].tolist()), text)

    def test_dtype_follows_megatron(self):
        # Megatron's optimal_dtype: uint16 for a vocabulary below 65500, int32 from 65500 on. Added tokens
        # grow the trained tokenizer to either side of the boundary; the last one must survive the trip.
        text = os.path.join(self.dir, "high_ids.jsonl")
        for vocab, dtype, code in ((65499, "uint16", 8), (65500, "int32", 4)):
            folder = os.path.join(self.dir, f"tok{vocab}")
            os.makedirs(folder, exist_ok=True)
            big = Tokenizer.from_file(os.path.join(self.tok, "tokenizer.json"))
            big.add_tokens([f"<|x{i}|>" for i in range(vocab - self.vocab)])
            big.save(os.path.join(folder, "tokenizer.json"))
            shutil.copy(os.path.join(self.tok, "tokenizer_config.json"), folder)
            with open(text, "w") as f:
                f.write(json.dumps({"text": f"high <|x{vocab - self.vocab - 1}|> id"}) + "\n")
            prefix = os.path.join(self.dir, f"v{vocab}", "h")
            preprocess(folder, prefix, "--append-eod", inputs=(text,))
            info = json.loads(run(STEPGRAPH, "data", "inspect", prefix + "_text_document", "--json",
                                  "--vocab-size", str(vocab)).stdout)
            self.assertEqual((info["dtype"], info["max_token"]), (dtype, vocab - 1))
            self.assertEqual(read_index(prefix + "_text_document")["code"], code)
            ids = read_documents(prefix + "_text_document")[0]
            self.assertEqual(ids.tolist(), big.encode(f"high <|x{vocab - self.vocab - 1}|> id").ids + [0])

    def test_txt_paragraphs_and_files(self):
        a, b = os.path.join(self.dir, "a.txt"), os.path.join(self.dir, "b.txt")
        with open(a, "w", encoding="utf-8") as f:
            f.write("First paragraph, line one;\nline two.\n\n\n  Second — with “quotes”.\n\nThird.\n")
        with open(b, "w", encoding="utf-8") as f:
            f.write("Another file.\n\nStill the same file.\n")
        paragraphs = ["First paragraph, line one;\nline two.", "  Second — with “quotes”.", "Third.",
                      "Another file.", "Still the same file."]
        files = ["First paragraph, line one;\nline two.\n\n\n  Second — with “quotes”.\n\nThird.",
                 "Another file.\n\nStill the same file."]
        for extra, expected in (((), paragraphs), (("--txt-document-per-file",), files)):
            prefix = os.path.join(self.dir, "txt" + str(len(extra)), "c")
            preprocess(self.tok, prefix, "--append-eod", "--workers", "2", "--documents-per-task", "1", *extra,
                       inputs=(a, b))
            docs = read_documents(prefix + "_text_document")
            self.assertEqual([self.tokenizer.decode(d[:-1].tolist()) for d in docs], expected)

    def test_json_list_is_one_sequence_per_item(self):
        path = os.path.join(self.dir, "lists.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            f.write(json.dumps({"text": ["One sentence.", "", "Two sentences."]}) + "\n")
            f.write(json.dumps({"text": ""}) + "\n")  # no tokens: skipped
            f.write(json.dumps({"text": "Last."}) + "\n")
        prefix = os.path.join(self.dir, "lists", "l")
        out = preprocess(self.tok, prefix, "--append-eod", inputs=(path,)).stdout
        self.assertIn("1 empty skipped", out)
        idx = read_index(prefix + "_text_document")
        np.testing.assert_array_equal(idx["doc_index"], [0, 2, 3])
        info = json.loads(run(STEPGRAPH, "data", "inspect", prefix + "_text_document", "--json").stdout)
        self.assertEqual((info["documents"], info["sequences"]), (2, 3))

    def expect_error(self, cmd: list[str], *fragments: str, leaves: str | None = None):
        proc = run(*cmd, expect_rc=1)
        self.assertTrue(proc.stderr.strip().splitlines()[-1].startswith("error: "), proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)
        for fragment in fragments:
            self.assertIn(fragment, proc.stderr)
        if leaves is not None:
            left = [n for n in os.listdir(leaves)] if os.path.isdir(leaves) else []
            self.assertEqual(left, [], f"a failed run left files behind in {leaves}")

    def test_preprocess_errors(self):
        bad = os.path.join(self.dir, "bad.jsonl")
        with open(bad, "w") as f:
            f.write('{"text": "fine"}\n{"text": "broken\n')
        out = os.path.join(self.dir, "errors")
        p = [sys.executable, PREPROCESS, "--tokenizer-type", "HuggingFaceTokenizer", "--append-eod"]
        missing = os.path.join(self.dir, "missing.jsonl")
        self.expect_error(p + ["--input", missing, "--tokenizer-model", self.tok, "--output-prefix", out + "/x"],
                          f"input file {missing} does not exist")
        for workers in ("1", "2"):  # the message comes back from a worker process too
            self.expect_error(p + ["--input", bad, "--tokenizer-model", self.tok, "--output-prefix", out + "/x",
                                   "--workers", workers, "--documents-per-task", "1"],
                              f"{bad}:2: not valid JSON", leaves=out)
        self.expect_error(p + ["--input", SAMPLE, "--json-keys", "body", "--tokenizer-model", self.tok,
                               "--output-prefix", out + "/x"], f"{SAMPLE}:1: no key 'body'", "'text'", leaves=out)
        empty = os.path.join(self.dir, "empty_tok")
        os.makedirs(empty, exist_ok=True)
        self.expect_error(p + ["--input", SAMPLE, "--tokenizer-model", empty, "--output-prefix", out + "/x"],
                          f"{empty} has no tokenizer.json")
        blocker = os.path.join(self.dir, "a_file")
        open(blocker, "w").close()  # a prefix under a regular file is unwritable even for root
        self.expect_error(p + ["--input", SAMPLE, "--tokenizer-model", self.tok, "--output-prefix",
                               blocker + "/sub/x"], "cannot write the output", "--output-prefix")
        self.expect_error(p[:2] + ["--tokenizer-type", "GPT2BPETokenizer", "--input", SAMPLE, "--tokenizer-model",
                                   self.tok, "--output-prefix", out + "/x"], "GPT2BPETokenizer is not supported")
        # Nothing to write is an error (train_tokenizer refuses the same files), not an empty dataset.
        nothing, empty_texts = os.path.join(self.dir, "nothing.jsonl"), os.path.join(self.dir, "empty_texts.jsonl")
        with open(nothing, "w") as f:
            f.write("\n")
        with open(empty_texts, "w") as f:
            f.write('{"text": ""}\n{"text": ""}\n')
        for workers in ("1", "2"):
            self.expect_error(p + ["--input", nothing, "--tokenizer-model", self.tok, "--output-prefix", out + "/x",
                                   "--workers", workers], f"no documents in {nothing}: nothing to write", leaves=out)
            self.expect_error(p + ["--input", empty_texts, "--tokenizer-model", self.tok, "--output-prefix",
                                   out + "/x", "--workers", workers], "the 2 document(s)", "empty texts under key "
                              "'text'", "nothing to write", leaves=out)
        # A later --json-keys output that cannot be opened: the earlier key's .tmp goes too.
        keys = os.path.join(self.dir, "keys")
        os.makedirs(os.path.join(keys, "x_b_document.bin.tmp"))  # a folder where b's .bin.tmp would go
        self.expect_error(p + ["--input", SAMPLE, "--json-keys", "text", "b", "--tokenizer-model", self.tok,
                               "--output-prefix", keys + "/x"], "cannot write the output", "x_b_document.bin")
        self.assertEqual(os.listdir(keys), ["x_b_document.bin.tmp"], "the text key's .bin.tmp was left behind")

    def test_corrupt_gzip_input(self):
        with open(SAMPLE, "rb") as f:
            good = gzip.compress(f.read(), mtime=0)
        inputs = {"not_gzip.jsonl.gz": b"notgzip", "cut.jsonl.gz": good[:len(good) // 2],
                  "damaged.jsonl.gz": good[:100] + bytes(b ^ 0x55 for b in good[100:200]) + good[200:]}
        out = os.path.join(self.dir, "gz_errors")
        for name, data in inputs.items():
            path = os.path.join(self.dir, name)
            with open(path, "wb") as f:
                f.write(data)
            for workers in ("1", "2"):
                self.expect_error([sys.executable, PREPROCESS, "--input", path, "--output-prefix", out + "/x",
                                   "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", self.tok,
                                   "--workers", workers], f"{path}: not a valid gzip file (", "gzip -t", leaves=out)
            self.expect_error([sys.executable, TRAIN, "--input", path, "--vocab-size", "500", "--output",
                               os.path.join(self.dir, "gz_never")], f"{path}: not a valid gzip file (", "gzip -t")
            self.assertFalse(os.path.exists(os.path.join(self.dir, "gz_never")))
        # The same text gzipped gives the same dataset.
        path = os.path.join(self.dir, "good.jsonl.gz")
        with open(path, "wb") as f:
            f.write(good)
        prefix = os.path.join(self.dir, "gz_ok", "s")
        preprocess(self.tok, prefix, "--append-eod", inputs=(path,))
        for ext in (".bin", ".idx"):
            with open(self.dataset + ext, "rb") as a, open(prefix + "_text_document" + ext, "rb") as b:
                self.assertEqual(a.read(), b.read(), f"{ext} differs between .jsonl and .jsonl.gz")

    def test_megatron_flags(self):
        # Accepted: they change nothing (order is always kept, --workers sets the parallelism).
        prefix = os.path.join(self.dir, "megatron", "s")
        err = preprocess(self.tok, prefix, "--append-eod", "--workers", "2", "--keep-sequential-samples",
                         "--partitions", "2", "--keep-newlines", "--lang", "english").stderr
        self.assertIn("--partitions 2: the input is not split", err)
        for ext in (".bin", ".idx"):
            with open(self.dataset + ext, "rb") as a, open(prefix + "_text_document" + ext, "rb") as b:
                self.assertEqual(a.read(), b.read(), f"{ext} differs with Megatron's no-op flags")
        # Refused with what to do instead (not argparse's "unrecognized arguments").
        p = [sys.executable, PREPROCESS, "--input", SAMPLE, "--output-prefix", prefix, "--tokenizer-type",
             "HuggingFaceTokenizer", "--tokenizer-model", self.tok]
        for flags, fragment in ((["--split-sentences"], "drop the flag"),
                                (["--vocab-file", "vocab.json"], "--tokenizer-model DIR"),
                                (["--merge-file", "merges.txt"], "--tokenizer-model DIR"),
                                (["--vocab-size", "50257"], "the vocabulary is the tokenizer folder's"),
                                (["--find-optimal-num-workers"], "time a few values"),
                                (["--workers-to-check", "2", "4"], "pass --workers N"),
                                (["--max-documents", "10"], "--find-optimal-num-workers, which is not supported"),
                                (["--performance-dir", "perf"], "--find-optimal-num-workers, which is not supported"),
                                (["--partitions", "0"], "--partitions must be at least 1")):
            self.expect_error(p + flags, f"error: {flags[0]}" if flags[0] != "--partitions" else "error: ", fragment)
        self.expect_error(p[:-2], "--tokenizer-model DIR is required")

    def test_train_tokenizer_errors(self):
        t = [sys.executable, TRAIN, "--output", os.path.join(self.dir, "never")]
        self.expect_error(t + ["--input", SAMPLE, "--vocab-size", "200"], "--vocab-size 200 is too small", "257")
        self.expect_error(t + ["--input", os.path.join(self.dir, "nope.txt"), "--vocab-size", "500"],
                          "nope.txt does not exist")
        self.expect_error(t + ["--input", SAMPLE, "--json-keys", "body", "--vocab-size", "500"],
                          f"{SAMPLE}:1: no key 'body'")
        empty_texts = os.path.join(self.dir, "train_empty_texts.jsonl")
        with open(empty_texts, "w") as f:
            f.write('{"text": ""}\n{"text": ""}\n')
        self.expect_error(t + ["--input", empty_texts, "--vocab-size", "500"], "the 2 document(s)",
                          "all have empty texts: nothing to train on")
        self.assertFalse(os.path.exists(os.path.join(self.dir, "never")))  # created up front, removed again
        # --output is checked before training (hours on a real corpus): its error comes before the bad key's.
        blocker = os.path.join(self.dir, "a_file_too")
        open(blocker, "w").close()  # a folder under a regular file is unwritable even for root
        proc = run(sys.executable, TRAIN, "--input", SAMPLE, "--json-keys", "body", "--vocab-size", "500",
                   "--output", blocker + "/tok", expect_rc=1)
        self.assertIn(f"error: cannot write the tokenizer to {blocker}/tok", proc.stderr)
        self.assertIn("choose a writable --output", proc.stderr)
        self.assertNotIn("no key 'body'", proc.stderr)
        self.assertNotIn("byte-level BPE", proc.stderr)  # training never started

    def test_next_command_runs_as_printed(self):
        # Two inputs, another key: the printed preprocess_data command carries them over and works.
        with open(SAMPLE, encoding="utf-8") as f:
            docs = [json.loads(line) for line in f if line.strip()]
        inputs = [os.path.join(self.dir, "body one.jsonl"), os.path.join(self.dir, "body_two.jsonl")]
        for path, part in zip(inputs, (docs[:30], docs[30:])):
            with open(path, "w", encoding="utf-8") as f:
                f.writelines(json.dumps({"body": d["text"]}) + "\n" for d in part)
        tok = os.path.join(self.dir, "tok_body")
        out = run(sys.executable, TRAIN, "--input", *inputs, "--json-keys", "body", "--vocab-size", "600",
                  "--output", tok).stdout
        line = [l for l in out.splitlines() if l.strip().startswith("next:")][0]
        cmd = shlex.split(line.split("next:", 1)[1])
        self.assertEqual(cmd[0], "python3")
        self.assertTrue(os.path.samefile(cmd[1], PREPROCESS), cmd[1])
        self.assertEqual(cmd[cmd.index("--input") + 1: cmd.index("--input") + 3], inputs)
        prefix = os.path.join(self.dir, "next", "b")
        run(sys.executable, *[prefix if c == "PREFIX" else c for c in cmd[1:]])
        idx = read_index(prefix + "_body_document")
        self.assertEqual(len(idx["doc_index"]) - 1, len(docs))

    def test_tokenizer_server(self):
        out = run(sys.executable, SERVER, "--help").stdout
        self.assertIn("tokenizer_server.py TOKENIZER_DIR", out)
        self.assertIn("`stepgraph generate` starts it", out)
        requests = [{"decode": [999999]}, {"decode_raw": [1, self.vocab]}, {"decode": [-1]},
                    {"decode": [40, 41]}, {"encode": "The river"}]
        proc = subprocess.run([sys.executable, SERVER, self.tok], capture_output=True, text=True, timeout=60,
                              input="".join(json.dumps(r) + "\n" for r in requests))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        ready, *replies = [json.loads(l) for l in proc.stdout.splitlines()]
        self.assertEqual(ready["vocab_size"], self.vocab)
        last = self.vocab - 1
        self.assertEqual(replies[:3], [
            {"error": f"token id 999999 is out of range: the vocabulary has {self.vocab:,} tokens (ids 0..{last})"},
            {"error": f"token id {self.vocab} is out of range: the vocabulary has {self.vocab:,} tokens "
                      f"(ids 0..{last})"},
            {"error": f"token id -1 is out of range: the vocabulary has {self.vocab:,} tokens (ids 0..{last})"}])
        self.assertEqual(replies[3], {"text": self.tokenizer.decode([40, 41])})
        self.assertEqual(replies[4], {"ids": self.tokenizer.encode("The river").ids})

    # --- stop signals -----------------------------------------------------------------------------------

    def big_text(self) -> str:
        """~40 MB of paragraphs: seconds of reading for either tool (a hang guard bounds the tests)."""
        path = os.path.join(self.dir, "big.txt")
        if not os.path.exists(path):
            paragraph = b"The river runs north by the old stone house, past the mill and the bridge. " * 5
            with open(path, "wb") as f:
                f.write((paragraph + b"\n\n") * 105_000)
        return path

    def test_train_tokenizer_stops_at_once_on_a_signal(self):
        # The trainer pulls the text from a Rust thread; Python's own handler would wait for the whole input.
        for signum in (signal.SIGINT, signal.SIGTERM):
            out = os.path.join(self.dir, "stopped", "tok")
            rc, err, seconds = run_and_signal([sys.executable, TRAIN, "--input", self.big_text(), "--vocab-size",
                                               "5000", "--output", out, "--log-interval", "1000"], signum)
            self.assertEqual(rc, 128 + signum, err)
            self.assertLess(seconds, 10, err)
            self.assertEqual(err.count("stopping..."), 1, err)
            self.assertIn("no tokenizer written", err)
            self.assertNotIn("Traceback", err)
            self.assertFalse(os.path.exists(os.path.dirname(out)), "the folders it made are left behind")

    def test_preprocess_cleans_up_on_sigterm(self):
        out = os.path.join(self.dir, "term")
        for workers in ("1", "2"):
            rc, err, _ = run_and_signal([sys.executable, PREPROCESS, "--input", self.big_text(), "--output-prefix",
                                         out + "/x", "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model",
                                         self.tok, "--workers", workers, "--log-interval", "1000"], signal.SIGTERM)
            self.assertEqual(rc, 143, err)
            self.assertIn("terminated: no output written", err)
            self.assertNotIn("Traceback", err)
            self.assertEqual(os.listdir(out), [], "SIGTERM left the unfinished outputs behind")

    # --- the tokenizer folder ---------------------------------------------------------------------------

    def test_output_with_a_tokenizer_needs_force(self):
        out = os.path.join(self.dir, "force")
        shutil.copytree(self.tok, out)
        before = read_folder(out)
        t = [sys.executable, TRAIN, "--input", SAMPLE, "--vocab-size", "600", "--output", out]
        self.expect_error(t, f"--output {out} already holds a tokenizer (tokenizer.json, tokenizer_config.json, "
                             f"special_tokens_map.json)", "--force")
        self.assertEqual(read_folder(out), before)
        proc = run(*t, "--force")
        self.assertIn("training merges", proc.stderr)  # what the trainer does after the progress line
        replaced = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
        self.assertLessEqual(replaced.get_vocab_size(with_added_tokens=True), 600)
        self.assertEqual(sorted(os.listdir(out)), TOKENIZER_FILES)
        # Another tokenizer's vocabulary would stay beside the new one: refused even with --force.
        open(os.path.join(out, "vocab.json"), "w").close()
        self.expect_error(t + ["--force"], "vocab.json would stay beside the new tokenizer")
        self.assertIn("--force", run(sys.executable, TRAIN, "--help").stdout)

    def test_full_disk_changes_nothing(self):
        out = os.path.join(self.dir, "full_disk")
        shutil.copytree(self.tok, out)
        before = read_folder(out)
        for fail_at in ("1", "3"):  # tokenizer.json's sync; the last file's, after two were written
            proc = subprocess.run([sys.executable, "-c", FULL_DISK_WRAPPER, TRAIN, "--input", SAMPLE, "--vocab-size",
                                   "600", "--output", out, "--force"], capture_output=True, text=True, timeout=120,
                                  env={**os.environ, "SG_FAIL_FSYNC_AT": fail_at})
            self.assertEqual(proc.returncode, 1, proc.stderr)
            self.assertNotIn("Traceback", proc.stderr)
            self.assertEqual(proc.stderr.strip().splitlines()[-1],
                             f"error: cannot write the tokenizer to {out}: No space left on device (nothing in it "
                             f"was changed); free space or choose a writable --output")
            self.assertEqual(sorted(os.listdir(out)), TOKENIZER_FILES, "temporary files left behind")
            self.assertEqual(read_folder(out), before)

    def test_a_failed_finalize_leaves_no_temporaries(self):
        # Any failure while the .idx is written (not only a full disk) removes both temporary files.
        IndexedDatasetWriter = sgtools_module("indexed_dataset").IndexedDatasetWriter
        prefix = os.path.join(self.dir, "interrupted", "corpus")
        for error in (KeyboardInterrupt, ValueError):
            writer = IndexedDatasetWriter(prefix, np.uint16)
            writer.add_documents(np.array([1, 2, 3], dtype=np.uint16), [[3]])

            def fail():
                raise error("while writing the index")
            writer.index_bytes = fail
            with self.assertRaises(error):
                writer.finalize()
            self.assertEqual(os.listdir(os.path.dirname(prefix)), [], error.__name__)

    def test_eod_from_special_tokens_map(self):
        # A layout transformers writes: the eos_token only in special_tokens_map.json. The C++ trainer takes
        # the EOD from there (src/data/hf_tokenizer.cpp), so --append-eod must too.
        folder = os.path.join(self.dir, "tok_map")
        os.makedirs(folder, exist_ok=True)
        shutil.copy(os.path.join(self.tok, "tokenizer.json"), folder)
        text = os.path.join(self.dir, "eod.jsonl")
        with open(text, "w") as f:
            f.write('{"text": "The river"}\n')
        for config in ({"tokenizer_class": "PreTrainedTokenizerFast"}, {"eos_token": None}):
            with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
                json.dump(config, f)
            with open(os.path.join(folder, "special_tokens_map.json"), "w") as f:
                json.dump({"eos_token": {"content": "<|endoftext|>", "lstrip": False}}, f)
            prefix = os.path.join(self.dir, "eod_map", "e")
            preprocess(folder, prefix, "--append-eod", inputs=(text,))
            self.assertEqual(read_documents(prefix + "_text_document")[0].tolist(),
                             self.tokenizer.encode("The river").ids + [0])
        with open(os.path.join(folder, "special_tokens_map.json"), "w") as f:
            json.dump({"eos_token": "<|nope|>"}, f)
        self.expect_error([sys.executable, PREPROCESS, "--input", text, "--output-prefix", prefix, "--tokenizer-type",
                           "HuggingFaceTokenizer", "--tokenizer-model", folder, "--append-eod"],
                          f"{folder}/special_tokens_map.json names eos_token '<|nope|>'")
        os.remove(os.path.join(folder, "special_tokens_map.json"))
        self.expect_error([sys.executable, PREPROCESS, "--input", text, "--output-prefix", prefix, "--tokenizer-type",
                           "HuggingFaceTokenizer", "--tokenizer-model", folder, "--append-eod"],
                          "names no eos_token in tokenizer_config.json or special_tokens_map.json")

    # --- input details ----------------------------------------------------------------------------------

    def test_lone_surrogate_is_an_error(self):
        path = os.path.join(self.dir, "surrogate.jsonl")
        with open(path, "w") as f:
            f.write('{"text": "fine"}\n{"text": "a \\ud800 b"}\n{"text": ["x", "\\udc00"]}\n')
        message = f"error: {path}:2: key 'text' holds text that is not valid Unicode (lone surrogate \\ud800)"
        out = os.path.join(self.dir, "surrogate_out")
        for workers in ("1", "2"):
            self.expect_error([sys.executable, PREPROCESS, "--input", path, "--output-prefix", out + "/x",
                               "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", self.tok,
                               "--workers", workers], message, leaves=out)
        self.expect_error([sys.executable, TRAIN, "--input", path, "--vocab-size", "300", "--output",
                           os.path.join(self.dir, "surrogate_tok")], message)
        with open(path, "w") as f:
            f.write('{"text": ["x", "\\udc00"]}\n')
        self.expect_error([sys.executable, TRAIN, "--input", path, "--vocab-size", "300", "--output",
                           os.path.join(self.dir, "surrogate_tok")],
                          f"{path}:1: item 1 of key 'text' holds text that is not valid Unicode (lone surrogate "
                          f"\\udc00)")

    def test_array_with_a_non_string_item(self):
        path = os.path.join(self.dir, "mixed.jsonl")
        with open(path, "w") as f:
            f.write('{"text": ["a", 1]}\n')
        self.expect_error([sys.executable, PREPROCESS, "--input", path, "--output-prefix", self.dir + "/mixed/x",
                           "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", self.tok],
                          f"{path}:1: key 'text' holds an array whose item 1 is a JSON number")

    def test_byte_order_mark_and_capital_suffixes(self):
        # A BOM is not text (utf-8-sig); .JSONL.GZ is .jsonl.gz. Each gives what the plain file gives.
        docs = [{"text": "First document."}, {"text": "Second."}]
        plain = os.path.join(self.dir, "plain.jsonl")
        with open(plain, "w") as f:
            f.writelines(json.dumps(d) + "\n" for d in docs)
        with open(plain, "rb") as f:
            bom_jsonl = b"\xef\xbb\xbf" + f.read()
        bom = os.path.join(self.dir, "bom.jsonl")
        with open(bom, "wb") as f:
            f.write(bom_jsonl)
        bom_txt = os.path.join(self.dir, "bom.txt")
        with open(bom_txt, "wb") as f:
            f.write(b"\xef\xbb\xbfFirst document.\n\nSecond.\n")
        capital = os.path.join(self.dir, "CAPITAL.JSONL.GZ")
        with open(capital, "wb") as f:
            f.write(gzip.compress(bom_jsonl, mtime=0))
        expected = None
        for i, path in enumerate((plain, bom, bom_txt, capital)):
            prefix = os.path.join(self.dir, "bom_out", str(i))
            preprocess(self.tok, prefix, "--append-eod", inputs=(path,))
            got = [d.tolist() for d in read_documents(prefix + "_text_document")]
            expected = expected or got
            self.assertEqual(got, expected, path)
        self.assertEqual(expected, [self.tokenizer.encode(d["text"]).ids + [0] for d in docs])

    def test_inputs_are_files_given_once(self):
        out = os.path.join(self.dir, "once")
        p = [sys.executable, PREPROCESS, "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", self.tok,
             "--output-prefix", out + "/x", "--input"]
        pattern = os.path.join(self.dir, "*.jsonl")
        self.expect_error(p + [pattern], f"input file {pattern} does not exist", "does not expand patterns",
                          "leave the pattern unquoted", leaves=out)
        alias = os.path.join(self.dir, ".", "sample_again.jsonl")
        os.symlink(SAMPLE, alias)
        for tool in (p, [sys.executable, TRAIN, "--vocab-size", "300", "--output", out + "/tok", "--input"]):
            self.expect_error(tool + [SAMPLE, SAMPLE], f"input file {SAMPLE} is given twice", "list each file once",
                              leaves=out)
            self.expect_error(tool + [SAMPLE, alias], f"is given twice (as {SAMPLE} and {alias})", leaves=out)

    def test_gz_progress_counts_compressed_bytes(self):
        # The progress bar's total is the files' size, compressed for .gz: what is read must count the same.
        corpus = sgtools_module("corpus")
        check_inputs, read_records = corpus.check_inputs, corpus.read_records
        path = os.path.join(self.dir, "progress.jsonl.gz")
        with open(SAMPLE, "rb") as f:
            data = f.read()
        with open(path, "wb") as f:
            f.write(gzip.compress(data * 20, mtime=0))  # repeated: compresses far below its size
        total = check_inputs([path])
        self.assertLess(total * 10, len(data) * 20)
        sizes = [r.size for r in read_records([path])]
        self.assertEqual(sum(sizes), total)
        self.assertTrue(all(s >= 0 for s in sizes))
        self.assertEqual(sum(r.size for r in read_records([SAMPLE])), os.path.getsize(SAMPLE))

    def test_dataset_writer_removes_the_old_index_before_replacing_the_bin(self):
        # A kill between finalize()'s two renames (simulated: the second one raises, and the clean-up a killed
        # process never runs is switched off) must not leave the old .idx beside the new .bin: a stale .idx of
        # the same size reads as valid.
        IndexedDatasetWriter = sgtools_module("indexed_dataset").IndexedDatasetWriter
        prefix = os.path.join(self.dir, "replaced", "corpus")

        def write(documents, killed=False):
            w = IndexedDatasetWriter(prefix, np.uint16)
            w.add_documents(np.asarray(sum(documents, []), dtype=np.int64), [[len(d)] for d in documents])
            if killed:
                w.abort = lambda: None
            w.finalize()

        class Killed(BaseException):
            pass

        write([[1, 2, 3], [4, 5]])
        real_replace, renamed = os.replace, []

        def replace(src, dst):
            renamed.append(dst)
            if len(renamed) == 2:
                raise Killed
            real_replace(src, dst)

        os.replace = replace
        try:
            with self.assertRaises(Killed):
                write([[9], [8, 7, 6, 5]], killed=True)  # as many tokens as the old corpus
        finally:
            os.replace = real_replace
        self.assertEqual(renamed, [prefix + ".bin", prefix + ".idx"])
        self.assertFalse(os.path.exists(prefix + ".idx"), "the old .idx stayed beside the new .bin")
        proc = run(STEPGRAPH, "data", "inspect", prefix, expect_rc=1)
        self.assertIn(f"{prefix}.idx.tmp is left from a write of {prefix} that did not finish", proc.stderr)
        write([[9], [8, 7, 6, 5]])
        self.assertEqual([d.tolist() for d in read_documents(prefix)], [[9], [8, 7, 6, 5]])
        self.assertEqual(sorted(os.listdir(os.path.dirname(prefix))), ["corpus.bin", "corpus.idx"])

    def test_preprocess_next_line_names_the_checkouts_binary(self):
        binary = os.path.join(ROOT, "build", "src", "stepgraph")
        for cwd, expected in ((self.dir, binary), (ROOT, os.path.join("build", "src", "stepgraph"))):
            proc = subprocess.run([sys.executable, PREPROCESS, "--input", SAMPLE, "--output-prefix",
                                   os.path.join(self.dir, "next_bin", "n"), "--tokenizer-type", "HuggingFaceTokenizer",
                                   "--tokenizer-model", self.tok], cwd=cwd, capture_output=True, text=True, timeout=120)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            line = [l for l in proc.stdout.splitlines() if l.strip().startswith("next:")][0]
            cmd = shlex.split(line.split("next:", 1)[1])
            self.assertEqual(cmd[0], expected)
            self.assertEqual(cmd[1:3], ["data", "inspect"])

    def test_help(self):
        for tool, flags in ((TRAIN, ("--vocab-size", "--min-frequency", "--special-tokens", "EOD")),
                            (PREPROCESS, ("--append-eod", "--workers", "--json-keys", "_text_document",
                                          "--txt-document-per-file"))):
            out = run(sys.executable, tool, "--help").stdout
            for flag in flags:
                self.assertIn(flag, out)


if __name__ == "__main__":
    sys.exit(tool_test_common.main(__doc__, globals()))
