"""Exercism test-runner output, interface version 3: ``results.json``.

Statuses follow the interface: a test is ``pass``, ``fail`` or ``error`` (its process crashed,
or a fixture failed); the run is ``error`` only when nothing could be tested (a broken manifest:
then ``message`` says why), else ``fail`` if any test did not pass. ``task_id`` is the task's
1-based position in its kata's manifest; ``output`` is capped at 500 characters, as Exercism asks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..results import ERROR, RunResult
from . import ReportOptions
from .common import cap, error_summary, rows

OUTPUT_LIMIT = 500


def build(result: RunResult, options: ReportOptions) -> dict[str, Any]:
    tests = []
    for row in rows(result):
        task_id = row.kata.tasks.index(row.task) + 1
        status = "pass" if row.ok else "error" if row.outcome == ERROR else "fail"
        test: dict[str, Any] = {
            "name": row.name,
            "status": status,
            "message": None if row.ok else row.text(4000, output=False),
            "output": cap(row.output, OUTPUT_LIMIT) if row.output else None,
            "test_code": row.source,
            "task_id": task_id,
        }
        tests.append(test)
    errs = error_summary(result, 65535)
    if result.errors or not tests:
        return {
            "version": 3,
            "status": "error",
            "message": errs or "no test was collected",
            "tests": tests,
        }
    status = "pass" if all(t["status"] == "pass" for t in tests) else "fail"
    # Kata errors (a crashed test) show on their tests; the top-level message is for "error" only.
    return {"version": 3, "status": status, "message": None, "tests": tests}


def write(result: RunResult, path: Path, options: ReportOptions) -> None:
    path.write_text(json.dumps(build(result, options), indent=1), encoding="utf-8")
