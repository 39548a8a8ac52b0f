"""Worker processes that apply one function to a stream of tasks and give the results back in task order, and that a
stop ends at once.

Why not multiprocessing.Pool: its workers read one shared task pipe, whose read end the parent holds too, and
Pool.terminate() (which its `with` block runs on every exception, a stop signal's included) ends the workers and then
joins its task thread. When that thread was writing a task larger than the pipe holds, nobody reads the rest and the
write never fails: terminate() waits forever, and the tool hangs on Ctrl-C or SIGTERM with its unfinished outputs on
disk (seen with tools/preprocess_data.py --workers 2 once in about 200 SIGTERMs; Python 3.11's pool.py). Here every
worker has its own task and result pipes whose other ends only that worker holds, so a write to a killed worker fails
at once; tasks go round-robin, and a stop kills the workers and waits for nothing else.
"""
from __future__ import annotations

import multiprocessing
import queue
import signal
import threading
from collections import deque
from typing import Any, Callable, Iterable, Iterator

_END = None  # the task that ends a worker's loop


def _worker_loop(tasks, results, initializer, initargs, func) -> None:
    initializer(*initargs)
    while True:
        try:
            task = tasks.recv()
        except EOFError:
            return
        if task is _END:
            return
        try:
            results.send((True, func(task)))
        except BaseException as e:  # the parent raises it, as Pool's get() would
            results.send((False, e))


class WorkerDied(RuntimeError):
    pass


class OrderedWorkers:
    """`workers` processes forked with `blocked` signals blocked (the initializer unblocks them once its handlers are
    set), each running initializer(*initargs) once and then func on its tasks."""

    def __init__(self, workers: int, func: Callable[[Any], Any], initializer: Callable[..., None], initargs: tuple,
                 blocked: Iterable[signal.Signals] = ()):
        context = multiprocessing.get_context("fork")
        self._processes, self._task_pipes, self._result_pipes = [], [], []
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, set(blocked))
        try:
            for _ in range(workers):
                task_reader, task_writer = context.Pipe(duplex=False)
                result_reader, result_writer = context.Pipe(duplex=False)
                process = context.Process(target=_worker_loop, daemon=True,
                                          args=(task_reader, result_writer, initializer, initargs, func))
                process.start()
                task_reader.close()  # the worker's ends: closed here so a dead worker's pipes say so
                result_writer.close()
                self._processes.append(process)
                self._task_pipes.append(task_writer)
                self._result_pipes.append(result_reader)
        except BaseException:
            self.kill()
            raise
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        # One sender thread a worker, started after every fork: a send that waits for a busy worker never keeps the
        # caller from reading another worker's result (two full pipes waiting on each other).
        self._outboxes = [queue.SimpleQueue() for _ in self._processes]
        self._senders = [threading.Thread(target=self._send_loop, args=(i,), daemon=True)
                         for i in range(len(self._processes))]
        for sender in self._senders:
            sender.start()

    def _send_loop(self, i: int) -> None:
        while True:
            task = self._outboxes[i].get()
            try:
                self._task_pipes[i].send(task)
            except OSError:  # the worker was killed
                return
            if task is _END:
                return

    def map(self, tasks: Iterable[Any], in_flight_per_worker: int) -> Iterator[Any]:
        """func(task) for every task, in order; at most workers * in_flight_per_worker tasks are handed out at once, so
        memory stays bounded however many tasks come."""
        pending: deque[int] = deque()
        limit = len(self._processes) * in_flight_per_worker
        for n, task in enumerate(tasks):
            worker = n % len(self._processes)
            self._outboxes[worker].put(task)
            pending.append(worker)
            if len(pending) >= limit:
                yield self._result(pending.popleft())
        while pending:
            yield self._result(pending.popleft())

    def _result(self, i: int) -> Any:
        try:
            ok, value = self._result_pipes[i].recv()
        except EOFError:
            self._processes[i].join(timeout=5)
            raise WorkerDied(f"worker process {self._processes[i].pid} ended without finishing its task (exit status "
                             f"{self._processes[i].exitcode})") from None
        if not ok:
            raise value
        return value

    def close(self) -> None:
        """The normal end, every result read: each worker finishes its loop and exits."""
        for outbox in self._outboxes:
            outbox.put(_END)
        for sender in self._senders:
            sender.join()
        for process in self._processes:
            process.join()

    def kill(self) -> None:
        """A stop: the workers end now, whatever they were doing (nothing of theirs is shared, so nothing waits)."""
        for process in self._processes:
            process.kill()
        for process in self._processes:
            process.join()
        for outbox in getattr(self, "_outboxes", ()):
            outbox.put(_END)  # a sender waiting for a task ends; one in a send gets the dead pipe's error
