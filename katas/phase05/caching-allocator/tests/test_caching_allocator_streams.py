"""Public tests of caching-allocator, tasks "streams" (per-stream pools, record_stream) and
"threads" (many threads at once)."""

from __future__ import annotations

from typing import Any

from hypothesis.stateful import run_state_machine_as_test

from harness.testing import hidden_settings

MiB = 1 << 20


# --------------------------------------------------------------------------- streams
def test_streams_each_stream_has_its_own_blocks(make: Any) -> None:
    a, dev = make()
    p = a.malloc(1000, stream=0)
    a.free(p)
    q = a.malloc(1000, stream=1)  # p's segment belongs to stream 0: a new one for stream 1
    assert q != p and dev.info().mallocs == 2
    assert a.malloc(1000, stream=0) == p, "stream 0 gets its cached block back"
    assert {s.stream for s in a.snapshot()} == {0, 1}


def test_streams_record_stream_waits_for_the_other_stream(make: Any, alloc: Any) -> None:
    a, dev = make()
    p = a.malloc(4096, stream=0)
    dev.launch(1)  # a kernel on stream 1 reads p ...
    a.record_stream(p, 1)  # ... so the allocator is told
    a.free(p)
    s = a.stats()
    assert s.allocated == 0 and s.active == 4096, "freed, but still in use on stream 1"
    assert [b.state for b in a.snapshot()[0].blocks][0] == alloc.AWAITING_EVENTS
    q = a.malloc(4096, stream=0)
    assert q != p, "stream 1 has not finished: p must not be handed out again"
    dev.complete(1)
    assert a.malloc(4096, stream=0) == p, "stream 1 is done: p is free (and the best fit)"
    assert dev.info().live_events == 0, "every event recorded is released (cudaEventDestroy)"
    assert a.stats().active == a.stats().allocated == 8192


def test_streams_the_event_marks_the_moment_of_free(make: Any) -> None:
    a, dev = make()
    p = a.malloc(4096, stream=0)
    a.record_stream(p, 2)
    a.free(p)  # nothing was running on stream 2 when p was freed
    dev.launch(2)  # later work on stream 2 does not use p
    assert a.malloc(4096, stream=0) == p
    a.record_stream(p, 0)  # its own stream: nothing to wait for
    a.free(p)
    assert a.malloc(4096, stream=0) == p


def test_streams_empty_cache_waits_for_events(make: Any) -> None:
    a, dev = make()
    p = a.malloc(1 << 20, stream=0)
    a.record_stream(p, 1)
    dev.launch(1)
    a.record_stream(p, 3)
    a.free(p)
    a.empty_cache()  # synchronizes the events: the segment is whole again and goes back
    assert a.stats().reserved == 0 and dev.info().used == 0
    assert dev.info().live_events == 0


def test_streams_state_machine(lib: Any, checker: Any) -> None:
    """Streams 0, 1, 2 with record_stream, launches and completions against checker.py."""
    run_state_machine_as_test(
        checker.machine(lib, streams=True),
        settings=hidden_settings(max_examples=30, stateful_step_count=40),
    )


# --------------------------------------------------------------------------- threads
def test_threads_four_threads_at_once(make: Any) -> None:
    """lib.rs's kata_stress: 4 threads malloc and free at random at the same time (cffi lets
    go of the GIL, the threads are Rust's), launch kernels on stream 2, complete its work and
    record_stream blocks on it before freeing them; every overlap of a new block with a live
    one, or with one freed after record_stream whose stream-2 work may still run, is counted."""
    a, dev = make(capacity=8 << 30)
    assert a.stress(threads=4, ops=20_000, seed=1) == 0, (
        "kata_stress: a block was handed out while it was live, or while stream 2 could still "
        "read it"
    )
    s, info = a.stats(), dev.info()
    assert s.allocated == 0, f"everything was freed: {s}"
    assert s.reserved == info.used and s.device_mallocs == info.mallocs
    assert info.bad_calls == 0
    a.empty_cache()
    s, info = a.stats(), dev.info()
    assert s.active == 0 and info.used == 0 and info.live_events == 0, (
        f"after empty_cache nothing is active, reserved or awaiting events: {s}, {info}"
    )
