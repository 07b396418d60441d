"""Hidden tests of hal, task cuda: random sizes and grids against numpy, and a kernel written
for this run (its name and constant drawn fresh), on your backend over the cpu CUDA runtime."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.testing import random_for

RUN = """
import struct
halpy.require_started(CUDA, "hal_cuda.c")
assert hal.init() == 0, hal.last_error()
out["devices"] = [d["backend"] for d in hal.devices()]
st, m = hal.module_load(0, MODULE)
res = []
for kernel, grid, block, bufs, args in CASES:
    st, f = hal.module_function(m, kernel)
    hs = []
    for data in bufs:
        st, h = hal.mem_alloc(0, len(bytes.fromhex(data))); hal.memcpy_htod(h, 0, bytes.fromhex(data)); hs.append(h)
    a = [("mem", hs[v]) if k == "mem" else (k, v) for k, v in args]
    st = hal.launch(f, tuple(grid), tuple(block), a)
    res.append([st, [hal.memcpy_dtoh(h, 0, len(bytes.fromhex(d)))[1].hex() for h, d in zip(hs, bufs)]])
    for h in hs[1:]: hal.mem_free(h)
out["res"] = res
out["shutdown"] = hal.shutdown()  # with buffers still allocated
"""


def build_module(source: str, name: str, kernels: list[str]) -> Path:
    from harness.cuda.cpu.building import PLAIN, build_kernels

    return build_kernels(
        source, name, kernels, extern_c=True, options=(), include_dirs=(), compiler=PLAIN
    ).path


@pytest.mark.kata_gate(
    "a kernel written for this run (a fresh name and constant) or phase 02's kernels on random "
    "sizes and grids give results other than numpy's on the cuda backend"
)
def test_cuda_fresh_kernels_and_random_launches(
    hal: Any, built: Any, backends: Any, cuda_vendor: dict[str, Path], hal_data: Path
) -> None:
    r = random_for("cuda")
    k = r.randint(2, 97)
    name = "k" + "".join(r.choice("abcdefghij") for _ in range(8))
    text = (hal_data / "vector_add.cu").read_text() + (
        f"\n__global__ void {name}(const int* a, int* b, int n) {{\n"
        "  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
        f"  if (i < (size_t)n) b[i] = a[i] * {k} - (int)threadIdx.x;\n}}\n"
    )
    module = build_module(text, "fresh.cu", ["vector_add", "saxpy", name])
    cases, wants = [], []
    for case in range(4):
        n = r.randint(1, 3000)
        grid, block = [r.randint(1, 12), 1, 1], [r.choice([1, 32, 64, 96, 128]), 1, 1]
        g = np.random.default_rng(r.randrange(2**32))
        x, y = g.standard_normal(n).astype(np.float32), g.standard_normal(n).astype(np.float32)
        kind = name if case == 0 else r.choice(["vector_add", "saxpy", name])
        if kind == "vector_add":
            cases.append(
                [
                    kind,
                    grid,
                    block,
                    [x.tobytes().hex(), y.tobytes().hex(), "00" * 4 * n],
                    [["mem", 0], ["mem", 1], ["mem", 2], ["i32", n]],
                ]
            )
            wants.append((2, (x + y).tobytes()))
        elif kind == "saxpy":
            alpha = np.float32(r.uniform(-2, 2))
            cases.append(
                [
                    kind,
                    grid,
                    block,
                    [x.tobytes().hex(), y.tobytes().hex()],
                    [["f32", float(alpha)], ["mem", 0], ["mem", 1], ["i32", n]],
                ]
            )
            wants.append((1, (alpha * x + y).astype(np.float32).tobytes()))
        else:
            a = g.integers(-1000, 1000, n).astype(np.int32)
            grid = [(n + block[0] - 1) // block[0], 1, 1]
            cases.append(
                [
                    kind,
                    grid,
                    block,
                    [a.tobytes().hex(), "00" * 4 * n],
                    [["mem", 0], ["mem", 1], ["i32", n]],
                ]
            )
            tid = np.arange(n) % block[0]
            wants.append((1, (a * k - tid).astype(np.int32).tobytes()))
    d = backends({"libhal_cuda.so": (built.cuda, None), "libhal_cpu.so": (built.cpu, None)})
    script = f"CUDA = {str(built.cuda)!r}\nMODULE = {str(module)!r}\nCASES = {cases!r}\n" + RUN
    out = hal(script, [d], env={"KATA_CUDA_RUNTIME": str(cuda_vendor["runtime"])})
    assert out["devices"] == ["cuda", "cpu"], (
        f"cuda (priority 20) before cpu (10): {out['devices']}"
    )
    assert out["shutdown"] == 0, (
        f"hal_shutdown with cuda buffers still allocated: {out['shutdown']}"
    )
    for c, (st, got), (which, want) in zip(cases, out["res"], wants, strict=True):
        what = f"{c[0]} on grid {c[1]} block {c[2]} (n from the buffers: {len(bytes.fromhex(c[3][0])) // 4})"
        assert st == 0, f"hal_launch of {what} on the cuda backend returned {st}"
        assert bytes.fromhex(got[which]) == want, f"{what}: the output differs from numpy's"


@pytest.mark.kata_gate("memory or a stream of one device was accepted for a kernel of another")
def test_cuda_cross_device_arguments_are_refused(
    hal: Any, built: Any, backends: Any, cuda_vendor: dict[str, Path]
) -> None:
    d = backends({"libhal_cuda.so": (built.cuda, None), "libhal_cpu.so": (built.cpu, None)})
    out = hal(
        f"halpy.require_started({str(built.cuda)!r}, 'hal_cuda.c')\n"
        "assert hal.init() == 0, hal.last_error()\n"
        f"st, m = hal.module_load(1, {str(built.kernels)!r})\n"
        "st, f = hal.module_function(m, 'inc')\n"
        "st, x = hal.mem_alloc(0, 64)\n"
        "st, s = hal.stream_create(0)\n"
        "out['arg'] = hal.launch(f, (1, 1, 1), (1, 1, 1), [('mem', x), ('i32', 16)])\n"
        "out['last'] = hal.last_error()\n"
        "st, y = hal.mem_alloc(1, 64)\n"
        "out['stream'] = hal.launch(f, (1, 1, 1), (1, 1, 1), [('mem', y), ('i32', 16)], s)\n"
        "out['last2'] = hal.last_error()\n"
        "out['ok'] = hal.launch(f, (1, 1, 1), (1, 1, 1), [('mem', y), ('i32', 16)])\n",
        [d],
        env={"KATA_CUDA_RUNTIME": str(cuda_vendor["runtime"])},
    )
    assert out["last"] and out["last2"] and out["last"] != out["last2"], (
        f"hal_last_error after each refused launch says why: {out['last']!r}, {out['last2']!r}"
    )
    assert (out["arg"], out["stream"], out["ok"]) == (1, 1, 0), (
        f"memory or a stream of device 0 (cuda) for a kernel of device 1 (cpu): HAL_ERROR_INVALID_VALUE: {out}"
    )
