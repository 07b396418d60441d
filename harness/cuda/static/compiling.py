"""nvcc and ptxas runs through the content-addressed artefact cache: PTX and cubins of a source."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from harness.native.build import BuildError, default_cache
from harness.native.cache import ArtefactCache, hash_parts
from harness.native.diagnostics import trim_compiler_output
from harness.toolchain import require_tool, tool_version_text

__all__ = [
    "FORMAT_VERSION",
    "CudaCompileError",
    "compile_cubin",
    "compile_ptx",
    "cubin_entry",
    "is_ptx",
    "read_source",
]

FORMAT_VERSION = "cuda-static-1"
_TIMEOUT_S = 300


class CudaCompileError(BuildError):
    """nvcc/ptxas rejected the code; `str(err)` is the trimmed diagnostics."""


def read_source(source: str | os.PathLike[str]) -> tuple[str, str]:
    """(text, file name) of a source given as a path or as CUDA/PTX text."""
    if isinstance(source, os.PathLike) or (
        isinstance(source, str) and "\n" not in source and source.endswith((".cu", ".ptx"))
    ):
        path = Path(source)
        return path.read_text(encoding="utf-8"), path.name
    return str(source), "kernel.cu"


def is_ptx(text: str) -> bool:
    return bool(re.search(r"^\s*\.version\s+\d", text, re.M)) and ".target" in text


def _check_arch(arch: str) -> str:
    if not re.fullmatch(r"(sm|compute)_\d+[af]?", arch):
        raise ValueError(f"arch must look like 'sm_80', not {arch!r}")
    return arch


def _compile(
    text: str,
    filename: str,
    *,
    tool: str,
    args: Sequence[str],
    out_name: str,
    cache: ArtefactCache | None,
) -> Path:
    """Run `tool args... filename -o out` in a cache entry; returns the entry directory."""
    exe = require_tool(tool)
    store = cache if cache is not None else default_cache()
    key = hash_parts(
        [FORMAT_VERSION, tool, str(exe), tool_version_text(tool), *args, filename, text]
    )

    def produce(tmp: Path) -> None:
        (tmp / filename).write_text(text, encoding="utf-8")
        cmd = [str(exe), *args, filename, "-o", out_name]
        proc = subprocess.run(
            cmd,
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=_TIMEOUT_S,
            env={**os.environ, "LC_ALL": "C"},
            check=False,
        )
        (tmp / "compile.log").write_text(proc.stdout + proc.stderr, encoding="utf-8")
        meta = {"ok": proc.returncode == 0, "returncode": proc.returncode, "command": cmd[1:]}
        (tmp / "meta.json").write_text(json.dumps(meta), encoding="utf-8")

    entry = store.get_or_create(key, produce, label=f"{tool} {filename} {' '.join(args)}")
    meta = json.loads((entry.path / "meta.json").read_text(encoding="utf-8"))
    if not meta["ok"]:
        log = (entry.path / "compile.log").read_text(encoding="utf-8")
        message = trim_compiler_output(log) or f"{tool} exited with {meta['returncode']}"
        raise CudaCompileError(message, log=log, command=[tool, *meta["command"]])
    return entry.path


def compile_ptx(
    source: str | os.PathLike[str],
    arch: str = "sm_75",
    options: Sequence[str] = (),
    *,
    cache: ArtefactCache | None = None,
) -> str:
    """PTX text of a CUDA source (path or text): `nvcc -ptx -arch=<arch>`."""
    text, name = read_source(source)
    arch = _check_arch(arch)
    entry = _compile(
        text, name, tool="nvcc", args=["-ptx", f"-arch={arch}", *options], out_name="out.ptx",
        cache=cache,
    )  # fmt: skip
    return (entry / "out.ptx").read_text(encoding="utf-8")


def compile_cubin(
    source: str | os.PathLike[str],
    arch: str = "sm_75",
    options: Sequence[str] = (),
    *,
    cache: ArtefactCache | None = None,
) -> Path:
    """Path of a cached cubin for a CUDA source, or for PTX text (assembled with ptxas).

    Built with `-Xptxas -v`; the resource report is kept beside it for ptxas_resources.
    """
    return cubin_entry(source, arch, options, cache) / "out.cubin"


def cubin_entry(
    source: str | os.PathLike[str],
    arch: str,
    options: Sequence[str],
    cache: ArtefactCache | None,
) -> Path:
    text, name = read_source(source)
    arch = _check_arch(arch).replace("compute_", "sm_")
    if is_ptx(text):
        if not name.endswith(".ptx"):
            name = "kernel.ptx"
        args = [f"-arch={arch}", "-v", *options]
        return _compile(text, name, tool="ptxas", args=args, out_name="out.cubin", cache=cache)
    args = ["-cubin", f"-arch={arch}", "-Xptxas", "-v", *options]
    return _compile(text, name, tool="nvcc", args=args, out_name="out.cubin", cache=cache)
