"""Exercism test-runner output, interface version 3: ``results.json``.

What the interface asks, and how it is met:

- tests are listed in the order of the test files (pytest's collection order: public test files
  first, then hidden ones), not grouped by task;
- a test is ``pass``, ``fail`` or ``error`` (its process crashed, or a fixture failed); the run is
  ``error`` only when no test ran at all (a broken manifest, nothing collected: ``message`` says
  why), else ``fail`` if any test did not pass. Errors outside any test (a crashed worker, a test
  file that does not import) become ``error`` entries of their own, so they are not lost;
- ``task_id`` is unique per results file: tasks are numbered 1, 2, ... across every kata of the
  run, in kata then manifest order;
- ``test_code`` is the public test's function as written (never a hidden test's source);
- ``output`` is capped at 500 characters.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..results import ERROR, RunResult
from .common import cap, error_summary, errors, rows, test_code
from .options import ReportOptions

OUTPUT_LIMIT = 500


def build(result: RunResult, options: ReportOptions) -> dict[str, Any]:
    task_ids = {
        (kata.id, task.id): n
        for n, (kata, task) in enumerate(((k, t) for k in result.katas for t in k.tasks), start=1)
    }
    kata_pos = {id(k): i for i, k in enumerate(result.katas)}
    ordered = sorted(
        enumerate(rows(result)),
        # Kata by kata; within a kata, collection order; tasks none of whose tests ran go last.
        key=lambda ir: (
            kata_pos[id(ir[1].kata)],
            ir[1].record is None,
            ir[1].record.seq if ir[1].record else 0,
            ir[0],
        ),
    )
    tests = []
    for _, row in ordered:
        status = "pass" if row.not_failed else "error" if row.outcome == ERROR else "fail"
        tests.append(
            {
                "name": row.name,
                "status": status,
                "message": None if row.ok else row.text(4000, output=False),
                "output": cap(row.output, OUTPUT_LIMIT) if row.output else None,
                "test_code": test_code(row, options.root),
                "task_id": task_ids[(row.kata.id, row.task.id)],
            }
        )
    ran = any(row.record is not None for _, row in ordered)
    if not ran:
        return {
            "version": 3,
            "status": "error",
            "message": error_summary(result, 65535) or "no test was collected",
            "tests": tests,
        }
    for err in errors(result):
        tests.append(
            {
                "name": f"gpu-katas: {err.splitlines()[0][:200]}",
                "status": "error",
                "message": cap(err, 4000),
                "output": None,
                "test_code": "",
            }
        )
    status = "pass" if all(t["status"] == "pass" for t in tests) else "fail"
    return {"version": 3, "status": status, "message": None, "tests": tests}


def write(result: RunResult, path: Path, options: ReportOptions) -> None:
    path.write_text(json.dumps(build(result, options), indent=1), encoding="utf-8")
