"""PrairieLearn external-grader entry point: grade ``/grade/student`` into
``/grade/results/results.json``.

    python -m harness.graders.prairielearn [--grade-root /grade] [--course DIR] [--katas simt]

The course repository is ``/grade/serverFilesCourse/gpu-katas`` (put it in the course's
``serverFilesCourse``) unless ``--course``/``KATA_PL_COURSE`` names another. Which katas: the
question's ``params.kata`` (a string or list, from ``/grade/data/data.json``), else ``--katas``/
``KATA_KATAS``, else every kata the submission has files for.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .common import grade


def fallback(message: str) -> dict:
    return {
        "gradable": False,
        "score": 0.0,
        "message": f"error: the submission could not be graded: {message}",
        "output": message,
        "tests": [],
    }


def _katas_from_data(grade_root: Path) -> list[str]:
    try:
        data = json.loads((grade_root / "data" / "data.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return []
    kata = (data.get("params") or {}).get("kata")
    if isinstance(kata, str):
        return [kata]
    return [str(k) for k in kata] if isinstance(kata, list) else []


def main(argv: list[str] | None = None) -> int:
    env = os.environ.get
    p = argparse.ArgumentParser(prog="run.sh", description=__doc__.splitlines()[0])
    p.add_argument("--grade-root", default=env("KATA_PL_ROOT", "/grade"))
    p.add_argument("--course", default=env("KATA_PL_COURSE", ""))
    p.add_argument("--results", default=env("KATA_PL_RESULTS", ""))
    p.add_argument("--katas", default=env("KATA_KATAS", ""), help="comma-separated kata ids")
    p.add_argument("--workers", default=env("KATA_WORKERS", "2"))
    p.add_argument("--hidden-bundle", default=env("KATA_HIDDEN_BUNDLE", ""),
                   help="hidden-test bundle supplied at grading time (key: KATA_HIDDEN_KEY)")  # fmt: skip
    a = p.parse_args(argv)
    root = Path(a.grade_root)
    course = Path(a.course) if a.course else root / "serverFilesCourse" / "gpu-katas"
    results = Path(a.results) if a.results else root / "results" / "results.json"
    katas = _katas_from_data(root) or [k for k in a.katas.split(",") if k]
    extra = [f"--kata-hidden={Path(a.hidden_bundle).resolve()}"] if a.hidden_bundle else []
    return grade(course, root / "student", results, "prairielearn", katas, fallback, extra,
                 a.workers)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
