"""The cpu CUDA backend against plain C and numba-cuda's simulator (ratios, not timed tests).

    python harness/benchmarks/bench_cuda.py

numba-cuda is optional (`pip install numba-cuda`); without it that comparison is skipped.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import harness.cuda as hc  # noqa: E402
from harness.native import build_shared_library, load  # noqa: E402

N = 16 * 1024
M = 64
KERNELS = Path(__file__).resolve().parents[1] / "tests" / "cuda_kernels"
VADD = """
__global__ void vadd(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""
PLAIN_C = """
void vadd(const float* a, const float* b, float* c, int n) { for (int i = 0; i < n; ++i) c[i] = a[i] + b[i]; }
void matmul(const float* A, const float* B, float* C, int n) {
    for (int i = 0; i < n; ++i) for (int j = 0; j < n; ++j) {
        float acc = 0; for (int k = 0; k < n; ++k) acc += A[i * n + k] * B[k * n + j]; C[i * n + j] = acc; }
}
"""


def best(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.random(N, dtype=np.float32), rng.random(N, dtype=np.float32)
    c = np.zeros(N, np.float32)
    A, B = rng.random((M, M), dtype=np.float32), rng.random((M, M), dtype=np.float32)
    C = np.zeros((M, M), np.float32)
    vadd = hc.SourceModule(VADD, name="vadd.cu").get_function("vadd")
    mm = hc.SourceModule((KERNELS / "matmul_tiled.cu").read_text(), name="mm.cu").get_function(
        "matmul_tiled"
    )
    vargs = (hc.In(a), hc.In(b), hc.Out(c), np.int32(N))
    margs = (hc.In(A), hc.In(B), hc.Out(C), np.int32(M))
    vl = {"block": (256, 1, 1), "grid": (N // 256, 1)}
    ml = {"block": (16, 16, 1), "grid": (M // 16, M // 16)}
    rows = {}
    rows["vadd cpu backend (forked launch)"] = best(lambda: vadd(*vargs, **vl))
    rows["vadd cpu backend kernel time"] = min(
        vadd(*vargs, **vl, time_kernel=True) for _ in range(5)
    )
    rows["matmul cpu backend (forked launch)"] = best(lambda: mm(*margs, **ml))
    rows["matmul cpu backend kernel time"] = min(
        mm(*margs, **ml, time_kernel=True) for _ in range(5)
    )
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "plain.c"
        p.write_text(PLAIN_C)
        decls = (
            "void vadd(const float*, const float*, float*, int);"
            "void matmul(const float*, const float*, float*, int);"
        )
        lib = load(decls, build_shared_library([p]))
        ffi = lib.ffi
        fp = lambda x: ffi.cast("float*", x.ctypes.data)  # noqa: E731
        rows["vadd plain C"] = best(lambda: lib.vadd(fp(a), fp(b), fp(c), N))
        rows["matmul plain C"] = best(lambda: lib.matmul(fp(A), fp(B), fp(C), M))
    for k, v in rows.items():
        print(f"{k:40s} {v * 1e3:9.3f} ms")
    print(
        f"vadd kernel time / plain C:   {rows['vadd cpu backend kernel time'] / rows['vadd plain C']:.1f}x"
    )
    print(
        f"matmul kernel time / plain C: {rows['matmul cpu backend kernel time'] / rows['matmul plain C']:.1f}x"
    )
    if importlib.util.find_spec("numba") is None:
        print("numba-cuda simulator: skipped (pip install numba-cuda to compare)")
        return
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    from numba import cuda as ncuda

    @ncuda.jit
    def nvadd(x, y, out):
        i = ncuda.grid(1)
        if i < out.size:
            out[i] = x[i] + y[i]

    sim = best(lambda: nvadd[N // 256, 256](a, b, c), repeat=1)
    print(
        f"vadd numba simulator {sim * 1e3:.1f} ms: cpu backend is {sim / rows['vadd cpu backend (forked launch)']:.0f}x faster"
    )


if __name__ == "__main__":
    main()
