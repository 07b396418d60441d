"""A cross-process readers/writer lock: kata tests share the machine, budget tests own it.

Under pytest-xdist every worker is a process, so the lock is two `flock(2)` files in the results
directory (`.kata/budgets.gate`, `.kata/budgets.lock`):

- an ordinary kata test passes the *gate* (takes it exclusively for a moment), takes the main
  lock *shared*, lets go of the gate and runs;
- a budget test takes the gate and keeps it, so no new test starts, then takes the main lock
  *exclusively*, which waits until the tests already running have finished.

Why the gate: Linux flock does not favour writers, so without it workers that keep starting
ordinary tests could hold the shared lock between them for the whole session and starve the
budget test. Why this cannot deadlock: locks are always taken gate first; a test that holds the
main lock shared waits for nothing (it only releases); a budget test waiting for the main lock
holds the gate, never a shared lock of its own; and a worker holds the locks of one test at a time.

flock locks belong to an open file description, which a child forked *without* exec (the
sandbox's per-kata child, multiprocessing's fork) shares: closing our descriptor does not release
the lock while such a child keeps its copy open. So every release is an explicit `LOCK_UN`, which
drops the lock for the description whoever else holds it open.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["BudgetLock"]


class BudgetLock:
    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.gate_path = self.directory / "budgets.gate"
        self.lock_path = self.directory / "budgets.lock"

    @staticmethod
    def _release(fd: int) -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)  # not just close(): a forked child may share the fd
        finally:
            os.close(fd)

    def _open(self, path: Path) -> int:
        self.directory.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Held by an ordinary kata test: many at once, never during a budget test."""
        gate = self._open(self.gate_path)
        main = -1
        try:
            fcntl.flock(gate, fcntl.LOCK_EX)  # waits while a budget test holds or awaits the gate
            main = self._open(self.lock_path)
            fcntl.flock(main, fcntl.LOCK_SH)
        except BaseException:
            if main >= 0:
                self._release(main)
            raise
        finally:
            self._release(gate)
        try:
            yield
        finally:
            self._release(main)

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Held by a budget test: alone on the machine, as far as this session's tests go."""
        gate = self._open(self.gate_path)
        try:
            fcntl.flock(gate, fcntl.LOCK_EX)
            main = self._open(self.lock_path)
            try:
                fcntl.flock(main, fcntl.LOCK_EX)  # the tests already running finish first
                yield
            finally:
                self._release(main)
        finally:
            self._release(gate)
