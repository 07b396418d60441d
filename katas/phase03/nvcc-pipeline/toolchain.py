"""Run the real CUDA toolchain on a source file and hand back its text output. GIVEN: read it.

Every function returns exactly what the tool prints, so your parsers see the real thing. Builds
go through the harness's content-addressed cache (``.kata/build-cache``): a source is compiled
once per set of options, ever, however many tests ask; ``cuobjdump``'s output is cached the
same way.

    dryrun("questions.cu", ["-c", "-arch=sm_75"])   # nvcc --dryrun: the stages, not run
    ptxas_log("questions.cu", "sm_90")               # nvcc -cubin -Xptxas -v: resource report
    sass_text("questions.cu", "sm_75", ["-Xptxas", "-O0"])  # cuobjdump --dump-sass of the cubin
    ptx("questions.cu", "sm_75", ["-lineinfo"])      # nvcc -ptx
"""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from harness.cuda.static import compile_cubin, compile_ptx, sass
from harness.native.cache import ArtefactCache, hash_parts
from harness.toolchain import require_tool, tool_version_text

__all__ = ["CACHE", "KATA_DIR", "dryrun", "ptx", "ptxas_log", "sass_text"]

KATA_DIR = Path(__file__).resolve().parent
# The harness's build cache (same directory as its default one), held here rather than created
# lazily inside the harness, whose module state the sandbox's tamper guard watches.
CACHE = ArtefactCache()
Source = str | os.PathLike[str]


def _path(source: Source) -> Path:
    """A source named relative to the kata directory ("questions.cu") or by any path."""
    path = Path(source)
    if not path.is_absolute() and not path.exists():
        path = KATA_DIR / path
    if not path.is_file():
        raise FileNotFoundError(f"no CUDA source {source!s} (looked in {path.parent})")
    return path


def dryrun(source: Source, args: Sequence[str] = ("-c",)) -> str:
    """What `nvcc --dryrun ARGS source` prints (on stderr): one `#$ ` line per step."""
    return _dryrun(str(_path(source)), tuple(args))


@functools.cache
def _dryrun(path: str, args: tuple[str, ...]) -> str:
    nvcc = require_tool("nvcc")
    cmd = [str(nvcc), "--dryrun", *args, Path(path).name]
    # Run where the source is, so the paths it prints are short; nothing is written.
    proc = subprocess.run(
        cmd, cwd=Path(path).parent, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "LC_ALL": "C"},
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr.strip()}")
    return proc.stderr


def ptx(source: Source, arch: str = "sm_75", options: Sequence[str] = ()) -> str:
    """PTX text: `nvcc -ptx -arch=ARCH OPTIONS source`."""
    return compile_ptx(_path(source), arch, list(options), cache=CACHE)


def ptxas_log(source: Source, arch: str = "sm_75", options: Sequence[str] = ()) -> str:
    """The `ptxas info` report of `nvcc -cubin -arch=ARCH -Xptxas -v OPTIONS source`."""
    cubin = compile_cubin(_path(source), arch, list(options), cache=CACHE)
    return (cubin.parent / "compile.log").read_text(encoding="utf-8")


def sass_text(source: Source, arch: str = "sm_75", options: Sequence[str] = ()) -> str:
    """`cuobjdump --dump-sass` of the cubin that `nvcc -cubin -arch=ARCH OPTIONS` builds."""
    return _sass(str(compile_cubin(_path(source), arch, list(options), cache=CACHE)))


@functools.cache
def _sass(cubin: str) -> str:
    # Kept in the build cache too, keyed by the cubin's bytes: every test process reads it.
    data = Path(cubin).read_bytes()
    key = hash_parts(["nvcc-pipeline-sass", tool_version_text("cuobjdump"), data.hex()])

    def produce(tmp: Path) -> None:
        (tmp / "sass.txt").write_text(sass(Path(cubin)), encoding="utf-8")

    entry = CACHE.get_or_create(key, produce, label=f"cuobjdump --dump-sass {Path(cubin).name}")
    return (entry.path / "sass.txt").read_text(encoding="utf-8")
