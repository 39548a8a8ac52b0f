#!/usr/bin/env python3
"""tools/sgtools/ordered_workers.py (the worker processes of tools/preprocess_data.py --workers N): results in task
order, a worker's error raised in the caller, a worker that dies named, and a stop that ends at once while tasks larger
than a pipe are being written to busy workers (where multiprocessing.Pool's terminate() could wait forever for its
task thread) or workers are blocked writing large results the caller does not read.

    python3 tests/tools/ordered_workers_test.py --stepgraph build/src/stepgraph [-v]
"""
from __future__ import annotations

import os
import random
import sys
import time
import unittest

import tool_test_common

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "tools"))
from sgtools.ordered_workers import OrderedWorkers, WorkerDied  # noqa: E402

_state: dict = {}


def setup(offset: int) -> None:
    _state["offset"] = offset


def shifted_square(n: int) -> int:
    time.sleep(random.random() * 0.01)  # workers finish out of order
    return n * n + _state["offset"]


def fails_at_seven(n: int) -> int:
    if n == 7:
        raise ValueError("task 7 is bad")
    return n


def dies_at_two(n: int) -> int:
    if n == 2:
        os._exit(3)
    return n


def slow_length(task: bytes) -> int:
    time.sleep(0.3)
    return len(task)


def large(n: int) -> bytes:
    return bytes(32 << 20)  # far more than a pipe holds: the worker blocks in its send until the caller reads


class OrderedWorkersTest(unittest.TestCase):
    def test_results_come_in_task_order(self):
        for workers, in_flight in ((1, 1), (3, 1), (3, 4), (5, 2)):
            pool = OrderedWorkers(workers, shifted_square, setup, (5,))
            self.assertEqual(list(pool.map(range(40), in_flight)), [n * n + 5 for n in range(40)])
            pool.close()

    def test_a_workers_error_is_raised_in_the_caller(self):
        pool = OrderedWorkers(2, fails_at_seven, setup, (0,))
        got = []
        with self.assertRaisesRegex(ValueError, "task 7 is bad"):
            for value in pool.map(range(20), 2):
                got.append(value)
        self.assertEqual(got, list(range(7)))
        pool.kill()

    def test_a_worker_that_dies_is_named(self):
        pool = OrderedWorkers(2, dies_at_two, setup, (0,))
        with self.assertRaisesRegex(WorkerDied, r"worker process \d+ ended without finishing its task \(exit status 3\)"):
            list(pool.map(range(6), 1))
        pool.kill()

    def test_a_stop_ends_at_once_while_workers_write_large_results(self):
        pool = OrderedWorkers(3, large, setup, (0,))
        results = pool.map(range(30), 4)
        self.assertEqual(len(next(results)), 32 << 20)
        time.sleep(0.5)  # every worker now blocked in a send the caller does not read
        start = time.monotonic()
        results.close()
        pool.kill()
        self.assertLess(time.monotonic() - start, 5.0)
        for process in pool._processes:
            self.assertFalse(process.is_alive())

    def test_a_stop_ends_at_once_while_large_tasks_are_being_written(self):
        pool = OrderedWorkers(2, slow_length, setup, (0,))
        results = pool.map((bytes(16 << 20) for _ in range(20)), 4)
        self.assertEqual(next(results), 16 << 20)  # the senders are now writing the next tasks to busy workers
        start = time.monotonic()
        results.close()
        pool.kill()
        self.assertLess(time.monotonic() - start, 5.0)
        for sender in pool._senders:
            sender.join(timeout=5)
            self.assertFalse(sender.is_alive(), "a sender still writes to a killed worker")


if __name__ == "__main__":
    sys.exit(tool_test_common.main(__doc__, globals()))
