"""Fixtures of the release-engineering tests, public and hidden: each defined once, here
(docs/kata-layout.md). Tests never import kata code: they ask the `kata` fixture for it."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="module")
def release(kata: Any) -> Any:
    """release.py (given): Version, Build, Node, the driver table, Arm, Policy, Change, ..."""
    return kata.module("release")


@pytest.fixture(scope="module")
def semver(kata: Any) -> Any:
    """semver.py (yours): task semver."""
    return kata.module("semver")


@pytest.fixture(scope="module")
def compat(kata: Any) -> Any:
    """compat.py (yours): task compat."""
    return kata.module("compat")


@pytest.fixture(scope="module")
def canary(kata: Any) -> Any:
    """canary.py (yours): task canary."""
    return kata.module("canary")


@pytest.fixture(scope="module")
def scenarios(kata: Any) -> Any:
    """scenarios.py (given): the shipped canary scenarios with their known decisions."""
    return kata.module("scenarios")


@pytest.fixture(scope="module")
def rollback(kata: Any) -> Any:
    """rollback.py (yours): task rollback."""
    return kata.module("rollback")


@pytest.fixture(scope="module")
def tracing(kata: Any) -> Any:
    """tracing.py (yours): task ebpf."""
    return kata.module("tracing")


@pytest.fixture
def run_bpftrace() -> Any:
    """run_bpftrace(program, child, others=(), timeout=20): start `program` under bpftrace, wait
    until its probes are attached, let `child` and `others` (Popens blocked on reading their
    stdin) go on by closing their stdin, wait for them, stop bpftrace with SIGINT and return
    (stdout, stderr)."""
    import signal
    import subprocess
    import time

    started: list[Any] = []

    def run(program: str, child: Any, others: Any = (), timeout: float = 20.0) -> tuple[str, str]:
        bt = subprocess.Popen(
            ["bpftrace", "-e", program],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(bt)
        deadline = time.monotonic() + timeout
        line = bt.stdout.readline() if bt.stdout else ""  # "Attaching N probes..."
        if "Attaching" not in line:
            bt.kill()
            out, err = bt.communicate(timeout=5)
            raise AssertionError(f"bpftrace did not attach: {line}{out}{err}".strip())
        time.sleep(0.2)  # attached: the probes fire from now on
        for p in (child, *others):
            p.stdin.close()
        for p in (child, *others):
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
        bt.send_signal(signal.SIGINT)
        out, err = bt.communicate(timeout=max(1.0, deadline - time.monotonic()))
        return out, err

    yield run
    for p in started:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=5)


@pytest.fixture
def syscall_child() -> Any:
    """syscall_child(n, call="getppid"): a Python child, started up and blocked on its stdin, that
    once released calls os.<call>() n times and exits (Python itself never calls getppid or
    sched_yield)."""
    import subprocess
    import sys

    children: list[Any] = []

    def start(n: int, call: str = "getppid") -> Any:
        code = (
            "import os, sys\nprint('ready', flush=True)\nsys.stdin.read()\n"
            f"for _ in range({int(n)}):\n    os.{call}()\n"
        )
        p = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        children.append(p)
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"  # started up
        return p

    yield start
    for p in children:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=5)
