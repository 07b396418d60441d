"""Fixtures of the vector-add tests, public and hidden (docs/kata-layout.md): each defined once."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def launch(kata):
    return kata.module("launch")
