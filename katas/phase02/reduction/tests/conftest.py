"""Fixtures of the reduction tests, public and hidden (docs/kata-layout.md): each defined once."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def gpu(cuda_gpu):
    """The `cuda` fixture on a real GPU (harness.cuda.fixtures.cuda_gpu skips otherwise)."""
    return cuda_gpu
