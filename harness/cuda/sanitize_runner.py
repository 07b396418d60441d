"""Run one launch described by a directory (spec.json, args.npz), in a process of its own; used
under compute-sanitizer by harness.cuda.sanitizer, and by the differential test (cpu backend vs
hardware, harness/tests/test_cuda_differential.py):

    compute-sanitizer --tool racecheck python -m harness.cuda.sanitize_runner DIR
    python -m harness.cuda.sanitize_runner --backend cpu [--schedules all] DIR

Writes DIR/out.npz: the Out/InOut arrays (and device arrays' contents) after the launch, and
`seconds`; then prints "harness.cuda.sanitize_runner: launched KERNEL" (the sanitizer's caller
requires it: a sanitizer that never ran the program must not look clean). Exit status 0 on a
clean launch; a harness.cuda error is written to DIR/error.json (its class, message, kernel,
block, thread, address) and exits 3; anything else is printed and exits 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from harness.cuda.sanitizer import SENTINEL

__all__ = ["main", "run"]


def _arguments(spec: dict, arrays: Any, device: Any) -> tuple[list[Any], dict[str, Any], list]:
    """(launch arguments, outputs to save, kinds) from the spec; `device(value)` makes a device
    array of the backend."""
    args: list[Any] = []
    outputs: dict[str, Any] = {}
    for i, a in enumerate(spec["args"]):
        value = arrays[f"a{i}"]
        if a.get("device"):
            d = device(value)
            args.append(d)
            outputs[f"a{i}"] = d
        elif a["kind"] == "scalar":
            args.append(value[()])
        else:
            arr = np.ascontiguousarray(value)
            args.append(arr)
            if a["kind"] != "in":
                outputs[f"a{i}"] = arr
    return args, outputs, [a.get("kind") for a in spec["args"]]


def run(directory: Path, drv: Any = None, backend: str = "gpu", schedules: str = "") -> float:
    """Compile and launch the spec in `directory` once; write out.npz; return the kernel time."""
    spec = json.loads((directory / "spec.json").read_text(encoding="utf-8"))
    with np.load(directory / "args.npz") as arrays:
        if backend == "cpu":
            seconds, outputs = _run_cpu(spec, arrays, schedules)
        else:
            seconds, outputs = _run_gpu(spec, arrays, drv)
    result = {k: (v.get() if hasattr(v, "get") else v) for k, v in outputs.items()}
    np.savez(directory / "out.npz", seconds=np.float64(seconds), **result)
    print(f"{SENTINEL}{spec['kernel']}", flush=True)
    return float(seconds)


def _run_gpu(spec: dict, arrays: Any, drv: Any) -> tuple[float, dict[str, Any]]:
    from harness.cuda.gpu import GpuDeviceArray, GpuModule, Planned

    mod = GpuModule(
        spec["source"],
        spec["options"],
        spec["no_extern_c"],
        name=spec["name"],
        include_dirs=spec["include_dirs"],
        drv=drv,
    )
    fn = mod.get_function(spec["kernel"])
    args, outputs, kinds = _arguments(spec, arrays, lambda v: GpuDeviceArray(v, mod._drv))
    plan = [
        Planned("device", a)
        if isinstance(a, GpuDeviceArray)
        else Planned("scalar", a)
        if kind == "scalar"
        else Planned(kind, a)
        for a, kind in zip(args, kinds, strict=True)
    ]
    block, grid = tuple(spec["block"]), tuple(spec["grid"])
    seconds = mod._drv.launch(fn._fn, plan, block, grid, spec["shared"], True) or 0.0
    return float(seconds), outputs


def _run_cpu(spec: dict, arrays: Any, schedules: str) -> tuple[float, dict[str, Any]]:
    import harness.cuda as hc
    from harness.cuda.cpu.backend import CpuDeviceArray, default_schedules

    options = [o for o in spec["options"] if o != "-lineinfo"]
    mod = hc.SourceModule(
        spec["source"],
        options,
        spec["no_extern_c"],
        backend="cpu",
        name=spec["name"],
        include_dirs=spec["include_dirs"],
    )
    fn = mod.get_function(spec["kernel"])
    args, outputs, kinds = _arguments(spec, arrays, CpuDeviceArray.from_array)
    wrapped = [
        {"in": hc.In, "out": hc.Out, "inout": hc.InOut}[kind](a)
        if kind in ("in", "out", "inout") and not isinstance(a, CpuDeviceArray)
        else a
        for a, kind in zip(args, kinds, strict=True)
    ]
    chosen = (
        default_schedules() if schedules == "all" else tuple(filter(None, schedules.split(",")))
    )
    seconds = fn(
        *wrapped,
        block=tuple(spec["block"]),
        grid=tuple(spec["grid"]),
        shared=spec["shared"],
        time_kernel=True,
        schedules=chosen or None,
    )
    return float(seconds or 0.0), outputs


def _error_record(e: BaseException) -> dict[str, Any]:
    return {
        "type": type(e).__name__,
        "message": str(e),
        "kernel": getattr(e, "kernel", None),
        "block": getattr(e, "block", None),
        "thread": getattr(e, "thread", None),
        "address": getattr(e, "address", None),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m harness.cuda.sanitize_runner")
    p.add_argument("--backend", choices=("cpu", "gpu"), default="gpu")
    p.add_argument("--schedules", default="", help="cpu backend: schedules to compare, or all")
    p.add_argument("directory")
    try:
        a = p.parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as e:
        return int(e.code or 0)
    from harness.cuda.errors import CudaError

    directory = Path(a.directory)
    try:
        run(directory, backend=a.backend, schedules=a.schedules)
    except CudaError as e:  # the launch's own error: the caller compares it
        (directory / "error.json").write_text(json.dumps(_error_record(e)), encoding="utf-8")
        print(f"harness.cuda.sanitize_runner: {type(e).__name__}: {e}", file=sys.stderr)
        return 3
    except Exception as e:  # reported to the parent through the exit status and stderr
        print(f"harness.cuda.sanitize_runner: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
