#!/usr/bin/env python3
"""scripts/two_ranks_one_gpu.sh without a GPU (ctest tools/two_ranks_one_gpu_test, label cpu): the environment
each rank gets, the exit status, the [rank 1] prefix and the signal forwarding, with a shell command in place of
stepgraph. The script is how scripts/gpu.sh dp runs world size 2 on one GPU (docs/distributed.md); if a rank got
the wrong RANK, a shared NCCL_HOSTID or no signal, those GPU checks would test something else or hang.

    python3 tests/tools/two_ranks_one_gpu_test.py --stepgraph build/src/stepgraph [-v]
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tool_test_common import main  # noqa: E402

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "two_ranks_one_gpu.sh"
STEPGRAPH = ""  # set by main(); unused: the ranks run a shell command here
ENV_NAMES = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
             "CUDA_VISIBLE_DEVICES", "NCCL_HOSTID", "NCCL_SOCKET_IFNAME", "NCCL_IB_DISABLE"]


def run_ranks(command: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ENV_NAMES}
    env.update(env_extra or {})
    return subprocess.run(["bash", str(SCRIPT), "bash", "-c", command], capture_output=True, text=True,
                          timeout=60, env=env)


class TwoRanksOneGpuTest(unittest.TestCase):
    def test_each_rank_gets_torchruns_environment_and_its_own_nccl_host(self):
        printed = "; ".join(f'echo "{name}=${name}"' for name in ENV_NAMES)
        r = run_ranks(printed)
        self.assertEqual(r.returncode, 0, r.stderr)
        ranks = {0: {}, 1: {}}
        for line in r.stdout.splitlines():
            rank = 1 if line.startswith("[rank 1] ") else 0
            name, _, value = line.removeprefix("[rank 1] ").partition("=")
            ranks[rank][name] = value
        for rank, env in ranks.items():
            self.assertEqual(env["RANK"], str(rank))
            self.assertEqual(env["LOCAL_RANK"], str(rank))
            self.assertEqual(env["WORLD_SIZE"], "2")
            self.assertEqual(env["LOCAL_WORLD_SIZE"], "2")
            self.assertEqual(env["MASTER_ADDR"], "127.0.0.1")
            self.assertEqual(env["CUDA_VISIBLE_DEVICES"], "0")  # both ranks on the one GPU
            self.assertEqual(env["NCCL_SOCKET_IFNAME"], "lo")
        self.assertEqual(ranks[0]["MASTER_PORT"], ranks[1]["MASTER_PORT"])
        self.assertTrue(ranks[0]["MASTER_PORT"].isdigit())
        self.assertNotEqual(ranks[0]["NCCL_HOSTID"], ranks[1]["NCCL_HOSTID"])  # else NCCL refuses the pair

    def test_the_status_is_the_lowest_failing_ranks(self):
        self.assertEqual(run_ranks("exit 0").returncode, 0)
        self.assertEqual(run_ranks('exit $(( RANK == 1 ? 5 : 0 ))').returncode, 5)
        self.assertEqual(run_ranks('exit $(( RANK == 1 ? 5 : 3 ))').returncode, 3)

    def test_a_signal_reaches_both_ranks_once(self):
        with tempfile.TemporaryDirectory() as tmp:
            # Each rank appends a line per SIGTERM it gets, then exits 143 as stepgraph does after its stop.
            # The trap ends its sleep too, which would otherwise hold the output pipes open for 30 s.
            command = (f'sleep 30 & s=$!; trap "echo term >> {tmp}/rank$RANK; kill $s; exit 143" TERM; '
                       f'touch {tmp}/ready$RANK; wait')
            env = {k: v for k, v in os.environ.items() if k not in ENV_NAMES}
            p = subprocess.Popen(["bash", str(SCRIPT), "bash", "-c", command], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            deadline = time.monotonic() + 20
            while not all(Path(tmp, f"ready{r}").exists() for r in (0, 1)):
                self.assertLess(time.monotonic(), deadline, "the ranks did not start")
                time.sleep(0.05)
            p.send_signal(signal.SIGTERM)
            p.communicate(timeout=20)
            self.assertEqual(p.returncode, 143)
            for rank in (0, 1):
                self.assertEqual(Path(tmp, f"rank{rank}").read_text().split(), ["term"], f"rank {rank}")

    def test_no_command_is_a_usage_error(self):
        r = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=20)
        self.assertEqual(r.returncode, 2)
        self.assertIn("usage:", r.stderr)


if __name__ == "__main__":
    sys.exit(main(__doc__, globals()))
