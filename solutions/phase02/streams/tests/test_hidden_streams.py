"""Hidden tests of the streams kata: any sizes, and unbalanced stages.

Examples are derandomized, so a grade never depends on luck.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.testing import hidden_settings, watch_calls

SETTINGS = hidden_settings(60)


@st.composite
def sizes(draw):
    n = draw(st.integers(1, 3000))
    return n, draw(st.integers(1, min(n, 40))), draw(st.integers(1, 9))


@pytest.mark.kata_gate(
    "chunk_bounds is right only for the examples: for any n the chunk sizes must differ by at "
    "most one, the longer chunks first"
)
@SETTINGS
@given(size=sizes())
def test_plan_any_size(schedule, size):
    """Chunks of n items in sizes differing by at most one, longer first; three ops per chunk in
    order on stream i % n_streams. Catches: more streams than chunks, chunks of one item."""
    n, n_chunks, n_streams = size
    bounds = schedule.chunk_bounds(n, n_chunks)
    lengths = [stop - start for start, stop in bounds]
    assert [b[0] for b in bounds] == [0, *[b[1] for b in bounds[:-1]]] and bounds[-1][1] == n
    assert lengths == sorted(lengths, reverse=True) and lengths[0] - lengths[-1] <= 1, bounds
    ops = schedule.plan(n, n_chunks, n_streams)
    want = [
        schedule.Op(i % n_streams, kind, start, stop)
        for i, (start, stop) in enumerate(bounds)
        for kind in ("h2d", "kernel", "d2h")
    ]
    assert list(ops) == want


stage = st.floats(0.01, 10.0)


@pytest.mark.kata_gate(
    "pipelined_time is right only for balanced stages: after the first chunk, the slowest "
    "stage (not the mean of the three) sets the pace"
)
@SETTINGS
@given(a=stage, b=stage, c=stage, n_chunks=st.integers(1, 24))
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
    assert schedule.pipelined_time(a, b, c, n_chunks) == pytest.approx(timeline.makespan(spans))


@pytest.mark.kata_gate(
    "pipelined_time runs the given simulator (timeline.py) instead of deriving the pipeline's "
    "time from the three stages"
)
def test_model_derived_not_simulated(schedule, timeline):
    """The model task is the formula; timeline.simulate is what it is checked against. Catches:
    building a plan inside pipelined_time and returning the simulator's makespan."""
    with watch_calls(timeline) as log:
        got = [schedule.pipelined_time(a, b, c, n) for a, b, c, n in CASES]
    assert not log, f"pipelined_time called {log}"
    want = [(a + b + c) / n + (n - 1) * max(a, b, c) / n for a, b, c, n in CASES]
    assert got == pytest.approx(want)


CASES = [(1.0, 2.0, 3.0, 4), (5.0, 1.0, 1.0, 10), (0.5, 0.25, 4.0, 1), (2.0, 2.0, 2.0, 7)]
