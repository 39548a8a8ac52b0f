#!/usr/bin/env python3
"""tools/convert_tokenizer.py: Megatron-LM's GPT2BPETokenizer files (vocab.json + merges.txt) into a tokenizer
folder, checked on the CPU (ctest tools/convert_tokenizer_test, label cpu).

The files are GPT-2's layout made small: a byte-level BPE of 600 tokens trained on
tests/data/public_domain_sample.jsonl, saved as vocab.json and merges.txt ('#version' line first), "<|endoftext|>"
appended last (id 600, as GPT-2's 50256).
Checks:
  - the converted folder encodes every sample document (and a text of spaces, digits, contractions, underscores and
    non-ASCII letters) to the ids of GPT-2's own encoder, written out below from OpenAI's algorithm (the byte-to-
    unicode table, the pre-tokenization pattern, merges by rank), and decodes back to the text; transformers'
    GPT2Tokenizer on the same two files agrees too (skipped with a notice without transformers);
  - `stepgraph validate` reads the folder (601 ids, padded to 640), and tools/preprocess_data.py with it writes a
    dataset whose documents are those ids with the EOD (600) last;
  - errors name the file, the line or the flag: a merge whose token the vocabulary lacks, a vocabulary that is no
    JSON object or gives an id twice, an EOD token not in it, an output folder holding a tokenizer (without --force);
    preprocess_data.py's --vocab-file and stepgraph's GPT2BPETokenizer point at this tool.

    python3 tests/tools/convert_tokenizer_test.py --stepgraph build/src/stepgraph [-v]
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import tool_test_common
from tokenizer_tools_fixture import PREPROCESS, ROOT, SAMPLE, read_documents, run

CONVERT = os.path.join(ROOT, "tools", "convert_tokenizer.py")
EOD = "<|endoftext|>"
STEPGRAPH = ""  # set from --stepgraph

# GPT-2's pre-tokenization pattern with Python's re: \p{L} as [^\W\d_], \p{N} as \d (the same on this text).
GPT2_PATTERN = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+""")
EXTRA_TEXT = ("  two  spaces\n\nnew lines 123 4567 don't it's we'll _under_score_ cafe\u0301 na\u00efve "
              "\u6771\u4eac \t end")


def bytes_to_unicode() -> dict[int, str]:
    """OpenAI's table: printable bytes map to themselves, the others to code points from 256 on."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + \
        list(range(ord("\u00ae"), ord("\u00ff") + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


class Gpt2Encoder:
    """GPT-2's encoder (what Megatron-LM's GPT2BPETokenizer runs): each piece's byte characters merged by rank."""

    def __init__(self, vocab: dict[str, int], merges: list[tuple[str, str]]):
        self.vocab = vocab
        self.ranks = {pair: i for i, pair in enumerate(merges)}
        self.byte_chars = bytes_to_unicode()

    def bpe(self, word: str) -> list[str]:
        parts = list(word)
        while len(parts) > 1:
            pairs = [(self.ranks.get((a, b), len(self.ranks)), i) for i, (a, b) in enumerate(zip(parts, parts[1:]))]
            rank, _ = min(pairs)
            if rank == len(self.ranks):
                break
            merged, i = [], 0
            while i < len(parts):
                if i + 1 < len(parts) and self.ranks.get((parts[i], parts[i + 1])) == rank:
                    merged.append(parts[i] + parts[i + 1])
                    i += 2
                else:
                    merged.append(parts[i])
                    i += 1
            parts = merged
        return parts

    def encode(self, text: str) -> list[int]:
        ids = []
        for piece in GPT2_PATTERN.findall(text):
            word = "".join(self.byte_chars[b] for b in piece.encode("utf-8"))
            ids += [self.vocab[token] for token in self.bpe(word)]
        return ids


def sample_texts() -> list[str]:
    with open(SAMPLE, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f if line.strip()]


