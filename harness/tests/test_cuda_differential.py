"""The cpu backend against the hardware it emulates (issue 22): every phase 02 kernel — the
references, the shortcuts, and two kernels with a bug (an out-of-bounds store, a missing
__syncthreads()) — run with the same inputs on both backends, results and errors compared.

Each launch is a directory (spec.json, args.npz) run by ``python -m harness.cuda.sanitize_runner
--backend cpu|gpu DIR``: the cpu half in this process (the cpu backend initialises no CUDA), the
gpu half always in a child process, so CUDA is never initialised in the pytest process.

- test_cpu_backend: the cpu half, on every machine: each kernel against numpy's answer (the buggy
  ones: OutOfBounds, and for the race the set of results its thread schedules give, which must
  hold more than one);
- test_against_the_hardware: the same launch on the GPU (skipped without the gpu tier): equal
  results (to float tolerance: sums in another order), the race's result among the values the cpu
  schedules found for each element, the out-of-bounds store either an error or right where it is
  in bounds (a GPU faults only past its allocation's rounding). With KATA_DIFFERENTIAL_JSON set,
  each outcome is appended there as a JSON line (harness/benchmarks/gpu_check.sh archives it).

docs/cuda.md records the last results on hardware.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.cuda import sanitize_runner
from harness.cuda.cpu.backend import default_schedules
from harness.cuda.errors import CudaError

ROOT = Path(__file__).resolve().parents[2]
KERNELS = Path(__file__).parent / "cuda_kernels"


@dataclass
class Launch:
    """One kernel's launch: arguments as (kind, value), the grid, and numpy's answer."""

    args: list[tuple[str, Any]]
    block: tuple[int, int, int]
    grid: tuple[int, ...]
    shared: int = 0
    want: Callable[[list[Any]], dict[int, np.ndarray]] = field(default=lambda a: {})
    options: tuple[str, ...] = ()
    kind: str = "exact"  # "exact", "race" (a set of results), "oob" (an out-of-bounds store)


def _f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def vector_add(rng: np.random.Generator) -> Launch:
    a, b, n = _f32(rng, 10_007), _f32(rng, 10_007), 10_007
    c = np.zeros(n, np.float32)
    return Launch([("in", a), ("in", b), ("out", c), ("scalar", np.int32(n))], (256, 1, 1), (8,),
                  want=lambda args: {2: a + b})  # fmt: skip


def saxpy(rng: np.random.Generator) -> Launch:
    x, y, n = _f32(rng, 5000), _f32(rng, 5000), 5000
    return Launch([("scalar", np.float32(2.5)), ("in", x), ("inout", y.copy()),
                   ("scalar", np.int32(n))], (128, 1, 1), (7,),
                  want=lambda args: {2: np.float32(2.5) * x + y})  # fmt: skip


def matmul(rng: np.random.Generator) -> Launch:
    m, n, k, tile = 100, 77, 33, 16
    a, b = _f32(rng, m, k), _f32(rng, k, n)
    c = np.zeros((m, n), np.float32)
    args = [("in", a), ("in", b), ("out", c)] + [("scalar", np.int32(v)) for v in (m, n, k)]
    grid = ((n + tile - 1) // tile, (m + tile - 1) // tile)
    return Launch(args, (tile, tile, 1), grid, options=(f"-DTILE={tile}",),
                  want=lambda _: {2: (a.astype(np.float64) @ b).astype(np.float32)})  # fmt: skip


def reduction(kernel: str) -> Callable[[np.random.Generator], Launch]:
    def make(rng: np.random.Generator) -> Launch:
        n, block, grid = 100_003, 256, 64
        data = _f32(rng, n)
        owner = (np.arange(n) // block) % grid
        sums = np.bincount(owner, weights=data.astype(np.float64), minlength=grid)
        return Launch([("in", data), ("inout", np.zeros(grid, np.float32)),
                       ("scalar", np.int32(n))], (block, 1, 1), (grid,),
                      shared=block * 4 if kernel == "reduce_shared" else 0,
                      want=lambda _: {1: sums.astype(np.float32)})  # fmt: skip

    return make


def transpose(rng: np.random.Generator) -> Launch:
    rows, cols = 100, 77
    src = _f32(rng, rows, cols)
    out = np.zeros((cols, rows), np.float32)
    args = [("in", src), ("out", out), ("scalar", np.int32(rows)), ("scalar", np.int32(cols))]
    return Launch(args, (32, 8, 1), ((cols + 31) // 32, (rows + 31) // 32),
                  want=lambda _: {1: src.T.copy()})  # fmt: skip


def oob_fill(rng: np.random.Generator) -> Launch:
    c = np.zeros(1000, np.float32)
    return Launch([("out", c), ("scalar", np.int32(1000))], (256, 1, 1), (4,), kind="oob",
                  want=lambda _: {0: 2.0 * np.arange(1000, dtype=np.float32)})  # fmt: skip


def racy_shift(rng: np.random.Generator) -> Launch:
    d = np.arange(256, dtype=np.float32)
    return Launch([("inout", d), ("scalar", np.int32(256))], (256, 1, 1), (1,), kind="race",
                  want=lambda _: {0: np.roll(d, -1)})  # fmt: skip


LAUNCHES: dict[str, Callable[[np.random.Generator], Launch]] = {
    "vector_add": vector_add,
    "saxpy": saxpy,
    "matmul_naive": matmul,
    "matmul_tiled": matmul,
    "reduce_shared": reduction("reduce_shared"),
    "reduce_shuffle": reduction("reduce_shuffle"),
    "transpose_naive": transpose,
    "transpose_tiled": transpose,
    "transpose_padded": transpose,
    "fill": oob_fill,
    "shift": racy_shift,
}


def _sources() -> list[tuple[str, str, str]]:
    """(id, file name, CUDA source) of every phase 02 reference .cu file and of each shortcut's
    (a shortcut.patch applied to the reference, or a whole copy)."""
    from harness.patches import apply

    out = []
    for kata in sorted((ROOT / "solutions" / "phase02").iterdir()):
        for cu in sorted(kata.glob("*.cu")):
            out.append((kata.name, cu.name, cu.read_text()))
        for shortcut in sorted((kata / "shortcuts").glob("*/")):
            patch = shortcut / "shortcut.patch"
            files = (
                {Path(k).name: v.decode() for k, v in apply(kata, patch.read_text()).items()}
                if patch.is_file()
                else {cu.name: cu.read_text() for cu in shortcut.glob("*.cu")}
            )
            for name, text in sorted(files.items()):
                if name.endswith(".cu"):
                    out.append((f"{kata.name}/{shortcut.name}", name, text))
    for bug in ("oob_store.cu", "missing_sync.cu"):
        out.append(("bug", bug, (KERNELS / bug).read_text()))
    return out


def cases() -> list[tuple[str, str, str, str]]:
    """(id, file name, source, kernel): every kernel of LAUNCHES each source defines."""
    return [
        (f"{where}:{kernel}", name, text, kernel)
        for where, name, text in _sources()
        for kernel in LAUNCHES
        if f"void {kernel}(" in text
    ]


CASES = cases()

# Shortcuts whose kernel reads shared memory its block never wrote: the value is undefined on a
# GPU, and the cpu backend's garbage fill (0x7f bytes) makes the result wrong there on purpose.
UNDEFINED = {"reduction/shuffle-no-lane-guard:reduce_shuffle"}


def _refused(got: dict[str, Any]) -> bool:
    """The cpu backend refused to build the kernel: code its trace cannot see (no_sanitize
    attributes, inline asm, library copies) is a compile error there, never a launch."""
    return got.get("error") == "CudaCompileError" and "hides memory accesses" in str(
        got.get("message", "")
    )


def write_launch(directory: Path, name: str, source: str, kernel: str, launch: Launch) -> None:
    spec = {
        "source": source,
        "options": list(launch.options),
        "no_extern_c": False,
        "name": name,
        "include_dirs": [],
        "kernel": kernel,
        "block": list(launch.block),
        "grid": list(launch.grid),
        "shared": launch.shared,
        "args": [{"kind": kind} for kind, _ in launch.args],
    }
    (directory / "spec.json").write_text(json.dumps(spec))
    np.savez(
        directory / "args.npz", **{f"a{i}": np.asarray(v) for i, (_, v) in enumerate(launch.args)}
    )


def outputs(directory: Path, launch: Launch) -> dict[int, np.ndarray]:
    with np.load(directory / "out.npz") as res:
        return {i: res[f"a{i}"] for i in range(len(launch.args)) if f"a{i}" in res.files}


def run_cpu(directory: Path, schedules: str = "") -> dict[str, Any]:
    """One cpu-backend launch in this process: {"outputs": ...} or {"error": class name}."""
    (directory / "out.npz").unlink(missing_ok=True)
    try:
        sanitize_runner.run(directory, backend="cpu", schedules=schedules)
    except CudaError as e:
        return {"error": type(e).__name__, "message": str(e)}
    return {"ok": True}


def run_gpu(directory: Path) -> dict[str, Any]:
    """The launch on the GPU, in a child process (CUDA never starts in pytest's process)."""
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cuda.sanitize_runner", "--backend", "gpu", str(directory)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    if proc.returncode == 3:
        return {"error": json.loads((directory / "error.json").read_text())["type"]}
    if proc.returncode != 0:
        return {"error": "crash", "message": (proc.stdout + proc.stderr)[-2000:]}
    return {"ok": True}


def close(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.allclose(a, b, rtol=1e-4, atol=1e-3))


def schedule_results(directory: Path, launch: Launch) -> list[dict[int, np.ndarray]]:
    """The racy kernel's outputs under each thread schedule of the cpu backend."""
    found = []
    for schedule in default_schedules():
        got = run_cpu(directory, schedule)
        assert "error" not in got, got
        found.append(outputs(directory, launch))
    return found


@pytest.mark.parametrize(
    ("name", "source", "kernel"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_cpu_backend(
    tmp_path: Path, name: str, source: str, kernel: str, request: pytest.FixtureRequest
) -> None:
    launch = LAUNCHES[kernel](np.random.default_rng(22))
    write_launch(tmp_path, name, source, kernel, launch)
    if launch.kind == "race":
        found = schedule_results(tmp_path, launch)
        distinct = {r[0].tobytes() for r in found}
        assert len(distinct) > 1, "a race the cpu backend's schedules cannot tell apart"
        d0 = launch.args[0][1]
        for r in found:  # each element is its neighbour before or after the update
            nb = np.roll(d0, -1)
            assert np.all((r[0] == nb) | (r[0] == nb + 1)), r[0][:8]
        return
    got = run_cpu(tmp_path)
    if launch.kind == "oob":
        assert got.get("error") == "OutOfBounds", got
        return
    where = request.node.callspec.id.split(":")[0]
    if _refused(got):
        assert "/" in where, f"a reference kernel is refused by the cpu backend: {got}"
        return
    assert "error" not in got, got
    mine = outputs(tmp_path, launch)
    for i, want in launch.want(launch.args).items():
        if request.node.callspec.id in UNDEFINED:
            assert not close(mine[i], want), f"{where}: uninitialised shared memory read as 0"
        else:
            assert close(mine[i], want), f"{name}:{kernel} argument {i} on the cpu backend"


def _no_gpu() -> str | None:
    from harness.tiers import probe

    caps = probe()
    return None if caps.has_tier("gpu") else f"needs the gpu tier: {caps.why_not('gpu')}"


def _record(case: str, outcome: dict[str, Any]) -> None:
    path = os.environ.get("KATA_DIFFERENTIAL_JSON")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"case": case, **outcome}) + "\n")


