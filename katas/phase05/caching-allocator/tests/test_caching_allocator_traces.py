"""Public tests of caching-allocator, tasks "traces" (recorded programs: device mallocs and
peak reserved memory against the reference) and "speed" (ops per second)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest


# --------------------------------------------------------------------------- traces
def test_traces_training_hits_the_cache_after_step_one(lib: Any, traces: Any, replay: Any) -> None:
    """The point of the caching allocator: a training loop repeats its allocations, so every
    step after the first comes from the cache, with no cudaMalloc at all."""
    _, one, _ = replay(lib, traces.training(steps=1))
    four, info, _ = replay(lib, traces.training(steps=4))
    assert info.mallocs == one.mallocs, (
        f"1 step: {one.mallocs} device mallocs; 4 steps: {info.mallocs}"
    )
    assert four.allocated == 0 and info.bad_calls == 0


@pytest.mark.parametrize("name", ["training", "inference", "side-stream", "tight"])
def test_traces_mallocs_and_peak_reserved(
    name: str, lib: Any, traces: Any, replay: Any, kata_budget: Any, build_reference: Any
) -> None:
    """Budgets: at most the reference's device mallocs and peak reserved bytes (deterministic
    counts, so 1.0x: the same algorithm gives the same numbers)."""
    trace = traces.load(name)
    _, mine, _ = replay(lib, trace)  # the device's counts, not what the allocator reports
    assert mine.bad_calls == 0
    kata_budget.metrics[f"device mallocs ({name})"] = mine.mallocs
    kata_budget.metrics[f"peak reserved MiB ({name})"] = round(mine.peak_used / 2**20, 1)
    ref = None
    if kata_budget.reference_available:
        ref = replay(build_reference(), trace)[1]
    for metric, key, what in [
        ("device mallocs", "mallocs", "mallocs"),
        ("peak reserved bytes", "peak", "peak_used"),
    ]:
        kata_budget.compare(
            lambda what=what: getattr(mine, what),
            None if ref is None else (lambda what=what: getattr(ref, what)),
            name=f"{key}-{name}",
            metric=metric,
            ratio=1.0,
            rounds=1,
        )


def test_traces_picture(lib: Any, alloc: Any, traces: Any, picture: Any, kata_metrics: Any) -> None:
    """Your allocator's segments in the middle of a batch halfway through the inference trace
    (README.md shows the reference's): the HTML report shows this picture."""
    trace = traces.inference()
    dev = alloc.Device(lib, trace.capacity)
    a = alloc.Allocator(lib, dev)
    a.replay(trace.ops[: traces.mid_batch(trace)])
    segments = a.snapshot()
    assert segments and sum(s.size for s in segments) == a.stats().reserved
    svg = picture.segments_svg(segments, "Your allocator halfway through the inference trace")
    assert ET.fromstring(svg).tag.endswith("svg")
    kata_metrics["svg"] = svg
    kata_metrics["label"] = "your allocator's segments (halfway through 'inference')"
    kata_metrics["fragmentation"] = round(picture.fragmentation(segments), 3)


# --------------------------------------------------------------------------- speed
def test_speed_churn_ops_per_second(
    lib: Any, alloc: Any, traces: Any, kata_budget: Any, build_reference: Any
) -> None:
    """The churn trace (thousands of free holes in the small pool) replayed inside Rust;
    budget: 2.5x the reference's time."""
    trace = traces.churn()
    ref_lib = build_reference()

    def run(lib_: Any) -> int:
        dev = alloc.Device(lib_, trace.capacity)
        alloc.Allocator(lib_, dev).replay(trace.ops)
        return dev.info().mallocs

    want = run(ref_lib)

    def caches(mallocs: int) -> None:  # what is timed is a caching allocator, not cudaMalloc
        assert mallocs <= want, (
            f"the timed replay made {mallocs} device mallocs, the reference {want}"
        )

    verdict = kata_budget.compare(
        lambda: run(lib), lambda: run(ref_lib), name="churn", ratio=2.5, check=caches
    )
    kata_budget.metrics["your ops/s"] = round(len(trace) / (verdict.learner_cost / 1e9))
    kata_budget.metrics["reference ops/s"] = round(len(trace) / (verdict.reference_cost / 1e9))
