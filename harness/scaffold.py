"""`kata new PHASE NAME`: a complete, verifiable kata skeleton for instructors.

The scaffold passes `kata verify` as generated (its stub is not started, its reference passes, its
two shortcuts, patches against the reference, are caught by a hidden gate), so an instructor starts from green and replaces the
example task, its gate and its shortcuts with the real ones.
"""

from __future__ import annotations

import re
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined

from .manifest import TRACKS
from .schedule import phase_weeks

_FILES = {
    # template -> path, relative to the repository root
    "kata.toml.j2": "katas/{phase_dir}/{name}/kata.toml",
    "README.md.j2": "katas/{phase_dir}/{name}/README.md",
    "stub.py.j2": "katas/{phase_dir}/{name}/{module}.py",
    "conftest.py.j2": "katas/{phase_dir}/{name}/tests/conftest.py",  # fixtures public and hidden
    "test_public.py.j2": "katas/{phase_dir}/{name}/tests/test_{module}.py",
    "solution.py.j2": "solutions/{phase_dir}/{name}/{module}.py",
    "test_hidden.py.j2": "solutions/{phase_dir}/{name}/tests/test_hidden_{module}.py",
    # two shortcuts, each caught by the hidden gate: `kata verify` requires at least two. Each is
    # rendered as a whole copy and written as a patch against the reference (shortcut_tool)
    "shortcut_public.toml.j2": "solutions/{phase_dir}/{name}/shortcuts/public-answers/shortcut.toml",
    "shortcut_public.py.j2": "solutions/{phase_dir}/{name}/shortcuts/public-answers/{module}.py",
    "shortcut_positive.toml.j2": "solutions/{phase_dir}/{name}/shortcuts/positives-only/shortcut.toml",
    "shortcut_positive.py.j2": "solutions/{phase_dir}/{name}/shortcuts/positives-only/{module}.py",
}


def scaffold(
    root: Path, phase: int, name: str, title: str | None = None, track: str = ""
) -> list[Path]:
    """Create the kata `name` in `phase` (or in katas/<track>/, drawing on `phase`); returns the
    files written. Refuses to overwrite."""
    if not 1 <= phase <= 12:
        raise ValueError(f"PHASE must be 1..12, got {phase}")
    if not re.fullmatch(r"[a-z][a-z0-9_-]*", name):
        raise ValueError(f"NAME must be lower-case letters, digits, '-' or '_', got {name!r}")
    if track and track not in TRACKS:
        raise ValueError(f"--track must be one of {', '.join(TRACKS)}, got {track!r}")
    phase_dir = track or f"phase{phase:02d}"
    module = name.replace("-", "_")
    kata_dir = root / "katas" / phase_dir / name
    if kata_dir.exists():
        raise FileExistsError(f"{kata_dir} already exists")
    env = Environment(
        loader=PackageLoader("harness", "templates/new_kata"),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
    )
    values = {
        "id": name,
        "title": title or name.replace("-", " ").replace("_", " ").capitalize(),
        "phase": phase,
        "weeks": [] if track else list(phase_weeks(phase)),
        "track": track,
        "module": module,
        "rel_dir": f"katas/{phase_dir}/{name}",
    }
    written = []
    for template, pattern in _FILES.items():
        path = root / pattern.format(phase_dir=phase_dir, name=name, module=module)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(env.get_template(template).render(**values), encoding="utf-8")
        written.append(path)
    from .shortcut_tool import convert_one

    sol = root / "solutions" / phase_dir / name
    for sc in sorted((sol / "shortcuts").iterdir()):
        copies = [p for p in written if p.parent == sc and p.name != "shortcut.toml"]
        if convert_one(sc, sol).status != "converted":
            raise RuntimeError(f"the scaffold's shortcut {sc.name} did not convert")
        written = [p for p in written if p not in copies] + [sc / "shortcut.patch"]
    return written
