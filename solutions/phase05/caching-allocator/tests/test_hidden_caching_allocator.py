"""Hidden tests of caching-allocator: other sizes, longer state machines, other traces, more
threads, and the gates against the shortcuts in ../shortcuts/."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import run_state_machine_as_test

from harness.testing import hidden_settings, raises, random_for

KiB, MiB = 1 << 10, 1 << 20


def run_seed() -> int:
    """A seed for this test's random sequences, from the run seed (--kata-seed reproduces
    it); every failure message names it."""
    return random_for().randrange(1 << 32)


def says(message: str, q: int) -> bool:
    """Does `message` give the quantity `q` (bytes) in bytes, MiB or GiB, in any format?"""
    nums = [float(x) for x in re.findall(r"\d+(?:\.\d+)?", message.replace(",", ""))]
    return any(
        abs(n - q) < 1 or abs(n - q / MiB) < 0.006 or abs(n - q / (1 << 30)) < 0.006 for n in nums
    )


def random_runs(checker: Any, lib: Any, runs: int, steps: int, **kw: Any) -> None:
    seed = run_seed()
    print(f"random_run seeds {seed}..{seed + runs - 1}")
    for k in range(runs):
        checker.random_run(lib, seed + k, steps, **kw)


# --------------------------------------------------------------------------- sizes
@pytest.mark.kata_gate(
    "the size functions disagree with section 1's rules on sizes drawn at random up to 16 GiB"
)
@hidden_settings(max_examples=200)
@given(size=st.integers(1, 1 << 34), request=st.integers(1, 1 << 34))
def test_sizes_any_size(lib: Any, alloc: Any, size: int, request: int) -> None:
    r = max(512, -(-size // 512) * 512)
    got = alloc.sizes(lib, size, min(request, size))
    assert got.rounded == r, f"round_size({size}) = {got.rounded}, expected {r}"
    assert got.small == (size <= MiB), f"is_small({size}) = {got.small}"
    if size <= MiB:
        want = 2 * MiB
    elif size < 10 * MiB:
        want = 20 * MiB
    else:
        want = -(-size // (2 * MiB)) * 2 * MiB
    assert got.segment == want, f"segment_size({size}) = {got.segment}, expected {want}"
    rest = size - min(request, size)
    want_split = rest >= 512 if min(request, size) <= MiB else rest > MiB
    assert got.split == want_split, (
        f"should_split({size}, {min(request, size)}) = {got.split}, expected {want_split}"
    )


@pytest.mark.kata_gate(
    "should_split disagrees with section 1's two rules (a small block splits when at least 512 "
    "bytes remain, a large one when more than 1 MiB remains) on sizes around both thresholds"
)
def test_sizes_should_split_around_both_thresholds(lib: Any, alloc: Any) -> None:
    """should_split(block, rounded) for requests on both sides of 1 MiB and rests on both sides
    of 512 bytes and of 1 MiB: the exact boundaries, then fresh random ones from the run seed."""
    rng = random_for()
    cases = [
        (rounded, rest)
        for rounded in (512, MiB - 512, MiB, MiB + 512, 2 * MiB, 10 * MiB)
        for rest in (0, 512 - 1, 512, 512 + 1, 1024, MiB - 512, MiB - 1, MiB, MiB + 1, MiB + 512)
    ]
    for _ in range(300):
        rounded = rng.choice(
            [
                512 * rng.randint(1, MiB // 512),  # small
                MiB + 512 * rng.randint(1, 40_000),  # large
                MiB + rng.choice((-512, 0, 512)),  # on the small/large threshold
            ]
        )
        rest = rng.choice([512, MiB]) + 512 * rng.randint(-2, 2) + rng.choice((0, 0, -1, 1))
        cases.append((rounded, max(0, rest)))
    for rounded, rest in cases:
        want = rest >= 512 if rounded <= MiB else rest > MiB
        got = alloc.sizes(lib, rounded + rest, rounded).split
        assert got == want, (
            f"should_split({rounded + rest}, {rounded}): a {'small' if rounded <= MiB else 'large'} "
            f"request with {rest} bytes remaining gives {got}, expected {want}"
        )


# --------------------------------------------------------------------------- pools
@pytest.mark.kata_gate(
    "malloc does not return the best fit (the smallest free block big enough) among holes of "
    "several sizes"
)
def test_pools_best_fit_in_the_large_pool(make: Any) -> None:
    a, dev = make()
    first = a.malloc(8 * MiB)  # 20 MiB segment: 8 MiB, then 12 MiB free
    sep = a.malloc(2 * MiB)
    second = a.malloc(3 * MiB)
    a.malloc(2 * MiB)
    a.free(first)  # holes: 8 MiB at `first`, 3 MiB at `second`, 5 MiB at the end
    a.free(second)
    assert a.malloc(3 * MiB) == second, "best fit: the 3 MiB hole, not the 8 MiB one below it"
    assert a.malloc(5 * MiB) == sep + 2 * MiB + 3 * MiB + 2 * MiB, (
        "malloc(5 MiB): the best fit is the 5 MiB hole at the segment's end"
    )
    assert dev.info().mallocs == 1, "malloc: cached holes fit every request, one device malloc"


@pytest.mark.kata_gate(
    "malloc does not return the lowest address among free blocks of the best size (holes of equal "
    "sizes, freed in either order)"
)
def test_pools_best_fit_ties_go_to_the_lowest_address(make: Any) -> None:
    rng = random_for()
    for _ in range(6):
        a, dev = make()
        h = MiB + 512 * rng.randint(1, 4096)  # large, at most 3 MiB
        low = a.malloc(h)  # one 20 MiB segment: low, 2 MiB, high, 2 MiB, a free tail > h
        a.malloc(2 * MiB)
        high = a.malloc(h)
        a.malloc(2 * MiB)
        for p in rng.sample([low, high], 2):
            a.free(p)
        got = a.malloc(h)
        assert got == low, (
            f"malloc({h}) with two free blocks of {h} bytes at {low:#x} and {high:#x}: "
            f"returned {got:#x}; the best fit among equals is the lowest address"
        )


@pytest.mark.kata_gate(
    "malloc, free, empty_cache or stats() disagree with checker.py's model of the caching"
    " allocator (best fit, splitting, cached segments, the OOM retry) on random sequences on a"
    " 100 MiB device"
)
def test_pools_state_machine_bigger_device(lib: Any, checker: Any) -> None:
    run_state_machine_as_test(
        checker.machine(lib, capacity=100 * MiB),
        settings=hidden_settings(max_examples=60, stateful_step_count=50),
    )


def test_pools_random_sequences(lib: Any, checker: Any) -> None:
    """Fresh seeded sequences (malloc, free, empty_cache, bad frees) against checker.py's model,
    on a device where the retry path runs (64 MiB) and on a bigger one."""
    random_runs(checker, lib, runs=12, steps=150, streams=False)
    random_runs(checker, lib, runs=4, steps=150, streams=False, capacity=200 * MiB)


def test_pools_oom_keeps_blocks_in_use(make: Any, alloc: Any) -> None:
    a, dev = make(capacity=24 * MiB)
    p = a.malloc(5 * MiB)  # 20 MiB segment, in use
    q = a.malloc(1000)  # 2 MiB small segment
    a.free(q)
    with raises(
        alloc.OutOfMemory,
        "malloc(16 MiB) with 20 MiB of a 24 MiB device in use must raise OutOfMemory",
    ):
        try:
            a.malloc(16 * MiB)  # 15 MiB cached do not fit; a 16 MiB segment: 2 + 2 MiB free
        except alloc.OutOfMemory as e:
            message = str(e)
            raise
    for what, q in (("the request", 16 * MiB), ("the device's capacity", 24 * MiB)):
        assert says(message, q), (
            f"malloc(16 MiB) on a 24 MiB device: the OutOfMemory message gives {what} "
            f"({q} bytes) in no unit (bytes, MiB or GiB): {message!r}"
        )
    s = a.stats()
    assert s.reserved == 20 * MiB and s.device_frees == 1, "the free small segment went back"
    assert a.malloc(3 * MiB) == p + 5 * MiB, "the in-use segment still serves requests"


def cached_state(a: Any, dev: Any, ops: list[tuple[int, int, int, bool]]) -> list[int]:
    """Run `ops` (size, stream, the stream of a record_stream on launched work or 0, kept): a
    malloc each, freed at once unless kept; returns the kept pointers."""
    live = []
    for size, stream, other, keep in ops:
        p = a.malloc(size, stream=stream)
        if other:
            dev.launch(other)
            a.record_stream(p, other)
        if keep:
            live.append(p)
        else:
            a.free(p)
    return live


@pytest.mark.kata_gate(
    "malloc raises OutOfMemory on a device too full for the request's segment while releasing "
    "the cache's whole free segments (and retrying) would make room, or stats() does not count "
    "the retry and the OOM"
)
def test_pools_oom_retry_releases_the_cache(make: Any, alloc: Any) -> None:
    """Fresh random states from the run seed: blocks in use on stream 0, and freed blocks cached
    on stream 0 (too small for the request) and on stream 1 (another stream), some awaiting the
    event of a record_stream on launched work; the device has less left than the request's
    segment, and enough once every whole free segment goes back (section 3)."""
    rng = random_for()
    for case in range(25):
        ops = [(rng.randint(1, 60 * MiB), 1, 0, False)]  # a whole free segment on stream 1
        for _ in range(rng.randint(0, 8)):
            keep = rng.random() < 0.3
            stream = 0 if keep else rng.choice((0, 1))
            if stream == 0:
                size = rng.choice((rng.randint(1, MiB), rng.randint(MiB + 1, 10 * MiB - 1)))
            else:
                size = rng.randint(1, 60 * MiB)
            other = rng.choice((2, 3)) if not keep and rng.random() < 0.4 else 0
            ops.append((size, stream, other, keep))
        rng.shuffle(ops)
        probe, probe_dev = make(capacity=1 << 40)
        cached_state(probe, probe_dev, ops)
        used = probe_dev.info().used
        cache = sum(
            seg.size
            for seg in probe.snapshot()
            if all(b.state != alloc.ALLOCATED for b in seg.blocks)
        )
        request = 2 * MiB * rng.randint(11, 11 + cache // (2 * MiB))
        slack = rng.randint(max(0, request - cache), request - 512)
        a, dev = make(capacity=used + slack)
        live = cached_state(a, dev, ops)
        retries = a.stats().alloc_retries
        what = (
            f"case {case}: malloc({request // MiB} MiB) on stream 0 with {slack} bytes left on the "
            f"device and {cache // MiB} MiB of whole free segments cached (state {ops})"
        )
        try:
            p = a.malloc(request)
        except alloc.OutOfMemory as e:
            raise AssertionError(
                f"{what}: raised OutOfMemory; releasing the cache and retrying makes room: {e}"
            ) from None
        s = a.stats()
        assert s.alloc_retries == retries + 1, f"{what}: stats().alloc_retries counts the retry"
        assert s.reserved == used - cache + request == dev.info().used, (
            f"{what}: every whole free segment goes back before the retry; reserved "
            f"{s.reserved}, expected {used - cache + request}"
        )
        for q in live + [p]:
            a.free(q)
        assert a.stats().allocated == 0, f"{what}: the blocks in use survived the retry"
        too_big = 2 * MiB * (dev.info().capacity // (2 * MiB) + 1)
        with raises(alloc.OutOfMemory, f"{what}, then malloc({too_big} bytes): OutOfMemory"):
            a.malloc(too_big)
        t = a.stats()
        assert (t.alloc_retries, t.ooms) == (s.alloc_retries + 1, s.ooms + 1), (
            f"{what}, then malloc({too_big} bytes) raised OutOfMemory: stats() counts its retry "
            f"and its OOM (alloc_retries {s.alloc_retries} -> {t.alloc_retries}, ooms "
            f"{s.ooms} -> {t.ooms})"
        )


def test_pools_many_small_blocks_in_one_segment(make: Any) -> None:
    a, dev = make()
    ps = [a.malloc(512) for _ in range(4096)]  # exactly one 2 MiB segment
    assert dev.info().mallocs == 1 and sorted(ps) == ps, (
        "4096 mallocs of 512 bytes fill one 2 MiB segment in address order"
    )
    a.malloc(1)
    assert dev.info().mallocs == 2, "malloc: a full small segment: a second device malloc"
    for p in ps[::2]:
        a.free(p)
    assert a.stats().inactive_split == 2048 * 512 + (2 * MiB - 512), "holes + the 2nd tail"
    for p in ps[1::2]:
        a.free(p)
    assert [b.size for b in a.snapshot()[0].blocks] == [2 * MiB], (
        "free: every block of the segment freed, in any order, merges into one 2 MiB block"
    )


# --------------------------------------------------------------------------- streams
@pytest.mark.kata_gate(
    "a block freed after record_stream is handed out again while the recorded stream may still "
    "read it"
)
def test_streams_reuse_waits_for_every_recorded_stream(make: Any) -> None:
    a, dev = make()
    p = a.malloc(64 * KiB, stream=0)
    dev.launch(1)
    dev.launch(2)
    a.record_stream(p, 1)
    a.record_stream(p, 2)
    a.record_stream(p, 1)  # twice: one event per stream is enough
    a.free(p)
    assert a.stats().active == 64 * KiB, "stats().active counts a block awaiting its events"
    dev.complete(1)
    assert a.malloc(64 * KiB) != p, "stream 2 may still read p"
    dev.complete(2)
    assert a.malloc(64 * KiB) == p, "malloc: both recorded streams are done, p is the best fit"
    assert dev.info().live_events == 0, "every event recorded is released (cudaEventDestroy)"


@pytest.mark.kata_gate(
    "malloc, free, record_stream or empty_cache disagree with checker.py's model over streams"
    " (a block reused only once every stream recorded on it has completed its work) on random"
    " sequences on an 80 MiB device"
)
def test_streams_state_machine_long(lib: Any, checker: Any) -> None:
    run_state_machine_as_test(
        checker.machine(lib, streams=True, capacity=80 * MiB),
        settings=hidden_settings(max_examples=60, stateful_step_count=50),
    )


@pytest.mark.kata_gate(
    "malloc, free, record_stream or empty_cache disagree with checker.py's model over streams"
    " 0, 1, 2 (a block reused only once every stream recorded on it has completed its work) on"
    " random sequences of launches and completions"
)
def test_streams_random_sequences(lib: Any, checker: Any) -> None:
    """Fresh seeded sequences over streams 0, 1, 2 with record_stream, launches, completions
    and empty_cache against checker.py's model."""
    random_runs(checker, lib, runs=16, steps=200, streams=True)


