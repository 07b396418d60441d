"""Turn compiler and sanitizer output into short learner feedback.

A 300-line template error dump teaches nothing; the first few errors with their source line and
caret usually do. Both trimmers keep the order the tool printed and say how much they left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["relativise", "trim_compiler_output", "trim_sanitizer_report"]

# gcc/clang: "file.c:3:14: error: ..."; nvcc's front end: "file.cu(3): error: ...".
_HEAD = re.compile(
    r"^(?P<loc>[^\s:][^:]*:\d+(?::\d+)?|[^\s(][^(]*\(\d+\)): "
    r"(?P<kind>fatal error|catastrophic error|error|warning|note|remark)(?: #[\w-]+)?: (?P<msg>.*)$"
)
_ERROR_KINDS = ("error", "fatal error", "catastrophic error")
_CONTEXT = re.compile(
    r"^(In file included from |\s+from |[^\s:][^:]*: (In|At) (function|member function|"
    r"instantiation|global scope|top level|constructor|destructor|static member)|"
    r"[^\s:][^:]*: In (instantiation|substitution) of )"
)
_LINKER = re.compile(r"undefined reference|multiple definition|cannot find -l|ld returned")
_TMP_OBJECT = re.compile(r"/tmp/[^\s:]+\.o")


def relativise(text: str, root: Path | None) -> str:
    """Show paths under `root` relative to it (the kata directory)."""
    if root is None:
        return text
    prefix = str(Path(root).resolve()).rstrip("/") + "/"
    return text.replace(prefix, "")


@dataclass
class _Diag:
    kind: str
    lines: list[str] = field(default_factory=list)
    context: list[str] = field(default_factory=list)
    notes: list[list[str]] = field(default_factory=list)


def _parse(text: str) -> tuple[list[_Diag], list[str]]:
    diags: list[_Diag] = []
    misc: list[str] = []
    context: list[str] = []
    current: list[str] | None = None
    for line in text.splitlines():
        head = _HEAD.match(line)
        if head:
            kind = head.group("kind")
            if kind == "note" and diags:
                diags[-1].notes.append([line])
                current = diags[-1].notes[-1]
            else:
                diags.append(_Diag(kind=kind, lines=[line], context=context))
                current = diags[-1].lines
            context = []
        elif _CONTEXT.match(line):
            context.append(line)
            current = None
        elif line.startswith(" ") and current is not None:
            current.append(line)  # source line, caret, fix-it hint
        elif line.strip():
            misc.append(line)
            current = None
    return diags, misc


def trim_compiler_output(
    text: str,
    *,
    root: Path | None = None,
    max_errors: int = 5,
    max_lines: int = 25,
) -> str:
    """The first `max_errors` errors (with their source/caret lines and notes), at most
    `max_lines` lines, then "... N more errors". Linker errors and other failures fall back to
    their relevant lines."""
    text = relativise(text, root)
    diags, misc = _parse(text)
    errors = [d for d in diags if d.kind in _ERROR_KINDS]
    out: list[str] = []
    if errors:
        shown = 0
        last_context: list[str] = []
        for diag in errors:
            block: list[str] = []
            if diag.context and diag.context != last_context:
                block.extend(diag.context)
            block.extend(diag.lines)
            for note in diag.notes[:2]:
                block.extend(note)
            if shown >= max_errors or len(out) + len(block) > max_lines:
                if shown == 0:  # always show something of the first error
                    out.extend(block[:max_lines])
                    shown = 1
                break
            out.extend(block)
            last_context = diag.context or last_context
            shown += 1
        remaining = len(errors) - shown
        if remaining > 0:
            out.append(f"... {remaining} more error{'s' if remaining != 1 else ''}")
        return "\n".join(out)
    linker = [_TMP_OBJECT.sub("<object>", ln) for ln in misc if _LINKER.search(ln)]
    if linker:
        body = [ln for ln in linker if "ld returned" not in ln] or linker
        extra = len(body) - max_lines
        out = body[:max_lines]
        if extra > 0:
            out.append(f"... {extra} more lines")
        return "\n".join(out)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) > max_lines:
        return "\n".join([f"... {len(lines) - max_lines} earlier lines", *lines[-max_lines:]])
    return "\n".join(lines)


_SAN_ERROR = re.compile(
    r"(ERROR: (Address|Leak|Thread|Memory)Sanitizer|runtime error:|SUMMARY: \w+Sanitizer)"
)
_FRAME = re.compile(r"^\s+#(\d+) 0x[0-9a-f]+ in (?P<where>.*)$")
# Frames of the interpreter and libffi: how the test called in, not where the bug is.
_NOISE_FRAME = re.compile(
    r"(libpython|_ctypes|libffi|_cffi_backend|python3|\(<unknown module>\)|"
    r"\b(Objects|Python|Modules|Include|Parser|Programs)/|\bffi_call)"
)


def trim_sanitizer_report(
    text: str, *, root: Path | None = None, max_frames: int = 4, max_lines: int = 25
) -> str:
    """The sanitizer's headline, the first frames in learner code, and its SUMMARY line.

    Frames inside the Python interpreter or libffi (how the test called in) are dropped.
    """
    text = relativise(text, root)
    lines = text.splitlines()
    out: list[str] = []
    frames_shown = 0
    in_report = False
    for line in lines:
        if _SAN_ERROR.search(line):
            in_report = True
            out.append(line.strip())
            frames_shown = 0
            continue
        if not in_report:
            continue
        frame = _FRAME.match(line)
        if frame:
            if _NOISE_FRAME.search(frame.group("where")):
                frames_shown = max_frames  # the rest of this stack is the interpreter's
            elif frames_shown < max_frames:
                out.append("    " + line.strip())
                frames_shown += 1
            continue
        if re.match(r"^0x[0-9a-f]+ is located", line) or line.startswith(
            ("READ of size", "WRITE of size", "freed by thread", "previously allocated by")
        ):
            out.append(line.strip())
            frames_shown = 0
    if not out:
        tail = [ln for ln in lines if ln.strip()][-max_lines:]
        return "\n".join(tail)
    deduped: list[str] = []
    for line in out:
        if not deduped or deduped[-1] != line:
            deduped.append(line)
    if len(deduped) > max_lines:
        deduped = [*deduped[: max_lines - 1], f"... {len(deduped) - max_lines + 1} more lines"]
    return "\n".join(deduped)
