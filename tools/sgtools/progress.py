"""The progress line of the data tools, on stderr.

On a terminal it is one line redrawn at most 5 times a second: a bar over the input files' bytes as stored
(compressed for .gz, so bytes and MB/s count those), documents,
tokens, MB/s and the time left. Into a file or a pipe (CI logs) it prints a plain line every
`log_interval` documents instead, like Megatron's preprocess_data.py.
"""
from __future__ import annotations

import sys
import time


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def human_seconds(s: float) -> str:
    if s < 60:
        return f"{s:.1f} s"
    m, s = divmod(int(s + 0.5), 60)
    return f"{m} min {s:02d} s" if m < 60 else f"{m // 60} h {m % 60:02d} min"


class Progress:
    def __init__(self, total_bytes: int, log_interval: int, stream=None, show_tokens: bool = True):
        self.total_bytes = total_bytes
        self.log_interval = max(1, log_interval)
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty()
        self.show_tokens = show_tokens
        self.start = time.monotonic()
        self.documents = 0
        self.tokens = 0
        self.bytes = 0
        self._last_draw = 0.0
        self._next_log = self.log_interval

    def elapsed(self) -> float:
        return max(time.monotonic() - self.start, 1e-9)

    def update(self, documents: int, nbytes: int, tokens: int = 0) -> None:
        self.documents += documents
        self.bytes += nbytes
        self.tokens += tokens
        if self.tty:
            now = time.monotonic()
            if now - self._last_draw >= 0.2:
                self._last_draw = now
                self.stream.write("\r" + self._line(bar=True) + "\033[K")
                self.stream.flush()
        elif self.documents >= self._next_log:
            while self._next_log <= self.documents:
                self._next_log += self.log_interval
            print(self._line(bar=False), file=self.stream, flush=True)

    def finish(self) -> None:
        """Draws the final state (terminal) so the last numbers stay on screen."""
        if self.tty:
            self.stream.write("\r" + self._line(bar=True) + "\033[K\n")
            self.stream.flush()

    def _line(self, bar: bool) -> str:
        t = self.elapsed()
        parts = [f"{self.documents:,} documents"]
        if self.show_tokens:
            parts.append(f"{self.tokens:,} tokens")
        parts.append(f"{self.bytes / t / 1e6:.2f} MB/s")
        if self.show_tokens:
            parts.append(f"{self.tokens / t:,.0f} tokens/s")
        text = ", ".join(parts)
        if not bar:
            return f"processed {text} ({human_seconds(t)})"
        if self.total_bytes > 0:
            frac = min(self.bytes / self.total_bytes, 1.0)
            filled = int(frac * 24)
            left = t * (1 - frac) / frac if frac > 0 else 0
            eta = f", {human_seconds(left)} left" if 0 < frac < 1 else ""
            return f"[{'#' * filled}{'.' * (24 - filled)}] {frac * 100:5.1f}% {text}{eta}"
        return text
