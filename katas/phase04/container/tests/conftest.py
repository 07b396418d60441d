"""Fixtures of the container tests: your runtime, the given runner, a busybox rootfs, and a
clean-up that removes every cgroup and mount a test left behind, however your code failed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="module")
def rt(kata: Any) -> Any:
    """runtime.py (yours): every task."""
    return kata.module("runtime")


@pytest.fixture(scope="module")
def spec(kata: Any) -> Any:
    """spec.py (given): Spec, Device, Mount, the CLONE_* and MS_* constants."""
    return kata.module("spec")


@pytest.fixture(scope="module")
def host(kata: Any) -> Any:
    """host.py (given): root, busybox and cgroup checks, cgroup clean-up and counters."""
    return kata.module("host")


@pytest.fixture(scope="module")
def runner(kata: Any) -> Any:
    """runner.py (given): run(rt, spec) -> Result."""
    return kata.module("runner")


@pytest.fixture(scope="module")
def needs_root(host: Any) -> None:
    why = host.missing()
    if why:
        pytest.skip(why)


@pytest.fixture(scope="module")
def cgroup_version(host: Any) -> int:
    """1 or 2; skips (with what to do) where containers or cgroups cannot run."""
    why = host.missing(need_cgroups=True)
    if why:
        pytest.skip(why)
    return int(host.cgroup_version())


@pytest.fixture(scope="module")
def rootfs(needs_root: None, host: Any, kata: Any, tmp_path_factory: Any) -> Path:
    """A busybox rootfs, built once per module (a test that writes into it writes for all)."""
    return kata.module("rootfs").build(tmp_path_factory.mktemp("rootfs"), host.busybox())


@pytest.fixture
def run(needs_root: None, rt: Any, runner: Any) -> Any:
    """run(spec, timeout=10) -> runner.Result: one container with your runtime. Afterwards
    every cgroup of this kata is removed (its processes killed first), and a mount your code
    left in the test's own mount namespace is undone and fails the test."""
    with runner.contained(rt) as go:
        yield go
