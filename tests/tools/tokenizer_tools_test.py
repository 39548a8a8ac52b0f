#!/usr/bin/env python3
"""Text -> tokenizer -> .bin/.idx, checked end to end on the CPU (ctest tools/tokenizer_tools, label cpu).

Trains a byte-level BPE (vocabulary <= 2000) on tests/data/public_domain_sample.jsonl with
tools/train_tokenizer.py, tokenizes the sample with tools/preprocess_data.py on 2 workers, then checks:
  - `stepgraph data inspect` (the C++ reader, every check it makes) accepts the dataset and its counts,
    dtype and first tokens are the ones the tokenizer gives;
  - the .idx is Megatron's layout byte for byte, its offsets tile the .bin exactly;
  - every document decodes back to its text, EOD last; 1 and 2 workers write identical files;
  - transformers.AutoTokenizer loads the folder and agrees (skipped with a notice without transformers);
  - .txt input (paragraphs, one document per file) and the error messages of both tools.

    python3 tests/tools/tokenizer_tools_test.py --stepgraph build/src/stepgraph [-v]
"""
from __future__ import annotations

import json
import os
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

    def test_train_tokenizer_errors(self):
        t = [sys.executable, TRAIN, "--output", os.path.join(self.dir, "never")]
        self.expect_error(t + ["--input", SAMPLE, "--vocab-size", "200"], "--vocab-size 200 is too small", "257")
        self.expect_error(t + ["--input", os.path.join(self.dir, "nope.txt"), "--vocab-size", "500"],
                          "nope.txt does not exist")
        self.expect_error(t + ["--input", SAMPLE, "--json-keys", "body", "--vocab-size", "500"],
                          f"{SAMPLE}:1: no key 'body'")
        self.assertFalse(os.path.exists(os.path.join(self.dir, "never")))

    def test_help(self):
        for tool, flags in ((TRAIN, ("--vocab-size", "--min-frequency", "--special-tokens", "EOD")),
                            (PREPROCESS, ("--append-eod", "--workers", "--json-keys", "_text_document",
                                          "--txt-document-per-file"))):
            out = run(sys.executable, tool, "--help").stdout
            for flag in flags:
                self.assertIn(flag, out)


if __name__ == "__main__":
    sys.exit(tool_test_common.main(__doc__, globals()))
