"""The cpu CUDA backend against plain C and numba-cuda's simulator (ratios, not timed tests).

    python harness/benchmarks/bench_cuda.py

Goals (issue 6): a launch 1000x or more faster than numba-cuda's simulator (NUMBA_ENABLE_CUDASIM=1)
on the same kernels, and kernel time within 10x of the same computation in plain C. numba-cuda is
optional (`pip install numba-cuda`): without it the vadd ratio uses the figure measured here
(NUMBA_VADD_S). Set KATA_CUDA_LAUNCH_SERVER=0 to time launches that fork the Python process.
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
ROUNDS = 5
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


def best(fn, repeat: int = 20) -> float:
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
    measures = {
        "vadd cpu backend (forked launch)": lambda: best(lambda: vadd(*vargs, **vl)),
        "vadd cpu backend kernel time": lambda: min(
            vadd(*vargs, **vl, time_kernel=True) for _ in range(20)
        ),
        "vadd plain C": lambda: best(lambda: lib.vadd(fp(a), fp(b), fp(c), N)),
        "matmul cpu backend (forked launch)": lambda: best(lambda: mm(*margs, **ml)),
        "matmul cpu backend kernel time": lambda: min(
            mm(*margs, **ml, time_kernel=True) for _ in range(20)
        ),
        "matmul plain C": lambda: best(lambda: lib.matmul(fp(A), fp(B), fp(C), M)),
    }
    # Interleaved rounds, best of each: a busy spell of the (shared) machine then hits the
    # cpu backend and plain C alike instead of whichever ran during it.
    rows: dict[str, float] = {}
    for _ in range(ROUNDS):
        for k, measure in measures.items():
            rows[k] = min(rows.get(k, float("inf")), measure())
    for k, v in rows.items():
        print(f"{k:40s} {v * 1e3:9.3f} ms")
    goal(
        "vadd kernel time vs plain C",
        rows["vadd cpu backend kernel time"] / rows["vadd plain C"],
        10,
    )
    goal(
        "matmul kernel time vs plain C",
        rows["matmul cpu backend kernel time"] / rows["matmul plain C"],
        10,
    )
    sim = numba_simulator(a, b, A, B)
    if sim is None:
        print(
            "numba-cuda simulator: not installed (pip install numba-cuda); last measured on the "
            f"development machine: vadd {NUMBA_VADD_S:.2f} s per launch"
        )
        sim = {"vadd": NUMBA_VADD_S}
    for k in ("vadd", "matmul"):
        if k in sim:
            ours = rows[f"{k} cpu backend (forked launch)"]
            print(f"{k} numba simulator {sim[k] * 1e3:10.1f} ms per launch")
            goal(f"{k} launch: cpu backend faster than numba's simulator by", sim[k] / ours, 1000)


# numba-cuda's simulator, best of 3 warm launches of the same vector add, measured in this
# repository's container (2 shared cores, Python 3.11, numba-cuda 0.30.4). Used when numba-cuda
# is not installed, so the ratio can still be printed.
NUMBA_VADD_S = 1.13

NUMBA_KERNELS = """
from numba import cuda, float32

@cuda.jit
def vadd(x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + y[i]

@cuda.jit
def matmul_tiled(A, B, C):
    sA = cuda.shared.array((16, 16), float32)
    sB = cuda.shared.array((16, 16), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * 16 + ty
    col = cuda.blockIdx.x * 16 + tx
    n = C.shape[0]
    acc = float32(0.0)
    for t in range((n + 15) // 16):
        sA[ty, tx] = A[row, t * 16 + tx] if row < n and t * 16 + tx < n else 0.0
        sB[ty, tx] = B[t * 16 + ty, col] if t * 16 + ty < n and col < n else 0.0
        cuda.syncthreads()
        for k in range(16):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    if row < n and col < n:
        C[row, col] = acc
"""


def numba_simulator(a, b, A, B) -> dict[str, float] | None:
    """Seconds per launch of the same kernels in numba-cuda's simulator, or None."""
    if importlib.util.find_spec("numba") is None:
        return None
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    ns: dict = {}
    # The simulator swaps a kernel module's global `cuda` for its fake: define them at module level.
    exec(compile(NUMBA_KERNELS, "<numba kernels>", "exec"), ns)
    c = np.zeros_like(a)
    C = np.zeros_like(A)
    vadd = ns["vadd"]
    mm = ns["matmul_tiled"]
    vadd[N // 256, 256](a, b, c)  # first launch: set-up
    out = {"vadd": best(lambda: vadd[N // 256, 256](a, b, c), repeat=3)}
    np.testing.assert_allclose(c, a + b, rtol=1e-6)
    out["matmul"] = best(lambda: mm[(M // 16, M // 16), (16, 16)](A, B, C), repeat=2)
    np.testing.assert_allclose(C, A @ B, rtol=1e-4)
    return out


def goal(label: str, value: float, target: float) -> None:
    better = value <= target if "plain C" in label else value >= target
    print(f"{label:55s} {value:8.1f}x  goal {target}x: {'met' if better else 'MISSED'}")


if __name__ == "__main__":
    main()
