"""GitHub Actions autograding: one ``<ID>_RESULTS`` payload per kata for the grading reporter.

``classroom-resources/autograding-grading-reporter`` reads, for each id in its ``runners:``
input, the environment variable ``<ID>_RESULTS`` (id upper-cased): base64 of JSON
``{version: 1, status, max_score, tests: [{name, status, score, message, test_code, filename,
line_no, duration}]}``. This writer *appends* ``KEY=VALUE`` lines to PATH, so the path can be
``$GITHUB_ENV`` (later steps see the variables) or ``$GITHUB_OUTPUT``:

- ``<ID>_RESULTS=<base64>`` for each kata: the runner id is the kata id's letters and digits
  (``memory-hierarchy`` -> ``memoryhierarchy``, read from ``MEMORYHIERARCHY_RESULTS``), because
  the reporter accepts ids matching ``^[a-zA-Z0-9]+$`` only; a clash gets a number appended,
- ``KATA_RUNNERS=<id>,<id>`` — the value for the reporter's ``runners:`` input,
- ``HARNESS_RESULTS`` (runner ``harness``) when the run had errors outside any kata.

Why one runner per kata: the reporter's check-run total sums each test's ``score`` (each test
carries its real share of points, so "Points X/Y" equals the terminal total) while its console
table counts passes per runner; per-kata runners keep that table's rows per kata.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Collection
from pathlib import Path
from typing import Any

from ..results import ERROR, RunResult
from .common import cap, kata_rows
from .options import ReportOptions

_MESSAGE_LIMIT = 1000  # environment variables are capped at 128 KiB each on Linux


def runner_id(kata_id: str, taken: Collection[str] = ()) -> str:
    """The kata id's letters and digits, lower-cased; a number is appended while it is taken."""
    base = "".join(c for c in kata_id.lower() if c.isascii() and c.isalnum()) or "kata"
    rid, n = base, 1
    while rid in taken:
        n += 1
        rid = f"{base}{n}"
    return rid


def payloads(result: RunResult) -> dict[str, dict[str, Any]]:
    """Runner id -> the reporter's JSON for that runner."""
    out: dict[str, dict[str, Any]] = {}
    taken = {"harness"}  # the run-level error runner below
    for kata in result.katas:
        tests = []
        for row in kata_rows(result, kata):
            status = "pass" if row.not_failed else "error" if row.outcome == ERROR else "fail"
            tests.append(
                {
                    "name": row.name,
                    "status": status,
                    "score": row.score,
                    "message": cap(row.text(), _MESSAGE_LIMIT) if not row.ok else "",
                    "test_code": cap(row.source, _MESSAGE_LIMIT),
                    "filename": row.filename,
                    "line_no": (row.record.line or 0) if row.record and not row.hidden else 0,
                    "duration": round(row.record.duration * 1000) if row.record else 0,  # ms
                }
            )
        # pass: every test passed or could not run here (the kata passed, maybe with skips)
        passing = all(t["status"] == "pass" for t in tests)
        status = "error" if kata.errors else "pass" if passing else "fail"
        rid = runner_id(kata.id, taken)
        taken.add(rid)
        out[rid] = {
            "version": 1,
            "status": status,
            "max_score": kata.points,
            "tests": tests,
        }
    if result.errors or not result.katas:
        errs = result.errors or ["no kata was collected"]
        out["harness"] = {
            "version": 1,
            "status": "error",
            "max_score": 0,
            "tests": [
                {
                    "name": "gpu-katas: collection",
                    "status": "error",
                    "score": 0,
                    "message": cap("\n".join(errs), _MESSAGE_LIMIT),
                    "test_code": "",
                    "filename": "",
                    "line_no": 0,
                    "duration": 0,
                }
            ],
        }
    return out


def encode(payload: dict[str, Any]) -> str:
    return base64.b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode("ascii")


def write(result: RunResult, path: Path, options: ReportOptions) -> None:
    runners = payloads(result)
    lines = [f"{rid.upper()}_RESULTS={encode(p)}" for rid, p in runners.items()]
    lines.append(f"KATA_RUNNERS={','.join(runners)}")
    with path.open("a", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
