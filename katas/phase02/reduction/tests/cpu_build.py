"""Build reduce.cu with cpu_cuda.h into a shared library (cached by content) and call it.

Kept beside the tests: a stand-in until the harness's own CUDA CPU backend (harness.cuda) can
run kernels with shared memory, barriers and warp shuffles.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import cffi
import numpy as np

from harness.native.cache import ArtefactCache, hash_parts
from harness.toolchain import find_tool

HERE = Path(__file__).parent
DECLS = """
int reduce_run(int which, int reverse, const float* in, float* out, int n, int grid, int block);
const char* reduce_error(void);
"""
KERNELS = {"reduce_shared": 0, "reduce_shuffle": 1}
# `extern __shared__ float buf[];` -> a pointer to the launch's dynamic shared memory
_DYNAMIC = re.compile(r"extern\s+__shared__\s+(\w+)\s+(\w+)\s*\[\s*\]\s*;")


class KernelError(AssertionError):
    """The kernel deadlocked at a barrier or a shuffle, or the launch was invalid."""


class ReduceLib:
    def __init__(self, source: Path) -> None:
        cxx = find_tool("cxx")
        if cxx is None:
            raise RuntimeError("needs a C++ compiler (g++)")
        cu = _DYNAMIC.sub(r"\1* \2 = (\1*)cpu_cuda::dynamic_shared;", source.read_text("utf-8"))
        texts = {
            "reduce.cu": cu,
            "cpu_cuda.h": (HERE / "cpu_cuda.h").read_text(encoding="utf-8"),
            "reduce_driver.cpp": (HERE / "reduce_driver.cpp").read_text(encoding="utf-8"),
        }
        cmd = [str(cxx), "-O1", "-shared", "-fPIC", "-I.", "reduce_driver.cpp", "-o", "reduce.so"]

        def produce(tmp: Path) -> None:
            for name, text in texts.items():
                (tmp / name).write_text(text, encoding="utf-8")
            proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, check=False)
            (tmp / "build.log").write_text(proc.stdout + proc.stderr, encoding="utf-8")

        key = hash_parts(["reduce-cpu-1", *cmd, *texts.values()])
        entry = ArtefactCache().get_or_create(key, produce, label="reduce.cu")
        if not (entry.path / "reduce.so").exists():
            log = (entry.path / "build.log").read_text(encoding="utf-8")
            raise AssertionError(f"reduce.cu does not compile:\n{log[-3000:]}")
        self.ffi = cffi.FFI()
        self.ffi.cdef(DECLS)
        self.lib = self.ffi.dlopen(str(entry.path / "reduce.so"))

    def run(
        self, kernel: str, data: np.ndarray, grid: int, block: int, reverse: bool = False
    ) -> np.ndarray:
        """The `grid` per-block partial sums of `kernel` over float32 `data`."""
        assert data.dtype == np.float32 and data.flags.c_contiguous
        out = np.full(grid, np.nan, dtype=np.float32)
        buf = lambda a: self.ffi.from_buffer("float[]", a)
        rc = self.lib.reduce_run(
            KERNELS[kernel], int(reverse), buf(data), buf(out), data.size, grid, block
        )
        if rc != 0:
            raise KernelError(f"{kernel}: {self.ffi.string(self.lib.reduce_error()).decode()}")
        return out
