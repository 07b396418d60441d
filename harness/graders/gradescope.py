"""Gradescope entry point, run by ``run_autograder``: grade ``/autograder/submission``.

    python -m harness.graders.gradescope [--source DIR] [--submission DIR] [--results FILE]
        [--katas simt,coalesce] [--hidden-visibility after_published] [--workers 2]

Defaults are Gradescope's paths; each option also reads an environment variable
(``KATA_GS_SOURCE``, ``KATA_GS_SUBMISSION``, ``KATA_GS_RESULTS``, ``KATA_KATAS``), and
``--hidden-bundle``/``KATA_HIDDEN_BUNDLE`` names a hidden-test bundle kept out of the course
(its key in ``KATA_HIDDEN_KEY``); the run is in grade mode (``--kata-grade``) either way.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .common import grade


def fallback(message: str) -> dict:
    """A valid results.json for a run that produced none: no points, and why."""
    return {
        "score": 0,
        "output": f"The submission could not be graded: {message}",
        "output_format": "text",
        "visibility": "visible",
        "tests": [],
        "extra_data": {"status": "error", "errors": [message]},
    }


def main(argv: list[str] | None = None) -> int:
    env = os.environ.get
    p = argparse.ArgumentParser(prog="run_autograder", description=__doc__.splitlines()[0])
    p.add_argument("--source", default=env("KATA_GS_SOURCE", "/autograder/source"))
    p.add_argument("--submission", default=env("KATA_GS_SUBMISSION", "/autograder/submission"))
    p.add_argument("--results", default=env("KATA_GS_RESULTS", "/autograder/results/results.json"))
    p.add_argument("--katas", default=env("KATA_KATAS", ""), help="comma-separated kata ids")
    p.add_argument("--hidden-visibility", default=env("KATA_HIDDEN_VISIBILITY", "after_published"))
    p.add_argument("--workers", default=env("KATA_WORKERS", "2"))
    p.add_argument("--hidden-bundle", default=env("KATA_HIDDEN_BUNDLE", ""),
                   help="hidden-test bundle supplied at grading time (key: KATA_HIDDEN_KEY)")  # fmt: skip
    a = p.parse_args(argv)
    katas = [k for k in a.katas.split(",") if k]
    extra = [f"--kata-hidden-visibility={a.hidden_visibility}"]
    if a.hidden_bundle:
        extra.append(f"--kata-hidden={Path(a.hidden_bundle).resolve()}")
    return grade(
        Path(a.source), Path(a.submission), Path(a.results), "gradescope", katas, fallback,
        extra, a.workers,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
