"""Stopping on SIGINT/SIGTERM while a library, not Python, runs the work (train_tokenizer's training).

tokenizers' train_from_iterator pulls the Python iterator from a Rust thread while the main thread waits
inside Rust. Python runs signal handlers only in the main thread, between bytecodes, so Ctrl-C would wait
for the whole input to be read and trained on. StopRequest sees the signals at once instead: the C-level
handler writes each one to signal.set_wakeup_fd's pipe whatever the main thread is doing, and a watcher
thread reads it. The first signal prints "stopping..." and sets `signum`, which the iterator checks
before each document; once the input stream has ended (stream_ended(), or at once when it already has,
i.e. while the trainer computes its merges, which nothing can interrupt and whose result would be thrown
away) the watcher runs the clean-up and exits the process with 128 + N. A second signal exits at once
too (an iterator stuck on a slow read). Nothing is written before training returns, so nothing is lost.

    with StopRequest(on_exit=cleanup, outcome="no tokenizer written") as stop:
        tokenizer.train_from_iterator(stream, trainer)   # stream: `if stop.signum: return`, stream_ended()
    if stop.signum is not None:
        raise Stopped(stop.signum)                        # a signal in the last instant of training
"""
from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Callable

from . import signal_name

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopRequest:
    def __init__(self, on_exit: Callable[[], None], outcome: str):
        self.signum: int | None = None
        self._on_exit = on_exit
        self._outcome = outcome
        self._lock = threading.Lock()
        self._count = 0
        self._ended = False    # the input stream has ended: a signal exits at once
        self._closed = False   # training returned: signals are the main thread's again
        self._exiting = False

    def __enter__(self) -> StopRequest:
        self._rfd, self._wfd = os.pipe()
        os.set_blocking(self._wfd, False)  # the C-level handler must never block
        # A signal ignored when the tool started (`nohup`, a shell's background job) stays ignored.
        self._old_handlers = {s: signal.signal(s, self._handler) for s in SIGNALS
                              if signal.getsignal(s) is not signal.SIG_IGN}
        self._old_wakeup = signal.set_wakeup_fd(self._wfd, warn_on_full_buffer=False)
        self._thread = threading.Thread(target=self._watch, name="stop-watcher", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        signal.set_wakeup_fd(self._old_wakeup)
        for s, handler in self._old_handlers.items():
            signal.signal(s, handler)
        with self._lock:
            self._closed = True
            exiting = self._exiting
        if exiting:
            threading.Event().wait()  # the watcher is exiting the process
        os.close(self._wfd)  # the watcher reads what is left, then end of file
        self._thread.join()
        os.close(self._rfd)

    def stream_ended(self) -> None:
        """The iterator's last act (input done, stopped or failed): from now on a signal exits at once."""
        with self._lock:
            self._ended = True
            stop = self.signum is not None and not self._closed
        if stop:
            self._exit_now()

    def _handler(self, signum, frame) -> None:
        # Python calls it in the main thread when that next runs Python (before or after training); the
        # watcher has seen the same signal through the wakeup pipe, so this only makes sure of the flag.
        with self._lock:
            if self.signum is None:
                self.signum = signum

    def _watch(self) -> None:
        while True:
            try:
                data = os.read(self._rfd, 64)
            except OSError:
                return
            if not data:
                return
            for signum in data:
                if signum in SIGNALS:
                    self._request(signum)

    def _request(self, signum: int) -> None:
        with self._lock:
            if self._closed:
                return
            self._count += 1
            if self.signum is None:
                self.signum = signum
            first, ended = self._count == 1, self._ended
        if first:
            newline = "\n" if sys.stderr.isatty() else ""  # after the progress line
            print(f"{newline}stopping... ({signal.Signals(signum).name})", file=sys.stderr, flush=True)
        if ended or not first:
            self._exit_now()

    def _exit_now(self) -> None:
        with self._lock:
            if self._closed or self._exiting:
                return
            self._exiting = True
        signum = self.signum or signal.SIGINT
        try:
            self._on_exit()
            print(f"{signal_name(signum)}: {self._outcome}", file=sys.stderr, flush=True)
            sys.stdout.flush()
        finally:
            os._exit(128 + signum)
