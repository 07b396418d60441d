"""A warm rerun of a cuda test compiles nothing: checked by harness.native's compiles.log."""

from __future__ import annotations

import pytest

from harness.native.cache import ArtefactCache
from harness.toolchain import find_tool

pytestmark = pytest.mark.skipif(find_tool("cxx") is None, reason="needs a C++ compiler (g++)")

TEST = """
import numpy as np


def test_scale(cuda):
    f = cuda.module("scale.cu", backend="cpu").get_function("scale")
    x = np.arange(100, dtype=np.float32)
    f(cuda.InOut(x), np.float32(2), np.int32(100), block=(64, 1, 1), grid=(2, 1))
    assert (x == 2 * np.arange(100)).all()
"""

KERNEL = """
__global__ void scale(float* x, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= s;
}
"""


def test_second_run_compiles_nothing(pytester: pytest.Pytester, monkeypatch, tmp_path) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("KATA_BUILD_CACHE", str(cache))
    pytester.makepyfile(test_scale=TEST)
    (pytester.path / "scale.cu").write_text(KERNEL)
    first = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    first.assert_outcomes(passed=1)
    builds = ArtefactCache(cache).logged_builds()
    labels = " ".join(builds)
    # the kernel, the runtime library and the launch server (runtime.cpp as a program)
    assert len(builds) == 3 and "scale.cpp" in labels, builds
    assert "shared runtime.cpp" in labels and "executable runtime.cpp" in labels, builds
    second = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    second.assert_outcomes(passed=1)
    assert ArtefactCache(cache).logged_builds() == builds  # nothing compiled the second time


KATA_TOML = """\
id = "scale"
title = "Scale a vector"
phase = 2
summary = "x *= s on the GPU"
languages = ["cuda"]
files = ["scale.cu"]
time_limit = 10

[[tasks]]
id = "scale"
title = "Scale"
points = 10
tests = ["test_scale*"]
hints = ["one thread per element"]
"""

STUB = """
__global__ void scale(float* x, float s, int n) {
    // TODO
}
"""


def test_cuda_fixture_loads_the_learner_file_or_the_reference(repo, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("KATA_BUILD_CACHE", str(tmp_path / "cache"))
    repo.write("katas/phase02/scale/kata.toml", KATA_TOML)
    repo.write("katas/phase02/scale/scale.cu", STUB)
    repo.write("katas/phase02/scale/tests/test_scale.py", TEST)
    repo.write("solutions/phase02/scale/scale.cu", KERNEL)
    learner = repo.pytester.runpytest_subprocess("katas", "-p", "no:randomly")
    learner.assert_outcomes(failed=1)
    solution = repo.pytester.runpytest_subprocess(
        "katas", "-p", "no:randomly", "--kata-impl=solution"
    )
    solution.assert_outcomes(passed=1)
