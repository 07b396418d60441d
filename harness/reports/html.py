"""The HTML report: one self-contained page a learner or instructor reads in a browser.

Rendered with jinja2 from the template files in ``harness/templates/report/`` (``report.html.j2``
and the ``style.css`` it inlines). Self-contained on purpose: the CSS is inline, pictures are
``data:`` URIs, and there are no scripts, web fonts or links to fetch, so the file works when
mailed, attached to a CI run, or opened with networking off.

What it shows: an overview (points per phase and kata), then per kata each task's status and
points, its tests with durations (those not started yet in one line per task, saying where to
start), for a failing public test the assertion and the test's source lines around the failing
one, the hints for what failed (each once), skipped-for-tier notes, budget ratios as small SVG
bar charts, and pictures tests provide. Pictures come from ``kata_metrics``: ``svg``
(markup) or ``artifact`` (a file under ``.kata/artifacts/``); see :mod:`.charts` for the keys.

Hidden tests show their message only: no source lines, no file, no captured output.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from ..results import (
    ERROR,
    FAILED,
    NOT_STARTED,
    PASSED,
    SKIPPED,
    STATUS_ERROR,
    STATUS_FAILING,
    STATUS_IN_PROGRESS,
    STATUS_NOT_RUN,
    STATUS_NOT_STARTED,
    STATUS_PASSED,
    STATUS_PASSED_WITH_SKIPS,
    STATUS_SKIPPED,
    RunResult,
)
from .charts import Image, artefact_images, budget_bars, budget_chart, explanation, numbers
from .common import NOT_RUN, Row, errors, fmt_points, gate_line, kata_rows
from .options import ReportOptions

TEMPLATES = Path(__file__).resolve().parent.parent / "templates" / "report"

# CSS class and label of each test outcome and task status.
_OUTCOME = {
    PASSED: ("pass", "passed"),
    FAILED: ("fail", "failed"),
    ERROR: ("fail", "error"),
    NOT_STARTED: ("todo", "not started"),
    SKIPPED: ("skip", "skipped"),
    NOT_RUN: ("none", "not run"),
}
# CSS class of each status (of a task, a kata and the run).
_STATUS_CSS = {
    STATUS_PASSED: "pass",
    STATUS_PASSED_WITH_SKIPS: "pass",
    STATUS_FAILING: "fail",
    STATUS_ERROR: "fail",
    STATUS_IN_PROGRESS: "todo",
    STATUS_NOT_STARTED: "todo",
    STATUS_SKIPPED: "skip",
    STATUS_NOT_RUN: "none",
}


@dataclass
class SourceLine:
    number: int | None
    text: str
    failing: bool = False


@dataclass
class TestView:
    name: str
    hidden: bool
    css: str
    label: str
    points: str
    duration: str
    message: str
    location: str
    source: list[SourceLine]
    output: str
    charts: list[tuple[str, Markup]]
    numbers: list[tuple[str, str]]
    images: list[Image] = field(default_factory=list)
    explanation: str = ""  # a passed test's kata_explain text

    @property
    def plain(self) -> bool:
        quiet = self.css == "pass" or (self.css == "skip" and not self.hidden)
        return quiet and not (self.charts or self.numbers or self.images or self.explanation)


def _source_lines(row: Row, root: Path) -> list[SourceLine]:
    """The failing test's lines with numbers, read from the public test file when it still
    matches what the run saw; else the lines the run kept, unnumbered."""
    if not row.source:
        return []
    kept = row.source.splitlines()
    line = row.record.line if row.record else None
    path = (root / row.filename).resolve() if row.filename else None
    if line and path and path.is_relative_to(root.resolve()) and path.is_file():
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            lines = []
        # Where the kept window sits in the file: it must cover the failing line.
        for start in range(max(1, line - len(kept) + 1), line + 1):
            if lines[start - 1 : start - 1 + len(kept)] == kept:
                return [SourceLine(start + i, t, start + i == line) for i, t in enumerate(kept)]
    return [SourceLine(None, text) for text in kept]


def _duration(seconds: float) -> str:
    if seconds < 0.001:
        return "<1 ms"
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _test_view(row: Row, options: ReportOptions) -> TestView:
    css, label = _OUTCOME[row.outcome]
    record = row.record
    charts: list[tuple[str, Markup]] = []
    images: list[Image] = []
    nums: list[tuple[str, str]] = []
    if record is not None:
        bars = budget_bars(record.metrics)
        # Drawn here with every text escaped, so the markup is safe to inline.
        charts = [(label, Markup(budget_chart(r, b, unit))) for label, r, b, unit in bars]
        images = artefact_images(record, options.artifacts_dir)
        nums = [
            (k, v) for k, v in numbers(record.metrics) if not bars or k not in ("ratio", "budget")
        ]
    location = ""
    if row.filename and record and record.line:
        location = f"{row.filename}:{record.line}"
    return TestView(
        name=row.test_name,
        hidden=row.hidden,
        css=css,
        label=label,
        points=f"{fmt_points(row.score)}/{fmt_points(row.max_points)}",
        duration=_duration(record.duration) if record else "",
        message="" if row.ok else row.message,
        location=location,
        source=_source_lines(row, options.root),
        output=row.output,
        charts=charts,
        numbers=nums,
        images=images,
        explanation=explanation(record),
    )


def _not_started(view: TestView) -> bool:
    return view.label == _OUTCOME[NOT_STARTED][1] and not (view.charts or view.images)


def _todo_line(views: list[TestView]) -> str:
    """One line for a task's not-started tests: how many, and where the first one starts
    (`3 tests not started — start at add_sequence (block_manager.py:62)`)."""
    todo = [v for v in views if _not_started(v)]
    if not todo:
        return ""
    n = f"{len(todo)} test{'s' * (len(todo) > 1)} not started"
    where = todo[0].message.removeprefix("not started: ").strip()
    return f"{n} — start at {where}" if where else n


def _pct(earned: float, points: float) -> float:
    return round(100 * earned / points, 1) if points else 0.0


def context(result: RunResult, options: ReportOptions) -> dict[str, Any]:
    """Everything the template shows, as plain values (the template holds no logic of ours)."""
    katas = []
    for kata in result.katas:
        by_task: dict[str, list[TestView]] = {}
        for row in kata_rows(result, kata):
            if row.record is not None:
                by_task.setdefault(row.task.id, []).append(_test_view(row, options))
        tasks = [
            {
                "id": t.id,
                "title": t.title,
                "status": t.status,
                "css": _STATUS_CSS[t.status],
                "earned": fmt_points(t.earned),
                "points": t.points,
                "pct": _pct(t.earned, t.points),
                "hints": t.failure_hints,  # for what failed, each once
                "more_hints": max(0, len(t.hints) - len(t.failure_hints)),
                "skip_reasons": t.skip_reasons,
                "gates": [gate_line(t, g) for g in t.gate_reasons],
                "tests": by_task.get(t.id, []),
                # Passing tests with nothing more to show fit on one line of chips; the tests not
                # started yet on one line for the task (where to start); the rest in full.
                "plain": [v for v in by_task.get(t.id, []) if v.plain],
                "todo_line": _todo_line(by_task.get(t.id, [])),
                "detailed": [
                    v for v in by_task.get(t.id, []) if not v.plain and not _not_started(v)
                ],
                "passed": sum(r.ok for r in t.tests),
            }
            for t in kata.tasks
        ]
        nxt = kata.next_task
        katas.append(
            {
                "id": kata.id,
                "title": kata.title,
                "phase": kata.phase,
                "path": kata.path,
                "status": kata.status,
                "css": _STATUS_CSS[kata.status],
                "earned": fmt_points(kata.earned),
                "points": kata.points,
                "pct": _pct(kata.earned, kata.points),
                "errors": kata.errors,
                "next": f"{nxt.id} — {nxt.title}" if nxt else "",
                "tasks": tasks,
            }
        )
    phases: dict[int, dict[str, Any]] = {}
    for kata, k in zip(result.katas, katas, strict=True):
        p = phases.setdefault(kata.phase, {"phase": kata.phase, "katas": [], "e": 0.0, "p": 0})
        p["katas"].append(k)
        p["e"] += kata.earned
        p["p"] += kata.points
    for p in phases.values():
        p["earned"], p["points"], p["pct"] = (
            fmt_points(p["e"]),
            p["p"],
            _pct(p["e"], p["p"]),
        )
    return {
        "title": "gpu-katas report",
        "generated": time.strftime("%Y-%m-%d %H:%M", time.localtime(result.started or time.time())),
        "impl": result.impl,
        "tiers": ", ".join(result.tiers) or "cpu",
        "seed": result.seed,
        "duration": _duration(result.duration),
        "status": result.status,
        "status_css": _STATUS_CSS[result.status],
        "earned": fmt_points(result.earned),
        "points": result.points,
        "pct": _pct(result.earned, result.points),
        "phases": [phases[k] for k in sorted(phases)],
        "katas": katas,
        "run_errors": result.errors,
        "run_notes": result.notes,
        "error_count": len(errors(result)),
    }


def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,  # a typo in the template is an error, not a blank
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(result: RunResult, options: ReportOptions) -> str:
    return environment().get_template("report.html.j2").render(**context(result, options))


def write(result: RunResult, path: Path, options: ReportOptions) -> None:
    path.write_text(render(result, options), encoding="utf-8")
