"""Public tests of tasks line-size and capacities: what your pointer chases write, how sweeps are
read, and what they find on this machine (compared with what Linux reports, within a factor of
two, never with fixed numbers)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

KiB, MiB = 1 << 10, 1 << 20
MB_OK, MB_BAD_ARGS = 0, -2
OFFSETS = [8, 16, 32, 64, 128, 256, 512]
SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def sweeps(kata: Any) -> Any:
    return kata.module("sweeps")


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
def test_line_pair_link_writes_one_cycle_of_pairs(lib: Any, bench: Any) -> None:
    chunks, chunk, offset = 64, 256, 72
    with bench.Buffer(chunks * chunk, lib.ffi) as buf:
        rc = bench.started(lib.pair_link(buf.ptr, chunks, chunk, offset, 3), "pair_link")
        assert rc == MB_OK
        words = buf.words()
        for i in range(chunks):
            got = int(words[i * chunk // 8]) - buf.address
            assert got == i * chunk + offset, (
                f"chunk {i}: its first word should point {offset} bytes further on, to byte "
                f"{i * chunk + offset} of the buffer; it points to byte {got}"
            )
        succ = successors(words, buf.address, [i * chunk + offset for i in range(chunks)], chunk)
        assert sorted(succ) == list(range(chunks)), "two chunks lead to the same next chunk"
        assert cycle_length(succ) == chunks, (
            f"the chunks form a cycle of {cycle_length(succ)}, not one cycle of all {chunks}"
        )
        end = bench.started(lib.chase_walk(buf.ptr, 2 * chunks), "chase_walk")
        assert bench.address(lib, end) == buf.address, "a full lap should end where it began"


def test_line_pair_link_rejects_bad_arguments(lib: Any, bench: Any) -> None:
    with bench.Buffer(64 * 256, lib.ffi) as buf:
        bench.started(lib.pair_link(buf.ptr, 64, 256, 64, 1), "pair_link")
        for chunks, chunk, offset in [(1, 256, 64), (64, 256, 0), (64, 256, 256), (64, 256, 12)]:
            rc = lib.pair_link(buf.ptr, chunks, chunk, offset, 1)
            assert rc == MB_BAD_ARGS, (
                f"pair_link(chunks={chunks}, chunk_bytes={chunk}, offset={offset}) returned {rc}"
            )


def test_line_size_of_textbook_sweeps(sweeps: Any) -> None:
    # One miss (~90 ns) while the second load shares the line; two (~180 ns) once it does not.
    assert sweeps.line_size(OFFSETS, [90, 91, 89, 182, 178, 181, 180]) == 64
    assert sweeps.line_size(OFFSETS, [90, 91, 89, 92, 178, 181, 180]) == 128
    # A step spread over two points: 64 is already nearer two misses than one (by ratio).
    assert sweeps.line_size(OFFSETS, [100, 100, 110, 150, 190, 200, 200]) == 64


@pytest.mark.parametrize(
    "offsets, costs, why",
    [
        ([8, 16], [1.0], "lengths differ"),
        ([8], [1.0], "one point"),
        ([16, 8, 32], [1, 2, 3], "offsets not increasing"),
        ([8, 16, 32], [1, 0, 3], "a cost that is not positive"),
        ([8, 16, 32], [100, 110, 120], "no step"),
    ],
)
def test_line_size_rejects_malformed_sweeps(
    sweeps: Any, offsets: list[int], costs: list[float], why: str
) -> None:
    with pytest.raises(ValueError):
        sweeps.line_size(offsets, costs)


def test_line_size_of_this_machine(
    lib: Any, bench: Any, sweeps: Any, caches: list[Any], kata_metrics: dict[str, Any]
) -> None:
    """Linux's coherency_line_size, or twice it: Intel's adjacent-line prefetcher fetches lines
    in pairs, which a pair chase may see as one 128-byte line."""
    line = caches[0].line
    nbytes = max(64 * MiB, 4 * max(c.size for c in caches if c.level <= 2))
    found: list[int | str] = []
    for _ in range(3):  # a busy machine can blur one sweep; three chances
        ns = bench.pair_sweep(lib, OFFSETS, nbytes)
        kata_metrics["ns_per_pair"] = {
            str(o): round(t, 2) for o, t in zip(OFFSETS, ns, strict=True)
        }
        try:
            found.append(sweeps.line_size(OFFSETS, ns))
        except ValueError as e:
            found.append(str(e))
        if found[-1] in (line, 2 * line):
            break
    kata_metrics["line_size"] = found[-1]
    assert found[-1] in (line, 2 * line), (
        f"Linux reports {line}-byte cache lines; your sweeps found {found} "
        f"(ns per pair at offsets {OFFSETS}: {[round(t, 1) for t in ns]})"
    )


# --------------------------------------------------------------------------- task capacities
@SETTINGS
@given(n=st.integers(2, 600), stride=st.integers(1, 9), seed=st.integers(0, 2**64 - 1))
def test_chase_link_makes_one_cycle(lib: Any, bench: Any, n: int, stride: int, seed: int) -> None:
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


def test_chase_link_is_reproducible(lib: Any, bench: Any) -> None:
    with bench.Buffer(4096, lib.ffi) as a, bench.Buffer(4096, lib.ffi) as b:
        for buf in (a, b):
            bench.started(
                lib.chase_link(lib.ffi.cast("void **", buf.ptr), 512, 1, 42), "chase_link"
            )
        rel_a = [int(w) - a.address for w in a.words()]
        rel_b = [int(w) - b.address for w in b.words()]
        assert rel_a == rel_b, "the same seed should give the same cycle"


def test_chase_link_rejects_bad_arguments(lib: Any, bench: Any) -> None:
    with bench.Buffer(4096, lib.ffi) as buf:
        slots = lib.ffi.cast("void **", buf.ptr)
        bench.started(lib.chase_link(slots, 8, 1, 1), "chase_link")
        for n, stride in [(0, 1), (1, 1), (8, 0)]:
            rc = lib.chase_link(slots, n, stride, 1)
            assert rc == MB_BAD_ARGS, f"chase_link(n={n}, stride={stride}) returned {rc}"


def test_chase_walk_follows_pointers(lib: Any, bench: Any) -> None:
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


def test_chase_levels_of_textbook_sweeps(sweeps: Any) -> None:
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


def test_chase_levels_rejects_malformed_sweeps(sweeps: Any) -> None:
    for sizes, lat in [([1, 2], [1.0]), ([1], [1.0]), ([2, 1], [1, 1]), ([1, 2], [1, -1])]:
        with pytest.raises(ValueError):
            sweeps.cache_levels(sizes, lat)
    with pytest.raises(ValueError):
        sweeps.cache_levels([1, 2], [1, 2], jump=1.0)


def test_chase_capacities_of_this_machine(
    lib: Any, bench: Any, sweeps: Any, caches: list[Any], kata_metrics: dict[str, Any]
) -> None:
    """Your L1 and L2 from a latency sweep, each within a factor of two of what Linux reports:
    the size sits between the level's last point on its plateau and its knee. (The shared L3
    of a virtual machine is often not there for one process, so it is not checked.)"""
    l1 = next(c for c in caches if c.level == 1)
    l2 = next((c for c in caches if c.level == 2), None)
    if l2 is None:
        pytest.skip("this machine reports no L2 cache")
    sizes = bench.sweep_sizes(4 * KiB, 4 * l2.size)

    def fits(level: Any, size: int) -> bool:
        return level.spill is not None and level.capacity <= 2 * size and level.spill >= size // 2

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
        if not (len(levels) >= 3 and fits(levels[0], l1.size)):
            problems += f"the first level should be the {l1.size // KiB} KiB L1. "
        if not any(fits(lv, l2.size) for lv in levels[1:]):
            problems += f"no level is the {l2.size // KiB} KiB L2. "
        lats = [lv.latency_ns for lv in levels]
        if lats != sorted(lats):
            problems += "the levels' latencies should increase. "
        if not problems:
            break
    assert not problems, (
        f"{problems}Your levels: {levels} from latencies "
        f"{[(s // KiB, round(t, 1)) for s, t in zip(sizes, lat, strict=True)]} (KiB, ns)"
    )
