"""Fixtures of the simt tests, public and hidden (docs/kata-layout.md): each defined once."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def simt(kata):
    return kata.module("simt")


@pytest.fixture(scope="module")
def isa(kata):
    return kata.module("isa")
