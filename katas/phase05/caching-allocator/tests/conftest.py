"""Fixtures of the caching-allocator tests: your crate built with cargo, the given modules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from harness.native.build import BuildError
from harness.native.cargo import build_cargo_cdylib
from harness.native.loader import load
from harness.toolchain import ToolNotFoundError

# The crate: lib.rs, api.rs and device.rs are given, allocator.rs is yours.
SOURCES = ("lib.rs", "api.rs", "device.rs", "allocator.rs")


def build_crate(ctx: Any) -> Any:
    """`cargo build --release` of the crate of `ctx` (a kata context), loaded with cffi."""
    __tracebackhide__ = True
    try:
        built = build_cargo_cdylib(ctx.source("Cargo.toml"), [ctx.source(s) for s in SOURCES])
    except ToolNotFoundError as e:
        pytest.skip(f"this kata is Rust: {e}")
    except BuildError as e:
        pytest.fail(f"cargo build failed:\n{e}", pytrace=False)
    return load(None, built, header=ctx.source("allocator.h"))


@pytest.fixture(scope="module")
def lib(kata: Any) -> Any:
    """Your crate (allocator.rs with the given lib.rs, api.rs, device.rs), built and loaded."""
    return build_crate(kata)


@pytest.fixture(scope="module")
def alloc(kata: Any) -> Any:
    """alloc.py (given): Device, Allocator, sizes(), the exceptions."""
    return kata.module("alloc")


@pytest.fixture(scope="module")
def checker(kata: Any) -> Any:
    """checker.py (given): the state machine that checks your allocator against a model."""
    return kata.module("checker")


@pytest.fixture(scope="module")
def traces(kata: Any) -> Any:
    """traces.py (given): the allocation traces."""
    return kata.module("traces")


@pytest.fixture(scope="module")
def picture(kata: Any) -> Any:
    """picture.py (given): the segment picture and the fragmentation figure."""
    return kata.module("picture")


@pytest.fixture
def make(lib: Any, alloc: Any) -> Callable[..., tuple[Any, Any]]:
    """make(capacity=...) -> (allocator, device): a fresh device and your allocator on it."""

    def new(capacity: int = 1 << 30) -> tuple[Any, Any]:
        dev = alloc.Device(lib, capacity)
        return alloc.Allocator(lib, dev), dev

    return new


@pytest.fixture
def replay(alloc: Any) -> Callable[..., Any]:
    """replay(lib, trace) -> (stats, device info, ns in the allocator) on a fresh device."""

    def run(lib_: Any, trace: Any) -> tuple[Any, Any, int]:
        dev = alloc.Device(lib_, trace.capacity)
        a = alloc.Allocator(lib_, dev)
        ns = a.replay(trace.ops)
        return a.stats(), dev.info(), ns

    return run


@pytest.fixture
def build_reference(kata: Any, kata_budget: Any) -> Callable[[], Any]:
    """build_reference() -> the reference crate, built and loaded (skips without it)."""
    return lambda: build_crate(kata_budget.reference)
