#!/usr/bin/env python3
"""Text -> tokenizer -> .bin/.idx, checked end to end on the CPU (ctest tools/tokenizer_tools_test, label cpu).

On the tokenizer and dataset of tokenizer_tools_fixture.TokenizerToolsCase, checks:
  - `stepgraph data inspect` (the C++ reader, every check it makes) accepts the dataset and its counts,
    dtype and first tokens are the ones the tokenizer gives;
  - the .idx is Megatron's layout byte for byte, its offsets tile the .bin exactly;
  - every document decodes back to its text, EOD last; 1 and 2 workers write identical files;
  - transformers.AutoTokenizer loads the folder and agrees (skipped with a notice without transformers);
  - .txt and .gz input (paragraphs, one document per file), JSON lists, Megatron-LM's flags;
  - train_tokenizer's closing `next:` command runs as printed, preprocess_data's names the checkout's binary;
  - the EOD comes from tokenizer_config.json, else special_tokens_map.json (as the C++ trainer);
  - input details: a byte order mark, .GZ suffixes in capitals, files given twice, the progress count of .gz
    inputs (compressed bytes);
  - tools/tokenizer_server.py (what `stepgraph generate` runs): --help, errors for ids outside the vocabulary;
  - a tokenizer.json saved with truncation and padding on encodes as the plain one (both turned off, as transformers
    does).
tokenizer_tools_errors_test.py checks the errors, signals and full disks.

    python3 tests/tools/tokenizer_tools_test.py --stepgraph build/src/stepgraph [-v]
"""
from __future__ import annotations

import gzip
import json
import os
import shlex
import shutil
import subprocess
import sys

import tool_test_common

import numpy as np
from tokenizer_tools_fixture import (
    TokenizerToolsCase, PREPROCESS, ROOT, SAMPLE, SERVER, TRAIN, Tokenizer, VOCAB, preprocess, read_documents,
    read_index, run, sgtools_module)

STEPGRAPH = ""  # set from --stepgraph


class TokenizerTools(TokenizerToolsCase):
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

    def test_saved_truncation_and_padding_are_turned_off(self):
        # A tokenizer.json saved after enable_truncation / enable_padding keeps them, and the raw library applies
        # them: documents cut to 8 tokens, or pad ids in the .bin. The tools encode as transformers' default call
        # (Megatron's HuggingFaceTokenizer) does: the same files as the plain folder's, and whole prompts.
        folder = os.path.join(self.dir, "tok_truncating_padding")
        shutil.copytree(self.tok, folder)
        saved = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        saved.enable_truncation(max_length=8)
        saved.enable_padding(length=96, pad_id=1, pad_token=saved.id_to_token(1))
        saved.save(os.path.join(folder, "tokenizer.json"))
        as_is = Tokenizer.from_file(os.path.join(folder, "tokenizer.json")).encode(self.texts[0]).ids
        self.assertEqual(as_is[8:], [1] * 88, "used as is, the saved file truncates to 8 and pads to 96")
        out = os.path.join(self.dir, "truncating_padding", "sample")
        preprocess(folder, out, "--json-keys", "text", "--append-eod", "--workers", "2", "--documents-per-task", "7")
        for ext in (".bin", ".idx"):
            with open(self.dataset + ext, "rb") as a, open(out + "_text_document" + ext, "rb") as b:
                self.assertEqual(a.read(), b.read(), f"{ext} differs from the plain folder's")
        text = self.texts[0]
        proc = subprocess.run([sys.executable, SERVER, folder], capture_output=True, text=True, timeout=60,
                              input=json.dumps({"encode": text}) + "\n")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        reply = json.loads(proc.stdout.splitlines()[1])
        self.assertEqual(reply, {"ids": self.tokenizer.encode(text).ids})

    def test_server_cleans_up_spaces_where_the_config_says_so(self):
        # transformers' decode removes the space before punctuation and contractions where tokenizer_config.json sets
        # clean_up_tokenization_spaces (Llama 3's folders do); train_tokenizer writes false, which keeps the text.
        text = "Yes , it is n't here . Is it ? It 's fine !"
        ids = self.tokenizer.encode(text).ids
        folder = os.path.join(self.dir, "tok_clean_up")
        shutil.copytree(self.tok, folder)
        config_path = os.path.join(folder, "tokenizer_config.json")
        with open(config_path) as f:
            config = json.load(f)

        def decoded(clean_up):
            config["clean_up_tokenization_spaces"] = clean_up
            with open(config_path, "w") as f:
                json.dump(config, f)
            proc = subprocess.run([sys.executable, SERVER, folder], capture_output=True, text=True, timeout=60,
                                  input=json.dumps({"decode": ids}) + "\n" + json.dumps({"decode_raw": ids}) + "\n")
            self.assertEqual(proc.returncode, 0, proc.stderr)
            return [json.loads(line)["text"] for line in proc.stdout.splitlines()[1:]]

        self.assertEqual(decoded(False), [text, text])
        cleaned = "Yes, it isn't here. Is it? It's fine!"
        self.assertEqual(decoded(True), [cleaned, cleaned])

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
                                (["--vocab-file", "vocab.json"], "tools/convert_tokenizer.py --vocab-file"),
                                (["--merge-file", "merges.txt"], "--tokenizer-model DIR"),
                                (["--vocab-size", "50257"], "the vocabulary is the tokenizer folder's"),
                                (["--find-optimal-num-workers"], "time a few values"),
                                (["--workers-to-check", "2", "4"], "pass --workers N"),
                                (["--max-documents", "10"], "--find-optimal-num-workers, which is not supported"),
                                (["--performance-dir", "perf"], "--find-optimal-num-workers, which is not supported"),
                                (["--partitions", "0"], "--partitions must be at least 1")):
            self.expect_error(p + flags, f"error: {flags[0]}" if flags[0] != "--partitions" else "error: ", fragment)
        self.expect_error(p[:-2], "--tokenizer-model DIR is required")

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
