"""The controller's side of a run: every test report becomes a record of the results model, then
the results are saved, written as reports and summarised.

:class:`ResultCollector` is registered by :mod:`harness.plugin` where there is no ``workerinput``
(under xdist, the workers' reports, and the synthetic report of a crashed worker, all arrive
here). It reads each report's :class:`~harness.api.KataReportInfo`; it never sees an item.
"""

from __future__ import annotations

import os
import re
from typing import Any

import pytest

from . import hangs, layout
from .api import KataReportInfo, KataState
from .results import ERROR, FAILED, NOT_STARTED, PASSED, SKIPPED, ResultBuilder


class KataTaskWarning(pytest.PytestWarning):
    """A task of a kata matches none of its tests, so its points cannot be earned."""


def _outcome(report: pytest.TestReport, rec: KataReportInfo | None) -> str:
    if rec is not None and rec.outcome:
        return rec.outcome
    if report.passed:
        return PASSED
    if report.skipped:
        return SKIPPED
    return FAILED if report.when == "call" else ERROR


# xdist's synthetic report for a test whose worker died: "worker 'gw0' crashed while running ..."
_CRASH = re.compile(r"worker '?(?P<worker>[\w-]+)'? crashed while running")


def _crash_message(report: pytest.TestReport) -> str:
    text = str(report.longrepr or "")
    crash = _CRASH.search(text)
    if crash:
        return (
            f"the test process crashed (worker {crash['worker']} exited unexpectedly) "
            "while running this test"
        )
    return text.strip().splitlines()[-1][:2000] if text.strip() else "failed"


def _captured(report: pytest.TestReport) -> str:
    """What the test printed, for graders' per-test output; capped so reports stay small."""
    text = report.capstdout + report.capstderr
    return text if len(text) <= 2000 else text[:2000] + "\n[... output truncated]"


def _skip_reason(report: pytest.TestReport) -> str:
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    return ""


def _partial(session: pytest.Session) -> bool:
    """Whether this run left tests of its katas out: -k/-m/--deselect/--lf, part of a kata's
    paths, or a -x stop. (`kata progress` merges such runs; the summary says so.)"""
    from .guide import narrowed

    opt = session.config.option
    selected = getattr(opt, "keyword", "") or getattr(opt, "markexpr", "")
    left_out = selected or getattr(opt, "deselect", None) or getattr(opt, "lf", False)
    stopped = bool(session.shouldstop or session.shouldfail)
    args = list(session.config.args)
    return bool(left_out or stopped or narrowed(session.config.invocation_params.dir, args))


