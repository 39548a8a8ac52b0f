#!/usr/bin/env python3
"""The tokenizer tools' errors and run lifecycle, on the CPU (ctest tools/tokenizer_tools_errors_test, label cpu).

On the tokenizer and dataset of tokenizer_tools_fixture.TokenizerToolsCase, checks:
  - the error messages of both tools (corrupt .gz, empty input, unwritable outputs checked before the work),
    lone surrogates and arrays with a non-string item;
  - stop signals: train_tokenizer stops at once while the trainer reads (its iterator runs on a Rust thread),
    preprocess_data cleans up on SIGTERM as on Ctrl-C; both exit 128 + N and write nothing;
  - the tokenizer folder is written all or nothing (a full disk simulated), never over a tokenizer without
    --force; a failed finalize leaves no temporaries; the dataset writer removes the old index before it
    replaces the .bin.

    python3 tests/tools/tokenizer_tools_errors_test.py --stepgraph build/src/stepgraph [-v]
"""
from __future__ import annotations

import gzip
import os
import shutil
import signal
import subprocess
import sys

import tool_test_common

import numpy as np
from tokenizer_tools_fixture import (
    TokenizerToolsCase, FULL_DISK_WRAPPER, PREPROCESS, SAMPLE, TOKENIZER_FILES, TRAIN, Tokenizer, preprocess,
    read_documents, read_folder, run, run_and_signal, sgtools_module)

STEPGRAPH = ""  # set from --stepgraph


class TokenizerToolsErrors(TokenizerToolsCase):
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
                                   self.tok, "--output-prefix", out + "/x"], "GPT2BPETokenizer is not read here",
                          "tools/convert_tokenizer.py --vocab-file")
        self.expect_error(p[:2] + ["--tokenizer-type", "BertWordPieceCase", "--input", SAMPLE, "--tokenizer-model",
                                   self.tok, "--output-prefix", out + "/x"], "BertWordPieceCase is not supported")
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


if __name__ == "__main__":
    sys.exit(tool_test_common.main(__doc__, globals()))
