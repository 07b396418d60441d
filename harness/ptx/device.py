"""Run a PTX kernel on a real GPU, the way :func:`harness.ptx.run_kernel` runs it on the CPU.

    from harness.ptx.device import run_on_device
    out, a, b = run_on_device(ptx_text, "saxpy", [out, a, b, np.int32(n)], grid=8, block=128)

The launch happens in a fresh Python subprocess (``python -m harness.ptx.device DIR``), so CUDA
is never initialised in the calling (pytest) process. The child talks to the driver through
ctypes (libcuda.so.1: cuModuleLoadDataEx JIT-compiles the PTX for whatever GPU is there), so
nothing beyond the NVIDIA driver and numpy is needed. Arrays are copied to the device before the
launch and back after it; the copies are returned in argument order (scalars as given).
``KATA_LIBCUDA`` overrides the library path.
"""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = ["DeviceError", "run_on_device"]

_LIBCUDA = "libcuda.so.1"
_SCALARS = {
    np.dtype(np.int32): ctypes.c_int32, np.dtype(np.uint32): ctypes.c_uint32,
    np.dtype(np.int64): ctypes.c_int64, np.dtype(np.uint64): ctypes.c_uint64,
    np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double,
}  # fmt: skip


class DeviceError(RuntimeError):
    """The GPU run failed: no driver, a JIT (ptxas) error, a launch or memory fault."""


def _dim3(value: int | Sequence[int], what: str) -> tuple[int, int, int]:
    dims = (int(value),) if isinstance(value, (int, np.integer)) else tuple(int(d) for d in value)
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise ValueError(f"{what} must be a positive int or 1-3 positive ints, got {value!r}")
    return dims + (1,) * (3 - len(dims))  # type: ignore[return-value]