def test_streams_waiting_for_an_event_completes_its_streams_work(lib: Any, checker: Any) -> None:
    """empty_cache synchronizes the event of a block freed after record_stream, which completes
    stream 1's work up to it: a block freed later after record_stream on stream 1, with nothing
    launched since, is free at once (the model must know it, and the allocator must do it)."""
    m = checker.machine(lib, streams=True)()

    def do(op: str, *args: int) -> None:
        getattr(m, f"do_{op}")(*args)
        m.consistent()

    do("launch", 1)
    do("malloc", 4096, 0)
    a = max(m.live)
    do("malloc", 4096, 0)
    do("record_stream", a, 1)
    do("free", a)
    do("empty_cache")
    before = set(m.live)
    do("malloc", 4096, 0)
    (b,) = set(m.live) - before
    do("record_stream", b, 1)
    do("free", b)
    do("malloc", 4096, 0)
    assert b in m.live, (
        f"malloc after empty_cache waited for stream 1: the block {b:#x} freed after "
        "record_stream(1), with no work launched on stream 1 since, is the best fit again"
    )


def test_streams_large_blocks_per_stream(make: Any) -> None:
    a, dev = make()
    p = a.malloc(3 * MiB, stream=5)
    a.free(p)
    q = a.malloc(3 * MiB, stream=6)
    assert q != p and dev.info().mallocs == 2, (
        "malloc on stream 6: stream 5's cached large block is not reused, a new segment"
    )
    assert a.malloc(3 * MiB, stream=5) == p, "malloc on stream 5 gets its cached block back"


