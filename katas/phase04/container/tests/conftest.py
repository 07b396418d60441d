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


def _mounts() -> set[str]:
    return {line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()}


@pytest.fixture
def run(needs_root: None, rt: Any, runner: Any, host: Any) -> Any:
    """run(spec, timeout=10) -> Result: one container with your runtime. Afterwards every
    cgroup of this kata is removed (processes killed first) and a mount your code left in the
    test's own mount namespace fails the test."""
    before = _mounts()

    def go(s: Any, timeout: float = 10.0) -> Any:
        return runner.run(rt, s, timeout)

    try:
        yield go
    finally:
        left = host.cleanup_cgroups()
        leaked = _mounts() - before
        for target in sorted(leaked, key=len, reverse=True):
            import ctypes

            ctypes.CDLL(None).umount2(target.encode(), 2)
    assert not leaked, f"your runtime left mounts in the host's mount namespace: {sorted(leaked)}"
    del left  # a cgroup left by a crashed run is the runner's to clean, not a failure
