"""Instruction classes of SASS and PTX opcodes; the table is data: opcodes.toml beside this file."""

from __future__ import annotations

import tomllib
from pathlib import Path

__all__ = ["PTX_CLASSES", "SASS_CLASSES", "classify_ptx", "classify_sass"]

with (Path(__file__).resolve().parent / "opcodes.toml").open("rb") as _fh:
    _TABLE = tomllib.load(_fh)
SASS_CLASSES: dict[str, frozenset[str]] = {c: frozenset(ops) for c, ops in _TABLE["sass"].items()}
PTX_CLASSES: dict[str, frozenset[str]] = {c: frozenset(ops) for c, ops in _TABLE["ptx"].items()}
_SASS_CLASS_OF = {op: cls for cls, ops in SASS_CLASSES.items() for op in ops}
_PTX_CLASS_OF = {op: cls for cls, ops in PTX_CLASSES.items() for op in ops}
del _fh, _TABLE


def classify_sass(opcode: str) -> str:
    """Instruction class of a SASS opcode: global_memory, shared_memory, local_memory,
    constant_memory, texture, float, integer, conversion, move, tensor, sync, control, other."""
    return _SASS_CLASS_OF.get(opcode.split(".", 1)[0], "other")


def classify_ptx(opcode: str) -> str:
    """memory, sync, control, convert, move, compare, tensor, or arith for everything else."""
    return _PTX_CLASS_OF.get(opcode.split(".", 1)[0], "arith")