# --------------------------------------------------------------------------- traces
# The reference's counts on these traces (deterministic; the same algorithm gives the same);
# the test checks that the reference still makes them, and that each trace exercises its point.
HIDDEN_TRACES = [
    ("inference", dict(batches=200, seed=17), 17, 2_212_495_360),
    ("side_stream", dict(batches=150, seed=23), 7, 102_760_448),
    ("training", dict(steps=2, layers=6, batch=4, seq=1024), 21, 1_226_833_920),
    ("tight", dict(batches=200, seed=32), 25, 1_342_177_280),  # 2 OOM retries
]


@pytest.mark.parametrize("kind, kw, mallocs, peak", HIDDEN_TRACES)
def test_traces_other_programs(
    kind: str,
    kw: dict[str, int],
    mallocs: int,
    peak: int,
    lib: Any,
    traces: Any,
    replay: Any,
    kata_budget: Any,
    build_reference: Any,
) -> None:
    trace = getattr(traces, kind)(**kw)
    stats, info, _ = replay(lib, trace)
    assert info.bad_calls == 0, f"trace {kind}: the device saw a free or event of something unknown"
    # the device's own counts: what the allocator reports about itself is checked, not graded
    assert info.mallocs <= mallocs, f"trace {kind}: {info.mallocs} device mallocs > {mallocs}"
    assert info.peak_used <= peak, f"trace {kind}: peak reserved {info.peak_used} > {peak}"
    if not kata_budget.reference_available:
        return
    # The trace still exercises its point with the reference, and the bounds are its counts.
    ref_stats, ref, _ = replay(build_reference(), trace)
    assert (ref.mallocs, ref.peak_used) == (mallocs, peak), (
        f"trace {kind}: the reference makes {ref.mallocs} device mallocs, peak {ref.peak_used}; "
        f"the test's bounds are {mallocs}, {peak} (the trace drifted: update HIDDEN_TRACES)"
    )
    kinds = trace.ops["kind"]
    assert ref.mallocs * 3 < int((kinds == traces.MALLOC).sum()), (
        f"trace {kind}: the reference's cache serves too few of its mallocs to test caching"
    )
    if kind == "side_stream":
        assert (kinds == traces.RECORD_STREAM).any() and (kinds == traces.LAUNCH).any(), (
            "trace side_stream has no record_stream of launched work"
        )
    if kind == "tight":
        assert ref_stats.alloc_retries >= 1, "trace tight: the reference never retries after OOM"


