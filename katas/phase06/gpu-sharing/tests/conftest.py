"""Fixtures of the gpu-sharing tests: your modules and the given ones, loaded once per module."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest


@pytest.fixture(scope="module")
def gpus(kata: Any) -> Any:
    """gpus.py (given): the MIG profile tables of A100-40GB, A100-80GB and H100-80GB."""
    return kata.module("gpus")


@pytest.fixture(scope="module")
def mig(kata: Any) -> Any:
    """mig.py (yours): task "placement"."""
    return kata.module("mig")


@pytest.fixture(scope="module")
def packer(kata: Any) -> Any:
    """packer.py (yours): task "packing"."""
    return kata.module("packer")


@pytest.fixture(scope="module")
def sharing(kata: Any) -> Any:
    """sharing.py (yours): task "sharing"."""
    return kata.module("sharing")


@pytest.fixture(scope="module")
def k8s(kata: Any) -> Any:
    """k8s_sharing.py (yours): task "kubernetes"."""
    return kata.module("k8s_sharing")


@pytest.fixture(scope="module")
def workloads(kata: Any) -> Any:
    """workloads.py (given): Job, Outcome and two job mixes."""
    return kata.module("workloads")


def referee(gpu: Any, placed: Sequence[tuple[str, int]]) -> str | None:
    """The tests' own placement check (so a packer is never judged by the learner's mig.py):
    None when valid, else the first rule broken."""
    used: set[int] = set()
    count: dict[str, int] = {}
    compute = 0
    for name, start in placed:
        p = gpu.profile(name)
        if start not in p.starts:
            return f"{name} cannot start at {start}"
        count[p.name] = count.get(p.name, 0) + 1
        if count[p.name] > p.max_instances:
            return f"more than {p.max_instances} x {p.name}"
        span = set(range(start, start + p.memory_slices))
        if span & used:
            return f"{name}@{start} overlaps slices {sorted(span & used)}"
        used |= span
        compute += p.compute_slices
    return None if compute <= gpu.compute_slices else f"{compute} compute slices"


@pytest.fixture(scope="module")
def valid() -> Any:
    return referee
