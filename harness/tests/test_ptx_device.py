"""harness.ptx.device: PTX on a real GPU through the driver, in a subprocess.

Without a GPU only the error paths run: bad arguments are refused before any subprocess, and a
missing driver is a DeviceError that names the library. With one, saxpy from the interpreter's
samples must agree with the interpreter.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import harness.ptx as ptx
from harness.ptx import run_kernel
from harness.ptx.device import DeviceError, run_on_device

SAXPY = (Path(ptx.__file__).parent / "samples" / "kernels_sm75.ptx").read_text()
HAVE_DRIVER = Path("/proc/driver/nvidia").exists()


def test_bad_arguments_are_refused_before_launching() -> None:
    with pytest.raises(TypeError, match=r"argument 1: a numpy array or a numpy scalar"):
        run_on_device(SAXPY, "saxpy", [np.zeros(4, np.float32), 3], grid=1, block=4)
    with pytest.raises(ValueError, match="block must be a positive int"):
        run_on_device(SAXPY, "saxpy", [np.zeros(4, np.float32)], grid=1, block=0)


def test_a_missing_driver_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    missing = tmp_path / "libcuda.so.1"
    monkeypatch.setenv("KATA_LIBCUDA", str(missing))
    a = np.ones(4, np.float32)
    with pytest.raises(DeviceError, match=rf"no CUDA driver: cannot load {missing}"):
        run_on_device(SAXPY, "saxpy", [a, a, a.copy(), np.int32(4)], grid=1, block=4)


@pytest.mark.skipif(not HAVE_DRIVER, reason="no NVIDIA driver (/proc/driver/nvidia is missing)")
def test_saxpy_on_the_gpu_matches_the_interpreter() -> None:
    n = 1000
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2, n)).astype(np.float32)
    out = np.full(n + 24, -7.0, np.float32)
    got = run_on_device(SAXPY, "saxpy", [a, b, out, np.int32(n)], grid=8, block=128)
    run_kernel(SAXPY, "saxpy", [a, b, out, np.int32(n)], grid=8, block=128)
    np.testing.assert_array_equal(got[2], out)  # fma.rn.f32 and stores: exact on both
    np.testing.assert_array_equal(got[0], a)
    with pytest.raises(DeviceError, match="cuModuleGetFunction"):
        run_on_device(SAXPY, "no_such_kernel", [a], grid=1, block=1)
