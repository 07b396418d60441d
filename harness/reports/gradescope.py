"""Gradescope autograder output: ``/autograder/results/results.json``.

One test per kata test, with its share of the task's points as ``max_score`` and tags naming
kata and task. Hidden tests get ``--kata-hidden-visibility`` (default ``after_published``, so
students see them once grades are published). A run that could not be graded cleanly says so
in ``extra_data.status == "error"`` and in the top-level ``output``; a leaderboard is added when
tests report budget ratios (lower is better).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..results import RunResult
from .charts import budget
from .common import error_summary, errors, fmt_points, notes_text, rows
from .options import ReportOptions


def build(result: RunResult, options: ReportOptions) -> dict[str, Any]:
    # Run errors (a grader that lacks a tool, a crash outside any test) head the test list too,
    # worth nothing, so nobody reads the score without seeing them.
    tests: list[dict[str, Any]] = [
        {
            "name": f"gpu-katas: grading error {i}"
            if len(result.errors) > 1
            else "gpu-katas: grading error",
            "score": 0.0,
            "max_score": 0.0,
            "status": "failed",
            "output": err,
            "output_format": "text",
            "visibility": "visible",
        }
        for i, err in enumerate(result.errors, 1)
    ]
    leaderboard = []
    for row in rows(result):
        tests.append(
            {
                "name": row.name,
                "number": row.number,
                "score": row.score,
                "max_score": row.max_points,
                "status": "passed" if row.not_failed else "failed",
                "output": row.text(),
                "output_format": "text",
                "tags": [row.kata.id, row.task.id],
                "visibility": options.hidden_visibility if row.hidden else "visible",
                "extra_data": {"kata": row.kata.id, "task": row.task.id, "outcome": row.outcome},
            }
        )
        b = budget(row.record.metrics) if row.record else None
        if b is not None:
            leaderboard.append({"name": f"{row.kata.id} {row.test_name}", "value": b[0]})
    status = result.status
    head = f"{fmt_points(result.earned)}/{result.points} points · {status}"
    out: dict[str, Any] = {
        "score": result.earned,
        "execution_time": round(result.duration, 3),
        "output": "\n\n".join(p for p in (head, error_summary(result), notes_text(result)) if p),
        "output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",  # the log holds hidden tests' names and timings
        "tests": tests,
        "extra_data": {
            "status": status,
            "errors": errors(result),
            "notes": result.notes,
            "impl": result.impl,
        },
    }
    if leaderboard:
        out["leaderboard"] = [dict(e, order="asc") for e in leaderboard]
    return out


def write(result: RunResult, path: Path, options: ReportOptions) -> None:
    path.write_text(json.dumps(build(result, options), indent=1), encoding="utf-8")
