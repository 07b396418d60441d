"""The limits a sandbox child gets from kata.toml and the session (unit level, no child forked)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from harness.api import STATE
from harness.sandbox import Sandbox
from harness.tiers import Capabilities


def _sandbox(tiers: tuple[str, ...], sanitize: str | None = None) -> Sandbox:
    option = SimpleNamespace(kata_no_timeout=False, kata_sanitize=sanitize)
    stash = pytest.Stash()
    stash[STATE] = SimpleNamespace(caps=Capabilities(tiers, ()))
    return Sandbox(SimpleNamespace(option=option, stash=stash))  # type: ignore[arg-type]


def _info(task_tiers: tuple[str | None, ...], kata_tier: str = "cpu") -> SimpleNamespace:
    tasks = tuple(SimpleNamespace(tier=t) for t in task_tiers)
    manifest = SimpleNamespace(time_limit=10, memory_limit_mb=2048, tier=kata_tier, tasks=tasks)
    return SimpleNamespace(manifest=manifest)


def test_limits_come_from_the_manifest() -> None:
    limits = _sandbox(("cpu",))._limits(_info((None,)))
    assert (limits.wall_s, limits.memory_mb, limits.cpu_s) == (10.0, 2048, 20.0)
    assert limits.address_space


@pytest.mark.parametrize(
    ("tiers", "task_tiers", "kata_tier", "address_space"),
    [
        (("cpu", "gpu"), (None, "gpu"), "cpu", False),  # cuInit reserves the GPU's address range
        (("cpu", "gpu"), (None,), "gpu", False),
        (("cpu", "gpu"), (None, "cluster-sim"), "cpu", True),  # no CUDA in this kata
        (("cpu",), (None, "gpu"), "cpu", True),  # its gpu tests skip here: nothing to spare
    ],
)
def test_address_space_limit_is_off_only_where_cuda_will_start(
    tiers: tuple[str, ...], task_tiers: tuple[str | None, ...], kata_tier: str, address_space: bool
) -> None:
    limits = _sandbox(tiers)._limits(_info(task_tiers, kata_tier))
    assert limits.address_space is address_space


def test_address_space_limit_is_off_under_sanitizers() -> None:
    assert not _sandbox(("cpu",), sanitize="address")._limits(_info((None,))).address_space
