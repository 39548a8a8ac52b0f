#!/usr/bin/env python3
"""stepgraph under a real torchrun (ctest tools/torchrun_test, label cpu; skipped where torch is not importable).

torchrun's elastic agent serves its own TCPStore on MASTER_ADDR:MASTER_PORT and tells the workers so with
TORCHELASTIC_USE_AGENT_STORE=True; stepgraph's rank 0 then serves its store on MASTER_PORT + 1 (or
STEPGRAPH_STORE_PORT) instead of failing with "address already in use" (docs/distributed.md, Launching). One rank
on the CPU backend trains after the rendezvous, so no GPU is needed. torch is looked for in $STEPGRAPH_TORCH_PYTHON
(a Python interpreter with torch, e.g. a venv's bin/python), else in the python3 running this test.

    STEPGRAPH_TORCH_PYTHON=/path/to/venv/bin/python python3 tests/tools/torchrun_test.py --stepgraph build/src/stepgraph
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tool_test_common import main  # noqa: E402

STEPGRAPH = ""  # set by main()
TORCH_PYTHON = os.environ.get("STEPGRAPH_TORCH_PYTHON", sys.executable)


def torch_importable() -> bool:
    try:
        return subprocess.run([TORCH_PYTHON, "-c", "import torch.distributed.run"], capture_output=True,
                              timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


HAVE_TORCH = torch_importable()
LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                 "TORCHELASTIC_USE_AGENT_STORE", "STEPGRAPH_STORE_PORT", "STEPGRAPH_RENDEZVOUS_FILE",
                 "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(rdzv: list[str], run_dir: str, extra_env: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    env.update(extra_env or {})
    command = [TORCH_PYTHON, "-m", "torch.distributed.run", *rdzv, "--nproc-per-node", "1", "--no-python",
               STEPGRAPH, "train", "llama/tiny", "--cpu", "--plain", "--run-dir", run_dir,
               "train.train_iters=2", "scheduler.lr_warmup_iters=0"]
    return subprocess.run(command, capture_output=True, text=True, timeout=240, env=env)


@unittest.skipUnless(HAVE_TORCH, f"torch is not importable by {TORCH_PYTHON} (set STEPGRAPH_TORCH_PYTHON)")
class TorchrunTest(unittest.TestCase):
    def check_trained(self, r: subprocess.CompletedProcess, port_text: str):
        output = r.stdout + r.stderr
        self.assertEqual(r.returncode, 0, output[-4000:])
        self.assertIn("rank 0 of 1 (local rank 0, torchrun)", output)
        self.assertIn(port_text, output)
        self.assertNotIn("cannot serve the rendezvous store", output)

    def test_static_rendezvous_serves_on_master_port_plus_one(self):
        port = free_port()
        with tempfile.TemporaryDirectory() as tmp:
            r = torchrun(["--master-addr", "127.0.0.1", "--master-port", str(port)], tmp + "/run")
        self.check_trained(r, f"127.0.0.1:{port + 1} (MASTER_PORT + 1: torchrun's agent store holds MASTER_PORT)")

    def test_standalone_c10d_rendezvous(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = torchrun(["--standalone"], tmp + "/run")
        self.check_trained(r, "(MASTER_PORT + 1: torchrun's agent store holds MASTER_PORT)")

    def test_stepgraph_store_port_is_honored_and_the_agents_port_refused(self):
        port, chosen = free_port(), free_port()
        with tempfile.TemporaryDirectory() as tmp:
            r = torchrun(["--master-addr", "127.0.0.1", "--master-port", str(port)], tmp + "/run",
                         {"STEPGRAPH_STORE_PORT": str(chosen)})
            self.check_trained(r, f"rendezvous tcp 127.0.0.1:{chosen}")
            r = torchrun(["--master-addr", "127.0.0.1", "--master-port", str(port)], tmp + "/run2",
                         {"STEPGRAPH_STORE_PORT": str(port)})
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(f"STEPGRAPH_STORE_PORT = {port} is MASTER_PORT", r.stdout + r.stderr)


if __name__ == "__main__":
    sys.exit(main(__doc__, globals()))
