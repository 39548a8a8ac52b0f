"""What tests/tools/tokenizer_tools_test.py and tokenizer_tools_errors_test.py share: the tools' paths, helpers that
run them and read what they write (the .idx parsed independently of the tools), and TokenizerToolsCase, whose
setUpClass trains a byte-level BPE (vocabulary <= 2000) on tests/data/public_domain_sample.jsonl with
tools/train_tokenizer.py and tokenizes the sample with tools/preprocess_data.py on 2 workers.
"""
from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest

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


class TokenizerToolsCase(unittest.TestCase):
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

    def expect_error(self, cmd: list[str], *fragments: str, leaves: str | None = None):
        proc = run(*cmd, expect_rc=1)
        self.assertTrue(proc.stderr.strip().splitlines()[-1].startswith("error: "), proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)
        for fragment in fragments:
            self.assertIn(fragment, proc.stderr)
        if leaves is not None:
            left = [n for n in os.listdir(leaves)] if os.path.isdir(leaves) else []
            self.assertEqual(left, [], f"a failed run left files behind in {leaves}")

    def big_text(self) -> str:
        """~40 MB of paragraphs: seconds of reading for either tool (a hang guard bounds the tests)."""
        path = os.path.join(self.dir, "big.txt")
        if not os.path.exists(path):
            paragraph = b"The river runs north by the old stone house, past the mill and the bridge. " * 5
            with open(path, "wb") as f:
                f.write((paragraph + b"\n\n") * 105_000)
        return path