class ResultCollector:
    """Controller-side: turns every report into a TestRecord, then saves and renders results.

    Registered only where there is no ``workerinput``: under xdist, workers' reports (and the
    synthetic report of a crashed worker) all arrive here.
    """

    def __init__(self, state: KataState) -> None:
        self.state = state
        self.builder = ResultBuilder(state.root, state.impl, list(state.caps.tiers), state.seed)
        self.partial = False  # the run left some of its katas' tests out
        self.once: dict[tuple[str, str], str] = {}  # (kata, problem) -> the test that showed it

    def _never_ran(self, session: pytest.Session) -> None:
        """Tests that were to run and did not (a crashed worker, a run cut short) keep their
        share of their task's points, unearned: the points of those that ran never grow."""
        opt = session.config.option
        if getattr(opt, "exitfirst", False) or getattr(opt, "maxfail", 0):
            return  # the learner asked to stop early: not a fault of the run
        if not self.builder.records:
            return  # nothing ran (a collection error stopped the run): no points moved
        missing: dict[str, list[str]] = {}
        for nodeid in self.builder.order:  # every test the run was to run, collection order
            if nodeid in self.builder.records:
                continue
            record = self.builder.new_record(
                nodeid,
                outcome=ERROR,
                message="this test never ran: the run stopped before it "
                "(a crashed test process or an interrupted run)",
            )
            if record is not None:
                self.builder.add(record)
                missing.setdefault(record.kata, []).append(nodeid)
        for ids in missing.values():
            name = ids[0].rsplit("::", 1)[-1]
            self.builder.add_collect_error(ids[0], f"{len(ids)} test(s) never ran, from {name}")

    def _once(self, report: pytest.TestReport, rec: KataReportInfo) -> None:
        """Say a kata-wide problem once: the kata's error for a cut-short kata (an import that
        hung, a spent budget), the full text of a syntax error at its first test only; and each
        hint once per task (the first failure it belongs to shows it)."""
        kata = rec.kata
        name = report.nodeid.rsplit("::", 1)[-1]
        hang = rec.hang
        if hang is not None and hang.kind == hangs.IMPORT and (kata, "import") not in self.once:
            self.once[(kata, "import")] = name
            self.builder.add_collect_error(
                report.nodeid, f"the kata stopped at this import: {hang.cause}"
            )
        if rec.fail_fast:
            text = rec.kata_error
            kind = "import" if "did not finish importing" in text else "budget"
            if (kata, kind) not in self.once:
                self.once[(kata, kind)] = name
                self.builder.add_collect_error(report.nodeid, f"not every test ran: {text}")
        if rec.hint:  # each hint once per task and run, at the first failure it belongs to
            first = self.once.setdefault((kata, f"hint:{rec.task}:{rec.hint}"), report.nodeid)
            if first != report.nodeid:
                title = f"hint for task {rec.task!r}"
                report.sections = [s for s in report.sections if s[0] != title]
        key = rec.load_error
        if key:
            first = self.once.setdefault((kata, f"load:{key}"), name)
            if first == name:
                self.builder.add_note(report.nodeid, f"{key} (in full under {name})")
            else:
                short = f"{key} (shown in full under {first})"
                rec.message = short
                rec.attach(report)
                report.longrepr = short

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call" and report.passed:
            return  # setup/teardown that passed say nothing about the test
        rec = KataReportInfo.of(report)
        if rec is not None:
            self._once(report, rec)
        outcome = _outcome(report, rec)
        message = rec.message if rec is not None else ""
        crashed = rec is None and _CRASH.search(str(report.longrepr or "")) is not None
        # A sandbox child that died is the test process crashing, as it would be without it.
        crashed = crashed or (rec is not None and rec.sandbox in ("crash", "exit"))
        if not message and outcome in (FAILED, ERROR):
            message = _crash_message(report)
        if crashed:
            # The test errored (no points) and the kata is marked as errored, as graders expect.
            name = report.nodeid.rsplit("::", 1)[-1]
            self.builder.add_collect_error(report.nodeid, f"{name}: {message}")
        rec = rec or KataReportInfo("", None)  # not a kata test's report: the defaults
        hidden = rec.hidden or layout.is_hidden_path(report.nodeid)
        record = self.builder.new_record(
            report.nodeid,
            outcome=outcome,
            message=message,
            duration=round(report.duration, 4),
            skip_reason=rec.skip_reason or _skip_reason(report),
            tier_skip=rec.tier_skip,
            missing=rec.missing,
            metrics=rec.metrics,
            line=rec.line,
            source=rec.source,
            output="" if hidden or report.passed else _captured(report),
            hidden=hidden,
            gate=rec.gate,
            hint=rec.hint,
            raised=rec.raised,
        )
        if record is not None:
            self.builder.add(record)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.builder.set_order([item.nodeid for item in session.items])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        # Under xdist the controller collects nothing: each worker sends its ids in file order.
        self.builder.set_order(list(ids))

    def pytest_warning_recorded(self, warning_message: Any) -> None:
        # Also the workers' warnings: xdist replays them here.
        if issubclass(warning_message.category, KataTaskWarning):
            self.builder.add_warning(str(warning_message.message))

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            text = str(report.longrepr).strip()
            self.builder.add_collect_error(
                report.nodeid, f"{report.nodeid or 'collection'}: {text}"
            )

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.builder.errors[:0] = self.state.run_errors  # e.g. grade mode's tampering
        if not (self.builder.katas or self.builder.errors):
            return  # not a kata run (e.g. the harness's own tests): stay out of the way
        from . import progress
        from .reports import report_options, write_reports

        self._never_ran(session)
        if exitstatus == pytest.ExitCode.OK and self.builder.has_outcome(NOT_STARTED):
            # Not-started tests report as skips (see makereport), but the kata is not solved.
            exitstatus = session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if exitstatus == pytest.ExitCode.OK and self.state.run_errors:
            exitstatus = session.exitstatus = pytest.ExitCode.TESTS_FAILED  # api.add_run_error
        result = self.state.result = self.builder.build(exit_status=int(exitstatus))
        from .grading import active, apply, optional_names

        if active(session.config):
            if apply(result, optional_names(session.config)) and session.exitstatus == 0:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED  # graded incompletely
        self.partial = _partial(session)
        options = report_options(session.config, self.state.results_dir)
        try:  # reports first: they are what graders read, and they must never be lost
            self.state.written += write_reports(
                self.state.reports, result, self.state.root, options
            )
        finally:
            progress.save(result, self.state.results_dir)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        # KATA_SUMMARY=off: `kata watch` prints the summary itself, last on the screen.
        if self.state.result is not None and os.environ.get("KATA_SUMMARY") != "off":
            from .terminal import render_summary

            render_summary(terminalreporter, self.state.result, self.state.written, self.partial)
