"""The fuzz harness: a subprocess worker for calls that could crash, and example budgets.

``make test`` runs each fuzz test on a few derandomized examples (the 'ci' profile); ``make fuzz``
(HYPOTHESIS_PROFILE=fuzz) runs thousands of random ones.
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

FUZZ = os.environ.get("HYPOTHESIS_PROFILE") == "fuzz"
CALL_BUDGET_S = 60.0  # a call running longer is a hang


def budget(ci_examples: int, fuzz_examples: int = 2000):
    """@settings for a fuzz test: ``ci_examples`` in make test, ``fuzz_examples`` in make fuzz."""
    return settings(max_examples=fuzz_examples if FUZZ else ci_examples)


class Worker:
    """Runs ``tests.fuzz.targets.<name>(*args)`` in a subprocess; restarts it after a crash."""

    def __init__(self):
        self.proc = None

    def _start(self):
        # small plan cap: a hostile size is refused at once instead of allocating gigabytes
        env = {**os.environ, "TOKENMILL_QUIET": "1", "PYTHONFAULTHANDLER": "1", "TOKENMILL_MAX_PLAN_ROWS": "1000000"}
        # stderr to a file, not a pipe: warnings would fill an unread pipe and block the worker
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("_worker.py"))],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, env=env)

    def call(self, name: str, *args):
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        blob = pickle.dumps((name, args))
        try:
            self.proc.stdin.write(struct.pack("<Q", len(blob)) + blob)
            self.proc.stdin.flush()
        except BrokenPipeError:
            return self._died(name, args)
        ready, _, _ = select.select([self.proc.stdout], [], [], CALL_BUDGET_S)
        if not ready:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            raise AssertionError(f"{name}{args!r:.300} ran past its {CALL_BUDGET_S:.0f} s budget (a hang)")
        head = self.proc.stdout.read(8)
        if len(head) < 8:
            return self._died(name, args)
        return pickle.loads(self.proc.stdout.read(struct.unpack("<Q", head)[0]))

    def _died(self, name, args):
        self.proc.wait()
        code = self.proc.returncode
        self.err.seek(0)
        err = self.err.read().decode("utf-8", "replace")[-2000:]
        self.proc = None
        raise AssertionError(f"the worker died (exit status {code}) running {name}{args!r:.300}:\n{err}")

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@pytest.fixture(scope="session")
def worker():
    w = Worker()
    yield w
    w.close()


def expect_ok_or_refused(worker, name, *args):
    """The contract: a result the oracle accepts, or a TokenmillError with a message."""
    status, detail = worker.call(name, *args)
    assert status in ("ok", "refused"), f"{name}{args!r:.400}\n{status}: {detail}"
    if status == "refused":
        assert detail.strip(), f"{name}: a TokenmillError without a message"
    return status, detail
