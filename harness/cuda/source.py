"""Reading CUDA source without a CUDA compiler: kernel names, what the cpu backend must rewrite.

The cpu backend compiles the learner's file as C++; only two things need a textual rewrite, both
on the same line so diagnostics keep their line numbers: `extern __shared__ T s[];` (dynamic shared
memory) becomes a pointer into the runtime's buffer, and nothing else.
"""

from __future__ import annotations

import re

__all__ = [
    "kernel_names",
    "kernel_params",
    "needs_fibers",
    "rewrite_for_cpu",
    "strip_comments",
    "template_kernel_names",
]

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"", re.S)
_KERNEL = re.compile(
    r"__global__\s+(?:(?:static|inline|extern\s+\"C\"|__launch_bounds__\s*\([^)]*\))\s*)*"
    r"void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_]\w*)\s*\("
)
_TEMPLATE_KERNEL = re.compile(
    r"template\s*<[^{;]*?>\s*__global__\s+(?:[\w\s]*?\s)?void\s+([A-Za-z_]\w*)\s*\("
)
_DYN_SHARED = re.compile(
    r"extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s*)?([A-Za-z_][\w\s:<>*]*?)\s+"
    r"(?:__align__\s*\(\s*\d+\s*\)\s*)?([A-Za-z_]\w*)\s*\[\s*\]\s*;"
)
# Anything that makes a thread wait for others needs a fiber per thread; without one, each
# thread is a plain call (much faster).
_SYNC = re.compile(
    r"\b(?:__syncthreads\w*|__syncwarp|__shfl\w*|__ballot_sync|__any_sync|__all_sync|"
    r"__activemask|__reduce_\w+_sync|__match_\w+|cooperative_groups)\b"
)


def strip_comments(source: str) -> str:
    """Comments (and string literals) blanked out, newlines kept, so line numbers stay."""

    def blank(m: re.Match[str]) -> str:
        text = m.group(0)
        if text.startswith('"'):
            return '"' + " " * (len(text) - 2) + '"' if len(text) >= 2 else text
        return re.sub(r"[^\n]", " ", text)

    return _COMMENT.sub(blank, source)


def kernel_names(source: str) -> list[str]:
    """The `__global__` functions the file defines or declares, in order, without templates."""
    code = strip_comments(source)
    templates = set(template_kernel_names(source))
    names: list[str] = []
    for m in _KERNEL.finditer(code):
        if m.group(1) not in names and m.group(1) not in templates:
            names.append(m.group(1))
    return names


def template_kernel_names(source: str) -> list[str]:
    return [m.group(1) for m in _TEMPLATE_KERNEL.finditer(strip_comments(source))]


def needs_fibers(source: str) -> bool:
    """True when some thread may wait for another: barriers or warp collectives in the file."""
    return _SYNC.search(strip_comments(source)) is not None


def rewrite_for_cpu(source: str) -> str:
    """The source the cpu backend compiles: dynamic shared memory declarations become pointers."""

    def dyn(m: re.Match[str]) -> str:
        ctype, name = m.group(1).strip(), m.group(2)
        return f"{ctype}* const {name} = reinterpret_cast<{ctype}*>(kata_dynamic_shared());"

    return _DYN_SHARED.sub(dyn, source)


def kernel_params(source: str, name: str) -> list[str] | None:
    """Parameter names of kernel `name` (for error messages), or None if they cannot be read."""
    code = strip_comments(source)
    m = re.search(
        r"\bvoid\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?" + re.escape(name) + r"\s*\(", code
    )
    if m is None:
        return None
    depth, i, start = 1, m.end(), m.end()
    while i < len(code) and depth:
        depth += {"(": 1, ")": -1}.get(code[i], 0)
        i += 1
    inner = code[start : i - 1]
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    names = []
    for part in parts:
        part = part.split("=")[0]
        ids = re.findall(r"[A-Za-z_]\w*", part)
        if not ids:
            return None
        names.append(ids[-1])
    return names
