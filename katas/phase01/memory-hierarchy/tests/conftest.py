"""Fixtures of the public tests: your built kernels and bench.py (how everything is measured)."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="module")
def bench(kata: Any) -> Any:
    """bench.py (given): buffers, timing, the sweeps."""
    return kata.module("bench")


@pytest.fixture(scope="module")
def lib(kata: Any, bench: Any, request: pytest.FixtureRequest) -> Any:
    """membench.c built with -O2 -march=native and loaded (once per module)."""
    option = request.config.getoption("kata_sanitize", default=None)
    return bench.build(kata, [s for s in (option or "").split(",") if s])


@pytest.fixture(scope="module")
def sweeps(kata: Any) -> Any:
    return kata.module("sweeps")


@pytest.fixture(scope="module")
def roofline(kata: Any) -> Any:
    return kata.module("roofline")
