"""Fixtures of the nvcc-pipeline tests, public and hidden (docs/kata-layout.md): each defined once."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def tc(kata):
    return kata.module("toolchain")


@pytest.fixture(scope="module")
def kernels_cu(kata) -> Path:
    return kata.source("kernels.cu")


@pytest.fixture(scope="module")
def questions_cu(kata) -> Path:
    return kata.source("questions.cu")


@pytest.fixture(scope="module")
def stages(kata):
    return kata.module("stages")


@pytest.fixture(scope="module")
def resources(kata):
    return kata.module("resources")


@pytest.fixture(scope="module")
def lineinfo(kata):
    return kata.module("lineinfo")


@pytest.fixture(scope="module")
def sass(kata):
    return kata.module("sass")
