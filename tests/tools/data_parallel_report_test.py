#!/usr/bin/env python3
"""bench/data_parallel_report.py's `losses` on metrics.jsonl files made here (ctest tools/data_parallel_report_test,
label cpu): how scripts/gpu.sh dp and dp_moe judge world size 2 against 1. A run within rounding passes; a loss off
by more than 1e-2, an MoE auxiliary loss off by a factor of two (a rank scaling by its own microbatches) and a step
that routed half the tokens (a rank logging only its own) each fail, naming what differs.

    python3 tests/tools/data_parallel_report_test.py --stepgraph build/src/stepgraph [-v]
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tool_test_common import main  # noqa: E402

REPORT = Path(__file__).resolve().parents[2] / "bench" / "data_parallel_report.py"
STEPGRAPH = ""  # set by main(); unused


def metrics(steps: int, *, loss_scale: float = 1.0, aux_scale: float = 1.0, token_scale: int = 1,
            moe: bool = True) -> list[dict]:
    out = []
    for s in range(1, steps + 1):
        record = {"step": s, "loss": (9.0 - 0.01 * s) * loss_scale, "grad_norm": 1.0}
        if moe:
            record["moe_aux_loss"] = (0.04 + 0.001 * s) * aux_scale
            record["moe_z_loss"] = 0.002 + 0.0001 * s
            record["moe_tokens_per_expert"] = [[s + e for e in range(4)] for _ in range(2)]
            if token_scale != 1:
                record["moe_tokens_per_expert"] = [[c // token_scale for c in row]
                                                   for row in record["moe_tokens_per_expert"]]
        out.append(record)
    return out


class DataParallelReportTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def write(self, name: str, records: list[dict]) -> str:
        path = Path(self.dir.name) / name
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        return str(path)

    def report(self, reference: list[dict], *runs: list[dict]) -> subprocess.CompletedProcess:
        paths = [self.write("ref.jsonl", reference)]
        paths += [self.write(f"run{i}.jsonl", run) for i, run in enumerate(runs)]
        return subprocess.run([sys.executable, str(REPORT), "losses", *paths], capture_output=True, text=True,
                              timeout=60)

    def test_a_run_within_rounding_passes_and_an_identical_one_is_bitwise(self):
        r = self.report(metrics(5), metrics(5, loss_scale=1.0 + 1e-6), metrics(5))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.count("as the reference"), 2, r.stdout)
        self.assertEqual(r.stdout.count("bitwise equal"), 1, r.stdout)

    def test_a_dense_run_is_judged_by_its_loss_alone(self):
        r = self.report(metrics(5, moe=False), metrics(5, moe=False))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertNotIn("MoE", r.stdout)
        r = self.report(metrics(5, moe=False), metrics(5, moe=False, loss_scale=1.01))
        self.assertEqual(r.returncode, 1, r.stdout)

    def test_an_aux_loss_twice_the_references_fails_naming_it(self):
        r = self.report(metrics(5), metrics(5, aux_scale=2.0))
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("moe_aux_loss differs by", r.stdout)
        self.assertNotIn("moe_z_loss differs", r.stdout)

    def test_half_the_routed_tokens_fails_naming_the_step(self):
        r = self.report(metrics(5), metrics(5, token_scale=2))
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("step 1 routed", r.stdout)

    def test_moe_metrics_missing_from_a_run_fail(self):
        r = self.report(metrics(5), metrics(5, moe=False))
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("moe_aux_loss missing", r.stdout)


if __name__ == "__main__":
    sys.exit(main(__doc__, globals()))
