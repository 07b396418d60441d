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


OOB_SCRIPT = r"""
import os
halpy.require_started(CUDA, "hal_cuda.c")
assert hal.init() == 0, hal.last_error()
st, m = hal.module_load(0, MODULE)
st, g = hal.module_function(m, "read_past_end")
bufs = []
for size, free in BUFS:
    st, h = hal.mem_alloc(0, size)
    bufs.append(h)
for (size, free), h in zip(BUFS, bufs):
    if free:
        hal.mem_free(h)
fd = os.open(ERR, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
saved = os.dup(2)
os.dup2(fd, 2)  # the backend prints the runtime's message on stderr
try:
    out["st"] = hal.launch(g, (N // 64 + 1, 1, 1), (64, 1, 1), [("mem", bufs[A]), ("mem", bufs[C]), ("i32", N)])
finally:
    os.dup2(saved, 2)
    os.close(fd)
    os.close(saved)
out["stderr"] = open(ERR).read()
"""


@pytest.mark.kata_gate(
    "a kernel that reads past the end of one of several live buffers fails without the runtime's "
    "message naming that buffer (by its size) on stderr"
)
def test_cuda_out_of_bounds_read_names_its_buffer(
    hal: Any, built: Any, backends: Any, cuda_vendor: dict[str, Path], tmp_path: Path
) -> None:
    import re

    r = random_for("cuda-oob")
    n = 64 * r.randint(1, 8)  # a's end is a page boundary of kata_dev_alloc's (align 256)
    sizes = {4 * n}
    bufs: list[list[Any]] = []
    for _ in range(r.randint(1, 4)):
        size = r.randint(1, 6000)
        while size in sizes:  # every buffer's size its own: the message names a's by its size
            size += 1
        sizes.add(size)
        bufs.append([size, r.random() < 0.3])
    a_at = r.randint(0, len(bufs))
    bufs.insert(a_at, [4 * n, False])
    c_size = 4 * (n + r.randint(1, 50))
    c_at = r.randint(0, len(bufs))
    bufs.insert(c_at, [c_size, False])
    a_at += c_at <= a_at
    d = backends({"libhal_cuda.so": (built.cuda, None)})
    script = (
        f"CUDA = {str(built.cuda)!r}\nMODULE = {str(cuda_vendor['kernels'])!r}\nBUFS = {bufs!r}\n"
        f"A, C, N = {a_at}, {c_at}, {n}\nERR = {str(tmp_path / 'stderr')!r}\n" + OOB_SCRIPT
    )
    out = hal(script, [d], env={"KATA_CUDA_RUNTIME": str(cuda_vendor["runtime"])})
    what = (
        f"read_past_end on a {4 * n}-byte buffer (buffers of {[b[0] for b in bufs]} bytes, "
        f"{[b[0] for b in bufs if b[1]]} freed before the launch)"
    )
    assert out["st"] == 9, f"{what}: HAL_ERROR_LAUNCH_FAILED, got {out['st']}"
    named = re.findall(
        r"past the end of (?:device array|argument) \d+ \((\d+) bytes\)", out["stderr"]
    )
    assert named and int(named[0]) == 4 * n, (
        f"{what}: the runtime names the {4 * n}-byte buffer when every live buffer is described to "
        f"kata_launch; the backend printed {out['stderr'].strip()[-300:]!r}"
    )


LEAK_SCRIPT = r"""
import os
halpy.require_started(CUDA, "hal_cuda.c")
def held():  # kata_dev_alloc's buffers: memfd mappings and their fds
    with open("/proc/self/maps") as f:
        maps = sum(1 for ln in f if "kata-device-buffer" in ln)
    fds = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds += "kata-device-buffer" in os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return [maps, fds]
res = []
for plan in PLAN:
    assert hal.init() == 0, hal.last_error()
    s = {"start": held()}
    hs = [hal.mem_alloc(0, size)[1] for size, free in plan]
    s["allocated"] = held()
    for h, (size, free) in zip(hs, plan):
        if free:
            hal.mem_free(h)
    s["after_free"] = held()
    s["shutdown"] = hal.shutdown()
    s["after_shutdown"] = held()
    res.append(s)
out["res"] = res
# The backend on its own, its table called directly: its shutdown gives back what it still holds
# (whatever the core did or did not free first).
import cffi
ffi = cffi.FFI()
ffi.cdef(halpy.cdef_of(halpy.HERE / "hal.h"))
ffi.cdef(halpy.cdef_of(halpy.HERE / "hal_backend.h"))
ffi.cdef("const hal_backend_ops* hal_backend_entry(uint32_t, uint32_t);")
ops = ffi.dlopen(CUDA).hal_backend_entry(1, 2)
direct = {"init": ops.init()}
ptr = ffi.new("void**")
direct["alloc"] = [ops.mem_alloc(0, size, ptr) for size, _free in PLAN[0]]
direct["allocated"] = held()
ops.shutdown()
direct["after_shutdown"] = held()
out["direct"] = direct
"""


@pytest.mark.kata_gate(
    "device buffers of the cuda backend stay mapped, or their memfds open, after hal_mem_free, "
    "hal_shutdown or the backend's own shutdown (random buffers, some left allocated)"
)
def test_cuda_free_and_shutdown_give_every_buffer_back(
    hal: Any, built: Any, backends: Any, cuda_vendor: dict[str, Path]
) -> None:
    r = random_for("cuda-leaks")
    plan = [
        [
            [r.choice([1, 100, 4096, r.randint(1, 70000)]), r.random() < 0.4]
            for _ in range(r.randint(2, 9))
        ]
        for _session in range(2)
    ]
    d = backends({"libhal_cuda.so": (built.cuda, None)})
    out = hal(
        f"CUDA = {str(built.cuda)!r}\nPLAN = {plan!r}\n" + LEAK_SCRIPT,
        [d],
        env={"KATA_CUDA_RUNTIME": str(cuda_vendor["runtime"])},
    )
    for i, (s, p) in enumerate(zip(out["res"], plan, strict=True)):
        what = (
            f"session {i + 1}: buffers of {[b[0] for b in p]} bytes, {sum(b[1] for b in p)} freed"
        )
        assert s["start"] == [0, 0], f"{what}: buffers of the session before are still held: {s}"
        assert s["allocated"][1] == len(p), (
            f"{what}: each buffer is a kata_dev_alloc memfd: {s['allocated'][1]} open"
        )
        kept = sum(1 for _size, free in p if not free)
        assert s["after_free"][1] == kept, (
            f"{what}: hal_mem_free gives the buffer back (kata_dev_free): {s['after_free'][1]} "
            f"memfds open for {kept} live buffers"
        )
        assert s["shutdown"] == 0 and s["after_shutdown"] == [0, 0], (
            f"{what}: hal_shutdown gives back every buffer the application left: "
            f"{s['after_shutdown'][0]} mappings and {s['after_shutdown'][1]} memfds remain"
        )
    direct = out["direct"]
    what = f"the cuda backend's own table: init, mem_alloc of {[b[0] for b in plan[0]]} bytes, shutdown"
    assert direct["init"] == 0 and set(direct["alloc"]) == {0}, f"{what}: {direct}"
    assert direct["allocated"][1] == len(plan[0]) and direct["after_shutdown"] == [0, 0], (
        f"{what}: the backend's shutdown gives back every buffer it still holds: "
        f"{direct['after_shutdown'][0]} mappings and {direct['after_shutdown'][1]} memfds remain"
    )
