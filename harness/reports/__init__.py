"""Report writers: each turns one :class:`~harness.results.RunResult` into one format.

``--kata-report=FORMAT:PATH`` (several allowed). A writer is a function
``write(result, path, root) -> None`` registered in :data:`WRITERS`; the model is the only input,
so every format agrees with the terminal summary by construction.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from ..results import RunResult

Writer = Callable[[RunResult, Path, Path], None]


def _write_json(result: RunResult, path: Path, root: Path) -> None:
    result.save(path)


WRITERS: dict[str, Writer] = {"json": _write_json}


def check_spec(spec: str) -> tuple[str, str]:
    """Split "FORMAT:PATH" and check the format is known; raises ValueError naming the problem."""
    fmt, sep, path = spec.partition(":")
    if not sep or not path:
        raise ValueError(
            f"expected FORMAT:PATH, e.g. json:results.json (formats: {', '.join(WRITERS)})"
        )
    if fmt not in WRITERS:
        raise ValueError(f"unknown report format {fmt!r} (formats: {', '.join(sorted(WRITERS))})")
    return fmt, path


def write_report(spec: str, result: RunResult, root: Path) -> str:
    """Write one report; returns the path written (relative paths are relative to `root`)."""
    fmt, path = check_spec(spec)
    target = Path(path) if Path(path).is_absolute() else root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    WRITERS[fmt](result, target, root)
    return str(target)


def save_progress(result: RunResult, results_dir: Path) -> None:
    """Keep the last run (`last-run.json`) and, for learner runs, each kata's latest state
    (`progress.json`), which `kata progress` reads."""
    result.save(results_dir / "last-run.json")
    if result.impl != "learner":
        return
    progress_path = results_dir / "progress.json"
    try:
        progress = json.loads(progress_path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        progress = {"katas": {}}
    data = result.to_dict()
    for kata in data["katas"]:
        if any(t["tests"] for t in kata["tasks"]):
            kata["updated"] = time.time()
            progress["katas"][kata["id"]] = kata
    tmp = progress_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(progress, indent=1), encoding="utf-8")
    tmp.replace(progress_path)
