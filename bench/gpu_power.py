"""Board power and SM clock of one GPU while a block of code runs, read from `nvidia-smi` every 20 ms: the PyTorch
side's counterpart of the power line that `stepgraph bench` prints (src/bench/power_summary.h), so that a
same-call comparison shows both sides' clocks. An H200 at its power limit lowers its clock, and a step's time
then follows the energy it spends (docs/performance.md).

    sampler = GpuPowerSampler(gpu_id)      # "GPU-<uuid>" or an index; never raises for a missing nvidia-smi
    with sampler:
        ...                                # the measured steps
    summary = sampler.summary()            # the keys of stepgraph bench's JSON "power" object
    print(describe(summary))               # the same wording as stepgraph bench's line

Without nvidia-smi (or a GPU it knows) the summary has no samples and says why in "unavailable".
"""
import shutil
import subprocess

INTERVAL_MS = 20
# power.draw.instant: the current draw (drivers since 2023); power.draw there is a 1 s average. The clock-limit
# reasons were renamed from clocks_throttle_reasons; older drivers know only the older names.
FIELD_SETS = [
    (True, "power.draw.instant,clocks.sm,clocks_event_reasons.sw_power_cap,"
           "clocks_event_reasons.hw_power_brake_slowdown,power.limit,clocks.max.sm"),
    (False, "power.draw,clocks.sm,clocks_throttle_reasons.sw_power_cap,"
            "clocks_throttle_reasons.hw_power_brake_slowdown,power.limit,clocks.max.sm"),
]


def _number(text: str):
    try:
        return float(text)
    except ValueError:
        return None  # "[N/A]", "[Not Supported]"


def parse_line(line: str):
    """One CSV line of the query -> (power W, SM clock MHz, capped or None, limit W, device max MHz), or None."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 6:
        return None
    power, clock = _number(parts[0]), _number(parts[1])
    if power is None or clock is None:
        return None
    reasons = [p for p in parts[2:4] if p in ("Active", "Not Active")]
    capped = None if not reasons else any(p == "Active" for p in reasons)
    return power, clock, capped, _number(parts[4]) or 0.0, _number(parts[5]) or 0.0


def _percentile(values: list, q: float) -> float:
    """Linear interpolation between ranks, as stepgraph's bench_stats percentile."""
    ordered = sorted(values)
    at = q * (len(ordered) - 1)
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (at - low) * (ordered[high] - ordered[low])


def summarize(rows: list, instant: bool, unavailable: str = "") -> dict:
    """The parsed samples -> the keys of stepgraph bench's JSON "power" object."""
    if not rows:
        return {"samples": 0, "unavailable": unavailable or "no sample was taken", "interval_ms": INTERVAL_MS,
                "instant": instant}
    power = [r[0] for r in rows]
    clock = [r[1] for r in rows]
    reasons = [r[2] for r in rows if r[2] is not None]
    return {"samples": len(rows), "unavailable": None, "interval_ms": INTERVAL_MS, "instant": instant,
            "limit_w": rows[-1][3], "median_w": _percentile(power, 0.5), "max_w": max(power),
            "sm_clock_median_mhz": _percentile(clock, 0.5), "sm_clock_min_mhz": min(clock),
            "sm_clock_device_max_mhz": rows[-1][4], "reasons_known": len(reasons) == len(rows),
            "power_capped_share": sum(reasons) / len(rows) if len(reasons) == len(rows) else 0.0}


def describe(s: dict) -> str:
    """stepgraph bench's wording (src/bench/power_summary.cpp describe_power)."""
    if not s.get("samples"):
        return "not sampled: " + (s.get("unavailable") or "no sample was taken")
    text = f"median {s['median_w']:.0f} W"
    if s["limit_w"] > 0:
        text += f" of the {s['limit_w']:.0f} W limit"
    text += f" (max {s['max_w']:.0f} W{'' if s['instant'] else '; 1 s averages'}); SM clock median " \
            f"{s['sm_clock_median_mhz']:.0f} MHz (min {s['sm_clock_min_mhz']:.0f}"
    if s["sm_clock_device_max_mhz"] > 0:
        text += f", device max {s['sm_clock_device_max_mhz']:.0f}"
    text += " MHz); "
    if s["reasons_known"]:
        text += f"clock held down by the power cap in {round(100 * s['power_capped_share'])}% of "
    text += f"{s['samples']} samples (every {s['interval_ms']:.0f} ms)"
    if not s["reasons_known"]:
        text += "; this GPU does not report why its clock is held down"
    return text


class GpuPowerSampler:
    def __init__(self, gpu_id: str, nvidia_smi: str = "nvidia-smi"):
        self.gpu_id = str(gpu_id)
        self.rows: list = []
        self.unavailable = ""
        self.instant = True
        self.fields = None
        self._proc = None
        self._exe = shutil.which(nvidia_smi)
        if self._exe is None:
            self.unavailable = f"{nvidia_smi} not found on PATH"
            return
        errors = []
        for instant, fields in FIELD_SETS:  # the first field set this driver knows
            probe = subprocess.run(self._command(fields, loop=False), capture_output=True, text=True, timeout=30)
            line = probe.stdout.strip().splitlines()[:1]
            if probe.returncode == 0 and line and parse_line(line[0]) is not None:
                self.instant, self.fields = instant, fields
                return
            errors.append((probe.stdout + probe.stderr).strip().splitlines()[:1] or [f"exit {probe.returncode}"])
        self.unavailable = f"{nvidia_smi} --query-gpu answered no usable power and clock for GPU {self.gpu_id}: " + \
            "; ".join(e[0] for e in errors)

    def _command(self, fields: str, loop: bool) -> list:
        command = [self._exe, f"--query-gpu={fields}", "--format=csv,noheader,nounits", "-i", self.gpu_id]
        return command + ["-lms", str(INTERVAL_MS)] if loop else command

    def __enter__(self):
        self.rows = []
        if self.fields is not None:
            self._proc = subprocess.Popen(self._command(self.fields, loop=True), stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL, text=True)
        return self

    def __exit__(self, *exc):
        if self._proc is not None:
            self._proc.terminate()
            out, _ = self._proc.communicate(timeout=30)
            self._proc = None
            self.rows = [r for r in (parse_line(line) for line in out.splitlines()) if r is not None]
        return False

    def summary(self) -> dict:
        return summarize(self.rows, self.instant, self.unavailable)
