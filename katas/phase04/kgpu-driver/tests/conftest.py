"""Fixtures of the kgpu-driver tests: your kgpu.c built into the user-space kernel (kernel.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.native.build import BuildError, build_executable


@pytest.fixture(scope="module")
def kernel_py(kata: Any) -> Any:
    """kernel.py (given): build, Kernel, PRELUDE."""
    return kata.module("kernel")


@pytest.fixture(scope="module")
def built(kata: Any, kernel_py: Any) -> Any:
    """The kernel process with your kgpu.c, and the preload library."""
    try:
        return kernel_py.build(kata.source, kata.search_path)
    except BuildError as e:
        pytest.fail(f"compilation failed:\n{e}", pytrace=False)


@pytest.fixture(scope="module")
def umd(kata: Any) -> Path:
    """umd.c (given), the C user program, built."""
    try:
        return build_executable(
            [kata.source("umd.c")], flags=("-pthread",), link_flags=("-pthread",),
            include_dirs=kata.search_path,
        ).path  # fmt: skip
    except BuildError as e:
        pytest.fail(f"umd.c did not compile:\n{e}", pytrace=False)


@pytest.fixture
def kernel(kernel_py: Any, built: Any, tmp_path: Path) -> Iterator[Any]:
    """A fresh kernel process with your driver loaded (unloaded after the test)."""
    with kernel_py.Kernel(built, tmp_path / "kernel.log") as k:
        yield k
