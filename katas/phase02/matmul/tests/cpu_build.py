"""Build matmul.cu with cpu_cuda.h into a shared library (cached by content) and call it.

Kept beside the tests: a stand-in until the harness's own CUDA CPU backend (harness.cuda) can
run kernels with shared memory and barriers.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import cffi
import numpy as np

from harness.native.cache import ArtefactCache, hash_parts
from harness.toolchain import find_tool

HERE = Path(__file__).parent
DECLS = """
int matmul_run(int which, int reverse, const float* A, const float* B, float* C, int M, int N,
               int K);
const char* matmul_error(void);
"""
KERNELS = {"matmul_naive": 0, "matmul_tiled": 1}


class KernelError(AssertionError):
    """The kernel deadlocked at a barrier, or the launch was invalid."""


class MatmulLib:
    def __init__(self, source: Path, tile: int) -> None:
        cxx = find_tool("cxx")
        if cxx is None:
            raise RuntimeError("needs a C++ compiler (g++)")
        texts = {
            "matmul.cu": source.read_text(encoding="utf-8"),
            "cpu_cuda.h": (HERE / "cpu_cuda.h").read_text(encoding="utf-8"),
            "matmul_driver.cpp": (HERE / "matmul_driver.cpp").read_text(encoding="utf-8"),
        }
        cmd = [str(cxx), "-O1", "-shared", "-fPIC", f"-DTILE={tile}", "-I."]
        cmd += ["matmul_driver.cpp", "-o", "matmul.so"]

        def produce(tmp: Path) -> None:
            for name, text in texts.items():
                (tmp / name).write_text(text, encoding="utf-8")
            proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, check=False)
            (tmp / "build.log").write_text(proc.stdout + proc.stderr, encoding="utf-8")

        key = hash_parts(["matmul-cpu-2", *cmd, *texts.values()])
        entry = ArtefactCache().get_or_create(key, produce, label=f"matmul.cu TILE={tile}")
        if not (entry.path / "matmul.so").exists():
            log = (entry.path / "build.log").read_text(encoding="utf-8")
            raise AssertionError(f"matmul.cu (TILE={tile}) does not compile:\n{log[-3000:]}")
        self.ffi = cffi.FFI()
        self.ffi.cdef(DECLS)
        self.lib = self.ffi.dlopen(str(entry.path / "matmul.so"))
        self.tile = tile

    def run(
        self, kernel: str, A: np.ndarray, B: np.ndarray, C: np.ndarray, reverse: bool = False
    ) -> None:
        """C = A @ B with `kernel`, launched with block (TILE, TILE) over C; C is updated.
        reverse: run each block's threads last to first instead of first to last."""
        (M, K), (K2, N) = A.shape, B.shape
        assert K == K2 and C.shape == (M, N)
        for a in (A, B, C):
            assert a.dtype == np.float32 and a.flags.c_contiguous
        buf = lambda a: self.ffi.from_buffer("float[]", a)
        if self.lib.matmul_run(KERNELS[kernel], int(reverse), buf(A), buf(B), buf(C), M, N, K) != 0:
            raise KernelError(f"{kernel}: {self.ffi.string(self.lib.matmul_error()).decode()}")
