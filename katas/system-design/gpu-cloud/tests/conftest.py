"""Fixtures of the gpu-cloud tests, public and hidden: each defined once, here
(docs/kata-layout.md). Tests never import kata code: they ask the `kata` fixture for it."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="module")
def gc(kata: Any) -> Any:
    """gpu_cloud.py (yours)."""
    return kata.module("gpu_cloud")


@pytest.fixture(scope="module")
def cl(kata: Any) -> Any:
    """cloud.py (given): SpotJob, Tier, AWS_EGRESS, GPUS_PER_NODE, SHAPES, GB."""
    return kata.module("cloud")
