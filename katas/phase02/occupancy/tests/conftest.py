"""Fixtures of the occupancy tests, public and hidden (docs/kata-layout.md): each defined once."""

from __future__ import annotations

import pytest

from harness.cuda import static
from harness.native.cache import ArtefactCache


@pytest.fixture(scope="module")
def occ(kata):
    return kata.module("occupancy")


@pytest.fixture(scope="module")
def tune(kata):
    return kata.module("tune")


@pytest.fixture(scope="module")
def given(kata):
    return kata.module("launches")


@pytest.fixture(scope="module")
def ptxas(kata, given):
    """{arch: KernelMap of Resources} for kernels.cu, from this machine's ptxas (one nvcc run per
    arch, cached across runs by the harness build cache)."""
    source = kata.source("kernels.cu")
    cache = ArtefactCache()  # the harness's cache directory, passed explicitly
    return {arch: static.ptxas_resources(source, arch, cache=cache) for arch in given.ARCHS}
