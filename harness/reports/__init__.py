"""Report writers: each turns one :class:`~harness.results.RunResult` into one format.

``--kata-report=FORMAT:PATH`` (several allowed, relative paths are relative to the root):

============  =====================================================  ==========================
format        what                                                   module
============  =====================================================  ==========================
json          the results model itself (``last-run.json`` shape)     here
html          one self-contained page for people                     :mod:`.html`
markdown      points table and failing tasks with hints              :mod:`.markdown`
gradescope    ``/autograder/results/results.json``                   :mod:`.gradescope`
prairielearn  ``/grade/results/results.json``                        :mod:`.prairielearn`
exercism      ``results.json``, test-runner interface version 3      :mod:`.exercism`
github        ``<ID>_RESULTS=base64`` lines, one per kata (append)   :mod:`.github`
junit         JUnit XML like pytest's ``--junitxml`` (xunit2/xunit1)  :mod:`.junit`
============  =====================================================  ==========================

The model is the only input, so every format agrees with the terminal summary by construction;
per-test points come from :attr:`~harness.results.TaskResult.shares`. The markdown summary is
also appended to ``$GITHUB_STEP_SUMMARY`` when that is set (``--kata-no-step-summary`` stops it).

Writers never see hidden test source or reference code: hidden records carry their message only,
and :mod:`.common` refuses to show source lines for them.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import layout
from ..results import RunResult
from .options import ReportOptions

# Gradescope's visibility levels, from most to least hidden.
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")


Writer = Callable[[RunResult, Path, ReportOptions], None]


def _write_json(result: RunResult, path: Path, options: ReportOptions) -> None:
    result.save(path)


def _lazy(module: str) -> Writer:
    """A writer imported on first use, so the plugin's start-up never pays for jinja2 & co."""

    def write(result: RunResult, path: Path, options: ReportOptions) -> None:
        importlib.import_module(f"{__name__}.{module}").write(result, path, options)

    write.__name__ = f"write_{module}"
    return write


WRITERS: dict[str, Writer] = {
    "json": _write_json,
    **{
        name: _lazy(name)
        for name in (
            "html",
            "markdown",
            "gradescope",
            "prairielearn",
            "exercism",
            "github",
            "junit",
        )
    },
}


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


def write_report(
    spec: str, result: RunResult, root: Path, options: ReportOptions | None = None
) -> str:
    """Write one report; returns the path written (relative paths are relative to `root`)."""
    fmt, path = check_spec(spec)
    options = options or ReportOptions(root=root, results_dir=layout.results_dir(root))
    target = Path(path) if Path(path).is_absolute() else root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    WRITERS[fmt](result, target, options)
    return str(target)


def write_reports(
    specs: list[str], result: RunResult, root: Path, options: ReportOptions | None = None
) -> list[str]:
    """Write every requested report and the GitHub job summary; returns the paths written.

    One broken writer must not cost the others (a grader needs its file even when the HTML
    fails), so a failure is reported on stderr and the rest still run.
    """
    options = options or ReportOptions(root=root, results_dir=layout.results_dir(root))
    written = []
    for spec in specs:
        try:
            written.append(write_report(spec, result, root, options))
        except Exception as e:  # noqa: BLE001 - reported, and the other formats still get written
            print(f"gpu-katas: report {spec} was not written: {_why(e)}", file=sys.stderr)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary and options.step_summary:
        try:
            from .markdown import append_step_summary

            append_step_summary(result, Path(summary))
        except OSError as e:
            print(f"gpu-katas: job summary not written to {summary}: {_why(e)}", file=sys.stderr)
    return written


def _why(e: BaseException) -> str:
    """An exception as a sentence, not its repr: "No such file or directory: out/x.html"."""
    if isinstance(e, OSError) and e.strerror:
        return f"{e.strerror}: {e.filename}" if e.filename else e.strerror
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


# --------------------------------------------------------------------------- options
def add_report_options(group: Any) -> None:
    """Report options, added to the plugin's option group (`group` is pytest's OptionGroup)."""
    group.addoption(
        "--kata-hidden-visibility",
        choices=VISIBILITIES,
        default=os.environ.get("KATA_HIDDEN_VISIBILITY", "after_published"),
        help="Gradescope visibility of hidden tests (default after_published: "
        "students see them once grades are published)",
    )
    group.addoption(
        "--kata-junit-family",
        choices=("xunit2", "xunit1"),
        default=os.environ.get("KATA_JUNIT_FAMILY", "xunit2"),
        help="shape of the junit report: xunit2 (default; valid against the xunit2 schema) or "
        "xunit1 (adds per-test <properties>: kata, task, points, score)",
    )
    group.addoption(
        "--kata-no-step-summary",
        action="store_true",
        help="do not append the markdown summary to $GITHUB_STEP_SUMMARY",
    )


def report_options(config: Any, results_dir: Path) -> ReportOptions:
    """The options of one run, from pytest's config."""
    return ReportOptions(
        root=Path(config.rootpath),
        results_dir=Path(results_dir),
        hidden_visibility=config.option.kata_hidden_visibility,
        step_summary=not config.option.kata_no_step_summary,
        junit_family=config.option.kata_junit_family,
    )
