"""The cpu backend's launch server: launches forked by a small helper, not by the pytest process.

Results must not depend on who forks (the server or, with KATA_CUDA_LAUNCH_SERVER=0, this
process); a dead server is replaced; a forked child (the sandbox's) starts a server of its own.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import harness.cuda as hc
from harness.cuda.cpu import server
from harness.toolchain import find_tool

pytestmark = pytest.mark.skipif(find_tool("cxx") is None, reason="needs a C++ compiler (g++)")

SAXPY = """
__global__ void saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""


def run(n: int = 1000, schedule: str = "forward") -> np.ndarray:
    f = hc.SourceModule(SAXPY, name="saxpy.cu").get_function("saxpy")
    x = np.arange(n, dtype=np.float32)
    y = np.ones(n, np.float32)
    kw = {"block": (128, 1, 1), "grid": ((n + 127) // 128, 1)}
    if schedule == "forward":
        f(np.float32(2), hc.In(x), hc.InOut(y), np.int32(n), **kw)
    else:
        f(np.float32(2), hc.In(x), hc.InOut(y), np.int32(n), schedules=(schedule,), **kw)
    return y


def test_launches_run_in_the_server_and_match_forked_ones(monkeypatch) -> None:
    expected = 2 * np.arange(1000, dtype=np.float32) + 1
    for schedule in ("forward", "reverse", "random"):
        np.testing.assert_array_equal(run(schedule=schedule), expected)
    srv = server.current()
    assert srv is not None and srv.proc.poll() is None and srv.pid == os.getpid()
    monkeypatch.setenv("KATA_CUDA_LAUNCH_SERVER", "0")
    assert server.current() is None
    np.testing.assert_array_equal(run(), expected)  # this process forks: the same result


def test_a_dead_server_is_replaced() -> None:
    run()
    first = server.current()
    assert first is not None
    first.proc.kill()
    first.proc.wait()
    np.testing.assert_array_equal(run(10), 2 * np.arange(10, dtype=np.float32) + 1)
    second = server.current()
    assert second is not None and second is not first and second.proc.poll() is None


def test_a_forked_child_starts_its_own_server() -> None:
    run()
    parent = server.current()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit status
        try:
            ok = np.array_equal(run(10), 2 * np.arange(10, dtype=np.float32) + 1)
            mine = server.current()
            ok = ok and mine is not None and mine is not parent and mine.pid == os.getpid()
        except BaseException:
            ok = False
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert server.current() is parent and parent.proc.poll() is None
    np.testing.assert_array_equal(run(10), 2 * np.arange(10, dtype=np.float32) + 1)
