"""harness.ptx.device: PTX on a real GPU through the driver, in a subprocess.

Without a GPU: bad arguments are refused before any subprocess, a missing driver is a DeviceError
that names the library, and a stand-in libcuda (C, below: host memory, a CPU "kernel") checks the
ctypes plumbing end to end: buffers, scalar parameters, copies back, JIT logs in errors. With a
GPU, saxpy from the interpreter's samples must agree with the interpreter.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import harness.ptx as ptx
from harness.ptx import run_kernel
from harness.ptx.device import DeviceError, run_on_device

SAXPY = (Path(ptx.__file__).parent / "samples" / "kernels_sm75.ptx").read_text()
HAVE_DRIVER = Path("/proc/driver/nvidia").exists()


FAKE_LIBCUDA = r"""
// A stand-in for libcuda.so.1 with just the calls harness.ptx.device makes: device memory is
// host memory, and "launching" kernel `twice` runs out[i] = 2 * in[i] for i < n on the CPU.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
typedef unsigned long long CUdeviceptr;
static const char *names[] = {"CUDA_SUCCESS", "CUDA_ERROR_INVALID_VALUE", "CUDA_ERROR_NOT_FOUND"};
int cuInit(unsigned flags) { return flags == 0 ? 0 : 1; }
int cuGetErrorName(int e, const char **s) { *s = names[e == 500 ? 2 : e]; return 0; }
int cuGetErrorString(int e, const char **s) { *s = e == 500 ? "named symbol not found" : "invalid argument"; return 0; }
int cuDeviceGet(int *d, int ordinal) { *d = ordinal; return 0; }
int cuDevicePrimaryCtxRetain(void **ctx, int d) { *ctx = (void *)0x1; return 0; }
int cuDevicePrimaryCtxRelease_v2(int d) { return 0; }
int cuCtxSetCurrent(void *ctx) { return ctx ? 0 : 1; }
int cuCtxSynchronize(void) { return 0; }
int cuModuleLoadDataEx(void **m, const void *image, unsigned n, int *opts, void **vals) {
  if (strstr((const char *)image, ".entry") == NULL) {  // fill the error log, as the JIT does
    for (unsigned i = 0; i < n; i++)
      if (opts[i] == 5) strcpy((char *)vals[i], "ptxas fatal   : no kernel in this PTX");
    return 1;
  }
  *m = (void *)0x2;
  return 0;
}
int cuModuleUnload(void *m) { return 0; }
int cuModuleGetFunction(void **f, void *m, const char *name) {
  if (strcmp(name, "twice") != 0) return 500;
  *f = (void *)0x3;
  return 0;
}
int cuMemAlloc_v2(CUdeviceptr *p, size_t n) { *p = (CUdeviceptr)(uintptr_t)malloc(n); return 0; }
int cuMemFree_v2(CUdeviceptr p) { free((void *)(uintptr_t)p); return 0; }
int cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { memcpy((void *)(uintptr_t)d, s, n); return 0; }
int cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { memcpy(d, (void *)(uintptr_t)s, n); return 0; }
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   unsigned bz, unsigned shmem, void *stream, void **params, void **extra) {
  float *out = (float *)(uintptr_t)*(CUdeviceptr *)params[0];
  const float *in = (const float *)(uintptr_t)*(CUdeviceptr *)params[1];
  unsigned n = *(unsigned *)params[2];
  float scale = *(float *)params[3];
  for (unsigned i = 0; i < n && i < gx * bx; i++) out[i] = scale * in[i];
  return 0;
}
"""


@pytest.fixture(scope="module")
def fake_libcuda(tmp_path_factory: pytest.TempPathFactory) -> Path:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("needs gcc to build the stand-in libcuda")
    d = tmp_path_factory.mktemp("fakecuda")
    (d / "fakecuda.c").write_text(FAKE_LIBCUDA)
    subprocess.run([gcc, "-shared", "-fPIC", "-O1", "-o", str(d / "libcuda.so.1"), str(d / "fakecuda.c")], check=True)  # fmt: skip
    return d / "libcuda.so.1"


def test_buffers_and_scalars_reach_the_kernel_and_come_back(fake_libcuda, monkeypatch) -> None:
    monkeypatch.setenv("KATA_LIBCUDA", str(fake_libcuda))
    x = np.arange(10, dtype=np.float32)
    out = np.full(12, -1.0, np.float32)
    got = run_on_device(".entry twice", "twice", [out, x, np.uint32(10), np.float32(2.5)], grid=1, block=16)  # fmt: skip
    np.testing.assert_array_equal(got[0], np.append(2.5 * x, [-1.0, -1.0]).astype(np.float32))
    np.testing.assert_array_equal(got[1], x)
    assert got[2] == 10 and got[3] == np.float32(2.5), "scalars come back as given"
    assert (out == -1.0).all(), "the caller's arrays are not written: copies are returned"


def test_driver_errors_name_the_call_and_the_jit_log(fake_libcuda, monkeypatch) -> None:
    monkeypatch.setenv("KATA_LIBCUDA", str(fake_libcuda))
    x = np.zeros(4, np.float32)
    with pytest.raises(
        DeviceError, match=r"cuModuleGetFunction\('nope'\) failed: CUDA_ERROR_NOT_FOUND"
    ):
        run_on_device(".entry twice", "nope", [x], grid=1, block=1)
    with pytest.raises(DeviceError, match=r"JIT of the PTX.*no kernel in this PTX"):
        run_on_device("// empty", "twice", [x], grid=1, block=1)


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
