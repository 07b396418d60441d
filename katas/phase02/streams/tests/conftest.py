"""Fixtures of the streams tests, public and hidden (docs/kata-layout.md): each defined once."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def schedule(kata):
    return kata.module("schedule")


@pytest.fixture(scope="module")
def timeline(kata):
    return kata.module("timeline")
