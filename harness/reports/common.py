"""The view every writer shares: one row per test with its points, status and learner text.

Writers differ only in shape, so what a row *says* is decided here once: the per-test points
(the test's share of its task, :attr:`TaskResult.shares`), the learner-facing text, and the
rule that hidden tests never show source. A task none of whose tests ran gets a placeholder
row holding its points, so every format's test points add up to the terminal total.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..results import (
    ERROR,
    FAILED,
    NOT_STARTED,
    PASSED,
    SKIPPED,
    KataResult,
    RunResult,
    TaskResult,
    TestRecord,
    split_nodeid,
)
from ..terminal import fmt_points

__all__ = [
    "NOT_RUN",
    "Row",
    "cap",
    "error_summary",
    "errors",
    "fmt_points",
    "gate_line",
    "kata_rows",
    "notes_text",
    "rows",
    "test_code",
]

NOT_RUN = "not_run"  # the outcome of a placeholder row


@dataclass
class Row:
    kata: KataResult
    task: TaskResult
    record: TestRecord | None  # None: the task's placeholder row (none of its tests ran)
    max_points: float
    number: str  # "kata.task.test", 1-based, for graders that order by it
    earned: float | None = None  # the test's score after its task's gate (None: none computed)

    @property
    def outcome(self) -> str:
        return self.record.outcome if self.record else NOT_RUN

    @property
    def ok(self) -> bool:
        return self.outcome == PASSED

    @property
    def not_failed(self) -> bool:
        """What a grader's pass/fail mark says: passed, or skipped because this machine lacks a
        tier or tool (never a failure of the submission; its points stay unearned)."""
        return self.outcome in (PASSED, SKIPPED)

    @property
    def score(self) -> float:
        if self.earned is not None:
            return self.earned
        return self.max_points if self.ok else 0.0

    @property
    def hidden(self) -> bool:
        return bool(self.record and self.record.hidden)

    @property
    def test_name(self) -> str:
        return self.record.name if self.record else "(no test ran)"

    @property
    def name(self) -> str:
        """`simt › warps › test_add[3]`; hidden tests say so instead of naming their file."""
        tag = " (hidden)" if self.hidden else ""
        return f"{self.kata.id} › {self.task.id} › {self.test_name}{tag}"

    @property
    def filename(self) -> str:
        """The public test file, relative to the root; empty for hidden tests."""
        if self.record is None or self.hidden:
            return ""
        return split_nodeid(self.record.nodeid)[0]

    hint: str = ""  # the hint shown with this test: once per task, at its first test (rows())

    @property
    def message(self) -> str:
        """One learner-facing line or paragraph: why this test did not pass."""
        r = self.record
        if r is None:
            return "not run: no test of this task was selected in this run"
        if r.outcome == PASSED:
            return ""
        if r.outcome == SKIPPED:
            return f"skipped: {r.skip_reason}" if r.skip_reason else "skipped"
        text = r.message or ("a hidden test failed" if r.hidden else "failed")
        if r.gate_failed:
            return f"{gate_line(self.task, r.gate)}\n{text}"
        return text

    @property
    def source(self) -> str:
        """The failing lines of a public test, never of a hidden one."""
        if self.record is None or self.hidden or self.ok:
            return ""
        return self.record.source

    @property
    def output(self) -> str:
        """What a failing public test printed."""
        if self.record is None or self.hidden:
            return ""
        return self.record.output

    def text(self, limit: int = 4000, output: bool = True) -> str:
        """Message, source lines, hint and output as plain text, for graders' `output` fields."""
        parts = [self.message]
        if self.source:
            where = f"{self.filename}:{self.record.line}" if self.record.line else self.filename
            parts.append(f"{where}\n{self.source}")
        if self.hint:
            parts.append(f"Hint: {self.hint}")
        if output and self.output:
            parts.append(f"Output:\n{self.output}")
        return cap("\n\n".join(p for p in parts if p), limit)


