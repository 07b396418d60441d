"""Public tests of tasks line-size and capacities: what your kernels write, how sweeps are read,
and what they find on this machine, judged by the sweep's own numbers and by what every cache
there is looks like (never by fixed timings, nor by what Linux reports about the caches)."""

from __future__ import annotations

import statistics
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

KiB, MiB = 1 << 10, 1 << 20
MB_OK, MB_BAD_ARGS, MB_UNSUPPORTED = 0, -2, -3
OFFSETS = [8, 16, 32, 64, 128, 256, 512]
SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def successors(words: Any, base: int, starts: list[int], step: int) -> list[int]:
    """Index of the slot each slot points to (slot k lives at byte starts[k]; slots are `step`
    bytes apart); fails on a pointer that is not the start of a slot."""
    out = []
    for k, at in enumerate(starts):
        target = int(words[at // 8]) - base
        assert target % step == 0 and 0 <= target < step * len(starts), (
            f"slot {k} points to byte {target} of the buffer: not the start of a slot"
        )
        out.append(target // step)
    return out


def cycle_length(succ: list[int]) -> int:
    seen, i = 0, 0
    while True:
        i, seen = succ[i], seen + 1
        if i == 0 or seen > len(succ):
            return seen


# --------------------------------------------------------------------------- task line-size
def test_line_size_flush_lines_leaves_memory_alone(lib: Any, bench: Any) -> None:
    chunks, chunk = 64, 512
    with bench.Buffer(chunks * chunk, lib.ffi) as buf:
        words = buf.words()
        words[:] = np.arange(words.size, dtype=np.uint64) * 2654435761
        before = words.copy()
        for offset in (0, 8, 72, chunk - 8):
            rc = bench.started(lib.flush_lines(buf.ptr, chunks, chunk, offset), "flush_lines")
            if rc == MB_UNSUPPORTED:
                pytest.skip("flush_lines: no user-mode cache flush on this processor")
            assert rc == MB_OK, f"flush_lines(offset={offset}) returned {rc}"
        assert np.array_equal(words, before), (
            "flush_lines changed the memory: a flush writes a line back and evicts it, the "
            "contents stay the same"
        )


def test_line_size_flush_lines_rejects_bad_arguments(lib: Any, bench: Any) -> None:
    with bench.Buffer(64 * 256, lib.ffi) as buf:
        bench.started(lib.flush_lines(buf.ptr, 64, 256, 64), "flush_lines")
        for chunks, chunk, offset in [(0, 256, 64), (64, 256, 256), (64, 256, 1000)]:
            rc = lib.flush_lines(buf.ptr, chunks, chunk, offset)
            assert rc == MB_BAD_ARGS, (
                f"flush_lines(chunks={chunks}, chunk_bytes={chunk}, offset={offset}) returned {rc}"
            )


def test_line_size_of_textbook_sweeps(sweeps: Any) -> None:
    # A miss (~100 ns) while the flushed line is the first word's; a hit (~8 ns) once it is not.
    assert sweeps.line_size(OFFSETS, [100, 101, 99, 8, 8.2, 7.9, 8]) == 64
    assert sweeps.line_size(OFFSETS, [100, 101, 99, 102, 8.2, 7.9, 8]) == 128
    # One slow measurement among the hits (the machine was busy) does not move the step.
    assert sweeps.line_size(OFFSETS, [100, 101, 99, 8, 8.2, 120, 8]) == 64


@pytest.mark.parametrize(
    "offsets, costs, why",
    [
        ([8, 16], [1.0], "lengths differ"),
        ([8], [1.0], "one point"),
        ([16, 8, 32], [3, 2, 1], "offsets not increasing"),
        ([8, 16, 32], [3, 0, 1], "a cost that is not positive"),
        ([8, 16, 32], [100, 90, 80], "no step"),
        ([8, 16, 32, 64], [10, 10, 100, 100], "a step up, not down"),
    ],
)
def test_line_size_rejects_malformed_sweeps(
    sweeps: Any, offsets: list[int], costs: list[float], why: str
) -> None:
    with pytest.raises(ValueError):
        sweeps.line_size(offsets, costs)


@pytest.mark.kata_budget  # a measurement: it runs alone, not beside other tests under -n
def test_line_size_of_this_machine(
    lib: Any, bench: Any, sweeps: Any, kata_metrics: dict[str, Any]
) -> None:
    """Your flush probe on this machine, judged by its own numbers: the hops before the step
    miss all the way to memory and those after it hit in cache, so the two sides differ several
    times over, and the step is at a cache-line size there is (32 to 256 bytes)."""
    problem = ""
    for _ in range(3):  # a busy machine can blur one sweep; three chances
        ns = bench.probe_sweep(lib, OFFSETS)
        kata_metrics["ns_per_hop"] = {str(o): round(t, 2) for o, t in zip(OFFSETS, ns, strict=True)}
        line = sweeps.line_size(OFFSETS, ns)
        kata_metrics["line_size"] = line
        k = OFFSETS.index(line)
        misses, hits = statistics.median(ns[:k]), statistics.median(ns[k:])
        problem = ""
        if not 32 <= line <= 256:
            problem = f"a step at {line} bytes: cache lines are 32 to 256 bytes. "
        elif misses < 2.5 * hits:
            problem = (
                f"the hops before {line} bytes cost {misses:.1f} ns, after it {hits:.1f} ns: a miss "
                "to memory should cost several times a hit. "
            )
        if not problem:
            break
    assert not problem, (
        f"{problem}Your sweep (ns per hop at offsets {OFFSETS}): {[round(t, 1) for t in ns]}"
    )


# --------------------------------------------------------------------------- task capacities
@SETTINGS
@given(n=st.integers(2, 600), stride=st.integers(1, 9), seed=st.integers(0, 2**64 - 1))
def test_capacities_link_makes_one_cycle(
    lib: Any, bench: Any, n: int, stride: int, seed: int
) -> None:
    with bench.Buffer(n * stride * 8, lib.ffi) as buf:
        slots = lib.ffi.cast("void **", buf.ptr)
        rc = bench.started(lib.chase_link(slots, n, stride, seed), "chase_link")
        assert rc == MB_OK
        words = buf.words()
        succ = successors(words, buf.address, [8 * stride * i for i in range(n)], 8 * stride)
        assert sorted(succ) == list(range(n)), "two slots lead to the same next slot"
        assert cycle_length(succ) == n, (
            f"n={n}: following the pointers from slot 0 comes back after {cycle_length(succ)} "
            "hops: the slots form several cycles, not one (is it Sattolo's algorithm?)"
        )
        others = [int(w) for i, w in enumerate(words) if i % stride]
        assert not any(others), "chase_link wrote between the slots"


def test_capacities_link_is_reproducible(lib: Any, bench: Any) -> None:
    with bench.Buffer(4096, lib.ffi) as a, bench.Buffer(4096, lib.ffi) as b:
        for buf in (a, b):
            bench.started(
                lib.chase_link(lib.ffi.cast("void **", buf.ptr), 512, 1, 42), "chase_link"
            )
        rel_a = [int(w) - a.address for w in a.words()]
        rel_b = [int(w) - b.address for w in b.words()]
        assert rel_a == rel_b, "the same seed should give the same cycle"


def test_capacities_link_rejects_bad_arguments(lib: Any, bench: Any) -> None:
    with bench.Buffer(4096, lib.ffi) as buf:
        slots = lib.ffi.cast("void **", buf.ptr)
        bench.started(lib.chase_link(slots, 8, 1, 1), "chase_link")
        for n, stride in [(0, 1), (1, 1), (8, 0)]:
            rc = lib.chase_link(slots, n, stride, 1)
            assert rc == MB_BAD_ARGS, f"chase_link(n={n}, stride={stride}) returned {rc}"


def test_capacities_walk_follows_pointers(lib: Any, bench: Any) -> None:
    order = [0, 5, 2, 7, 1, 3, 6, 4]  # a cycle written by hand: 0 -> 5 -> 2 -> ...
    with bench.Buffer(4096, lib.ffi) as buf:
        words = buf.words()
        for a, b in zip(order, order[1:] + order[:1], strict=True):
            words[a] = buf.address + 8 * b
        start = lib.ffi.cast("void **", buf.ptr)
        for hops in [1, 2, 7, 8, 8 * 3 + 5]:
            end = bench.started(lib.chase_walk(start, hops), "chase_walk")
            want = order[hops % len(order)]
            got = (bench.address(lib, end) - buf.address) // 8
            assert got == want, f"chase_walk(slot 0, {hops}) ended at slot {got}, not {want}"
        assert bench.address(lib, lib.chase_walk(start, 0)) == buf.address


def test_capacities_levels_of_textbook_sweeps(sweeps: Any) -> None:
    Level = sweeps.Level
    sizes = [k * KiB for k in range(1, 7)]
    assert sweeps.cache_levels(sizes, [2, 2, 2, 3.5, 6, 6.2]) == [
        Level(3 * KiB, 2.0, 4 * KiB),
        Level(6 * KiB, 6.1, None),
    ]
    # A machine with a 32 KiB L1, a 1 MiB L2 and memory behind them; two sizes per octave.
    sizes = [4 * KiB, 8 * KiB, 16 * KiB, 24 * KiB, 32 * KiB, 48 * KiB, 64 * KiB, 256 * KiB]
    sizes += [512 * KiB, 768 * KiB, 1 * MiB, 3 * MiB // 2, 2 * MiB, 4 * MiB, 8 * MiB]
    lat = [1.2, 1.2, 1.3, 1.2, 1.3, 3.0, 4.1, 4.2, 4.5, 4.6, 4.8, 20, 60, 85, 90]
    assert sweeps.cache_levels(sizes, lat) == [
        Level(32 * KiB, 1.2, 48 * KiB),
        Level(1 * MiB, 4.5, 3 * MiB // 2),
        Level(8 * MiB, 87.5, None),
    ]
    assert sweeps.cache_levels([1, 2, 3], [5, 5.1, 5.2]) == [Level(3, 5.1, None)]


def test_capacities_levels_rejects_malformed_sweeps(sweeps: Any) -> None:
    for sizes, lat in [([1, 2], [1.0]), ([1], [1.0]), ([2, 1], [1, 1]), ([1, 2], [1, -1])]:
        with pytest.raises(ValueError):
            sweeps.cache_levels(sizes, lat)
    with pytest.raises(ValueError):
        sweeps.cache_levels([1, 2], [1, 2], jump=1.0)


@pytest.mark.kata_budget  # a measurement: it runs alone, not beside other tests under -n
def test_capacities_of_this_machine(
    lib: Any, bench: Any, sweeps: Any, kata_metrics: dict[str, Any]
) -> None:
    """Your latency sweep from 4 KiB to 64 MiB on this machine, judged by its own numbers: at
    least two cache levels before memory, each slower than the one before, the first an L1 (a
    plateau of a few ns ending between 8 and 256 KiB: every L1 data cache there is), and memory
    several times slower than the L1 (what Linux says about the caches is shown, not used)."""
    sizes = bench.sweep_sizes(4 * KiB, 64 * MiB)
    problems = ""
    for attempt in range(3):  # a busy machine can blur one sweep; three chances
        lat = bench.chase_sweep(lib, sizes, seed=1 + 100 * attempt)
        levels = sweeps.cache_levels(sizes, lat)
        kata_metrics["latency_ns"] = {
            f"{s // KiB} KiB": round(t, 2) for s, t in zip(sizes, lat, strict=True)
        }
        kata_metrics["levels"] = [
            {"capacity": lv.capacity, "latency_ns": round(lv.latency_ns, 2), "spill": lv.spill}
            for lv in levels
        ]
        problems = ""
        lats = [lv.latency_ns for lv in levels]
        if len(levels) < 3:
            problems += "a sweep this wide shows at least two cache levels and memory. "
        elif not 8 * KiB <= levels[0].capacity <= 256 * KiB:
            problems += "the first level should be an L1 data cache (8 to 256 KiB). "
        elif lats[-1] < 4 * lats[0]:
            problems += "memory should be several times slower than the L1. "
        if any(b <= a for a, b in zip(lats, lats[1:], strict=False)):
            problems += "each level should be slower than the one before. "
        if not problems:
            break
    kata_metrics["linux reports"] = {
        f"L{c.level} {c.type}": f"{c.size // KiB} KiB" for c in bench.read_caches()
    }
    assert not problems, (
        f"{problems}Your levels: {levels} from latencies "
        f"{[(s // KiB, round(t, 1)) for s, t in zip(sizes, lat, strict=True)]} (KiB, ns)"
    )
