"""PrairieLearn external-grader output: ``/grade/results/results.json``.

``score`` is the fraction of points earned (0..1); each test carries its share of the task's
points (``points``/``max_points``). Budget charts and kata artefacts travel as data-URI images.
``gradable`` is false only when nothing could be graded (a broken manifest, no kata found):
PrairieLearn then does not count the attempt. Kata errors (a crashed test process, a test file
that does not import) are graded, and named in ``message``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..results import RunResult
from .charts import artefact_images, chart_images
from .common import error_summary, fmt_points, notes_text, rows
from .options import ReportOptions


def _images(images: list[Any]) -> list[dict[str, str]]:
    return [{"label": i.label, "url": i.uri} for i in images if i.uri]


def build(result: RunResult, options: ReportOptions) -> dict[str, Any]:
    tests, all_images = [], []
    for row in rows(result):
        images = []
        if row.record is not None:
            images = _images(
                chart_images(row.record) + artefact_images(row.record, options.artifacts_dir)
            )
        all_images += images
        tests.append(
            {
                "name": row.name,
                "description": row.task.title,
                "points": row.score,
                "max_points": row.max_points,
                "message": row.message,
                "output": row.text(),
                "images": images,
            }
        )
    gradable = bool(result.katas) and not result.errors
    errs = error_summary(result)
    message = f"{fmt_points(result.earned)}/{result.points} points · {result.status}"
    out: dict[str, Any] = {
        "gradable": gradable,
        "score": round(result.earned / result.points, 4) if result.points else 0.0,
        "message": f"error: {errs}" if errs else message,
        "output": "\n\n".join(p for p in (errs, notes_text(result)) if p),
        "images": all_images,
        "tests": tests,
    }
    if not gradable and not errs:
        out["message"] = "error: no kata was found to grade"
    return out


def write(result: RunResult, path: Path, options: ReportOptions) -> None:
    path.write_text(json.dumps(build(result, options), indent=1), encoding="utf-8")
