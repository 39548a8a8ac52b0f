#!/usr/bin/env python3
"""Your own data, end to end on the CPU (ctest tools/user_data_path_test, label cpu): the README's path

  text -> tools/train_tokenizer.py -> tools/preprocess_data.py -> `stepgraph train my_run.yaml`

on tests/data/public_domain_sample.jsonl, with a YAML file of the user's own (the tokenizer section,
dataset.split, validation every 3 steps, TensorBoard events, checkpoints) and a tiny model on the CPU
backend, then checks what the run leaves:
  - runs/my_run/ (the YAML file's stem): config.yaml (resolved: model.vocab_size taken from the tokenizer,
    padded to 128), metrics.jsonl (step lines with wall time and tokens, val_loss/val_ppl lines), report.html
    (inline SVG charts, no script, no network);
  - every checkpoint folder holds the tokenizer's tokenizer.json, tokenizer_config.json and
    special_tokens_map.json byte for byte; transformers.AutoTokenizer loads it (skipped with a notice
    without transformers);
  - the TensorBoard event file reads with the tensorboard package's EventAccumulator (else with protobuf's
    parser and the schema compiled by protoc; else only its TFRecord framing is checked) and holds the
    losses of metrics.jsonl; after a branch from step 3 into the same TensorBoard folder, TensorBoard shows each
    step once (the branch's session start drops the first run's later steps);
  - evaluation does not change training: the same run without validation has bitwise equal losses;
  - `stepgraph generate` on the save directory uses the tokenizer copied into the checkpoint.

    python3 tests/tools/user_data_path_test.py --stepgraph build/src/stepgraph [-v]
"""
from __future__ import annotations

import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

import tool_test_common

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN_TOKENIZER = os.path.join(ROOT, "tools", "train_tokenizer.py")
PREPROCESS = os.path.join(ROOT, "tools", "preprocess_data.py")
SAMPLE = os.path.join(ROOT, "tests", "data", "public_domain_sample.jsonl")
PROTO = os.path.join(ROOT, "src", "train", "tensorboard_event.proto")
STEPGRAPH = ""  # set from --stepgraph
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")

RUN_YAML = """\
# my_run.yaml: a tiny Llama on my own text (the README's "Your own data")
model:
  vocab_size: null                # from the tokenizer, padded to make_vocab_size_divisible_by
  num_layers: 2
  hidden_size: 64
  ffn_hidden_size: 128
  num_attention_heads: 4
  num_query_groups: 2
  seq_length: 64
train:
  micro_batch_size: 2
  global_batch_size: 4
  train_iters: {iters}
validation:
  eval_interval: {eval_interval}
  eval_iters: 2
optimizer:
  lr: 3.0e-3
scheduler:
  lr_warmup_iters: 1
  lr_decay_style: cosine
dataset:
  data_path: [{data}]
  split: "90,10,0"
tokenizer:
  tokenizer_type: HuggingFaceTokenizer
  tokenizer_model: {tok}
checkpoint:
  save: {save}
  save_interval: 3
logger:
  log_interval: 1
  tensorboard_dir: {tb}
"""


def run(*cmd: str, cwd: str | None = None, expect_rc: int = 0) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=240, cwd=cwd)
    if proc.returncode != expect_rc:
        raise AssertionError(f"{' '.join(cmd)}\nexited {proc.returncode}, expected {expect_rc}\n"
                             f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


def read_jsonl(path: str) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def tfrecords(path: str) -> list[bytes]:
    """The records of a TFRecord file (length, masked CRC, data, masked CRC); framing checked."""
    out = []
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        if pos + 16 + length > len(data):
            raise AssertionError(f"{path}: truncated record at byte {pos}")
        out.append(data[pos + 12: pos + 12 + length])
        pos += 16 + length
    return out


def read_scalars(event_file: str, work: str) -> tuple[dict[str, list[tuple[int, float]]], str]:
    """tag -> [(step, value)], and which reader read it."""
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError:
        EventAccumulator = None
    if EventAccumulator is not None:
        acc = EventAccumulator(event_file, size_guidance={"scalars": 0})
        acc.Reload()
        return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}, \
            "tensorboard EventAccumulator"
    # protobuf's own parser with our schema compiled by protoc.
    out = os.path.join(work, "pb")
    os.makedirs(out, exist_ok=True)
    subprocess.run(["protoc", f"--python_out={out}", "-I", os.path.dirname(PROTO), PROTO], check=True)
    sys.path.insert(0, out)
    import tensorboard_event_pb2 as pb  # noqa: E402
    scalars: dict[str, list[tuple[int, float]]] = {}
    for record in tfrecords(event_file):
        event = pb.Event.FromString(record)
        for value in event.summary.value:
            scalars.setdefault(value.tag, []).append((event.step, value.simple_value))
    return scalars, "protobuf (python) with src/train/tensorboard_event.proto"


