"""Run one gpu-backend launch described by a directory (spec.json, args.npz); used under
compute-sanitizer by harness.cuda.sanitizer:

    compute-sanitizer --tool racecheck python -m harness.cuda.sanitize_runner DIR

Writes DIR/out.npz: the Out/InOut arrays (and device arrays' contents) after the launch, and
`seconds` (CUDA events). Exit status 0 on a clean launch; a CUDA error is printed and exits 1.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from harness.cuda.gpu import GpuDeviceArray, GpuModule, Planned

__all__ = ["main", "run"]


def run(directory: Path, drv: Any = None) -> float:
    """Compile and launch the spec in `directory` once; write out.npz; return the kernel time."""
    spec = json.loads((directory / "spec.json").read_text(encoding="utf-8"))
    mod = GpuModule(
        spec["source"],
        spec["options"],
        spec["no_extern_c"],
        name=spec["name"],
        include_dirs=spec["include_dirs"],
        drv=drv,
    )
    fn = mod.get_function(spec["kernel"])
    plan: list[Planned] = []
    outputs: dict[str, Any] = {}
    with np.load(directory / "args.npz") as arrays:
        for i, a in enumerate(spec["args"]):
            value = arrays[f"a{i}"]
            if a.get("device"):
                d = GpuDeviceArray(value, mod._drv)
                plan.append(Planned("device", d))
                outputs[f"a{i}"] = d
            elif a["kind"] == "scalar":
                plan.append(Planned("scalar", value[()]))
            else:
                arr = np.ascontiguousarray(value)
                plan.append(Planned(a["kind"], arr))
                if a["kind"] != "in":
                    outputs[f"a{i}"] = arr
    block = tuple(spec["block"])
    grid = tuple(spec["grid"])
    seconds = mod._drv.launch(fn._fn, plan, block, grid, spec["shared"], True) or 0.0
    result = {k: (v.get() if isinstance(v, GpuDeviceArray) else v) for k, v in outputs.items()}
    np.savez(directory / "out.npz", seconds=np.float64(seconds), **result)
    return float(seconds)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m harness.cuda.sanitize_runner DIR", file=sys.stderr)
        return 2
    try:
        run(Path(args[0]))
    except Exception as e:  # reported to the parent through the exit status and stderr
        print(f"harness.cuda.sanitize_runner: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
