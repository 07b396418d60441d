"""Fixtures of the matmul tests, public and hidden (docs/kata-layout.md): each defined once."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module", params=[16, 32], ids=["tile16", "tile32"])
def tile(request):
    return request.param
