"""A markdown summary: points per kata and task, then the failing tasks with their hints.

Written by ``--kata-report=markdown:PATH``, and appended to ``$GITHUB_STEP_SUMMARY`` when that
is set, so a workflow run's page shows the learner's points without opening the log.
"""

from __future__ import annotations

from pathlib import Path

from ..results import (
    ERROR,
    FAILED,
    NOT_STARTED,
    TASK_FAILING,
    TASK_IN_PROGRESS,
    TASK_NOT_STARTED,
    TASK_PASSED,
    TASK_PASSED_WITH_SKIPS,
    RunResult,
)
from .common import error_summary, fmt_points, rows
from .options import ReportOptions

_ICON = {
    TASK_PASSED: "✅",
    TASK_PASSED_WITH_SKIPS: "✅",
    TASK_FAILING: "❌",
    TASK_IN_PROGRESS: "🟡",
    TASK_NOT_STARTED: "⭕",
}


def _cell(text: str) -> str:
    """Text that is safe inside a table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def render(result: RunResult) -> str:
    out = [f"## gpu-katas: {fmt_points(result.earned)}/{result.points} points", ""]
    out += [f"Status: **{result.status}**.", ""]
    if result.impl != "learner":
        out += [f"Implementation under test: `{result.impl}`.", ""]
    if result.seed is not None:
        out += [f"Seed: `{result.seed}` (reproduce with `--kata-seed={result.seed}`).", ""]
    out += ["| Phase | Kata | Task | Status | Points |", "| ---: | --- | --- | --- | ---: |"]
    for kata in result.katas:
        for task in kata.tasks:
            icon = _ICON.get(task.status, "➖")
            out.append(
                f"| {kata.phase:02d} | {_cell(kata.id)} | {_cell(task.title)} (`{task.id}`) "
                f"| {icon} {task.status} | {fmt_points(task.earned)}/{task.points} |"
            )
        out.append(
            f"| | **{_cell(kata.id)}** | **total** | {kata.status} "
            f"| **{fmt_points(kata.earned)}/{kata.points}** |"
        )
    failing = [r for r in rows(result) if r.outcome in (FAILED, ERROR, NOT_STARTED)]
    if failing:
        out += ["", "### To work on", ""]
        seen = set()
        for row in failing:
            key = (row.kata.id, row.task.id)
            if key not in seen:
                seen.add(key)
                out.append(
                    f"- **{_cell(row.kata.id)} › {_cell(row.task.title)}** (`{row.task.id}`)"
                )
                for hint in row.task.failure_hints:
                    out.append(f"  - 💡 Hint: {_cell(hint)}")
            first = row.message.strip().splitlines()[0] if row.message.strip() else ""
            out.append(f"  - `{_cell(row.test_name)}`: {_cell(first)[:300]}")
    if result.notes:
        out += ["", *(f"> {n}" for n in result.notes)]
    errs = error_summary(result)
    if errs:
        out += ["", "### Errors", "", "```text", errs.replace("```", "'''"), "```"]
    return "\n".join(out) + "\n"


def append_step_summary(result: RunResult, path: Path) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(render(result) + "\n")


def write(result: RunResult, path: Path, options: ReportOptions) -> None:
    path.write_text(render(result), encoding="utf-8")
