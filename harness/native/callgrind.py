"""Deterministic instruction counts with valgrind's callgrind, for performance budgets.

Wall-clock time on a shared 2-core machine is noise; the number of instructions a program
executes (callgrind's `Ir`) repeats exactly from run to run, so a budget can be a hard number.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.native.build import BuildResult
from harness.toolchain import require_tool

__all__ = ["CallgrindError", "instruction_count", "parse_callgrind_totals"]

_TOTALS = re.compile(r"^(?:summary|totals):\s+(\d+)", re.M)


class CallgrindError(RuntimeError):
    """valgrind failed or the program under it exited non-zero."""


def parse_callgrind_totals(text: str) -> int:
    """The Ir total of a callgrind.out file (its `summary:`/`totals:` line)."""
    match = _TOTALS.search(text)
    if match is None:
        raise CallgrindError("no summary/totals line in callgrind output")
    return int(match.group(1))


def instruction_count(
    program: Sequence[str | os.PathLike[str]] | BuildResult | str | os.PathLike[str],
    *args: str,
    function: str | None = None,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    timeout: float = 120.0,
) -> int:
    """Instructions executed (Ir) by `program` under `valgrind --tool=callgrind`.

    `program` is an argv list, an executable path, or a BuildResult from build_executable;
    `args` are appended. With `function="kata_run"` only instructions executed inside that
    function (and its callees) count, which leaves out process start-up and the driver's setup;
    keep such a function from being inlined (`__attribute__((noinline))`).
    """
    if isinstance(program, BuildResult):
        argv = [str(program.path)]
    elif isinstance(program, (str, os.PathLike)):
        argv = [os.fspath(program)]
    else:
        argv = [os.fspath(a) for a in program]
    argv += list(args)
    valgrind = require_tool("valgrind")
    with tempfile.TemporaryDirectory(prefix="kata-callgrind-") as tmp:
        out = Path(tmp) / "callgrind.out"
        cmd = [str(valgrind), "--tool=callgrind", f"--callgrind-out-file={out}", "-q"]
        if function:
            cmd.append(f"--toggle-collect={function}")
        proc = subprocess.run(
            [*cmd, *argv],
            input=stdin,
            capture_output=True,
            text=True,
            env=dict(os.environ if env is None else env),
            timeout=timeout,
            check=False,
        )
        if proc.returncode != 0:
            tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
            raise CallgrindError(f"{Path(argv[0]).name} exited with {proc.returncode}\n{tail}")
        if not out.exists():
            raise CallgrindError(f"callgrind wrote no output\n{proc.stderr.strip()}")
        return parse_callgrind_totals(out.read_text(encoding="utf-8", errors="replace"))
