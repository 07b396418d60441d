"""A learner's progress: written after each run, read by ``kata progress`` and ``kata hint``.

The results directory (``--kata-results-dir``, default ``<root>/.kata``; see :mod:`harness.layout`)
keeps the last run (``last-run.json``) and, for learner runs, each kata's latest state
(``progress.json``): a partial run (``-k``, one file, ``-x``) updates only the tests it ran.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from .atomic import write_json
from .results import RunResult

PROGRESS_FILE = "progress.json"
LAST_RUN_FILE = "last-run.json"


class ProgressError(Exception):
    """The progress file exists but cannot be read as ours (the sentence says what to do)."""


def save(result: RunResult, results_dir: Path) -> None:
    """Keep the last run and, for learner runs, merge it into each kata's latest state."""
    result.save(results_dir / LAST_RUN_FILE)
    if result.impl != "learner":
        return
    path = results_dir / PROGRESS_FILE
    try:
        progress = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        progress = {}
    if not (isinstance(progress, dict) and isinstance(progress.get("katas"), dict)):
        progress = {"katas": {}}  # unreadable or not ours (hand-edited, forged): start afresh
    data = result.to_dict()
    for kata in data["katas"]:
        if any(t["tests"] for t in kata["tasks"]):
            kata = _merged(progress["katas"].get(kata["id"]), kata)
            kata["updated"] = time.time()
            progress["katas"][kata["id"]] = kata
    write_json(path, progress)


def load(results_dir: Path) -> dict[str, dict[str, Any]]:
    """Each kata's latest state by kata id ({} before the first learner run)."""
    path = results_dir / PROGRESS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except json.JSONDecodeError as e:
        raise ProgressError(f"{path} is not valid JSON ({e}); delete it to start afresh") from None
    return data.get("katas", {}) if isinstance(data, dict) else {}


def load_run(results_dir: Path) -> RunResult:
    """The latest state of every kata as one run (what ``kata progress`` shows)."""
    return RunResult.from_dict({"katas": list(load(results_dir).values())})


def _merged(previous: Any, latest: dict[str, Any]) -> dict[str, Any]:
    """`latest` with the tests it did not run (`-k`, one file, `-x`) kept from `previous`.

    Tasks come from the latest run (its manifest): a kept test whose task is gone is dropped.
    Points and statuses are recomputed from the merged tests.
    """
    try:
        old = {t["id"]: list(t["tests"]) for t in previous["tasks"]}
        tasks = []
        for task in latest["tasks"]:
            ran = {r["nodeid"] for r in task["tests"]}
            kept = [r for r in old.get(task["id"], []) if r["nodeid"] not in ran]
            tests = sorted(task["tests"] + kept, key=lambda r: r["nodeid"])
            tasks.append({**task, "tests": tests})
        return RunResult.from_dict({"katas": [{**latest, "tasks": tasks}]}).to_dict()["katas"][0]
    except (TypeError, KeyError, AttributeError):
        return latest  # no previous state, or not in our shape: the latest run alone
