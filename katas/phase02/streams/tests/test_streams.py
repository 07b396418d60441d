"""Public tests of the streams kata, cpu tier. Each group is one task of kata.toml.

plan:  schedule.chunk_bounds and schedule.plan, run on timeline.py's three-engine model.
model: schedule.pipelined_time against that model.
(pipeline, the gpu task, is tests/test_streams_gpu.py.)
"""

from __future__ import annotations

import pytest

SECONDS = {"h2d": 1e-6, "kernel": 1e-6, "d2h": 1e-6}  # per item: three balanced stages


def check_plan(ops, n: int, n_chunks: int, n_streams: int) -> None:
    """Every element copied in, computed and copied out once, each chunk in order on one stream."""
    assert len(ops) == 3 * n_chunks, f"{len(ops)} operations for {n_chunks} chunks, want 3 each"
    for kind in ("h2d", "kernel", "d2h"):
        ranges = [(op.start, op.stop) for op in ops if op.kind == kind]
        covered = [i for start, stop in ranges for i in range(start, stop)]
        assert covered == list(range(n)), f"the {kind} operations do not cover 0..{n} in order"
    for i in range(n_chunks):
        chunk = ops[3 * i : 3 * i + 3]
        assert [op.kind for op in chunk] == ["h2d", "kernel", "d2h"], f"chunk {i}: {chunk}"
        assert len({(op.stream, op.start, op.stop) for op in chunk}) == 1, f"chunk {i}: {chunk}"
        assert 0 <= chunk[0].stream < n_streams, f"chunk {i}: stream {chunk[0].stream}"


# --------------------------------------------------------------------------- plan
def test_plan_chunk_bounds(schedule):
    assert schedule.chunk_bounds(1000, 4) == [(0, 250), (250, 500), (500, 750), (750, 1000)]
    assert schedule.chunk_bounds(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert schedule.chunk_bounds(5, 1) == [(0, 5)]
    assert schedule.chunk_bounds(3, 3) == [(0, 1), (1, 2), (2, 3)]


def test_plan_issue_order_and_streams(schedule):
    ops = schedule.plan(12, 4, 2)
    check_plan(ops, 12, 4, 2)
    Op = schedule.Op
    assert ops[:6] == [
        Op(0, "h2d", 0, 3), Op(0, "kernel", 0, 3), Op(0, "d2h", 0, 3),
        Op(1, "h2d", 3, 6), Op(1, "kernel", 3, 6), Op(1, "d2h", 3, 6),
    ]  # fmt: skip
    assert [op.stream for op in ops[::3]] == [0, 1, 0, 1], "chunk i goes to stream i % n_streams"


def test_plan_overlaps_copies_and_kernels(schedule, timeline):
    # Three balanced stages of 1 ms each over the array (1000 items): serial is 3 ms. Eight
    # chunks on three streams keep all three engines busy: 3 / 8 ms for the first chunk, then
    # one chunk's stage (1 / 8 ms) per further chunk: 10 / 8 = 1.25 ms.
    n = 1000
    ops = schedule.plan(n, 8, 3)
    check_plan(ops, n, 8, 3)
    got = timeline.makespan(timeline.simulate(ops, SECONDS))
    assert got == pytest.approx(1.25e-3), f"plan(1000, 8, 3) takes {got * 1e3:.3f} ms on the model"


def test_plan_one_stream_is_serial(schedule, timeline):
    ops = schedule.plan(1000, 8, 1)
    check_plan(ops, 1000, 8, 1)
    assert timeline.makespan(timeline.simulate(ops, SECONDS)) == pytest.approx(3e-3)


def test_plan_rejects_bad_input(schedule):
    with pytest.raises(ValueError, match="n_chunks"):
        schedule.chunk_bounds(10, 0)
    with pytest.raises(ValueError, match="n_chunks"):
        schedule.chunk_bounds(3, 4)  # an empty chunk is a launch of zero blocks
    with pytest.raises(ValueError, match="n_streams"):
        schedule.plan(10, 2, 0)


# --------------------------------------------------------------------------- model
def ideal_ops(schedule, n: int, n_chunks: int) -> list:
    """One stream per chunk: nothing but the engines limits the overlap."""
    return [
        schedule.Op(i, kind, i * (n // n_chunks), (i + 1) * (n // n_chunks))
        for i in range(n_chunks)
        for kind in ("h2d", "kernel", "d2h")
    ]


def test_model_one_chunk_is_serial(schedule):
    assert schedule.pipelined_time(2.0, 3.0, 4.0, 1) == pytest.approx(9.0)


def test_model_balanced_stages(schedule, timeline):
    # (n_chunks + 2) chunk-steps of T / n_chunks each.
    for n_chunks in (2, 4, 8, 16):
        want = (n_chunks + 2) / n_chunks
        assert schedule.pipelined_time(1.0, 1.0, 1.0, n_chunks) == pytest.approx(want)
        spans = timeline.simulate(
            ideal_ops(schedule, 1600, n_chunks), {k: 1 / 1600 for k in SECONDS}
        )
        assert timeline.makespan(spans) == pytest.approx(want)


def test_model_rejects_bad_input(schedule):
    with pytest.raises(ValueError, match="n_chunks"):
        schedule.pipelined_time(1.0, 1.0, 1.0, 0)