def rows(result: RunResult) -> Iterator[Row]:
    """Every test of the run, kata by kata and task by task, with its points."""
    for ki, kata in enumerate(result.katas, 1):
        for ti, task in enumerate(kata.tasks, 1):
            if task.excused:
                continue  # not graded on this grader: the run's notes say so, no row pretends
            if not task.tests:
                yield Row(kata, task, None, float(task.possible), f"{ki}.{ti}.1")
                continue
            pairs = zip(task.tests, task.shares, task.scores, strict=True)
            shown: set[str] = set()
            for i, (record, share, score) in enumerate(pairs, 1):
                hint = _row_hint(task, record)
                yield Row(
                    kata, task, record, share, f"{ki}.{ti}.{i}", score, hint * (hint not in shown)
                )
                shown.add(hint)


def _row_hint(task: TaskResult, record: TestRecord) -> str:
    """The hint for this test's failure; a not-started test gets the task's first hint."""
    if record.outcome in (FAILED, ERROR):
        return record.hint
    if record.outcome == NOT_STARTED and task.hints:
        return task.hints[0]
    return ""


def gate_line(task: TaskResult, gate: str) -> str:
    """One sentence for a failed gate: what is wrong, and what it costs the task."""
    cap = task.gate_cap
    cost = f"at most {fmt_points(cap)} of {task.points}" if cap else f"0 of {task.points}"
    return f"Gate failed: {gate} (task {task.id} earns {cost} points while it fails)"


def kata_rows(result: RunResult, kata: KataResult) -> list[Row]:
    return [r for r in rows(result) if r.kata is kata]


def errors(result: RunResult) -> list[str]:
    """Everything that kept the run from being a clean grade: run and kata errors."""
    out = list(result.errors)
    for kata in result.katas:
        out += [f"{kata.id}: {e}" for e in kata.errors]
    return out


def notes_text(result: RunResult) -> str:
    """What the run notes for the reader (tasks this grader left out), one line each."""
    return "\n".join(f"Note: {n}" for n in result.notes)


def error_summary(result: RunResult, limit: int = 2000) -> str:
    errs = errors(result)
    if not errs:
        return ""
    head = f"{len(errs)} error(s) while grading" if len(errs) > 1 else "an error while grading"
    return cap(head + ":\n" + "\n".join(f"- {e}" for e in errs), limit)


def cap(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, with a note saying so."""
    if len(text) <= limit:
        return text
    note = "\n[... truncated]"
    return text[: max(0, limit - len(note))] + note


def test_code(row: Row, root: Path) -> str:
    """The source of a public test's function (decorators included), read from its file under
    `root`; the failing lines when the file is not on disk (a bundle's tests); never a hidden
    test's source."""
    if row.record is None or row.hidden:
        return ""
    file_part, _, rest = row.record.nodeid.partition("::")
    path = root / file_part
    parts = rest.split("::")
    parts[-1] = parts[-1].split("[", 1)[0]
    return _function_source(path, tuple(parts)) or row.record.source


@lru_cache(maxsize=256)
def _parsed(path: Path) -> tuple[str, ast.Module] | None:
    try:
        text = path.read_text(encoding="utf-8")
        return text, ast.parse(text)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None


def _function_source(path: Path, names: tuple[str, ...]) -> str:
    """`Class::test_x` or `test_x` in the module at `path`, as written there."""
    parsed = _parsed(path)
    if parsed is None:
        return ""
    text, node = parsed
    body: list[ast.stmt] = node.body
    found: ast.stmt | None = None
    for name in names:
        found = next(
            (
                n
                for n in body
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and n.name == name
            ),
            None,
        )
        if found is None:
            return ""
        body = getattr(found, "body", [])
    if not isinstance(found, ast.FunctionDef | ast.AsyncFunctionDef):
        return ""
    lines = text.splitlines()
    first = min([found.lineno, *(d.lineno for d in found.decorator_list)])
    chunk = lines[first - 1 : found.end_lineno]
    indent = min((len(x) - len(x.lstrip()) for x in chunk if x.strip()), default=0)
    return "\n".join(x[indent:] for x in chunk)
