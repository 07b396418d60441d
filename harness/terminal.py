"""The learner's end-of-run summary: per kata, tasks with status and points, and what to do next.

Colour comes from pytest's terminal writer, which already honours NO_COLOR, PY_COLORS and
whether the output is a terminal, so CI logs get plain text.
"""

from __future__ import annotations

from typing import Any

from .guide import PARTIAL_NOTE, command
from .reports.charts import explanation
from .results import (
    PASSING_STATUSES,
    TASK_FAILING,
    TASK_IN_PROGRESS,
    TASK_NOT_RUN,
    TASK_NOT_STARTED,
    TASK_PASSED,
    TASK_PASSED_WITH_SKIPS,
    TASK_SKIPPED,
    KataResult,
    RunResult,
    TaskResult,
)

_MARK = {
    TASK_PASSED: ("✓", {"green": True}),
    TASK_PASSED_WITH_SKIPS: ("✓", {"green": True}),
    TASK_FAILING: ("✗", {"red": True}),
    TASK_IN_PROGRESS: ("◐", {"yellow": True}),
    TASK_NOT_STARTED: ("○", {"yellow": True}),
    TASK_SKIPPED: ("-", {"cyan": True}),
    TASK_NOT_RUN: ("·", {}),
}


def fmt_points(x: float) -> str:
    # The exact value (per-test points are dyadic, so sums are exact): "7.25", never rounded, so
    # the graders' own sums (JavaScript's String(x) prints the same shortest form) match it.
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def task_detail(task: TaskResult) -> str:
    status = task.status
    if status in (TASK_FAILING, TASK_IN_PROGRESS):
        passed = sum(t.ok for t in task.tests)
        detail = f"{status} ({passed} of {len(task.tests)} tests pass)"
        if task.gate_reasons:
            cap = task.gate_cap
            detail += f"; a gate failed: at most {fmt_points(cap)}" if cap else "; a gate failed: 0"
        return detail
    if status in (TASK_SKIPPED, TASK_PASSED_WITH_SKIPS):
        return f"{status}: " + "; ".join(task.skip_reasons)
    return status


def kata_lines(kata: KataResult, kata_cmd: str | None = None) -> list[tuple[str, dict[str, bool]]]:
    """The summary of one kata as (text, markup) lines; shared by `kata progress`.

    `kata_cmd` is how the suggested `kata hint` is spelled (default: as this shell can run it).
    """
    out: list[tuple[str, dict[str, bool]]] = []
    head = f"{kata.where} · {kata.id} — {kata.title}"
    pts = f"{fmt_points(kata.earned)}/{kata.points} points"
    out.append((f"{head}  {pts} · {kata.status}", {"bold": True}))
    width = max(len(t.id) for t in kata.tasks)
    for t in kata.tasks:
        mark, markup = _MARK[t.status]
        pts = f"{fmt_points(t.earned)}/{t.points}"
        out.append((f"  {mark} {t.id:<{width}}  {pts:>7}  {t.title} — {task_detail(t)}", markup))
        for reason in t.gate_reasons:
            out.append((f"    {' ' * width}gate: {reason}", {"red": True}))
        for test in t.tests:  # what a passed test explains (kata_explain): interview prep
            for i, line in enumerate(explanation(test).splitlines()):
                lead = f"why {test.name}: " if i == 0 else "  "
                out.append((f"    {' ' * width}{lead}{line}", {"cyan": True}))
    for err in kata.errors:
        out.append((f"  ! {err.splitlines()[0][:200]}", {"red": True}))
    for warning in kata.warnings:
        out.append((f"  ! {warning.removeprefix(f'kata {kata.id}: ')}", {"yellow": True}))
    for note in kata.notes:
        out.append((f"  ! {note.splitlines()[0][:200]}", {"yellow": True}))
    nxt = kata.next_task
    if nxt is not None:
        kata_cmd = kata_cmd or command("kata")
        hint = f" Hint: `{kata_cmd} hint {kata.id} {nxt.id}`." if nxt.hints else ""
        out.append((f"  next: {nxt.id} — {nxt.title}.{hint}", {"bold": True}))
    elif all(t.status == TASK_PASSED for t in kata.tasks):
        out.append(("  all tasks pass — well done.", {"green": True}))
    elif all(t.status in (*PASSING_STATUSES, TASK_SKIPPED) for t in kata.tasks):
        out.append(("  all tasks pass that this machine can run.", {"green": True}))
    return out


def render_summary(tr: Any, result: RunResult, written: list[str], partial: bool = False) -> None:
    tr.write_sep("=", "gpu-katas", bold=True)
    if result.impl != "learner":
        tr.write_line(f"implementation: {result.impl}")
    for kata in result.katas:
        for text, markup in kata_lines(kata):
            tr.write_line(text, **markup)
    for err in result.errors:
        tr.write_line(f"! {err.splitlines()[0][:300]}", red=True)
    for note in result.notes:
        tr.write_line(f"note: {note}", yellow=True)
    total = f"total: {fmt_points(result.earned)}/{result.points} points"
    tr.write_line(total, bold=True, green=result.earned == result.points and result.points > 0)
    if result.seed is not None:
        tr.write_line(f"seed: {result.seed} (the same inputs again: --kata-seed={result.seed})")
    if partial:
        tr.write_line("note: " + PARTIAL_NOTE.format(kata=command("kata")))
    for path in written:
        tr.write_line(f"report written: {path}")
