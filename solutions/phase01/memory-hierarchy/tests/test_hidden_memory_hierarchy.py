"""Hidden tests of the memory-hierarchy kata: each catches a shortcut that the public tests let
through, named in its docstring. Most are exact (what the C kernels write, sweeps with known
answers, roofline arithmetic, the SVG's geometry); the one timing check compares a kernel with
itself at two sizes in the same run. Test names put each test under its kata.toml task.
Hidden modules see no public conftest, so the fixtures are defined here.
"""

from __future__ import annotations

import builtins
import errno
import importlib.util
import io
import math
import os
import random
import statistics
import subprocess
import types
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.testing import hidden_settings, seeded

KiB, MiB = 1 << 10, 1 << 20
MB_OK = 0
MB_BAD_ARGS = -2
COPY, SCALE, ADD, TRIAD = range(4)
NAMES = ["copy", "scale", "add", "triad"]
SVG = "{http://www.w3.org/2000/svg}"
SETTINGS = hidden_settings(40)


# --------------------------------------------------------------------------- cycles
def chase_successors(lib: Any, bench: Any, n: int, stride: int, seed: int) -> list[int]:
    """next[i] for the cycle chase_link writes over n slots."""
    with bench.Buffer(n * stride * 8, lib.ffi) as buf:
        slots = lib.ffi.cast("void **", buf.ptr)
        status = bench.started(lib.chase_link(slots, n, stride, seed), "chase_link")
        assert status == MB_OK, (
            f"chase_link(slots, n={n}, stride={stride}, seed={seed}) returned {status}, not MB_OK"
        )
        words = buf.words()
        return [(int(words[i * stride]) - buf.address) // (8 * stride) for i in range(n)]


def looks_random(succ: list[int], what: str) -> None:
    """A uniformly random cycle of n has about 0.63 n distinct steps (next[i] - i mod n) and
    sends about 1/8 of its hops less than n/16 slots away; a stride walk has one step, and a
    cycle shuffled within small blocks stays near. Both bounds are many sigmas from random."""
    n = len(succ)
    assert sorted(succ) == list(range(n)), f"{what}: not a permutation of the slots"
    steps = [(s - i) % n for i, s in enumerate(succ)]
    assert len(set(steps)) >= n // 4, (
        f"{what}: only {len(set(steps))} different steps between consecutive slots over {n} "
        f"slots (most common: {statistics.mode(steps)}): a pattern the prefetcher can follow, "
        "not a random cycle"
    )
    near = sum(min(d, n - d) < n // 16 for d in steps)
    assert near < n // 4, (
        f"{what}: {near} of {n} hops go less than {n // 16} slots away: the walk stays local; "
        "a random cycle jumps anywhere"
    )


def test_capacities_link_is_not_a_stride_walk(lib: Any, bench: Any) -> None:
    """Shortcut: chase_link links slot i to slot i + c (c = 97, coprime to n: one cycle,
    reproducible; the public tests pass), a constant stride that a stride prefetcher can learn,
    so the sweep measures the prefetcher, not the latency."""
    for n, stride in [(4096, 1), (1000, 8), (3001, 3)]:
        looks_random(chase_successors(lib, bench, n, stride, 5), f"chase_link(n={n})")


@pytest.mark.kata_gate(
    "chase_link's cycle over a random n of 5,000 to 60,000 slots is not a random one (few "
    "distinct steps, or hops that stay near): the sizes a sweep's large arrays use"
)
def test_capacities_link_is_random_at_every_size(lib: Any, bench: Any) -> None:
    """Shortcut: a random cycle only at the small sizes the property tests use, a sequential
    or strided one above (the walk then measures the prefetcher: the sweep shows no level).
    n and the seed drawn fresh each run."""
    rng = random.Random(seeded("chase sizes"))
    n = rng.randrange(5_000, 60_000)
    seed = rng.randrange(2**63)
    looks_random(chase_successors(lib, bench, n, 1, seed), f"chase_link(n={n}, seed={seed})")


def test_capacities_link_depends_on_the_seed(lib: Any, bench: Any) -> None:
    """Shortcut: a random cycle from a fixed seed (srand(1) once), reproducible but the same for
    every seed: the sweep's sizes all walk one pattern and a retry with another seed cannot
    escape an unlucky one."""
    cycles = {tuple(chase_successors(lib, bench, 512, 1, seed)) for seed in (1, 2, 3, 2**63 + 1)}
    assert len(cycles) == 4, f"4 seeds gave {len(cycles)} different cycles"


# --------------------------------------------------------------------------- line_size
MACHINE_FILES = ("/sys/", "/proc/cpuinfo", "/proc/self/auxv")


@contextmanager
def machine_description_hidden() -> Iterator[None]:
    """Inside: Python code cannot read the machine's description. Files under /sys and
    /proc/cpuinfo raise PermissionError, os.sysconf and os.confstr (the C library's cache sizes)
    raise, and no program (getconf, lscpu) starts. A function that reads a sweep needs none."""

    def check(path: Any) -> None:
        if isinstance(path, (str, bytes, os.PathLike)) and os.fsdecode(path).startswith(
            MACHINE_FILES
        ):
            raise PermissionError(errno.EACCES, "hidden while grading: measure it", path)

    def guarded(real: Any) -> Any:
        def call(path: Any = ".", *args: Any, **kwargs: Any) -> Any:
            check(path)
            return real(path, *args, **kwargs)

        return call

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(errno.EACCES, "hidden while grading: measure it")

    with pytest.MonkeyPatch.context() as mp:
        for module, name in [(builtins, "open"), (io, "open"), (os, "open")]:
            mp.setattr(module, name, guarded(getattr(module, name)))
        for name in ("listdir", "scandir", "stat"):
            mp.setattr(os, name, guarded(getattr(os, name)))
        for name in ("sysconf", "confstr", "system", "popen", "posix_spawn", "posix_spawnp"):
            if hasattr(os, name):
                mp.setattr(os, name, refuse)
        for name in ("Popen", "run", "call", "check_call", "check_output", "getoutput"):
            mp.setattr(subprocess, name, refuse)
        yield


