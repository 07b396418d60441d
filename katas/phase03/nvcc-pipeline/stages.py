"""Task `stages`: read `nvcc --dryrun` and name the compilation pipeline's steps.

YOUR FILE. Replace each ``todo(...)``; ``pytest katas/phase03/nvcc-pipeline`` says what is next.

`nvcc --dryrun ARGS file.cu` prints (on stderr) every command nvcc would run, one per line,
each starting with ``#$ ``. Lines ``#$ NAME=value`` only set variables for the commands after
them: they are not commands. Commands are shell-quoted (``"$CICC_PATH/cicc"``,
``"-I/usr/local/cuda/include"``): `shlex` unquotes them the way the shell would.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness import todo

__all__ = ["Stage", "fatbin_images", "parse_dryrun"]


@dataclass(frozen=True)
class Stage:
    """One command of the pipeline."""

    tool: str  # the executable's file name: "gcc", "cudafe++", "cicc", "ptxas", "fatbinary", ...
    args: tuple[str, ...]  # the arguments after it, unquoted
    output: str | None  # the file after -o, if any
    arch: str | None  # "compute_75" (cicc -arch compute_75), "sm_75" (ptxas -arch=sm_75,
    # nvlink --arch=sm_75), else None


def parse_dryrun(text: str) -> list[Stage]:
    """The commands of `nvcc --dryrun` output, in order (`rm` too); settings are not commands."""
    todo("stages.parse_dryrun")


def fatbin_images(stages: list[Stage]) -> list[tuple[str, int]]:
    """(kind, sm) of every image the first `fatbinary` embeds, in its order: each argument
    ``--image3=kind=elf,sm=75,file=...`` is one image. ("elf", 75) is SASS for sm_75, ("ptx", 75)
    is PTX for compute_75, which the driver can JIT-compile for newer GPUs. [] if no fatbinary."""
    todo("stages.fatbin_images")
