"""Fixtures of the capacity-planning tests, public and hidden: each defined once, here
(docs/kata-layout.md). Tests never import kata code: they ask the `kata` fixture for it."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="module")
def cap(kata: Any) -> Any:
    """capacity_planning.py (yours)."""
    return kata.module("capacity_planning")


@pytest.fixture(scope="module")
def hw(kata: Any) -> Any:
    """hardware.py (given): Model, Gpu, Workload, Plan, Training, MODELS, GPUS."""
    return kata.module("hardware")
