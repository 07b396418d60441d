"""Task `stages`: read `nvcc --dryrun` and name the compilation pipeline's steps.

Each step nvcc would run is one line ``#$ <shell command>``; lines ``#$ NAME=value`` only set
variables for the later ones. Commands are shell-quoted ("$CICC_PATH/cicc", "-I/usr/...").
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import PurePosixPath

__all__ = ["Stage", "fatbin_images", "parse_dryrun"]


@dataclass(frozen=True)
class Stage:
    """One command of the pipeline."""

    tool: str  # the executable's file name: "gcc", "cudafe++", "cicc", "ptxas", "fatbinary", ...
    args: tuple[str, ...]  # the arguments after it, unquoted
    output: str | None  # the file after -o, if any
    arch: str | None  # "compute_75" (cicc), "sm_75" (ptxas, nvlink), else None


_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_ARCH = re.compile(r"^--?arch(?:=(.+))?$")


def parse_dryrun(text: str) -> list[Stage]:
    """The commands of `nvcc --dryrun` output, in order; variable settings are not commands."""
    stages: list[Stage] = []
    for line in text.splitlines():
        if not line.startswith("#$ "):
            continue
        command = line[3:].strip()
        if not command or _ASSIGNMENT.match(command):
            continue
        words = shlex.split(command)
        tool, args = PurePosixPath(words[0]).name, tuple(words[1:])
        stages.append(Stage(tool, args, _option(args, "-o"), _arch(args)))
    return stages


def _option(args: tuple[str, ...], flag: str) -> str | None:
    for i, arg in enumerate(args[:-1]):
        if arg == flag:
            return args[i + 1]
    return None


def _arch(args: tuple[str, ...]) -> str | None:
    for i, arg in enumerate(args):
        m = _ARCH.match(arg)
        if m:
            return m.group(1) or (args[i + 1] if i + 1 < len(args) else None)
    return None


def fatbin_images(stages: list[Stage]) -> list[tuple[str, int]]:
    """(kind, sm) of every image the first `fatbinary` embeds: ("elf", 75) is SASS for sm_75,
    ("ptx", 75) is PTX for compute_75 that the driver can JIT-compile for newer GPUs."""
    for stage in stages:
        if stage.tool != "fatbinary":
            continue
        images = []
        for arg in stage.args:
            if arg.startswith("--image3="):
                fields = dict(f.split("=", 1) for f in arg[len("--image3=") :].split(","))
                images.append((fields["kind"], int(fields["sm"])))
        return images
    return []
