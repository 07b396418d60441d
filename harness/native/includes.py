"""What a native source may include: files the build can see by name, not paths out of it.

The search path of a build is the implementation's directories (a shortcut's, the reference's,
the kata's), so `#include "allocator.h"` always finds what it should. A path that climbs out
(`../../scheduler.cpp`), an absolute one, a computed one (`#include MACRO`,
`include!(concat!(...))`), `#include_next` (which reaches the next directory on the search path:
the reference's copy of the same file) or a `#[path]` module would let a submission compile the
reference solution as its own; the build refuses them with a sentence.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

SOURCE_SUFFIXES = frozenset({".c", ".cc", ".cpp", ".cxx", ".cu", ".rs"})

_C_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(include_next|include|import|embed)\b(.*)$", re.M)
_C_TARGET = re.compile(r'^[ \t]*(?:"([^"\n]*)"|<([^>\n]*)>)')
_RS_INCLUDE = re.compile(r"\binclude(?:_str|_bytes)?![ \t\n]*[(\[{][ \t\n]*(\"[^\"]*\")?")
_RS_PATH_ATTR = re.compile(r"#!?\[[ \t\n]*path\b")


def _refuse_target(target: str) -> str | None:
    if target.startswith("/") or "\\" in target:
        return "an absolute path"
    if ".." in Path(target).parts:
        return "a path out of its directory (`..`)"
    if Path(target).suffix in SOURCE_SUFFIXES:
        return "another source file (only headers are included)"
    return None


def problems(path: Path) -> list[str]:
    """Why `path` may not be built as it is: one sentence per refused include (empty when fine)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    found: list[str] = []

    def refuse(pos: int, what: str, why: str) -> None:
        line = text.count("\n", 0, pos) + 1
        found.append(f"{path.name}:{line}: `{what.strip()}` includes {why}")

    if path.suffix == ".rs":
        for m in _RS_INCLUDE.finditer(text):
            literal = m.group(1)
            why = "a computed path" if literal is None else _refuse_target(literal[1:-1])
            if why:
                refuse(m.start(), m.group(0), why)
        for m in _RS_PATH_ATTR.finditer(text):
            refuse(m.start(), m.group(0), "a module from a path of its own choosing")
        return found
    for m in _C_DIRECTIVE.finditer(text):
        kind, rest = m.group(1), m.group(2)
        if kind != "include":
            refuse(m.start(), m.group(0), f"with #{kind}")
            continue
        t = _C_TARGET.match(rest)
        why = "a computed path" if t is None else _refuse_target(t.group(1) or t.group(2) or "")
        if why:
            refuse(m.start(), m.group(0), why)
    return found


def refusal(paths: Iterable[Path]) -> str | None:
    """The build's refusal naming every refused include of `paths`, or None when all are fine."""
    found = [p for path in paths for p in problems(Path(path))]
    if not found:
        return None
    return (
        "this build includes files from outside the kata; include the kata's headers by name "
        "only:\n" + "\n".join(found)
    )