def fresh(module: types.ModuleType) -> types.ModuleType:
    """A second copy of a learner module, its top level run again (now, under whatever is
    patched): a value read from the machine at import time is read again."""
    name = f"{module.__package__}._fresh_{module.__name__.rpartition('.')[2]}"
    spec = importlib.util.spec_from_file_location(name, module.__file__)
    assert spec is not None and spec.loader is not None, f"cannot load {module.__file__} again"
    copy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(copy)
    return copy


def flush_sweep(
    rng: random.Random, offsets: list[int], step: int, outlier: bool = False
) -> list[float]:
    """A flush probe's sweep: a miss (40-300 ns) before offsets[step], a hit 3-30x cheaper from
    it on, +-5% noise; with `outlier`, one point slowed 1.5x or more (a busy moment) where it
    cannot be mistaken for the other side: on a side of three points or more, not the first hit,
    by less than the step itself."""
    n = len(offsets)
    miss = rng.uniform(40.0, 300.0)
    ratio = rng.uniform(3.0, 30.0)
    costs = [(miss if i < step else miss / ratio) * rng.uniform(0.95, 1.05) for i in range(n)]
    if outlier:
        places = (list(range(step)) if step >= 3 else []) + (
            list(range(step + 1, n)) if n - step >= 3 else []
        )
        if not places:
            return costs
        i = rng.choice(places)
        costs[i] *= rng.uniform(1.5, min(6.0, ratio / 1.5) if i < step else ratio / 2)
    return costs


def oracle_line_size(costs: list[float]) -> tuple[int, float]:
    """README.md's rule, exhaustively: the split k with the smallest total misfit (sum of
    |log(cost / side's median)|, the first k on a tie), and its misses/hits median ratio."""
    logs = [math.log(c) for c in costs]

    def misfit(side: list[float]) -> float:
        middle = statistics.median(side)
        return sum(abs(c - middle) for c in side)

    k = min(range(1, len(logs)), key=lambda k: (misfit(logs[:k]) + misfit(logs[k:]), k))
    return k, statistics.median(costs[:k]) / statistics.median(costs[k:])


@hidden_settings(max_examples=80)
@given(
    data=st.data(),
    n=st.integers(3, 12),
    factor=st.floats(-4.0, 3.5),  # log10 of the outlier's factor: 1/10,000 .. ~3,000x
)
@pytest.mark.kata_gate(
    "line_size disagrees with the smallest-misfit split on random flush sweeps with one "
    "measurement anywhere slowed or sped up by any factor (up to thousands)"
)
def test_line_size_is_the_smallest_misfit_split_whatever_the_outlier(
    sweeps: Any, data: st.DataObject, n: int, factor: float
) -> None:
    """Shortcuts: a threshold at the geometric mean of the sweep's max and min, the largest
    drop between neighbours: right while an outlier stays small, wrong once one point is
    slowed more than (miss/hit)^2 times. Compared with the README's rule computed here."""
    offsets = sorted(data.draw(st.sets(st.integers(1, 512), min_size=n, max_size=n)))
    offsets = [8 * o for o in offsets]
    step = data.draw(st.integers(1, n - 1), label="step")
    costs = flush_sweep(random.Random(data.draw(st.integers(0, 2**32))), offsets, step)
    i = data.draw(st.integers(0, n - 1), label="outlier")
    costs[i] *= 10.0**factor
    k, ratio = oracle_line_size(costs)
    if ratio < 1.5:  # sweeps.STEP: the best split is no step down
        try:
            got = sweeps.line_size(offsets, costs)
        except ValueError:
            return
        raise AssertionError(
            f"line_size({offsets}, {costs}) = {got}: the best split has a misses/hits ratio "
            f"{ratio:.3g} < 1.5, so this sweep has no step (ValueError)"
        )
    got = line_size_of(sweeps, offsets, costs, offsets[k])
    assert got == offsets[k], (
        f"line_size({offsets}, {costs}) = {got}, expected {offsets[k]} (the split with the "
        f"smallest misfit; misses/hits {ratio:.3g})"
    )


@pytest.mark.parametrize(
    "costs, want",
    [
        ([100, 100, 100, 8, 8, 8, 300], 64),  # a slow last point: not the hits' level
        ([400, 100, 100, 8, 8, 8, 8], 64),  # a slow first point: not the misses' level
        ([100, 100, 100, 100, 100, 9, 8], 256),  # the step late ...
        ([100, 9, 8, 8, 8, 30, 8], 16),  # ... and early, with a slow hit
    ],
)
@pytest.mark.kata_gate(
    "line_size gives the wrong line on flush sweeps with one slow measurement at either end"
)
def test_line_size_splits_where_each_side_is_flattest(
    sweeps: Any, costs: list[float], want: int
) -> None:
    """Shortcut: a threshold between the first and the last point (the geometric mean of the two,
    the rule of a cleaner world): one slow measurement at either end moves it, and every public
    sweep still passes. The split with the smallest misfit does not move."""
    offsets = [8, 16, 32, 64, 128, 256, 512]
    got = line_size_of(sweeps, offsets, costs, want)
    assert got == want, f"line_size({offsets}, {costs}) = {got}, expected {want}"


def line_size_of(sweeps: Any, offsets: list[int], costs: list[float], want: int) -> int:
    """line_size on a sweep that does step down at `want`: refusing it (the ValueError meant for
    a sweep with no step) is a wrong answer on this input, not an honest crash."""
    try:
        return sweeps.line_size(offsets, costs)
    except ValueError as e:
        raise AssertionError(
            f"line_size({offsets}, {costs}) refused a sweep that steps down at offset {want}: {e}"
        ) from None


@hidden_settings(max_examples=60)
@given(data=st.data(), n=st.integers(2, 10), outlier=st.booleans())
@pytest.mark.kata_gate(
    "line_size misses the step of random flush sweeps (16- to 512-byte steps, random offsets, "
    "noise, an outlier in half of them)"
)
def test_line_size_finds_the_step_anywhere(
    sweeps: Any, data: st.DataObject, n: int, outlier: bool
) -> None:
    """Shortcuts: a fixed answer (64), or this machine's line size read from sysfs: sweeps of
    machines with 16- to 512-byte steps, random offsets (multiples of 8), +-5% noise, and one
    slow measurement in half of them."""
    offsets = sorted(data.draw(st.sets(st.integers(1, 512), min_size=n, max_size=n)))
    offsets = [8 * o for o in offsets]
    step = data.draw(st.integers(1, n - 1), label="step")  # first offset on the fast side
    costs = flush_sweep(random.Random(data.draw(st.integers(0, 2**32))), offsets, step, outlier)
    got = line_size_of(sweeps, offsets, costs, offsets[step])
    assert got == offsets[step], f"line_size({offsets}, {costs}) = {got}, expected {offsets[step]}"


