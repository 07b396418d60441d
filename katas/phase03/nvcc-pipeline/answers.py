"""Task `answers`: what changes between -O0 and -O3, and between sm_75 and sm_90 — measured.

YOUR FILE. `answers(source)` runs the toolchain on `source` (toolchain.py) with your own
parsers (stages, resources, sass, lineinfo) and reports the facts README.md's "answers" section
asks for, in exactly the shape it shows. The public tests ask about questions.cu; the hidden
tests ask about other sources, so compute the facts: typing in what you saw will not do.
"""

from __future__ import annotations

from pathlib import Path

from harness import todo

from .toolchain import dryrun, ptx, ptxas_log, sass_text  # noqa: F401  (what you run)

__all__ = ["answers"]


def answers(source: str | Path = "questions.cu") -> dict[str, object]:
    """The facts of README.md's "answers" section for the kernels of `source`."""
    todo("answers.answers")
