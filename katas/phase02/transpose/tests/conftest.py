"""Fixtures of the transpose tests, public and hidden (docs/kata-layout.md): each defined once."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def sectors(kata):
    return kata.module("sectors")


@pytest.fixture(scope="module")
def banks(kata):
    return kata.module("banks")
