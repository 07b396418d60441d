"""Fixtures of the expr-to-ptx tests, public and hidden (docs/kata-layout.md): each defined once."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def compiler(kata):
    return kata.module("compiler")


@pytest.fixture(scope="module")
def syntax(kata):
    return kata.module("syntax")
