"""Build transpose.cu with cpu_cuda.h (clang, load/store tracing) into a cached shared library.

Kept beside the tests: a stand-in until the harness's own CUDA CPU backend (harness.cuda) can
run kernels with shared memory, barriers and memory tracing.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import cffi
import numpy as np

from harness.native.cache import ArtefactCache, hash_parts
from harness.toolchain import find_tool

HERE = Path(__file__).parent
DECLS = """
int transpose_run(int which, int reverse, const float* in, float* out, int rows, int cols,
                  long* stats);
const char* transpose_error(void);
"""
KERNELS = {"transpose_naive": 0, "transpose_tiled": 1, "transpose_padded": 2}


class KernelError(AssertionError):
    """The kernel deadlocked at a barrier, or the launch was invalid."""


@dataclass(frozen=True)
class Traffic:
    """Global-memory traffic of one launch: warp-level requests, 32-byte sectors, useful bytes."""

    load_requests: int
    load_sectors: int
    load_bytes: int
    store_requests: int
    store_sectors: int
    store_bytes: int

    @property
    def load_efficiency(self) -> float:
        return self.load_bytes / (32 * self.load_sectors) if self.load_sectors else 1.0

    @property
    def store_efficiency(self) -> float:
        return self.store_bytes / (32 * self.store_sectors) if self.store_sectors else 1.0


def aligned(shape: tuple[int, int], fill: float = 0.0) -> np.ndarray:
    """A float32 array whose data starts on a 128-byte boundary, as cudaMalloc's do."""
    n = shape[0] * shape[1]
    raw = np.full(n + 32, fill, dtype=np.float32)
    skip = (-raw.ctypes.data % 128) // 4
    return raw[skip : skip + n].reshape(shape)


class TransposeLib:
    def __init__(self, source: Path) -> None:
        cxx = find_tool("clang++")
        if cxx is None:
            raise RuntimeError("needs clang++ (clang-14) for load/store tracing")
        texts = {
            "transpose.cu": source.read_text(encoding="utf-8"),
            "cpu_cuda.h": (HERE / "cpu_cuda.h").read_text(encoding="utf-8"),
            "transpose_driver.cpp": (HERE / "transpose_driver.cpp").read_text(encoding="utf-8"),
        }
        cmd = [str(cxx), "-O1", "-fsanitize-coverage=edge,trace-loads,trace-stores", "-shared"]
        cmd += ["-fPIC", "-I.", "transpose_driver.cpp", "-o", "transpose.so"]

        def produce(tmp: Path) -> None:
            for name, text in texts.items():
                (tmp / name).write_text(text, encoding="utf-8")
            proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, check=False)
            (tmp / "build.log").write_text(proc.stdout + proc.stderr, encoding="utf-8")

        key = hash_parts(["transpose-cpu-1", *cmd, *texts.values()])
        entry = ArtefactCache().get_or_create(key, produce, label="transpose.cu")
        if not (entry.path / "transpose.so").exists():
            log = (entry.path / "build.log").read_text(encoding="utf-8")
            raise AssertionError(f"transpose.cu does not compile:\n{log[-3000:]}")
        self.ffi = cffi.FFI()
        self.ffi.cdef(DECLS)
        self.lib = self.ffi.dlopen(str(entry.path / "transpose.so"))

    def run(self, kernel: str, src: np.ndarray, out: np.ndarray, reverse: bool = False) -> Traffic:
        """out = src.T with `kernel` (block (32, 8), a grid of 32 x 32 tiles); out is updated."""
        rows, cols = src.shape
        assert out.shape == (cols, rows)
        for a in (src, out):
            assert a.dtype == np.float32 and a.flags.c_contiguous
        stats = self.ffi.new("long[6]")
        buf = lambda a: self.ffi.from_buffer("float[]", a)
        rc = self.lib.transpose_run(
            KERNELS[kernel], int(reverse), buf(src), buf(out), rows, cols, stats
        )
        if rc != 0:
            raise KernelError(f"{kernel}: {self.ffi.string(self.lib.transpose_error()).decode()}")
        return Traffic(*stats)
