"""Fixtures of the license-fleet tests, public and hidden: each defined once, here
(docs/kata-layout.md). Tests never import kata code: they ask the `kata` fixture for it."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="module")
def lf(kata: Any) -> Any:
    """license_fleet.py (yours)."""
    return kata.module("license_fleet")


@pytest.fixture(scope="module")
def fl(kata: Any) -> Any:
    """fleet.py (given): Fleet, RevocationPath, RevocationList, CheckLoad, SIGNATURE_BYTES."""
    return kata.module("fleet")
