"""Hidden tests of the streams kata: any sizes, and unbalanced stages.

Examples are drawn from the run seed (fresh each run; --kata-seed reproduces them), with fixed
edge cases (chunks of one item, more streams than chunks) as explicit examples.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from harness.testing import hidden_settings, watch_calls

SETTINGS = hidden_settings(60)


@st.composite
def sizes(draw):
    n = draw(st.integers(1, 3000))
    return n, draw(st.integers(1, min(n, 40))), draw(st.integers(1, 9))


@pytest.mark.kata_gate(
    "chunk_bounds or plan on random sizes: the chunks do not cover range(n) in order in sizes "
    "differing by at most one (longer first), or chunk i's h2d, kernel, d2h are not on stream "
    "i % n_streams"
)
@SETTINGS
@given(size=sizes())
@example(size=(7, 7, 9))  # chunks of one item, more streams than chunks
@example(size=(2999, 40, 3))  # 39 items left over: 39 long chunks, one short
@example(size=(41, 40, 1))  # one long chunk, the rest short; one stream
def test_plan_any_size(schedule, size):
    """Chunks of n items in sizes differing by at most one, longer first; three ops per chunk in
    order on stream i % n_streams. Catches: more streams than chunks, chunks of one item."""
    n, n_chunks, n_streams = size
    bounds = schedule.chunk_bounds(n, n_chunks)
    lengths = [stop - start for start, stop in bounds]
    assert len(bounds) == n_chunks, (
        f"chunk_bounds({n}, {n_chunks}) gave {len(bounds)} chunks, expected {n_chunks}"
    )
    assert [b[0] for b in bounds] == [0, *[b[1] for b in bounds[:-1]]] and bounds[-1][1] == n, (
        f"chunk_bounds({n}, {n_chunks}) = {bounds}: the chunks must cover range({n}) in order, "
        "each starting where the one before stops"
    )
    assert lengths == sorted(lengths, reverse=True) and lengths[0] - lengths[-1] <= 1, (
        f"chunk_bounds({n}, {n_chunks}) gave chunk sizes {lengths}: they must differ by at most "
        "one, the longer chunks first"
    )
    ops = schedule.plan(n, n_chunks, n_streams)
    want = [
        schedule.Op(i % n_streams, kind, start, stop)
        for i, (start, stop) in enumerate(bounds)
        for kind in ("h2d", "kernel", "d2h")
    ]
    got = list(ops)
    wrong = next(
        (i for i, (g, w) in enumerate(zip(got, want, strict=False)) if g != w),
        min(len(got), len(want)),
    )
    assert got == want, (
        f"plan({n}, {n_chunks}, {n_streams}): op {wrong} is "
        f"{got[wrong] if wrong < len(got) else 'missing'}, expected "
        f"{want[wrong] if wrong < len(want) else 'no more ops'} (h2d, kernel, d2h of each chunk "
        f"in order, chunk i on stream i % {n_streams}; {len(got)} ops, expected {len(want)})"
    )


stage = st.floats(0.01, 10.0)


@pytest.mark.kata_gate(
    "pipelined_time disagrees with timeline.py's makespan on random unbalanced stages"
)
@SETTINGS
@given(a=stage, b=stage, c=stage, n_chunks=st.integers(1, 24))
@example(a=0.01, b=10.0, c=0.01, n_chunks=24)  # one stage dominates
@example(a=6.0, b=1.0, c=6.0, n_chunks=3)  # the copies dominate: two engines, not one
def test_model_unbalanced_stages(schedule, timeline, a, b, c, n_chunks):
    """Against the simulator, one stream per chunk. Catches: a formula right for balanced
    stages only, e.g. (h2d + kernel + d2h) / 3 * (n_chunks + 2) / n_chunks, and a bottleneck
    taken as the sum of the copies (the two directions have engines of their own)."""
    size = 10  # items per chunk
    n = size * n_chunks
    ops = [
        schedule.Op(i, kind, i * size, (i + 1) * size)
        for i in range(n_chunks)
        for kind in ("h2d", "kernel", "d2h")
    ]
    spans = timeline.simulate(ops, {"h2d": a / n, "kernel": b / n, "d2h": c / n})
    got, want = schedule.pipelined_time(a, b, c, n_chunks), timeline.makespan(spans)
    assert got == pytest.approx(want), (
        f"pipelined_time({a}, {b}, {c}, {n_chunks}) = {got}, but the pipeline on timeline.py's "
        f"model takes {want}"
    )


@pytest.mark.kata_gate(
    "pipelined_time calls into timeline.py (the simulator it is checked against)"
)
def test_model_does_not_call_the_simulator(schedule, timeline, kata_rng):
    """The model task is the makespan on the model; timeline.simulate is what it is checked
    against. Catches: building a plan inside pipelined_time and returning the simulator's
    makespan (a copy of timeline.py's source compiled under another name is refused by the
    fence). Only the calls count here: a wrong answer is the unbalanced-stages test's. A loop
    of its own over the three engines is accepted: it is the model, which the learner had to
    understand to write it (red team rt12-own-simulator); the README gives the closed form.
    Stages drawn fresh each run."""
    cases = [(1.0, 2.0, 3.0, 4), (0.5, 0.25, 4.0, 1)] + [
        (
            *(round(float(x), 3) for x in kata_rng.uniform(0.05, 8.0, 3)),
            int(kata_rng.integers(1, 64)),
        )
        for _ in range(6)
    ]
    with watch_calls(timeline) as log:
        for a, b, c, n in cases:
            schedule.pipelined_time(a, b, c, n)
    assert not log, f"pipelined_time called {log} on stages {cases[0]}"