@pytest.mark.kata_gate(
    "line_size's answer does not follow its sweep: sweeps of machines with 32-, 128- and "
    "256-byte lines, called with this machine's description hidden, get another line"
)
def test_line_size_reads_only_its_sweep(sweeps: Any) -> None:
    """Shortcut: line_size returns coherency_line_size from sysfs (or sysconf, getconf, lscpu),
    at call time or once at import. Sweeps of machines with 32-, 128- and 256-byte lines go to a
    fresh copy of sweeps.py, imported and called while the machine's description is hidden."""
    offsets = [8, 16, 32, 64, 128, 256, 512]
    rng = random.Random(seeded("line_size other machines"))
    with machine_description_hidden():
        copy = fresh(sweeps)
        for line in (128, 32, 256, 128):
            costs = flush_sweep(rng, offsets, offsets.index(line), outlier=True)
            got = line_size_of(copy, offsets, costs, line)
            assert got == line, f"line_size({offsets}, {costs}) = {got}, not {line}"


def step_of(costs: list[float]) -> int:
    """The index where a flush sweep drops: the split with the smallest total distance (in log)
    from each side's median (line_size's rule, here so that this test does not depend on it)."""
    logs = [math.log(c) for c in costs]

    def misfit(xs: list[float]) -> float:
        return sum(abs(x - statistics.median(xs)) for x in xs)

    return min(range(1, len(logs)), key=lambda k: misfit(logs[:k]) + misfit(logs[k:]))