@pytest.mark.parametrize(
    ("name", "source", "kernel"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_against_the_hardware(
    tmp_path: Path, name: str, source: str, kernel: str, request: pytest.FixtureRequest
) -> None:
    if why := _no_gpu():
        pytest.skip(why)
    case = request.node.callspec.id
    launch = LAUNCHES[kernel](np.random.default_rng(22))
    cpu_dir, gpu_dir = tmp_path / "cpu", tmp_path / "gpu"
    cpu_dir.mkdir()
    gpu_dir.mkdir()
    write_launch(cpu_dir, name, source, kernel, launch)
    write_launch(gpu_dir, name, source, kernel, launch)
    gpu = run_gpu(gpu_dir)
    if launch.kind == "race":
        found = schedule_results(cpu_dir, launch)
        assert "error" not in gpu, gpu
        hw = outputs(gpu_dir, launch)[0]
        seen = np.stack([r[0] for r in found])
        member = np.isclose(seen, hw[None, :]).any(axis=0)
        _record(case, {"kind": "race", "gpu_in_cpu_set": bool(member.all()),
                       "outside": int((~member).sum()), "schedules": len(found)})  # fmt: skip
        assert member.all(), f"{int((~member).sum())} elements outside the cpu schedules' values"
        return
    cpu = run_cpu(cpu_dir)
    if _refused(cpu) or case in UNDEFINED:
        pytest.skip("the cpu backend refuses this kernel, or its result is undefined on a GPU")
    if launch.kind == "oob":
        _record(case, {"kind": "oob", "cpu": cpu.get("error"), "gpu": gpu.get("error", "ok")})
        assert cpu.get("error") == "OutOfBounds", cpu
        if "error" not in gpu:  # no fault inside the allocation's rounding: in-bounds values right
            for i, want in launch.want(launch.args).items():
                assert close(outputs(gpu_dir, launch)[i][: want.size], want)
        return
    assert "error" not in cpu and "error" not in gpu, (cpu, gpu)
    mine, hw = outputs(cpu_dir, launch), outputs(gpu_dir, launch)
    same = {i: close(mine[i], hw[i]) for i in launch.want(launch.args)}
    _record(case, {"kind": "exact", "same": all(same.values())})
    assert all(same.values()), f"cpu backend and GPU differ in arguments {same}"
