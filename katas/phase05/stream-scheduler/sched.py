"""GIVEN: Python's view of your scheduler (scheduler.h through cffi). Do not edit.

    s = Scheduler(lib, workers=4)
    a = s.stream(); e = s.event()
    k = s.launch(a, duration=3, sleep_us=500)   # k_work(k) on a worker; 3 ticks of logical time
    s.record(e, a); s.wait_event(0, e)
    s.synchronize()                             # Deadlock(message) when nothing can run
    s.times(k)                                  # (start, end) on the logical clock
    s.ran(k)                                    # (start seq, end seq, thread) of the real run

A function still answering SCHED_TODO (or sched_create's NULL) raises KataTodo: not started.
"""

from __future__ import annotations

from typing import Any

from harness import todo

OK, INVALID, DEADLOCK, TODO = 0, -1, -2, -100
LEGACY_DEFAULT, PER_THREAD = 0, -1
BLOCKING, NON_BLOCKING = 0, 1


class Deadlock(RuntimeError):
    """sched_synchronize found that nothing can run any more; the message names the cycle."""


class Scheduler:
    def __init__(self, lib: Any, workers: int = 4) -> None:
        self.lib = lib
        lib.k_reset()
        ptr = lib.sched_create(workers)
        if ptr == lib.ffi.NULL:
            todo("scheduler.cpp: sched_create")
        self.ptr = lib.ffi.gc(ptr, lib.sched_destroy)
        self.workers = workers
        self.n = 0  # ops are numbered 0, 1, 2 ... in call order
        self.kernels: list[int] = []

    def _check(self, code: int, what: str) -> int:
        if code == TODO:
            todo(f"scheduler.cpp: {what}")
        if code == INVALID:
            raise ValueError(f"{what}: SCHED_INVALID")
        if code < 0:
            raise AssertionError(f"{what} returned {code}")
        return code

    def _op(self, code: int, what: str) -> int:
        got = self._check(code, what)
        assert got == self.n, f"{what} returned op id {got}, expected {self.n} (ids count calls)"
        self.n += 1
        return got

    def stream(self, flags: int = BLOCKING, priority: int = 0) -> int:
        return self._check(
            self.lib.sched_stream_create(self.ptr, flags, priority), "sched_stream_create"
        )

    def event(self) -> int:
        return self._check(self.lib.sched_event_create(self.ptr), "sched_event_create")

    def launch(self, stream: int, duration: int = 1, sleep_us: int = 0) -> int:
        """k_work(op id) on `stream`, sleeping `sleep_us` for real, `duration` logical ticks."""
        self.lib.k_set_sleep_us(self.n, sleep_us)
        arg = self.lib.ffi.cast("void *", self.n)
        op = self._op(
            self.lib.sched_launch(self.ptr, stream, self.lib.k_work, arg, duration), "sched_launch"
        )
        self.kernels.append(op)
        return op

    def record(self, event: int, stream: int) -> int:
        return self._op(self.lib.sched_record(self.ptr, event, stream), "sched_record")

    def wait_event(self, stream: int, event: int) -> int:
        return self._op(self.lib.sched_wait_event(self.ptr, stream, event), "sched_wait_event")

    def write_value(self, stream: int, flag: int, value: int) -> int:
        return self._op(
            self.lib.sched_write_value(self.ptr, stream, flag, value), "sched_write_value"
        )

    def wait_value(self, stream: int, flag: int, value: int) -> int:
        return self._op(
            self.lib.sched_wait_value(self.ptr, stream, flag, value), "sched_wait_value"
        )

    def synchronize(self) -> None:
        err = self.lib.ffi.new("char[]", 512)
        code = self.lib.sched_synchronize(self.ptr, err, 512)
        if code == DEADLOCK:
            raise Deadlock(self.lib.ffi.string(err).decode(errors="replace"))
        self._check(code, "sched_synchronize")

    def times(self, op: int) -> tuple[int, int]:
        start, end = self.lib.ffi.new("int64_t *"), self.lib.ffi.new("int64_t *")
        self._check(self.lib.sched_times(self.ptr, op, start, end), "sched_times")
        return int(start[0]), int(end[0])

    def ran(self, op: int) -> tuple[int, int, int]:
        lib = self.lib
        return int(lib.k_start_seq(op)), int(lib.k_end_seq(op)), int(lib.k_thread(op))

    def max_concurrent(self) -> int:
        return int(self.lib.k_max_concurrent())
