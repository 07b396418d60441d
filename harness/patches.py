"""Unified diffs against a kata's reference: parsed, applied strictly, written, materialised.

A shortcut (``solutions/phaseNN/<kata>/shortcuts/<name>/shortcut.patch``) and a mutant are the
reference plus a patch. :func:`apply` returns the patched files of a patch whose paths are
relative to the reference directory (``solutions/phaseNN/<kata>``); :func:`materialise` writes
them into a content-addressed directory of the build cache, which the loader puts first on the
implementation's search path (the reference, then the kata, come after it), so imports, native
builds (``#include`` by name through the include path), the oracle fence and hang detection
see an ordinary implementation directory. :func:`make_patch` writes the patch of edited files.

Parsing is :mod:`unidiff`'s; applying is here because no library applies a diff in memory
byte for byte (whatthepatch drops line endings and the final newline; patch-ng patches files on
disk and searches with fuzz): each hunk's context and removed lines must match the reference
exactly, at its line or, like ``patch`` and ``git apply``, shifted by whole lines; no fuzz. A
hunk that does not apply raises :class:`PatchError` naming the file, the hunk header and the
first line that differs.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from harness.native.cache import ArtefactCache, cache_root, hash_parts

if TYPE_CHECKING:
    import unidiff

PATCHED = "patched"  # <build cache>/patched/<key[:2]>/<key>/: materialised implementations
NO_NEWLINE = "\\ No newline at end of file\n"
DEV_NULL = "/dev/null"
_KEY_VERSION = "patched-v1"
_NO_NEWLINE_LINE, _AFTER_HUNK = "\\", ""  # unidiff's line types for "\ No newline", a blank


class PatchError(ValueError):
    """A patch is malformed or does not apply; the message names the file and the hunk."""


@dataclass(frozen=True)
class FilePatch:
    """The hunks of one file: `path` relative to the reference directory; `new` when the
    patch creates it."""

    path: str
    new: bool
    hunks: tuple[_Hunk, ...]


@dataclass(frozen=True)
class _Hunk:
    header: str  # "@@ -12,7 +12,8 @@", as a reader finds it in the patch
    start: int  # 0-based index of the reference line where `old` begins
    old: tuple[str, ...]  # context and removed lines, with their line endings
    new: tuple[str, ...]  # context and added lines


def lines(text: str) -> list[str]:
    """`text` split after each "\\n" only (str.splitlines also splits at \\f, \\x1c, ...)."""
    return re.findall(r"[^\n]*\n|[^\n]+\Z", text)


def parse(patch_text: str) -> list[FilePatch]:
    """The files of a unified diff (``--- a/x`` / ``+++ b/x`` headers; a/ b/ prefixes optional)."""
    # Imported here, not at start-up; and PatchSet and its error come from one module object
    # (a cached attribute of an earlier import would not catch a re-imported module's error).
    import unidiff

    try:
        patch_set = unidiff.PatchSet(lines(patch_text))
    except unidiff.UnidiffParseError as e:
        raise PatchError(f"not a unified diff: {e}") from None
    if not patch_set:
        raise PatchError("the patch changes no file (no ---/+++ headers)")
    out: list[FilePatch] = []
    for pf in patch_set:
        # By the headers only: unidiff also calls a file emptied (or an empty one filled) so.
        new = pf.source_file == DEV_NULL
        if pf.target_file == DEV_NULL:
            raise PatchError(f"{pf.path}: the patch deletes it; a patch may change or add files")
        if pf.is_rename or (not new and _strip(pf.source_file) != _strip(pf.target_file)):
            raise PatchError(f"{pf.path}: the patch renames it; a patch may change or add files")
        path = _checked_path(_strip(pf.target_file))
        if any(f.path == path for f in out):
            raise PatchError(f"{path}: the patch changes it twice; one section per file")
        if not len(pf):
            raise PatchError(f"{path}: no hunk")
        out.append(FilePatch(path, new, tuple(_hunk(h) for h in pf)))
    return out


def _strip(name: str) -> str:
    return name[2:] if name[:2] in ("a/", "b/") else name


def _checked_path(path: str) -> str:
    p = PurePosixPath(path)
    if p.is_absolute() or ".." in p.parts or not p.parts or "\\" in path:
        raise PatchError(f"{path}: a patch names files relative to the reference directory")
    return p.as_posix()


def _hunk(h: unidiff.Hunk) -> _Hunk:
    old: list[str] = []
    new: list[str] = []
    last: list[list[str]] = []  # the lists the previous line went to ("\ No newline" edits them)
    for line in h:
        kind, value = line.line_type, line.value
        if kind == _NO_NEWLINE_LINE:
            for side in last:
                if side and side[-1].endswith("\n"):
                    side[-1] = side[-1][:-1]
            continue
        if kind == _AFTER_HUNK:  # a blank line after the hunk's last line: not part of it
            continue
        last = {"-": [old], "+": [new]}.get(kind, [old, new])
        for side in last:
            side.append(value)
    header = f"@@ -{h.source_start},{h.source_length} +{h.target_start},{h.target_length} @@"
    start = h.source_start - 1 if h.source_length else h.source_start
    return _Hunk(header, max(start, 0), tuple(old), tuple(new))


def touched(patch_text: str) -> list[str]:
    """The paths a patch changes or adds, in its order."""
    return [f.path for f in parse(patch_text)]


def apply_file(fp: FilePatch, reference: str | None) -> str:
    """`reference` (None: the file does not exist) with the hunks of `fp` applied."""
    if fp.new and reference is not None:
        raise PatchError(f"{fp.path}: the patch adds it, but the reference has it already")
    if not fp.new and reference is None:
        raise PatchError(f"{fp.path}: the patch changes it, but the reference has no such file")
    ref = lines(reference or "")
    out: list[str] = []
    pos = 0  # the next reference line not yet copied
    for h in fp.hunks:
        at = _find(ref, h, pos)
        if at is None:
            raise PatchError(_mismatch(fp.path, ref, h))
        out += ref[pos:at]
        out += h.new
        pos = at + len(h.old)
    out += ref[pos:]
    return "".join(out)


def _find(ref: list[str], h: _Hunk, pos: int) -> int | None:
    """Where the hunk's old lines are in `ref` at or after `pos`: at its line, or the nearest
    whole-line shift of it (as `patch` does, without fuzz)."""
    n = len(h.old)
    candidates = sorted(range(pos, len(ref) - n + 1), key=lambda at: (abs(at - h.start), at))
    return next((at for at in candidates if tuple(ref[at : at + n]) == h.old), None)


def _mismatch(path: str, ref: list[str], h: _Hunk) -> str:
    for i, want in enumerate(h.old):
        j = h.start + i
        if j >= len(ref):
            return (f"{path}: hunk {h.header} does not apply: the reference ends at line "
                    f"{len(ref)}, the patch expects line {j + 1}: {_show(want)}")  # fmt: skip
        if ref[j] != want:
            return (f"{path}: hunk {h.header} does not apply: line {j + 1} of the reference is "
                    f"{_show(ref[j])}, the patch expects {_show(want)}")  # fmt: skip
    return f"{path}: hunk {h.header} does not apply: its lines overlap the hunk before it"


def _show(line: str) -> str:
    return repr(line[:-1] if line.endswith("\n") else line + " (no newline at end of file)")


def apply(base: Path, patch_text: str) -> dict[str, bytes]:
    """The files `patch_text` changes or adds, patched: path (relative to `base`) -> bytes.
    PatchError when the patch is malformed or a hunk does not apply."""
    out: dict[str, bytes] = {}
    for fp in parse(patch_text):
        target = Path(base) / fp.path
        try:
            reference = target.read_bytes().decode("utf-8") if target.is_file() else None
        except UnicodeDecodeError:
            raise PatchError(f"{fp.path}: the reference is not UTF-8 text") from None
        out[fp.path] = apply_file(fp, reference).encode("utf-8")
    return out


def patched_root() -> Path:
    """Where materialised implementations live (the oracle fence guards it as it guards
    solutions/: they are mostly the reference)."""
    return cache_root() / PATCHED


def materialise(base: Path, patch_text: str, *, root: Path | None = None) -> Path:
    """A directory holding the files `patch_text` changes or adds, patched (and nothing else),
    content-addressed under :func:`patched_root` (or `root`): put it before `base` on a search
    path. Safe across processes: the directory appears complete or not at all."""
    files = apply(base, patch_text)
    key = hash_parts([_KEY_VERSION, *(part for p in sorted(files) for part in (p, files[p]))])

    def produce(tmp: Path) -> None:
        for rel, data in files.items():
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / rel).write_bytes(data)

    cache = ArtefactCache(Path(root) if root is not None else patched_root())
    return cache.get_or_create(key, produce, label=f"patched {Path(base).name}").path


def file_diff(path: str, old: str | None, new: str, context: int = 3) -> str:
    """The unified diff of one file (`old` None: a new file), "\\ No newline" marked."""
    a = lines(old or "")
    b = lines(new)
    if a == b and old is not None:
        return ""
    out = []
    head = difflib.unified_diff(
        a, b, DEV_NULL if old is None else f"a/{path}", f"b/{path}", n=context, lineterm="\n"
    )
    for line in head:
        if line.endswith("\n"):
            out.append(line)
        else:
            out += [line + "\n", NO_NEWLINE]
    return "".join(out)


def make_patch(changes: Mapping[str, tuple[str | None, str]], context: int = 3) -> str:
    """The patch of `changes`: path -> (reference text or None when new, edited text), in
    sorted path order; files left as they were are not in it."""
    return "".join(file_diff(p, *changes[p], context=context) for p in sorted(changes))


__all__ = [
    "NO_NEWLINE",
    "PATCHED",
    "FilePatch",
    "PatchError",
    "apply",
    "apply_file",
    "file_diff",
    "lines",
    "make_patch",
    "materialise",
    "parse",
    "patched_root",
    "touched",
]