def run_on_device(
    ptx: str,
    kernel: str,
    args: Sequence[np.ndarray | np.generic],
    *,
    grid: int | Sequence[int],
    block: int | Sequence[int],
    timeout: float = 120.0,
) -> list[np.ndarray | np.generic]:
    """Launch `kernel` of `ptx` once on GPU 0; returns every argument after the launch."""
    g, b = _dim3(grid, "grid"), _dim3(block, "block")
    packed: dict[str, np.ndarray] = {}
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray):
            packed[f"a{i}"] = np.ascontiguousarray(a)
        elif isinstance(a, np.generic) and a.dtype in _SCALARS:
            packed[f"s{i}"] = np.asarray(a)
        else:
            raise TypeError(
                f"argument {i}: a numpy array or a numpy scalar of "
                f"{sorted(str(d) for d in _SCALARS)} is needed, got {type(a).__name__}"
            )
    with tempfile.TemporaryDirectory(prefix="kata-device-") as tmp:
        d = Path(tmp)
        (d / "kernel.ptx").write_text(ptx, encoding="utf-8")
        np.savez(d / "args.npz", **packed)
        (d / "launch.txt").write_text(f"{kernel}\n{' '.join(map(str, g + b))}\n", encoding="utf-8")
        proc = subprocess.run(
            [sys.executable, "-m", "harness.ptx.device", str(d)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if proc.returncode != 0:
            lines = (proc.stderr or proc.stdout).strip().splitlines()
            last = lines[-1] if lines else f"exited with {proc.returncode}"
            raise DeviceError(last.removeprefix("DeviceError: "))
        with np.load(d / "result.npz") as res:
            return [res[f"a{i}"] if f"a{i}" in res else args[i] for i in range(len(args))]


# --------------------------------------------------------------------------- the child process
def _driver() -> ctypes.CDLL:
    path = os.environ.get("KATA_LIBCUDA", _LIBCUDA)
    try:
        return ctypes.CDLL(path)
    except OSError as e:
        raise DeviceError(f"no CUDA driver: cannot load {path} ({e})") from None


def _check(cu: ctypes.CDLL, what: str, status: int, log: ctypes.Array | None = None) -> None:
    if status == 0:
        return
    name, text = ctypes.c_char_p(), ctypes.c_char_p()
    cu.cuGetErrorName(status, ctypes.byref(name))
    cu.cuGetErrorString(status, ctypes.byref(text))
    msg = f"{what} failed: {(name.value or b'?').decode()} ({(text.value or b'').decode()})"
    if log is not None and log.value:
        msg += ": " + " | ".join(log.value.decode(errors="replace").strip().splitlines())
    raise DeviceError(msg)


def _child(d: Path) -> None:
    kernel, dims = (d / "launch.txt").read_text(encoding="utf-8").splitlines()
    g = [int(x) for x in dims.split()]
    with np.load(d / "args.npz") as f:
        args = {k: f[k] for k in f.files}
    cu = _driver()
    # The driver reserves far more address space than it uses; a sandbox's RLIMIT_AS breaks it.
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY and soft != hard:
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
    status = cu.cuInit(0)
    if status != 0 and resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY:
        raise DeviceError(f"cuInit failed ({status}) under RLIMIT_AS: run without a memory limit")
    _check(cu, "cuInit", status)
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    _check(cu, "cuDeviceGet", cu.cuDeviceGet(ctypes.byref(dev), 0))
    _check(cu, "cuDevicePrimaryCtxRetain", cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
    _check(cu, "cuCtxSetCurrent", cu.cuCtxSetCurrent(ctx))
    # Load with an error log, so a PTX the JIT rejects says why (like ptxas would).
    log = ctypes.create_string_buffer(8192)
    opts = (ctypes.c_int * 2)(5, 6)  # CU_JIT_ERROR_LOG_BUFFER, ..._SIZE_BYTES
    vals = (ctypes.c_void_p * 2)(ctypes.cast(log, ctypes.c_void_p), ctypes.c_void_p(len(log)))
    image = (d / "kernel.ptx").read_bytes() + b"\0"
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    _check(cu, "cuModuleLoadDataEx (JIT of the PTX)", cu.cuModuleLoadDataEx(ctypes.byref(mod), image, 2, opts, vals), log)  # fmt: skip
    _check(cu, f"cuModuleGetFunction({kernel!r})", cu.cuModuleGetFunction(ctypes.byref(fn), mod, kernel.encode()))  # fmt: skip
    order = sorted(args, key=lambda k: int(k[1:]))
    holders, device = [], {}
    for key in order:
        value = args[key]
        if key[0] == "a":
            ptr = ctypes.c_uint64()
            _check(cu, "cuMemAlloc", cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(max(value.nbytes, 1))))  # fmt: skip
            _check(cu, "cuMemcpyHtoD", cu.cuMemcpyHtoD_v2(ptr, value.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(value.nbytes)))  # fmt: skip
            device[key] = ptr
            holders.append(ptr)
        else:
            holders.append(_SCALARS[value.dtype](value.item()))
    params = (ctypes.c_void_p * max(len(holders), 1))(
        *[ctypes.cast(ctypes.pointer(h), ctypes.c_void_p) for h in holders]
    )
    _check(cu, "cuLaunchKernel", cu.cuLaunchKernel(fn, *g, 0, None, params, None))
    _check(cu, "the kernel (cuCtxSynchronize)", cu.cuCtxSynchronize())
    out = {}
    for key, ptr in device.items():
        host = np.empty_like(args[key])
        _check(cu, "cuMemcpyDtoH", cu.cuMemcpyDtoH_v2(host.ctypes.data_as(ctypes.c_void_p), ptr, ctypes.c_size_t(host.nbytes)))  # fmt: skip
        cu.cuMemFree_v2(ptr)
        out[key] = host
    cu.cuModuleUnload(mod)
    cu.cuDevicePrimaryCtxRelease_v2(dev)
    np.savez(d / "result.npz", **out)


if __name__ == "__main__":
    try:
        _child(Path(sys.argv[1]))
    except DeviceError as e:
        print(f"DeviceError: {e}", file=sys.stderr)
        sys.exit(1)
