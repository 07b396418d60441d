"""Public tests of release-engineering, tasks "canary" (canary.py), "rollback" (rollback.py) and
"ebpf" (tracing.py).

The hidden tests check the same properties on fresh counts, samples, scenarios and dependency
graphs each run: p-values against their own Fisher and Mann-Whitney computations, decisions on
scenarios whose answer is known by construction, plans by the properties a plan must have."""

from __future__ import annotations

import shutil
from typing import Any

import pytest


# --------------------------------------------------------------------------- canary
def test_stats_errors_p_value(canary: Any) -> None:
    # 11 errors in all, 9 in the canary, equal arms: P(X >= 9), X ~ Binomial(11, 1/2) here.
    assert canary.errors_p_value(2, 5000, 9, 5000) == pytest.approx(0.03264234, rel=1e-6)
    assert canary.errors_p_value(5, 100, 5, 100) == pytest.approx(0.626235125, rel=1e-6)
    assert canary.errors_p_value(0, 1000, 0, 1000) == pytest.approx(1.0)
    assert canary.errors_p_value(100, 20000, 400, 20000) < 1e-40
    assert canary.errors_p_value(5000, 500000, 5300, 500000) == pytest.approx(
        0.001530186875, rel=1e-6
    )
    with pytest.raises(ValueError):
        canary.errors_p_value(5, 3, 0, 10)


def test_stats_latency_p_value(canary: Any) -> None:
    base = [100.0, 110.0, 120.0, 130.0, 140.0]
    # Values of scipy.stats.mannwhitneyu(canary, base, alternative="greater", method="asymptotic").
    assert canary.latency_p_value(base, base) == pytest.approx(0.5422350133, rel=1e-6)  # all ties
    slower = [x + 25.0 for x in base]  # overlaps base in 110..140: ties again
    assert canary.latency_p_value(base, slower) == pytest.approx(0.0300514030, rel=1e-6)
    assert canary.latency_p_value(slower, base) == pytest.approx(0.9816430718, rel=1e-6)
    with pytest.raises(ValueError):
        canary.latency_p_value([], base)


def test_canary_shipped_scenarios(canary: Any, scenarios: Any) -> None:
    for s in scenarios.SCENARIOS:
        got = canary.judge(s.baseline, s.canary, s.policy)
        assert got.decision == s.decision, (
            f"{s.name}: {got.decision}, expected {s.decision} ({s.why})"
        )


def test_canary_hold_on_too_few(canary: Any, release: Any) -> None:
    r = release
    lat = tuple(float(100 + i % 50) for i in range(300))
    tiny = r.Arm(100, 0, lat)
    assert canary.judge(r.Arm(100000, 10, lat), tiny, r.Policy()).decision == r.HOLD
    assert canary.judge(tiny, r.Arm(100000, 10, lat), r.Policy()).decision == r.HOLD


# --------------------------------------------------------------------------- rollback
def _changes(release: Any) -> list[Any]:
    C = release.Change
    return [
        C("image-13.0", after=("driver-580",), check="the service answers its smoke test"),
        C("driver-580", check="nvidia-smi shows 580 and the GPUs"),
        C("model-cache-v3", after=("image-13.0",), reversible=False,
          why="the new engine rewrote the cache in format v3", check="cache reads"),
        C("flag-fp8", after=("image-13.0",), check="fp8 off: accuracy probe"),
    ]  # fmt: skip


def test_rollback_rollout_order(rollback: Any, release: Any) -> None:
    order = rollback.rollout_order(_changes(release))
    assert order == ["driver-580", "image-13.0", "model-cache-v3", "flag-fp8"]
    C = release.Change
    with pytest.raises(ValueError):
        rollback.rollout_order([C("a", after=("b",)), C("b", after=("a",))])


def test_rollback_plan(rollback: Any, release: Any) -> None:
    changes = _changes(release)
    plan = rollback.rollback_plan(changes, {"driver-580", "image-13.0", "flag-fp8"})
    assert [u.change for u in plan.undo] == ["flag-fp8", "image-13.0", "driver-580"]
    assert plan.undo[0].check == "fp8 off: accuracy probe"
    assert plan.kept == {}
    plan = rollback.rollback_plan(
        changes, {"driver-580", "image-13.0", "model-cache-v3", "flag-fp8"}
    )
    assert [u.change for u in plan.undo] == ["flag-fp8"]
    assert plan.kept == {
        "model-cache-v3": "irreversible: the new engine rewrote the cache in format v3",
        "image-13.0": "needed by model-cache-v3",
        "driver-580": "needed by image-13.0",
    }
    with pytest.raises(ValueError):
        rollback.rollback_plan(changes, {"image-13.0"})  # applied without its driver


# --------------------------------------------------------------------------- ebpf
def test_ebpf_counts_a_childs_syscalls(tracing: Any, run_bpftrace: Any, syscall_child: Any) -> None:
    assert shutil.which("bpftrace")
    child = syscall_child(37)
    out, err = run_bpftrace(tracing.count_syscall_program("getppid", child.pid), child)
    assert out.strip().splitlines()[-1:] == ["getppid 37"], f"stdout {out!r}, stderr {err!r}"


def test_ebpf_refuses_what_is_not_a_name(tracing: Any) -> None:
    for bad in ["getppid { exit(); }", "", "Getppid", "1read"]:
        with pytest.raises(ValueError):
            tracing.count_syscall_program(bad, 1234)