class ConvertTokenizer(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        from tokenizers import Tokenizer, models, pre_tokenizers, trainers
        cls.tmp = tempfile.mkdtemp(prefix="sg_convert_tokenizer_")
        cls.files = os.path.join(cls.tmp, "gpt2")
        os.makedirs(cls.files)
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        trainer = trainers.BpeTrainer(vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                      show_progress=False)
        tokenizer.train_from_iterator(sample_texts(), trainer)
        tokenizer.model.save(cls.files)  # vocab.json, merges.txt
        cls.vocab_file = os.path.join(cls.files, "vocab.json")
        cls.merge_file = os.path.join(cls.files, "merges.txt")
        with open(cls.vocab_file, encoding="utf-8") as f:
            cls.vocab = json.load(f)
        cls.vocab[EOD] = len(cls.vocab)  # last, as GPT-2's
        with open(cls.vocab_file, "w", encoding="utf-8") as f:
            json.dump(cls.vocab, f, ensure_ascii=False)
        with open(cls.merge_file, encoding="utf-8") as f:
            lines = f.read().split("\n")
        assert lines[0].startswith("#version"), lines[0]
        cls.merges = [tuple(line.split(" ")) for line in lines[1:] if line]
        cls.folder = os.path.join(cls.tmp, "tok")
        cls.out = run(sys.executable, CONVERT, "--vocab-file", cls.vocab_file, "--merge-file", cls.merge_file,
                      "--output", cls.folder).stdout

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def convert(self, *args: str, expect_rc: int = 0) -> subprocess.CompletedProcess:
        return run(sys.executable, CONVERT, *args, expect_rc=expect_rc)

    def test_report(self):
        self.assertEqual(len(self.vocab), 601)
        self.assertIn(f"vocabulary:  601 ids (601 tokens), {len(self.merges)} merges", self.out)
        self.assertIn(f"EOD:         {EOD} = id 600", self.out)
        with open(os.path.join(self.folder, "tokenizer_config.json"), encoding="utf-8") as f:
            self.assertEqual(json.load(f)["eos_token"], EOD)

    def test_ids_are_gpt2_encoders(self):
        from tokenizers import Tokenizer
        converted = Tokenizer.from_file(os.path.join(self.folder, "tokenizer.json"))
        reference = Gpt2Encoder(self.vocab, self.merges)
        texts = sample_texts() + [EXTRA_TEXT]
        for text in texts:
            ids = converted.encode(text).ids
            self.assertEqual(ids, reference.encode(text), text[:60])
            self.assertEqual(converted.decode(ids), text)
        self.assertGreater(sum(len(reference.encode(t)) for t in texts), 1000)
        try:
            from transformers import GPT2Tokenizer
        except ImportError:
            print("\n  notice: transformers is not installed; its GPT2Tokenizer was not compared", file=sys.stderr)
            return
        slow = GPT2Tokenizer(self.vocab_file, self.merge_file)
        for text in texts:
            self.assertEqual(converted.encode(text).ids, slow.encode(text), text[:60])

    def test_stepgraph_and_preprocess_read_the_folder(self):
        proc = run(STEPGRAPH, "validate", "llama/tiny", "tokenizer.tokenizer_type=HuggingFaceTokenizer",
                   f"tokenizer.tokenizer_model={self.folder}", "model.vocab_size=null")
        self.assertIn("vocab 640", proc.stdout)  # 601 padded to a multiple of 128
        prefix = os.path.join(self.tmp, "data", "sample")
        run(sys.executable, PREPROCESS, "--input", SAMPLE, "--output-prefix", prefix, "--tokenizer-type",
            "HuggingFaceTokenizer", "--tokenizer-model", self.folder, "--append-eod", "--workers", "1")
        reference = Gpt2Encoder(self.vocab, self.merges)
        documents = read_documents(prefix + "_text_document")
        texts = sample_texts()
        self.assertEqual(len(documents), len(texts))
        for doc, text in zip(documents, texts):
            self.assertEqual(doc.tolist(), reference.encode(text) + [600])

    def expect_error(self, args: list[str], *fragments: str):
        proc = self.convert(*args, expect_rc=1)
        for fragment in fragments:
            self.assertIn(fragment, proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)

    def test_errors_name_the_file_line_or_flag(self):
        out = os.path.join(self.tmp, "never")
        bad_merges = os.path.join(self.tmp, "bad_merges.txt")
        with open(bad_merges, "w", encoding="utf-8") as f:
            f.write("#version: 0.2\n" + "\n".join(" ".join(m) for m in self.merges[:3]) + "\nq \u00e9zz\n")
        self.expect_error(["--vocab-file", self.vocab_file, "--merge-file", bad_merges, "--output", out],
                          f"{bad_merges}:5: the merge 'q \u00e9zz' needs '\u00e9zz'", "not one tokenizer's")
        not_json = os.path.join(self.tmp, "vocab.txt")
        with open(not_json, "w", encoding="utf-8") as f:
            f.write("hello 0\n")
        self.expect_error(["--vocab-file", not_json, "--merge-file", self.merge_file, "--output", out],
                          f"--vocab-file {not_json} is not JSON")
        twice = os.path.join(self.tmp, "twice.json")
        with open(twice, "w", encoding="utf-8") as f:
            json.dump({"a": 0, "b": 0}, f)
        self.expect_error(["--vocab-file", twice, "--merge-file", self.merge_file, "--output", out],
                          "id 0 belongs to both 'a' and 'b'")
        self.expect_error(["--vocab-file", self.vocab_file, "--merge-file", self.merge_file, "--output", out,
                           "--eos-token", "</s>"], "--eos-token '</s>' is not in --vocab-file")
        self.assertFalse(os.path.exists(out), "a refused conversion writes nothing")
        self.expect_error(["--vocab-file", self.vocab_file, "--merge-file", self.merge_file, "--output", self.folder],
                          "already holds a tokenizer", "--force")
        self.convert("--vocab-file", self.vocab_file, "--merge-file", self.merge_file, "--output", self.folder,
                     "--force")
        # The same merges with CRLF line ends (read as text: universal newlines) convert to the same tokenizer.json.
        crlf = os.path.join(self.tmp, "crlf_merges.txt")
        with open(self.merge_file, encoding="utf-8") as f, open(crlf, "w", encoding="utf-8", newline="") as g:
            g.write(f.read().replace("\n", "\r\n"))
        again = os.path.join(self.tmp, "tok_crlf")
        self.convert("--vocab-file", self.vocab_file, "--merge-file", crlf, "--output", again)
        for name in ("tokenizer.json", "tokenizer_config.json"):
            with open(os.path.join(self.folder, name), "rb") as a, open(os.path.join(again, name), "rb") as b:
                self.assertEqual(a.read(), b.read(), name)

    def test_megatron_spellings_point_here(self):
        proc = run(sys.executable, PREPROCESS, "--input", SAMPLE, "--output-prefix", os.path.join(self.tmp, "x"),
                   "--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", self.vocab_file, "--merge-file",
                   self.merge_file, expect_rc=1)
        self.assertIn("tools/convert_tokenizer.py --vocab-file", proc.stderr)
        proc = run(STEPGRAPH, "validate", "llama/tiny", "tokenizer.tokenizer_type=GPT2BPETokenizer",
                   f"tokenizer.tokenizer_model={self.files}", expect_rc=1)
        self.assertIn("tools/convert_tokenizer.py --vocab-file", proc.stdout + proc.stderr)


if __name__ == "__main__":
    sys.exit(tool_test_common.main(__doc__, globals()))