@pytest.mark.kata_budget  # a measurement: it runs alone, not beside other tests under -n
@pytest.mark.kata_gate(
    "flush_lines(offset) does not evict the line holding byte `offset`: with chunks starting "
    "half a line into a line, the measured step does not move to half the aligned one"
)
def test_line_size_flush_lines_evicts_the_line_of_the_byte(lib: Any, bench: Any) -> None:
    """Shortcut: flush_lines evicts the chunk's first line whenever `offset` is below the line
    size it knows (hard-coded 64, or sysconf's), which fakes the step the public test wants. With
    every chunk starting half a line into a line, a real flush of byte `offset` hits the first
    word's line only below half a line: the step moves to half the aligned one."""
    offsets = [8, 16, 32, 64, 128, 256, 512]
    got: list[tuple[int, int]] = []
    for _ in range(3):  # a busy machine can blur one sweep; three chances
        aligned = offsets[step_of(bench.probe_sweep(lib, offsets))]
        skewed = offsets[step_of(bench.probe_sweep(lib, offsets, skew=aligned // 2))]
        got.append((aligned, skewed))
        if skewed == aligned // 2:
            break
    aligned, skewed = got[-1]
    assert skewed == aligned // 2, (
        f"with chunks aligned to a line the step is at {aligned} bytes; with every chunk starting "
        f"{aligned // 2} bytes into a line it should be at {aligned // 2}, not {skewed} "
        f"(aligned, skewed steps of each try: {got})"
    )


# --------------------------------------------------------------------------- cache_levels
@pytest.mark.kata_gate(
    "cache_levels misses a knee of a level whose latency climbs gradually (each step below "
    "jump, the plateau's median left behind)"
)
def test_capacities_levels_knee_is_measured_from_the_plateau_start(sweeps: Any) -> None:
    """Shortcut: `latency[i] > jump * latency[i - 1]` (a knee against the previous point, not the
    plateau's first): the same on the public sweeps, blind to a level whose latency climbs
    gradually, as an L2 to L3 transition often does (each step here rises 1.3x < jump)."""
    Level = sweeps.Level
    sizes = [k * 8 * KiB for k in range(1, 9)]
    lat = [1.0, 1.0, 1.3, 1.69, 2.2, 2.86, 3.7, 3.7]
    got = sweeps.cache_levels(sizes, lat)
    want = [Level(24 * KiB, 1.0, 32 * KiB), Level(64 * KiB, 3.7, None)]
    assert got == want, (
        f"cache_levels on a sweep whose latency climbs 1.3x per point ({lat}) gave {got}, "
        f"expected {want}: a knee is measured from the start of the plateau, not the point before"
    )


@st.composite
def stepped_sweep(draw: Any) -> tuple[list[int], list[float], list[tuple[int, float, int | None]]]:
    """A sweep of 1-4 flat plateaus (+-5% noise) with random lengths, sizes and latencies; each
    jump (2.8x-12x) goes straight up or through one point halfway (by ratio); a plateau may hold
    one outlier inside it (1.6x-4x: above the knee's bar, alone). The answer is built alongside."""
    levels = draw(st.integers(1, 4))
    lat: list[float] = []
    plateaus: list[list[int]] = []  # indices of each plateau's points
    base = draw(st.floats(0.5, 5.0))
    for lv in range(levels):
        if lv:
            ratio = draw(st.floats(2.8, 12.0))
            if draw(st.booleans()):
                lat.append(base * math.sqrt(ratio))  # a point in the transition: no plateau's
            base *= ratio
        length = draw(st.integers(2, 7))
        plateaus.append(list(range(len(lat), len(lat) + length)))
        lat += [base * draw(st.floats(0.95, 1.05)) for _ in range(length)]
        # Not at either end: an outlier at the end looks like a knee, and one just after a
        # plateau's first point like the transition still rising.
        inside = plateaus[-1][2 if lv else 1 : -1]
        if inside and draw(st.booleans()):
            lat[draw(st.sampled_from(inside))] *= draw(st.floats(1.6, 4.0))
    gaps = draw(st.lists(st.integers(1, 64), min_size=len(lat), max_size=len(lat)))
    sizes = [KiB * sum(gaps[: i + 1]) for i in range(len(lat))]
    want = []
    for j, idx in enumerate(plateaus):
        spill = sizes[idx[-1] + 1] if j + 1 < levels else None  # the knee: the next point
        want.append((sizes[idx[-1]], statistics.median(lat[i] for i in idx), spill))
    return sizes, lat, want


@hidden_settings(max_examples=80)
@given(sweep=stepped_sweep())
@pytest.mark.kata_gate(
    "cache_levels misses the plateaus of random stepped sweeps (1-4 levels, random sizes and "
    "latencies, noise, a point halfway up a jump, an outlier inside a plateau)"
)
def test_capacities_levels_of_random_stepped_sweeps(sweeps: Any, sweep: Any) -> None:
    """Shortcuts: a first level hard-coded at 32 KiB, levels tied to the public sweeps' shape (a
    knee at the first point, always three levels), or levels read from sysfs; and one slow
    measurement taken for a knee. Random plateaus with known answers."""
    sizes, lat, want = sweep
    got = sweeps.cache_levels(sizes, lat)
    assert len(got) == len(want), f"cache_levels({sizes}, {lat}): {got}, want {want}"
    for g, (capacity, latency, spill) in zip(got, want, strict=True):
        assert (g.capacity, g.spill) == (capacity, spill), f"{got}, want {want}"
        assert g.latency_ns == pytest.approx(latency, rel=1e-9), f"{got}, want {want}"


def machine_sweep(l1: int, l2: int, l3: int | None) -> tuple[list[int], list[float]]:
    """The latency sweep, 4 KiB to 256 MiB two points per octave, of a machine with these cache
    sizes: 1.2 ns in L1, 4.5 in L2, 15 in L3, 95 in memory, one point halfway (by ratio) after
    each knee, +-3% noise drawn from the run seed."""
    rng = random.Random(seeded(f"machine sweep {l1} {l2} {l3}"))
    sizes = [s for k in range(12, 29) for s in (1 << k, 3 << (k - 1)) if s <= 256 << 20]
    bounds = [(l1, 1.2), (l2, 4.5)] + ([(l3, 15.0)] if l3 else []) + [(1 << 40, 95.0)]
    lat, prev = [], None
    for s in sizes:
        i = next(i for i, (b, _) in enumerate(bounds) if s <= b)
        here = bounds[i][1]
        if prev is not None and i > prev:  # the first point past a knee: halfway up
            here = math.sqrt(here * bounds[i - 1][1])
        lat.append(here * rng.uniform(0.97, 1.03))
        prev = i
    return sizes, lat


@pytest.mark.parametrize(
    "l1, l2, l3",
    [
        (48 * KiB, 2 * MiB, 105 * MiB),  # Sapphire Rapids
        (32 * KiB, 1 * MiB, 32 * MiB),  # Zen 4
        (128 * KiB, 12 * MiB, None),  # Apple M1 (P core): no L3 for the cores
        (64 * KiB, 1280 * KiB, 30 * MiB),  # Ice Lake server: an L2 between two sweep points
    ],
)
@pytest.mark.kata_gate(
    "cache_levels' levels do not follow its sweep: sweeps of machines unlike this one, called "
    "with this machine's description hidden, get levels whose sizes miss those machines' caches"
)
def test_capacities_levels_of_other_machines(sweeps: Any, l1: int, l2: int, l3: int | None) -> None:
    """Shortcut: cache_levels builds its levels from sysfs (or sysconf, lscpu), at call time or at
    import, and uses the sweep only for the latencies. Sweeps of machines unlike this one go to
    a fresh copy of sweeps.py, imported and called while the machine's description is hidden;
    each cache's size must lie between its level's capacity and its spill."""
    sizes, lat = machine_sweep(l1, l2, l3)
    with machine_description_hidden():
        levels = fresh(sweeps).cache_levels(sizes, lat)
    caches = [c for c in (l1, l2, l3) if c]
    assert len(levels) == len(caches) + 1, f"{len(caches)} caches and memory: {levels}"
    for lv, size in zip(levels, caches, strict=False):
        assert lv.spill is not None and lv.capacity <= size < lv.spill, (
            f"the {size // KiB} KiB cache is not between a level's capacity and spill: {levels}"
        )


# --------------------------------------------------------------------------- STREAM bytes
def test_bandwidth_bytes_of_add_and_triad(lib: Any, bench: Any) -> None:
    """Shortcut: 16 bytes per element for every kernel (copy's count reused): the public tests
    check copy and scale exactly, and add and triad only through their difference with the
    traffic. Add and triad read two arrays and write one: 24 bytes per element, 32 on the bus."""
    bench.started(lib.stream_bytes(TRIAD, 1), "stream_bytes")
    for kernel in (ADD, TRIAD):
        for n in (0, 1, 999, 10**10):
            assert lib.stream_bytes(kernel, n) == 24 * n, f"stream_bytes({NAMES[kernel]}, {n})"
            assert lib.stream_traffic_bytes(kernel, n) == 32 * n, (
                f"stream_traffic_bytes({NAMES[kernel]}, {n})"
            )
    for kernel in (COPY, SCALE):
        assert lib.stream_traffic_bytes(kernel, 10**9) == 24 * 10**9, NAMES[kernel]


@pytest.mark.kata_gate(
    "stream_bytes or stream_traffic_bytes is not (arrays read + written) x 8 bytes x n, and "
    "(reads + 2 x writes) x 8 x n on the bus, for every kernel at random sizes n"
)
def test_bandwidth_bytes_of_every_kernel_at_random_sizes(lib: Any, bench: Any) -> None:
    """Each kernel's bytes are linear in n with its own per-element count: copy and scale move
    16 bytes (24 on the bus, a read for ownership per written line), add and triad 24 (32).
    Sizes drawn fresh each run, from 2 to 2**40; a bad kernel or a negative n is MB_BAD_ARGS."""
    bench.started(lib.stream_bytes(COPY, 1), "stream_bytes")
    rng = random.Random(seeded("stream bytes"))
    per = {COPY: (16, 24), SCALE: (16, 24), ADD: (24, 32), TRIAD: (24, 32)}
    for _ in range(25):
        n = rng.randrange(2, 1 << rng.choice((8, 20, 40)))
        for kernel, (moved, bus) in per.items():
            got = lib.stream_bytes(kernel, n)
            assert got == moved * n, (
                f"stream_bytes({NAMES[kernel]}, n={n}) = {got}, expected {moved} x n = {moved * n}"
            )
            got = lib.stream_traffic_bytes(kernel, n)
            assert got == bus * n, (
                f"stream_traffic_bytes({NAMES[kernel]}, n={n}) = {got}, expected {bus} x n = "
                f"{bus * n}"
            )
    for kernel, n in ((4, 10), (-1, 10), (ADD, -rng.randrange(1, 1000))):
        for f in ("stream_bytes", "stream_traffic_bytes"):
            got = getattr(lib, f)(kernel, n)
            assert got == MB_BAD_ARGS, f"{f}(kernel={kernel}, n={n}) = {got}, not MB_BAD_ARGS"


# --------------------------------------------------------------------------- FMA
@pytest.mark.kata_budget  # a measurement: it runs alone, not beside other tests under -n
def test_peak_flops_peak_time_grows_with_iters(lib: Any, bench: Any) -> None:
    """Shortcut: fma_peak writes each chain's closed form, m^n (x0 + k) + a (1 - m^n) / (1 - m),
    instead of running the FMAs: right answers in no time, so the public speed-up test of this
    task passes (only the your-roofline task notices, through an impossible peak). Eight times
    the iterations must take several times as long (same run, fastest of five)."""
    out = np.zeros(256, dtype=np.float32)
    pout = lib.ffi.cast("float *", lib.ffi.from_buffer(out))
    bench.started(lib.fma_peak(pout, 1.0, 0.999, 0.001, 1), "fma_peak")
    ratio = 0.0
    for _ in range(3):  # a busy machine can upset one measurement; three chances
        t = {
            iters: min(
                bench.timed(lambda i=iters: lib.fma_peak(pout, 1.0, 0.999, 0.001, i))
                for _ in range(5)
            )
            for iters in (250_000, 2_000_000)
        }
        ratio = t[2_000_000] / t[250_000]
        if ratio >= 3:
            break
    assert ratio >= 3, f"fma_peak took {ratio:.2f}x as long for 8x the iterations"


# --------------------------------------------------------------------------- roofline
@SETTINGS
@given(
    peak=st.floats(1e8, 1e15),
    bw=st.floats(1e8, 1e13),
    ai=st.floats(0.0, 1e4),
)
def test_roofline_arithmetic_at_any_scale(roofline: Any, peak: float, bw: float, ai: float) -> None:
    """Shortcuts tied to the public machine (100 GFLOP/s, 10 GB/s, a ridge of exactly 10): a
    ridge rounded to a whole number of FLOP/byte, or a constant; roofs checked at any scale."""
    ridge = roofline.ridge_point(peak, bw)
    assert ridge == pytest.approx(peak / bw, rel=1e-12), f"ridge_point({peak:g}, {bw:g})"
    got = roofline.attainable(ai, peak, bw)
    assert got == pytest.approx(min(peak, ai * bw), rel=1e-12), (
        f"attainable({ai:g}, {peak:g}, {bw:g}) = {got:g}, expected min(peak, ai x bw) = "
        f"{min(peak, ai * bw):g}"
    )
    got = roofline.attainable(ridge, peak, bw)
    assert got == pytest.approx(peak, rel=1e-12), (
        f"attainable(ridge_point, {peak:g}, {bw:g}) = {got:g}, expected the peak {peak:g}"
    )
    want = "memory" if ai < peak / bw else "compute"
    got = roofline.bound(ai, peak, bw)
    assert got == want, f"bound({ai:g}, {peak:g}, {bw:g}) = {got!r}, expected {want!r}"


@pytest.mark.kata_gate(
    "place() gives a kernel's attainable or efficiency against another roof than its own "
    "(ai x bandwidth left of the ridge, the peak right of it), on random machines and kernels"
)
def test_roofline_place_a_memory_bound_kernel(roofline: Any) -> None:
    """Shortcut: place() measures every kernel against the peak (efficiency = achieved / peak,
    attainable = peak). The public test places only a compute-bound kernel, where that is right.
    A memory-bound kernel's roof is ai x bandwidth."""
    peak, bw = 200e9, 25e9  # ridge at 8 FLOP/byte
    k = roofline.Kernel("triad", flops=2e8, bytes=3.2e9, seconds=0.16)  # 1/16 FLOP/B, 1.25 GFLOP/s
    p = roofline.place(k, peak, bw)
    assert p.ai == pytest.approx(1 / 16), f"place(triad).ai = {p.ai}, expected 1/16 FLOP/byte"
    assert p.bound == "memory", f"place(triad).bound = {p.bound!r}, expected 'memory'"
    assert p.attainable == pytest.approx(bw / 16), "the roof above a memory-bound kernel"
    assert p.efficiency == pytest.approx(1.25e9 / (bw / 16)), "achieved / its own roof"
    rng = random.Random(seeded("roofline place"))
    for _ in range(8):  # machines and kernels drawn fresh each run, either side of the ridge
        peak, bw = 10 ** rng.uniform(9, 14), 10 ** rng.uniform(9, 12)
        ai = peak / bw * 10 ** rng.uniform(-3, 3)
        roof = min(peak, ai * bw)
        achieved = roof * rng.uniform(0.01, 1.0)
        k = roofline.Kernel("k", flops=achieved * 2.0, bytes=achieved * 2.0 / ai, seconds=2.0)
        p = roofline.place(k, peak, bw)
        where = f"place(Kernel(ai={ai:.3g} FLOP/B, {achieved:.3g} FLOP/s), {peak:.3g}, {bw:.3g})"
        assert p.attainable == pytest.approx(roof), (
            f"{where}.attainable = {p.attainable:.4g}, expected {roof:.4g}"
        )
        assert p.efficiency == pytest.approx(achieved / roof), (
            f"{where}.efficiency = {p.efficiency:.4g}, expected achieved / its own roof = "
            f"{achieved / roof:.4g}"
        )
        want = "memory" if ai < peak / bw else "compute"
        assert p.bound == want, f"{where}.bound = {p.bound!r}, expected {want!r}"


def svg_geometry(svg: str) -> tuple[list[tuple[float, float]], list[tuple[float, float]], Any]:
    """(roof vertices, kernel dot centres, root) of a roofline SVG, checked for the public shape."""
    root = ET.fromstring(svg)
    roofs = [e for e in root.iter(f"{SVG}polyline") if "roof" in e.get("class", "").split()]
    assert len(roofs) == 1, 'one <polyline class="roof">'
    roof = [tuple(map(float, p.split(","))) for p in roofs[0].get("points", "").split()]
    dots = [e for e in root.iter(f"{SVG}circle") if "kernel" in e.get("class", "").split()]
    centres = [(float(d.get("cx", "nan")), float(d.get("cy", "nan"))) for d in dots]
    return roof, centres, root  # type: ignore[return-value]


@SETTINGS
@given(
    peak=st.floats(1e9, 1e15),
    bw=st.floats(1e9, 1e13),
    ais=st.lists(st.floats(-3.0, 3.0), min_size=1, max_size=4),
    effs=st.lists(st.floats(-3.0, 0.0), min_size=4, max_size=4),
)
@pytest.mark.kata_gate(
    "roofline_svg's axes are not logarithmic (equal ratios at equal distances) or its roof and "
    "dots are not where attainable() and the kernels put them, on random machines and kernels"
)
def test_roofline_svg_axes_are_log_and_the_roof_is_in_place(
    roofline: Any, peak: float, bw: float, ais: list[float], effs: list[float]
) -> None:
    """Shortcuts the public SVG test lets through: linear axes, fixed axis ranges (0.01 to 1000
    FLOP/byte, say) that leave kernels off the picture, or a ridge vertex drawn at the wrong
    intensity (units mixed up: FLOP per 8-byte double, not per byte). Kernels at random
    intensities (1e-3..1e3 x the ridge) and efficiencies (1e-3..1 of their roof): the pixel
    positions of the extreme two fix each axis' log scale; every other dot and all three roof
    vertices must sit where that scale puts them, every dot and the ridge inside the picture."""
    ridge = peak / bw
    kernels = []
    # two fixed kernels four decades apart on both axes fix the scales; the rest are random
    for i, (lg, le) in enumerate(zip([-2.0, 2.0, *ais], [-2.0, 0.0, *effs], strict=False)):
        ai = ridge * 10.0**lg
        achieved = min(peak, ai * bw) * 10.0**le
        kernels.append(roofline.Kernel(f"k{i}", flops=achieved, bytes=achieved / ai, seconds=1.0))
    roof, dots, root = svg_geometry(roofline.roofline_svg(peak, bw, kernels))
    assert len(roof) == 3 and len(dots) == len(kernels), (
        f"roofline_svg drew {len(roof)} roof vertices and {len(dots)} kernel dots, expected 3 "
        f"and {len(kernels)}"
    )
    width, height = float(root.get("width", 0)), float(root.get("height", 0))
    named = [("the ridge vertex", roof[1]), *zip((k.name for k in kernels), dots, strict=True)]
    for what, (x, y) in named:
        assert 0 <= x <= width and 0 <= y <= height, (
            f"{what} is drawn at ({x}, {y}), outside the {width}x{height} picture"
        )
    lx = [math.log10(k.ai) for k in kernels]
    ly = [math.log10(k.achieved) for k in kernels]
    i, j = lx.index(min(lx)), lx.index(max(lx))
    sx = (dots[j][0] - dots[i][0]) / (lx[j] - lx[i])  # pixels per decade
    a, b = ly.index(min(ly)), ly.index(max(ly))
    sy = (dots[b][1] - dots[a][1]) / (ly[b] - ly[a])
    assert sx > 0 and sy < 0, "intensity grows to the right, performance upwards"

    def where(x: float, y: float) -> tuple[float, float]:  # pixel -> (log10 ai, log10 FLOP/s)
        return lx[i] + (x - dots[i][0]) / sx, ly[a] + (y - dots[a][1]) / sy

    tol = max(0.02, 2.0 / abs(sx), 2.0 / abs(sy))  # decades: two pixels, or 5%
    for k, (x, y), gx, gy in zip(kernels, dots, lx, ly, strict=True):
        wx, wy = where(x, y)
        assert abs(wx - gx) < tol and abs(wy - gy) < tol, (
            f"{k.name} ({k.ai:.3g} FLOP/B, {k.achieved:.3g} FLOP/s) is drawn at "
            f"({10**wx:.3g}, {10**wy:.3g}) by the scale of the other dots: not log-log"
        )
    (x0, y0), (x1, y1), (x2, y2) = (where(*v) for v in roof)
    assert abs(x1 - math.log10(ridge)) < tol and abs(y1 - math.log10(peak)) < tol, (
        f"the ridge vertex is at ({10**x1:.3g} FLOP/B, {10**y1:.3g} FLOP/s), "
        f"not ({ridge:.3g}, {peak:.3g})"
    )
    assert abs(y2 - math.log10(peak)) < tol, "the compute roof is at the peak"
    assert abs(y0 - (x0 + math.log10(bw))) < tol, "the memory roof's left end is at ai x bandwidth"
    assert x0 <= min(lx) + tol and x2 >= max(lx) - tol, "the roof spans every kernel"


@pytest.mark.kata_gate(
    "roofline_svg draws the kernels' dots out of order (a kernel of higher arithmetic "
    "intensity not to the right of one of lower, or of higher FLOP/s not above), on random "
    "machines and kernels"
)
def test_roofline_svg_dots_follow_their_kernels(roofline: Any) -> None:
    """Each kernel's dot at its own (intensity, performance): whatever the scale, the dots'
    x order is the kernels' intensity order and their y order (pixels grow downwards) the
    reverse of their performance order. Machines and kernels drawn fresh each run."""
    rng = random.Random(seeded("roofline svg dots"))
    for _ in range(6):
        peak, bw = 10 ** rng.uniform(9, 14), 10 ** rng.uniform(9, 12)
        kernels = []
        for i in range(rng.randrange(2, 7)):
            ai = peak / bw * 10 ** rng.uniform(-3, 3)
            achieved = min(peak, ai * bw) * 10 ** rng.uniform(-2, 0)
            kernels.append(roofline.Kernel(f"k{i}", achieved, achieved / ai, 1.0))
        _, dots, _ = svg_geometry(roofline.roofline_svg(peak, bw, kernels))
        assert len(dots) == len(kernels), (
            f"roofline_svg drew {len(dots)} kernel dots for {len(kernels)} kernels"
        )
        for a, b in ((a, b) for a in range(len(kernels)) for b in range(len(kernels))):
            ka, kb = kernels[a], kernels[b]
            if ka.ai > kb.ai * 1.05:
                assert dots[a][0] > dots[b][0], (
                    f"roofline_svg({peak:.3g}, {bw:.3g}): {ka.name} ({ka.ai:.3g} FLOP/B) is drawn "
                    f"at x={dots[a][0]}, not right of {kb.name} ({kb.ai:.3g} FLOP/B) at "
                    f"x={dots[b][0]}"
                )
            if ka.achieved > kb.achieved * 1.05:
                assert dots[a][1] < dots[b][1], (
                    f"roofline_svg({peak:.3g}, {bw:.3g}): {ka.name} ({ka.achieved:.3g} FLOP/s) is "
                    f"drawn at y={dots[a][1]}, not above {kb.name} ({kb.achieved:.3g} FLOP/s) at "
                    f"y={dots[b][1]}"
                )


def test_roofline_svg_escapes_kernel_names(roofline: Any) -> None:
    """Shortcut: names pasted into the SVG unescaped: fine for the public "triad", broken XML
    (or injected markup) for a kernel called `a<b & "c"`."""
    name = 'a<b & "c"'
    svg = roofline.roofline_svg(1e11, 1e10, [roofline.Kernel(name, 1e9, 1e9, 1.0)])
    try:
        _, dots, root = svg_geometry(svg)
    except ET.ParseError as e:
        raise AssertionError(f"the SVG is not well-formed XML with kernel {name!r}: {e}") from e
    title = next(c for c in root.iter(f"{SVG}circle") if "kernel" in c.get("class", "")).find(
        f"{SVG}title"
    )
    text = title.text if title is not None else None
    assert text is not None and text.startswith(name), (
        f"roofline_svg: the kernel's <title> is {text!r}, expected it to start with {name!r}"
    )
    assert len(dots) == 1, f"roofline_svg drew {len(dots)} kernel dots for one kernel"


def fma_chains(x0: np.ndarray, m: float, a: float, iters: int) -> np.ndarray:
    """x = x * m + a in float32, `iters` times (the product exact in float64: one rounding)."""
    x = np.asarray(x0, dtype=np.float32)
    for _ in range(iters):
        x = (x.astype(np.float64) * m + a).astype(np.float32)
    return x


@pytest.mark.kata_gate(
    "fma_peak's or fma_chain's results are not the FMA recurrence after the number of iterations"
    " asked, for random counts of 5,000 to 40,000 (chains far from converged)"
)
def test_peak_flops_every_iteration_runs(lib: Any, bench: Any) -> None:
    """x = fma(x, m, a) with m = 0.9999 converges slowly to a / (1 - m) = 1: the value after n
    iterations tells n apart (a run that stops early, or caps n, ends elsewhere). Exact, no
    timing; n drawn fresh each run."""
    rng = random.Random(seeded("fma iterations"))
    m, a = float(np.float32(0.9999)), float(np.float32(1e-4))  # the floats the C code gets
    out = np.full(256, np.nan, dtype=np.float32)
    pout = lib.ffi.cast("float *", lib.ffi.from_buffer(out))
    k = bench.started(lib.fma_peak(pout, 2.0, m, a, 1), "fma_peak")
    assert 1 <= k <= 256, f"fma_peak returned K = {k}: 1 <= K <= FMA_MAX_ACCUMULATORS"
    for _ in range(2):
        iters = rng.randrange(5_000, 40_000)
        x0 = float(rng.choice([2.0, 5.0, 17.0]))
        want = fma_chains(x0 + np.arange(k, dtype=np.float32), m, a, iters)
        early = fma_chains(x0 + np.arange(k, dtype=np.float32), m, a, iters // 4)
        assert np.all(np.abs(early - want) > 1e-2 * np.abs(want)), (
            f"test data: after {iters} and {iters // 4} iterations the chains do not differ"
        )
        out[:] = np.nan
        got_k = lib.fma_peak(pout, x0, m, a, iters)
        assert got_k == k, f"fma_peak returned K = {got_k}, then {k}"
        np.testing.assert_allclose(
            out[:k], want, rtol=1e-4,
            err_msg=f"fma_peak(x0={x0}, m={m}, a={a}, iters={iters}): out[k] is not chain k's"
            f" value after {iters} FMAs",
        )  # fmt: skip
        got = lib.fma_chain(x0, m, a, iters)
        assert got == pytest.approx(float(want[0]), rel=1e-4), (
            f"fma_chain({x0}, {m}, {a}, {iters}) = {got}, the recurrence gives {want[0]}"
        )


@pytest.mark.kata_gate(
    "fma_sweep's values are not `rounds` FMAs per element done one after another in float32, "
    "for random round counts of 1,000 to 5,000 (sums that stagnate, chains far from converged)"
)
def test_your_roofline_fma_sweep_does_every_round(lib: Any, bench: Any) -> None:
    """Two recurrences whose float32 value tells the work apart, drawn fresh each run:
    x = x * 1 + a with a below half an ulp of x never moves (each FMA rounds back to x), where
    any formula for `rounds` steps at once (x + rounds * a) moves; and x = x * 0.9999 + 1e-4
    after r rounds, far from its limit, which r / 4 rounds or a capped count miss."""
    rng = random.Random(seeded("fma_sweep rounds"))
    n = rng.randrange(1_000, 3_000)  # any remainder after the vector blocks
    rounds = rng.randrange(1_000, 5_000)
    x = np.array([rng.uniform(1.0, 2.0) for _ in range(n + 1)], dtype=np.float32)
    start, guard = x[:n].copy(), x[n]
    a = float(np.float32(2.0**-25 * rng.uniform(0.2, 0.9)))  # < half an ulp of [1, 2)
    px = lib.ffi.cast("float *", lib.ffi.from_buffer(x))
    assert bench.started(lib.fma_sweep(px, n, 1.0, a, rounds), "fma_sweep") == MB_OK, (
        f"fma_sweep(n={n}, m=1, a={a}, rounds={rounds}) did not return MB_OK"
    )
    moved = np.flatnonzero(x[:n] != start)
    assert moved.size == 0, (
        f"fma_sweep(x in [1, 2), m=1, a={a:.3g}, rounds={rounds}): element {moved[0]} became "
        f"{x[moved[0]]!r} from {start[moved[0]]!r}; each float32 FMA x*1 + a with a below half "
        f"an ulp of x gives x back, so {rounds} of them in turn leave it unchanged"
    )
    assert x[n] == guard, "fma_sweep wrote past element n-1"
    m, a = float(np.float32(0.9999)), float(np.float32(1e-4))
    x[:n] = np.float32(rng.choice([3.0, 5.0, 9.0]))
    want = fma_chains(x[:1], m, a, rounds)[0]
    early = fma_chains(x[:1], m, a, rounds // 4)[0]
    assert abs(early - want) > 1e-2 * abs(want), "test data: r and r/4 rounds do not differ"
    lib.fma_sweep(px, n, m, a, rounds)
    np.testing.assert_allclose(
        x[:n], want, rtol=1e-4,
        err_msg=f"fma_sweep(m={m}, a={a}, rounds={rounds}): not the value after {rounds} FMAs",
    )  # fmt: skip


BASELINE_CHAIN = """#include <math.h>
float hidden_chain(float x, float m, float a, long long iters) {
    for (long long i = 0; i < iters; i++) x = fmaf(x, m, a);
    return x;
}
"""


@pytest.mark.kata_budget  # a measurement: it runs alone, not beside other tests under -n
@pytest.mark.kata_gate(
    "fma_peak is not 16x faster than one dependent FMA chain built by the test (gcc -O2 "
    "-march=native, timed in the same rounds): K independent scalar chains reach at most ~8x"
)
def test_peak_flops_peak_beats_the_tests_own_chain(lib: Any, bench: Any, tmp_path: Any) -> None:
    """The public speedup is measured against the learner's own fma_chain, which a slowed
    chain (x kept in a volatile: a store and a load per FMA) makes easy to beat. Here the one
    chain is the test's: latency-bound whatever the submission does, and two FMA units can
    start at most latency x units = 8 scalar FMAs in flight, so 16x needs vectors."""
    import ctypes

    from harness.native.build import build_shared_library

    source = tmp_path / "hidden_chain.c"
    source.write_text(BASELINE_CHAIN)
    chain_lib = ctypes.CDLL(str(build_shared_library([source], flags=("-march=native",)).path))
    chain = chain_lib.hidden_chain
    chain.restype = ctypes.c_float
    chain.argtypes = [ctypes.c_float, ctypes.c_float, ctypes.c_float, ctypes.c_longlong]
    out = np.zeros(256, dtype=np.float32)
    pout = lib.ffi.cast("float *", lib.ffi.from_buffer(out))
    iters = 2_000_000
    k = bench.started(lib.fma_peak(pout, 1.0, 0.999, 0.001, 1), "fma_peak")
    run_peak = lambda: lib.fma_peak(pout, 1.0, 0.999, 0.001, iters)  # noqa: E731
    run_chain = lambda: chain(1.0, 0.999, 0.001, iters)  # noqa: E731
    speedup = 0.0
    for _ in range(3):  # a busy machine can upset one measurement; three chances
        speedup = max(speedup, k * bench.paired(run_peak, run_chain))
        if speedup >= 16:
            break
    assert speedup >= 16, (
        f"fma_peak ({k} chains, {iters} iterations) is only {speedup:.1f}x as fast as one "
        f"dependent fmaf chain compiled by the test; 16x expected (vector chains)"
    )


@pytest.mark.kata_gate(
    "a STREAM kernel's result is not its formula on a random array of 100,000 to 3,000,000 "
    "elements (every element, and nothing past n)"
)
def test_bandwidth_kernels_compute_at_every_size(lib: Any, bench: Any) -> None:
    """Catches: kernels that return MB_OK without touching arrays larger than the sizes the
    public formula test uses (so any bandwidth computed from them is fiction). The size and
    the data are drawn fresh each run; values within 1e-14 (a contracted FMA in triad is fine)."""
    rng = random.Random(seeded("stream sizes"))
    n = rng.randrange(100_000, 3_000_000)
    gen = np.random.default_rng(rng.randrange(2**32))
    a, b, c = (gen.standard_normal(n + 1) for _ in range(3))
    q = rng.uniform(0.5, 4.0)
    ptr = lambda x: lib.ffi.cast("double *", lib.ffi.from_buffer(x))  # noqa: E731
    calls = {
        COPY: ("c", lambda: lib.stream_copy(ptr(c), ptr(a), n), lambda: a[:n]),
        SCALE: ("b", lambda: lib.stream_scale(ptr(b), ptr(c), q, n), lambda: q * c[:n]),
        ADD: ("c", lambda: lib.stream_add(ptr(c), ptr(a), ptr(b), n), lambda: a[:n] + b[:n]),
        TRIAD: (
            "a",
            lambda: lib.stream_triad(ptr(a), ptr(b), ptr(c), q, n),
            lambda: b[:n] + q * c[:n],
        ),  # fmt: skip
    }
    arrays = {"a": a, "b": b, "c": c}
    for kernel, (name, run, formula) in calls.items():
        want = formula().copy()
        guard = arrays[name][n]
        rc = bench.started(run(), f"stream_{NAMES[kernel]}")
        assert rc == MB_OK, f"stream_{NAMES[kernel]}(n={n}) returned {rc}, not MB_OK"
        out = arrays[name]
        wrong = np.flatnonzero(~np.isclose(out[:n], want, rtol=1e-14, atol=1e-300))
        assert wrong.size == 0, (
            f"stream_{NAMES[kernel]}(n={n}, q={q}): {name}[{wrong[0]}] = {out[wrong[0]]!r}, "
            f"the formula gives {want[wrong[0]]!r} ({wrong.size} elements wrong)"
        )
        assert out[n] == guard, f"stream_{NAMES[kernel]}(n={n}) wrote past element n-1 of {name}"
