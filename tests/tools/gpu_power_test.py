#!/usr/bin/env python3
"""bench/gpu_power.py (the PyTorch reference's power and clock samples) against a fake nvidia-smi: the parsing,
the summary with stepgraph bench's keys and wording, the older drivers' field names, and a missing nvidia-smi
(ctest tools/gpu_power_test, label cpu).

    python3 tests/tools/gpu_power_test.py [-v]
"""
from __future__ import annotations

import os
import stat
import sys
import tempfile
import time
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "bench"))
import gpu_power  # noqa: E402

# A fake nvidia-smi: refuses the fields named in $FAKE_SMI_REFUSE; answers a query once, or every 20 ms with
# -lms, cycling through $FAKE_SMI_LINES (lines separated by '|'); records its arguments in $FAKE_SMI_ARGS.
FAKE = r"""#!/usr/bin/env python3
import os, sys, time
open(os.environ["FAKE_SMI_ARGS"], "a").write(" ".join(sys.argv[1:]) + "\n")
query = next(a for a in sys.argv if a.startswith("--query-gpu="))
refuse = os.environ.get("FAKE_SMI_REFUSE", "")
if refuse and refuse in query:
    print(f'Field "{refuse}" is not a valid field to query.')
    sys.exit(2)
lines = os.environ["FAKE_SMI_LINES"].split("|")
if "-lms" not in sys.argv:
    print(lines[0])
    sys.exit(0)
i = 0
while True:
    print(lines[i % len(lines)], flush=True)
    i += 1
    time.sleep(0.02)
"""


class GpuPowerTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.smi = os.path.join(self.dir.name, "nvidia-smi")
        with open(self.smi, "w") as f:
            f.write(FAKE)
        os.chmod(self.smi, os.stat(self.smi).st_mode | stat.S_IXUSR)
        self.args = os.path.join(self.dir.name, "args.txt")
        os.environ["FAKE_SMI_ARGS"] = self.args
        os.environ["FAKE_SMI_LINES"] = ("690.5, 1560, Active, Not Active, 700.00, 1980|"
                                        "710.0, 1500, Not Active, Active, 700.00, 1980|"
                                        "420.0, 1980, Not Active, Not Active, 700.00, 1980")
        os.environ.pop("FAKE_SMI_REFUSE", None)

    def tearDown(self):
        self.dir.cleanup()

    def calls(self) -> list:
        """nvidia-smi's argument lines so far, one per call."""
        with open(self.args) as f:
            return f.read().splitlines()

    def wait_for_sampling(self, seconds: float):
        """Waits until the fake nvidia-smi's sampling loop has started (a loaded CI machine may take a while to
        start a Python process), then `seconds` more: a fixed sleep alone made the sample count depend on load."""
        deadline = time.monotonic() + 60
        while not any("-lms" in c for c in self.calls()):
            self.assertLess(time.monotonic(), deadline, "the fake nvidia-smi's sampling loop never started")
            time.sleep(0.02)
        time.sleep(seconds)

    def test_parse_line(self):
        self.assertEqual(gpu_power.parse_line("690.5, 1560, Active, Not Active, 700.00, 1980"),
                         (690.5, 1560.0, True, 700.0, 1980.0))
        self.assertEqual(gpu_power.parse_line("300, 1200, [N/A], [N/A], [N/A], 1980"), (300.0, 1200.0, None, 0.0, 1980.0))
        self.assertIsNone(gpu_power.parse_line("[N/A], 1200, Active, Active, 700, 1980"))  # no power: no sample
        self.assertIsNone(gpu_power.parse_line("garbage"))

    def test_summary_has_stepgraphs_keys_and_wording(self):
        rows = [(690.0, 1600.0, True, 700.0, 1980.0), (700.0, 1500.0, True, 700.0, 1980.0),
                (420.0, 1980.0, False, 700.0, 1980.0), (695.0, 1560.0, True, 700.0, 1980.0)]
        s = gpu_power.summarize(rows, instant=True)
        self.assertEqual(s["samples"], 4)
        self.assertAlmostEqual(s["median_w"], 692.5)
        self.assertAlmostEqual(s["sm_clock_median_mhz"], 1580.0)
        self.assertAlmostEqual(s["power_capped_share"], 0.75)
        self.assertIsNone(s["unavailable"])
        # The same made-up samples give the same line as tests/bench/power_summary_test.cpp's.
        self.assertEqual(gpu_power.describe(s),
                         "median 692 W of the 700 W limit (max 700 W); SM clock median 1580 MHz (min 1500, device max "
                         "1980 MHz); clock held down by the power cap in 75% of 4 samples (every 20 ms)")
        unknown = gpu_power.summarize([(300.0, 1200.0, None, 0.0, 0.0)], instant=False)
        self.assertEqual(gpu_power.describe(unknown), "median 300 W (max 300 W; 1 s averages); SM clock median 1200 MHz "
                         "(min 1200 MHz); 1 samples (every 20 ms); this GPU does not report why its clock is held down")

    def test_samples_while_the_block_runs(self):
        sampler = gpu_power.GpuPowerSampler("GPU-1234", nvidia_smi=self.smi)
        self.assertEqual(sampler.unavailable, "")
        self.assertTrue(sampler.instant)
        with sampler:
            self.wait_for_sampling(0.3)
        s = sampler.summary()
        self.assertGreaterEqual(s["samples"], 3)
        self.assertEqual(s["max_w"], 710.0)
        self.assertEqual(s["limit_w"], 700.0)
        self.assertTrue(s["reasons_known"])
        self.assertGreater(s["power_capped_share"], 0.0)
        calls = self.calls()
        self.assertIn("-i GPU-1234", calls[-1])
        self.assertIn("-lms 20", calls[-1])
        self.assertIn("power.draw.instant", calls[-1])

    def test_older_drivers_field_names(self):
        os.environ["FAKE_SMI_REFUSE"] = "power.draw.instant"
        sampler = gpu_power.GpuPowerSampler("0", nvidia_smi=self.smi)
        self.assertEqual(sampler.unavailable, "")
        self.assertFalse(sampler.instant)
        with sampler:
            self.wait_for_sampling(0.1)
        self.assertIn("clocks_throttle_reasons.sw_power_cap", self.calls()[-1])
        self.assertIn("1 s averages", gpu_power.describe(sampler.summary()))

    def test_no_usable_answer_or_no_nvidia_smi_says_why(self):
        os.environ["FAKE_SMI_REFUSE"] = "clocks.sm"  # in both field sets
        refused = gpu_power.GpuPowerSampler("0", nvidia_smi=self.smi)
        self.assertIn("answered no usable power and clock for GPU 0", refused.unavailable)
        self.assertIn('"clocks.sm" is not a valid field', refused.unavailable)
        with refused:
            pass
        self.assertEqual(refused.summary()["samples"], 0)
        missing = gpu_power.GpuPowerSampler("0", nvidia_smi=os.path.join(self.dir.name, "no-such-smi"))
        self.assertIn("not found on PATH", missing.unavailable)
        self.assertTrue(gpu_power.describe(missing.summary()).startswith("not sampled: "))


if __name__ == "__main__":
    argv = [a for i, a in enumerate(sys.argv) if a != "--stepgraph" and (i == 0 or sys.argv[i - 1] != "--stepgraph")]
    unittest.main(argv=argv)
