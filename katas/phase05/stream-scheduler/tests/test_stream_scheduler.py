"""Public tests of stream-scheduler, tasks "streams", "default-stream" and "deadlock"."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest


def before(s: Any, a: int, b: int) -> bool:
    """Kernel op `a` ended before kernel op `b` started (real run)."""
    return 0 < s.ran(a)[1] < s.ran(b)[0]


# --------------------------------------------------------------------------- streams
def test_streams_run_in_order(new: Any) -> None:
    s = new()
    a = s.stream()
    ops = [s.launch(a, sleep_us=300 if i % 2 else 0) for i in range(6)]
    s.synchronize()
    for x, y in itertools.pairwise(ops):
        assert before(s, x, y), f"stream order: op {x} must end before op {y} starts"


def test_streams_overlap_on_workers(new: Any) -> None:
    s = new(workers=4)
    streams = [s.stream() for _ in range(3)]
    for st in streams:
        s.launch(st, sleep_us=20_000)
    s.synchronize()
    assert s.max_concurrent() >= 2, "kernels of different streams must run at the same time"
    assert len({s.ran(op)[2] for op in s.kernels}) >= 2, "on more than one worker thread"


def test_streams_events_order_two_streams(new: Any) -> None:
    s = new()
    a, b, e = s.stream(), s.stream(), s.event()
    k1 = s.launch(a, sleep_us=5_000)
    s.record(e, a)
    k2 = s.launch(a, sleep_us=5_000)  # after the record: b does not wait for it
    s.wait_event(b, e)
    k3 = s.launch(b)
    s.synchronize()
    assert before(s, k1, k3), "b waits for the work recorded in e before the wait"
    assert not before(s, k2, k3), "work after the record is not waited for"


def test_streams_wait_takes_the_record_made_before_it(new: Any) -> None:
    s = new()
    a, b, e = s.stream(), s.stream(), s.event()
    s.wait_event(b, e)  # never recorded yet: no wait at all (cudaStreamWaitEvent)
    k0 = s.launch(b)
    k1 = s.launch(a, sleep_us=20_000)
    s.record(e, a)  # a later record does not reach back to the earlier wait
    s.synchronize()
    assert not before(s, k1, k0)
    with pytest.raises(ValueError):
        s.wait_event(b, 99)  # no such event
    with pytest.raises(ValueError):
        s.launch(77)  # no such stream


# --------------------------------------------------------------------------- default-stream
def test_default_stream_legacy_stream_waits_for_blocking_streams(new: Any, sched: Any) -> None:
    s = new()
    blocking, nb = s.stream(sched.BLOCKING), s.stream(sched.NON_BLOCKING)
    k1 = s.launch(blocking, sleep_us=10_000)
    k2 = s.launch(nb, sleep_us=30_000)
    k3 = s.launch(sched.LEGACY_DEFAULT, sleep_us=80_000)  # waits for k1 (blocking), not k2
    k4 = s.launch(blocking)  # waits for k3: blocking streams wait for the legacy stream
    k5 = s.launch(nb)  # only after k2 (its own stream)
    s.synchronize()
    assert before(s, k1, k3) and before(s, k3, k4)
    assert not before(s, k2, k3), "a non-blocking stream does not sync with stream 0"
    assert before(s, k2, k5) and not before(s, k3, k5), "k5 does not wait for stream 0"


def test_default_stream_per_thread_stream_is_its_own_stream(new: Any, sched: Any) -> None:
    s = new()
    k1 = s.launch(sched.PER_THREAD, sleep_us=10_000)
    k2 = s.launch(sched.PER_THREAD)
    a = s.stream(sched.NON_BLOCKING)
    k3 = s.launch(a)
    k4 = s.launch(sched.LEGACY_DEFAULT)  # the per-thread stream is blocking: stream 0 waits
    s.synchronize()
    assert before(s, k1, k2), "the per-thread default stream is in order"
    assert not before(s, k1, k3)
    assert before(s, k2, k4), "cudaStreamPerThread syncs with the legacy default stream"


# --------------------------------------------------------------------------- deadlock
def test_deadlock_values_signal_across_streams(new: Any) -> None:
    s = new()
    a, b = s.stream(), s.stream()
    s.wait_value(b, 7, 1)  # b waits for flag 7 >= 1 ...
    k_b = s.launch(b)
    k_a = s.launch(a, sleep_us=10_000)
    s.write_value(a, 7, 1)  # ... which a writes after its kernel (a later call!)
    s.synchronize()
    assert before(s, k_a, k_b)


def test_deadlock_is_reported_with_its_cycle(new: Any, sched: Any) -> None:
    s = new()
    a, b = s.stream(), s.stream()
    s.wait_value(a, 1, 1)  # a waits for flag 1, which only b writes ...
    s.write_value(a, 2, 1)
    s.wait_value(b, 2, 1)  # ... after waiting for flag 2, which a writes after its wait
    s.write_value(b, 1, 1)
    with pytest.raises(sched.Deadlock) as err:
        s.synchronize()
    msg = str(err.value)
    assert "deadlock" in msg.lower()
    found = [int(x) for x in re.findall(r"stream (\d+)", msg)]
    assert set(found) == {a, b} and found[0] == found[-1], (
        f"the message should name the cycle, stream {a} -> stream {b} -> stream {a}: {msg!r}"
    )