@pytest.mark.kata_gate("stats() reports other device mallocs or peak reserved than the device saw")
@pytest.mark.parametrize("name", ["training", "tight"])
def test_traces_stats_are_what_the_device_saw(
    name: str, lib: Any, traces: Any, replay: Any
) -> None:
    stats, info, _ = replay(lib, traces.load(name))
    assert (stats.device_mallocs, stats.device_frees) == (info.mallocs, info.frees), (
        f"stats: {stats.device_mallocs} mallocs, {stats.device_frees} frees; the device counted "
        f"{info.mallocs} and {info.frees}"
    )
    assert stats.peak_reserved == info.peak_used, (
        f"stats: peak reserved {stats.peak_reserved}; the device's peak was {info.peak_used}"
    )


# --------------------------------------------------------------------------- threads
@pytest.mark.kata_gate(
    "blocks are handed out while live, or while the stream they were recorded on may still read "
    "them, under calls from 6-8 threads at once"
)
@pytest.mark.parametrize("threads, seed", [(8, 2), (6, 3)])
def test_threads_more_threads(make: Any, threads: int, seed: int) -> None:
    a, dev = make(capacity=16 << 30)
    bad = a.stress(threads=threads, ops=30_000, seed=seed)
    assert bad == 0, (
        f"kata_stress with {threads} threads: {bad} times a block was handed out while it was "
        "live, or while stream 2 could still read it"
    )
    s = a.stats()
    assert s.allocated == 0 and s.reserved == dev.info().used, (
        f"after kata_stress everything is freed and reserved is what the device holds: {s}"
    )
