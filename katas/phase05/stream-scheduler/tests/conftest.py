"""Fixtures of the stream-scheduler tests: your scheduler.cpp built with the given kernels."""

from __future__ import annotations

from typing import Any

import pytest

from harness.native.fixtures import NativeBuilder

FLAGS = ("-std=c++17", "-pthread")


def build(ctx: Any) -> Any:
    """scheduler.cpp + kernels.cpp (given) with g++ -std=c++17, loaded with cffi."""
    native = NativeBuilder(ctx.source, ctx.search_path)
    return native("scheduler.cpp", "kernels.cpp", header="scheduler.h", flags=FLAGS)


@pytest.fixture(scope="module")
def lib(kata: Any) -> Any:
    """Your scheduler (scheduler.cpp) and the test kernels, built and loaded."""
    return build(kata)


@pytest.fixture(scope="module")
def sched(kata: Any) -> Any:
    """sched.py (given): Scheduler, Deadlock, the constants."""
    return kata.module("sched")


@pytest.fixture(scope="module")
def checker(kata: Any) -> Any:
    """checker.py (given): the sequential model and the checks."""
    return kata.module("checker")


@pytest.fixture
def new(lib: Any, sched: Any) -> Any:
    """new(workers=4) -> a fresh Scheduler."""
    return lambda workers=4: sched.Scheduler(lib, workers)


@pytest.fixture
def run_under_tsan() -> Any:
    """run_under_tsan(ctx) -> (exit code, report) of tsan_driver.cpp (see _tsan_run)."""
    return _tsan_run


def _tsan_run(ctx: Any) -> tuple[int, str]:
    """Build tsan_driver.cpp with scheduler.cpp under -fsanitize=thread and run it: (exit code,
    trimmed report). Skips where the compiler has no TSan runtime or TSan cannot start here."""
    import resource
    import subprocess

    from harness.native.diagnostics import trim_sanitizer_report
    from harness.native.isolate import tsan_runtime

    if tsan_runtime() is None:
        pytest.skip("g++ has no ThreadSanitizer runtime (libtsan) here: apt-get install g++")
    native = NativeBuilder(ctx.source, ctx.search_path)
    program = native.executable(
        "scheduler.cpp", "kernels.cpp", "tsan_driver.cpp", header="scheduler.h",
        sanitize="thread", flags=FLAGS, link_flags=("-pthread",),
    )  # fmt: skip

    def unlimited_address_space() -> None:  # TSan maps terabytes of shadow, like ASan
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))

    proc = subprocess.run(
        [str(program.path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"TSAN_OPTIONS": "halt_on_error=1:exitcode=66:second_deadlock_stack=1"},
        preexec_fn=unlimited_address_space,
        check=False,
    )
    if "FATAL: ThreadSanitizer" in proc.stderr:
        pytest.skip(f"ThreadSanitizer cannot run on this machine: {proc.stderr.strip()[:200]}")
    root = ctx.source("scheduler.cpp").parent
    return proc.returncode, trim_sanitizer_report(proc.stderr, root=root) or proc.stderr[-2000:]
