"""What a run tells a learner to do next must work as printed.

- :func:`command`: the `kata` (or `pytest`) command as this shell can run it. After the README's
  setup without activating the virtual environment, plain ``kata`` is "command not found" (or
  another installation's); the summary then prints ``.venv/bin/kata``.
- :func:`missing_path`: ``pytest katas/phase09`` where there is no phase09 names the phases (or,
  for a missing kata, the katas of its phase) that are there, instead of pytest's bare
  "file or directory not found".
- :func:`narrowed`: whether the paths of a run name less than whole katas, so the summary can
  say that it counts only the tests that ran (``kata progress`` keeps the others).
- :func:`tasks_without_tests`: a task no collected test belongs to cannot be earned; the run
  warns about it (``kata verify`` fails on it).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

from .manifest import MANIFEST_NAME, TRACKS, Manifest, Task, find_kata_dir

_PHASE_DIR = re.compile(r"phase\d\d|" + "|".join(map(re.escape, TRACKS)))


def command(name: str = "kata") -> str:
    """How to run this installation's console script `name` from the current directory."""
    bindir = Path(sys.executable).parent  # not resolved: a venv's python is a symlink
    script = bindir / name
    if not script.is_file():
        module = {"kata": "harness.cli", "pytest": "pytest"}[name]
        return f"{_shortest(Path(sys.executable))} -m {module}"
    found = shutil.which(name)
    if found and _same(Path(found), script):
        return name
    return _shortest(script)


def _same(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False


def _shortest(path: Path) -> str:
    """`path` relative to the current directory when that is shorter, else absolute."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return str(path)
    if "/" not in rel and os.sep not in rel:
        rel = os.path.join(".", rel)  # a bare name would be looked up on PATH
    return rel if len(rel) < len(str(path)) else str(path)


def phases(katas: Path) -> dict[str, list[str]]:
    """{"phase01": ["memory-hierarchy", "simt"], ...}: the phases (and tracks: "system-design")
    under `katas` with a kata."""
    out: dict[str, list[str]] = {}
    if not katas.is_dir():
        return out
    for d in sorted(katas.iterdir()):
        if d.is_dir() and _PHASE_DIR.fullmatch(d.name):
            names = sorted(k.name for k in d.iterdir() if (k / MANIFEST_NAME).is_file())
            if names:
                out[d.name] = names
    return out


def missing_path(root: Path, invocation_dir: Path, args: list[str]) -> str | None:
    """A sentence for the first argument naming a phase or kata under katas/ that is not there."""
    katas = root / "katas"
    for arg in args:
        path = Path(os.path.normpath(invocation_dir / arg.split("::", 1)[0]))
        if path.exists():
            continue
        try:
            parts = path.relative_to(katas).parts
        except ValueError:
            continue  # not under katas/: pytest's own message is right
        if not parts:
            continue
        have = phases(katas)
        if parts[0] not in have:
            listing = "; ".join(f"{p} ({', '.join(k)})" for p, k in have.items()) or "none"
            return f"{arg}: katas/{parts[0]} is not there. The phases here are: {listing}."
        if len(parts) >= 2 and parts[1] not in have[parts[0]]:
            return (
                f"{arg}: katas/{parts[0]} has no kata {parts[1]}. "
                f"Its katas are: {', '.join(have[parts[0]])}."
            )
    return None


def narrowed(invocation_dir: Path, args: list[str]) -> bool:
    """Whether `args` name part of a kata (a test file, a test id, its tests/ folder)."""
    for arg in args:
        if "::" in arg:
            return True
        path = Path(os.path.normpath(invocation_dir / arg))
        kata_dir = find_kata_dir(path)
        if kata_dir is not None and path.resolve() != kata_dir:
            return True
    return False


PARTIAL_NOTE = (
    "a partial run: tasks above count only the tests that ran; "
    "`{kata} progress` keeps the others' latest results"
)


def kata_test_files(kata_dir: Path, hidden_dir: Path | None) -> set[Path]:
    """The kata's test files on disk: public ones, and hidden ones when `hidden_dir` is given."""
    files: set[Path] = set()
    for d in (kata_dir, hidden_dir):
        if d is not None and d.is_dir():
            files |= {p for p in d.rglob("test_*.py") if "__pycache__" not in p.parts}
    return files


def tasks_without_tests(manifest: Manifest, tests: list[tuple[str, str]]) -> list[Task]:
    """The tasks that none of `tests` ((file name, test name) pairs) belongs to."""
    matched = {t.id for file, name in tests if (t := manifest.task_for(file, name)) is not None}
    return [t for t in manifest.tasks if t.id not in matched]


def no_test_warning(manifest: Manifest, task: Task) -> str:
    return (
        f"kata {manifest.id}: task {task.id} matches no test (tests = "
        f"{', '.join(task.tests)}), so its {task.points} points cannot be earned"
    )
