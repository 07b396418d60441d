"""Fixtures of the fingerprint tests: your crate built with cargo, the given modules."""

from __future__ import annotations

from typing import Any

import pytest

from harness.native.build import BuildError
from harness.native.cargo import build_cargo_cdylib
from harness.native.loader import load
from harness.toolchain import ToolNotFoundError

# The crate: lib.rs, api.rs and sha256.rs are given, fingerprint.rs is yours.
SOURCES = ("lib.rs", "api.rs", "sha256.rs", "fingerprint.rs")


@pytest.fixture(scope="module")
def fp(kata: Any) -> Any:
    """fp.py (given): Lib (your crate's functions with Python values), Score, KINDS, VERDICTS."""
    return kata.module("fp")


@pytest.fixture(scope="module")
def lib(kata: Any, fp: Any) -> Any:
    """Your crate (fingerprint.rs with the given lib.rs, api.rs, sha256.rs), built and loaded."""
    __tracebackhide__ = True
    try:
        built = build_cargo_cdylib(kata.source("Cargo.toml"), [kata.source(s) for s in SOURCES])
    except ToolNotFoundError as e:
        pytest.skip(f"this kata is Rust: {e}")
    except BuildError as e:
        pytest.fail(f"cargo build failed:\n{e}", pytrace=False)
    return fp.Lib(load(None, built, header=kata.source("fingerprint.h")))


@pytest.fixture(scope="module")
def fakeroot(kata: Any) -> Any:
    """fakeroot.py (given): Machine, Nic, Disk, Gpu, Cpu, random_machine(rng), write(m, root)."""
    return kata.module("fakeroot")
