#!/usr/bin/env python3
"""bench/kernel_table.py on a made-up trace: the per-kernel table and, with --bench, the time per kernel class
and the GEMM-only MFU (ctest tools/kernel_table_test, label cpu).

    python3 tests/tools/kernel_table_test.py [-v]
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
TOOL = os.path.join(ROOT, "bench", "kernel_table.py")


def trace(kernels: list) -> dict:
    """A `stepgraph bench --trace` with one mode, `local`, whose step ran `kernels` ((name, microseconds))."""
    events = [{"ph": "M", "name": "process_name", "pid": 7, "args": {"name": "local"}}]
    t = 0.0
    for name, us in kernels:
        events.append({"ph": "X", "pid": 7, "tid": 1, "name": name, "cat": "kernel", "ts": t, "dur": us})
        t += us
    return {"traceEvents": events}


def bench(matmul_flops: float | None, peak: float = 1000.0) -> dict:
    batch = {"tokens_per_step": 1024, "flops_per_step": 3e12}
    if matmul_flops is not None:
        batch["matmul_flops_per_step"] = matmul_flops
    return {"batch": batch, "device": {"peak_bf16_tflops": peak}, "model": {},
            "modes": [{"label": "local", "mfu": 0.4}]}


class KernelTableTest(unittest.TestCase):
    def run_tool(self, trace_json: dict, bench_json: dict | None) -> str:
        with tempfile.TemporaryDirectory() as d:
            trace_path = os.path.join(d, "trace.json")
            with open(trace_path, "w") as f:
                json.dump(trace_json, f)
            cmd = [sys.executable, TOOL, trace_path, "--mode", "local"]
            if bench_json is not None:
                bench_path = os.path.join(d, "bench.json")
                with open(bench_path, "w") as f:
                    json.dump(bench_json, f)
                cmd += ["--bench", bench_path]
            done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
            self.assertEqual(done.returncode, 0, done.stderr)
            return done.stdout

    def test_classes_and_gemm_only_mfu(self):
        kernels = [("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", 1500.0),
                   ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<int>>(int)", 500.0),
                   ("cudnn_generated_fort_native_sdpa_sm90_flash_bprop", 600.0),
                   ("void sg::kernels::ssd_scan_forward_kernel<8>(int)", 100.0),
                   ("void sg::kernels::adamw_kernel(sg::kernels::AdamWParams)", 300.0)]
        out = self.run_tool(trace(kernels), bench(matmul_flops=1.6e12))
        self.assertIn("GEMM: 2.000 ms (66.7% of the kernel time)", out)
        self.assertIn("attention: 0.600 ms (20.0% of the kernel time)", out)
        self.assertIn("SSD scan: 0.100 ms (3.3% of the kernel time)", out)
        self.assertIn("other: 0.300 ms (10.0% of the kernel time)", out)
        # 1.6 TFLOP of matmuls in 2 ms of GEMM kernels = 800 TFLOP/s = 80% of a 1000 TFLOP/s peak.
        self.assertIn("GEMM-only MFU: 80.0% (1.60 TFLOP of matmuls per step at 800 TFLOP/s", out)
        self.assertIn("MFU of mode local: 40.0%", out)

    def test_old_bench_json_says_what_is_missing(self):
        out = self.run_tool(trace([("nvjet_x", 10.0)]), bench(matmul_flops=None))
        self.assertIn("needs batch.matmul_flops_per_step", out)

    def test_without_bench_only_the_table(self):
        out = self.run_tool(trace([("nvjet_x", 10.0), ("other_kernel", 30.0)]), None)
        self.assertIn("other_kernel", out)
        self.assertNotIn("GEMM-only MFU", out)


if __name__ == "__main__":
    argv = [a for i, a in enumerate(sys.argv) if a != "--stepgraph" and (i == 0 or sys.argv[i - 1] != "--stepgraph")]
    unittest.main(argv=argv)