def f32(x: float) -> float:
    return struct.unpack("f", struct.pack("f", x))[0]


class UserDataPath(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="sg_user_data_path_")
        d = cls.dir = cls.tmp.name
        cls.tok = os.path.join(d, "tok")
        run(sys.executable, TRAIN_TOKENIZER, "--input", SAMPLE, "--vocab-size", "2000", "--output", cls.tok)
        run(sys.executable, PREPROCESS, "--input", SAMPLE, "--json-keys", "text", "--output-prefix",
            os.path.join(d, "data", "sample"), "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model",
            cls.tok, "--append-eod", "--workers", "2")
        cls.data = os.path.join(d, "data", "sample_text_document")
        cls.runs = {}
        for name, eval_interval in (("my_run", 3), ("no_eval", "null")):
            with open(os.path.join(d, name + ".yaml"), "w") as f:
                f.write(RUN_YAML.format(iters=6, eval_interval=eval_interval, data=cls.data, tok=cls.tok,
                                        save=os.path.join(d, "ckpt_" + name), tb=os.path.join(d, "tb_" + name)))
            cls.runs[name] = run(STEPGRAPH, "train", name + ".yaml", "--cpu", "--plain", cwd=d)
        cls.run_dir = os.path.join(d, "runs", "my_run")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_run_folder_is_named_after_the_yaml_stem(self):
        for name in ("config.yaml", "metrics.jsonl", "report.html"):
            self.assertTrue(os.path.isfile(os.path.join(self.run_dir, name)), name)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "runs", "my_run.yaml")))

    def test_vocabulary_comes_from_the_tokenizer(self):
        from tokenizers import Tokenizer
        vocab = Tokenizer.from_file(os.path.join(self.tok, "tokenizer.json")).get_vocab_size(with_added_tokens=True)
        padded = (vocab + 127) // 128 * 128
        with open(os.path.join(self.run_dir, "config.yaml")) as f:
            config = f.read()
        # Derived from the tokenizer: null, so a rerun with another tokenizer takes its size; the value in a comment.
        self.assertIn(f"  vocab_size: null  # = {padded} (", config)
        self.assertIn("tokenizer:\n  tokenizer_type: HuggingFaceTokenizer\n", config)
        log = self.runs["my_run"].stderr
        self.assertIn(f"model.vocab_size {padded}", log)
        self.assertIn("EOD <|endoftext|> = 0", log)
        # The resolved config validates as it is (it would run again).
        run(STEPGRAPH, "validate", os.path.join(self.run_dir, "config.yaml"))

    def test_metrics_have_validation_wall_time_and_tokens(self):
        lines = read_jsonl(os.path.join(self.run_dir, "metrics.jsonl"))
        steps = [l for l in lines if "loss" in l]
        evals = [l for l in lines if "val_loss" in l]
        self.assertEqual([l["step"] for l in steps], [1, 2, 3, 4, 5, 6])
        self.assertEqual([l["step"] for l in evals], [3, 6])
        for l in steps:
            self.assertEqual(l["tokens"], l["step"] * 4 * 64)
            self.assertGreaterEqual(l["wall_time_s"], 0.0)
        for l in evals:
            self.assertTrue(math.isfinite(l["val_loss"]))
            self.assertAlmostEqual(l["val_ppl"], math.exp(l["val_loss"]), delta=1e-6 * l["val_ppl"])
            self.assertEqual(l["eval_batches"], 2)
        log = self.runs["my_run"].stderr
        self.assertIn("val loss", log)
        self.assertIn("valid split: documents", log)  # the validation data says where it comes from
        self.assertIn("train split: documents", log)

    def test_skip_train_evaluates_the_checkpoint_as_the_run_did(self):
        # The README's step 4: validation.skip_train on the run's checkpoints gives step 6's validation loss again,
        # and changes none of the run folder's records.
        before = {name: open(os.path.join(self.run_dir, name), "rb").read() for name in ("metrics.jsonl", "config.yaml")}
        out = run(STEPGRAPH, "train", "my_run.yaml", "--cpu", "--plain", "validation.skip_train=true",
                  "checkpoint.load=" + os.path.join(self.dir, "ckpt_my_run"), cwd=self.dir)
        result_path = os.path.join(self.run_dir, "evaluations", "iter_0000006.json")
        self.assertIn("wrote runs/my_run/evaluations/iter_0000006.json", out.stderr)  # the default run folder
        with open(result_path) as f:
            result = json.load(f)
        evals = [l for l in read_jsonl(os.path.join(self.run_dir, "metrics.jsonl")) if "val_loss" in l]
        self.assertEqual(result["iteration"], 6)
        self.assertEqual(result["batches"], 2)
        self.assertEqual(f"{result['val_loss']:.9g}", f"{evals[-1]['val_loss']:.9g}")  # the bits metrics.jsonl shows
        self.assertTrue(result["weights"].endswith("iter_0000006"))
        for name, text in before.items():
            self.assertEqual(open(os.path.join(self.run_dir, name), "rb").read(), text, name)
        self.assertEqual(sorted(n for n in os.listdir(os.path.join(self.dir, "ckpt_my_run")) if n.startswith("iter_")),
                         ["iter_0000003", "iter_0000006"])

    def test_evaluation_does_not_change_training(self):
        ours = [l["loss"] for l in read_jsonl(os.path.join(self.run_dir, "metrics.jsonl")) if "loss" in l]
        plain = [l["loss"] for l in read_jsonl(os.path.join(self.dir, "runs", "no_eval", "metrics.jsonl"))
                 if "loss" in l]
        self.assertEqual(ours, plain)  # %.9g printed floats: equal text, equal bits

    def test_report_is_self_contained(self):
        with open(os.path.join(self.run_dir, "report.html")) as f:
            html = f.read()
        self.assertIn("<svg", html)
        self.assertIn("validation loss", html)
        self.assertIn("finished: step 6 of 6", html)
        self.assertNotIn("<script", html)
        self.assertNotIn("http://", html.replace("http://www.w3.org", ""))

    def test_checkpoints_carry_the_tokenizer(self):
        ckpt = os.path.join(self.dir, "ckpt_my_run")
        folders = sorted(n for n in os.listdir(ckpt) if n.startswith("iter_"))
        self.assertEqual(folders, ["iter_0000003", "iter_0000006"])
        for folder in folders:
            for name in TOKENIZER_FILES:
                with open(os.path.join(self.tok, name), "rb") as a, open(os.path.join(ckpt, folder, name), "rb") as b:
                    self.assertEqual(a.read(), b.read(), f"{folder}/{name}")
        try:
            from transformers import AutoTokenizer
        except ImportError:
            print("\nNOTICE: transformers is not installed: AutoTokenizer.from_pretrained(checkpoint) is not "
                  "checked (SG_SETUP_TRANSFORMERS=1 bash scripts/setup.sh installs it)", file=sys.stderr)
            return
        tok = AutoTokenizer.from_pretrained(os.path.join(ckpt, folders[-1]))
        self.assertEqual(tok.eos_token_id, 0)
        self.assertEqual(tok.decode(tok("Call me a reader.").input_ids), "Call me a reader.")

    def test_generate_uses_the_checkpoints_own_tokenizer(self):
        # The README's step 5: `stepgraph generate` on the save directory (its latest checkpoint) finds the
        # tokenizer copied into it; the prompt is tokenized as the tokenizer itself does.
        from tokenizers import Tokenizer
        out = run(STEPGRAPH, "generate", os.path.join(self.dir, "ckpt_my_run"), "--cpu", "--json", "--ignore-eos",
                  "--prompt", "The river", "--max-new-tokens", "6").stdout
        result = json.loads(out)
        want = Tokenizer.from_file(os.path.join(self.tok, "tokenizer.json")).encode("The river").ids
        self.assertEqual(result["prompt_tokens"], [want])
        self.assertEqual(len(result["tokens"][0]), 6)
        self.assertEqual(len(result["texts"]), 1)

    def test_tensorboard_events_hold_the_metrics(self):
        tb = os.path.join(self.dir, "tb_my_run")
        files = [n for n in os.listdir(tb) if n.startswith("events.out.tfevents.")]
        self.assertEqual(len(files), 1, files)
        try:
            scalars, reader = read_scalars(os.path.join(tb, files[0]), self.dir)
        except (ImportError, FileNotFoundError, subprocess.CalledProcessError) as e:
            print(f"\nNOTICE: neither the tensorboard package nor protobuf (python) + protoc is usable ({e}): "
                  "only the TFRecord framing is checked", file=sys.stderr)
            self.assertGreater(len(tfrecords(os.path.join(tb, files[0]))), 6)
            return
        print(f"\n(TensorBoard events read with {reader})", file=sys.stderr)
        lines = read_jsonl(os.path.join(self.run_dir, "metrics.jsonl"))
        loss = {l["step"]: f32(l["loss"]) for l in lines if "loss" in l}
        val = {l["step"]: f32(l["val_loss"]) for l in lines if "val_loss" in l}
        self.assertEqual(dict(scalars["lm loss"]), loss)
        self.assertEqual(dict(scalars["lm loss validation"]), val)
        for tag in ("learning-rate", "grad-norm", "tokens-per-second", "mem-allocated-bytes",
                    "lm loss validation ppl"):
            self.assertIn(tag, scalars)

    def test_tensorboard_shows_each_step_once_after_a_branch(self):
        # A branch from step 3 of the 6-step run, writing into a copy of its TensorBoard folder: TensorBoard itself
        # (EventAccumulator, reading the folder) shows steps 1-5 once each, 4 and 5 the branch's, not the first
        # run's 4-6 beside them (the branch's file opens with a session start at step 4).
        try:
            from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
        except ImportError:
            print("\nNOTICE: the tensorboard package is not installed: the branch's TensorBoard view is not checked "
                  "(bash scripts/setup.sh installs it)", file=sys.stderr)
            return
        tb = os.path.join(self.dir, "tb_branch")
        shutil.copytree(os.path.join(self.dir, "tb_my_run"), tb)
        branch = os.path.join(self.dir, "runs", "branch")
        run(STEPGRAPH, "train", "my_run.yaml", "--cpu", "--plain", "--run-dir", branch, "train.train_iters=5",
            "checkpoint.load=" + os.path.join(self.dir, "ckpt_my_run", "iter_0000003"),
            "checkpoint.save=" + os.path.join(self.dir, "ckpt_branch"), "logger.tensorboard_dir=" + tb, cwd=self.dir)
        acc = EventAccumulator(tb, size_guidance={"scalars": 0})
        acc.Reload()
        first = {l["step"]: f32(l["loss"]) for l in read_jsonl(os.path.join(self.run_dir, "metrics.jsonl"))
                 if "loss" in l}
        branched = {l["step"]: f32(l["loss"]) for l in read_jsonl(os.path.join(branch, "metrics.jsonl"))
                    if "loss" in l}
        self.assertEqual(sorted(branched), [4, 5])
        shown = [(e.step, e.value) for e in acc.Scalars("lm loss")]
        self.assertEqual(shown, [(s, first[s]) for s in (1, 2, 3)] + [(s, branched[s]) for s in (4, 5)])


if __name__ == "__main__":
    sys.exit(tool_test_common.main(__doc__, globals()))
