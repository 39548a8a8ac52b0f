#!/usr/bin/env python3
"""Text -> tokenizer -> .bin/.idx, checked end to end on the CPU (ctest tools/tokenizer_tools, label cpu).

Trains a byte-level BPE (vocabulary <= 2000) on tests/data/public_domain_sample.jsonl with
tools/train_tokenizer.py, tokenizes the sample with tools/preprocess_data.py on 2 workers, then checks:
  - `stepgraph data inspect` (the C++ reader, every check it makes) accepts the dataset and its counts,
    dtype and first tokens are the ones the tokenizer gives;
  - the .idx is Megatron's layout byte for byte, its offsets tile the .bin exactly;
  - every document decodes back to its text, EOD last; 1 and 2 workers write identical files;
  - transformers.AutoTokenizer loads the folder and agrees (skipped with a notice without transformers);
  - .txt and .gz input (paragraphs, one document per file) and the error messages of both tools (corrupt
    .gz, empty input, unwritable outputs checked before the work, Megatron-LM's flags);
  - train_tokenizer's closing `next:` command runs as printed;
  - tools/tokenizer_server.py (what `stepgraph generate` runs): --help, errors for ids outside the vocabulary.

    python3 tests/tools/tokenizer_tools_test.py --stepgraph build/src/stepgraph [-v]
"""
from __future__ import annotations

import gzip
import json
import os
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
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

    def test_help(self):
        for tool, flags in ((TRAIN, ("--vocab-size", "--min-frequency", "--special-tokens", "EOD")),
                            (PREPROCESS, ("--append-eod", "--workers", "--json-keys", "_text_document",
                                          "--txt-document-per-file"))):
            out = run(sys.executable, tool, "--help").stdout
            for flag in flags:
                self.assertIn(flag, out)


if __name__ == "__main__":
    sys.exit(tool_test_common.main(__doc__, globals()))
