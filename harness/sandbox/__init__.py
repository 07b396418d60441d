"""pytest plugin: every kata test runs in a sandbox child, so learner code cannot harm the run.

A crash, a hang, a fork bomb, ``os._exit(0)`` or a patched pytest fails *that test* with a
sentence the learner can act on, and the run goes on to a complete report. Tests outside katas
(the harness's own) and tests skipped by a marker run in the pytest process as usual.

Modules: :mod:`.child` (fork, result pipe, reuse), :mod:`.limits` (rlimits, cgroups, network
namespace), :mod:`.guard` (tamper check), :mod:`.native_crash` (which C function crashed),
:mod:`.messages` (the sentences). ``--kata-no-sandbox`` runs learner code in-process (debugging);
``--kata-sandbox=test`` forks a fresh child per test instead of one per kata.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
from _pytest.reports import TestReport

from .. import hangs
from ..api import (
    KataItemInfo,
    KataReportInfo,
    KataTimeout,
    capabilities,
    in_sandbox_child,
    item_info,
    wall_limit,
)
from . import messages, secrets
from .child import Child, ChildGone, ChildSpec, Outcome
from .limits import Limits, isolation_notes
from .native_crash import CRASH_SIGNALS, native_sites, pick_site


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("gpu-katas")
    g.addoption(
        "--kata-no-sandbox",
        action="store_true",
        help="run learner code in the pytest process: no limits, and a crash ends the run "
        "(debugging with --pdb)",
    )
    g.addoption(
        "--kata-sandbox",
        choices=("kata", "test"),
        default="kata",
        help="one sandbox child per kata, restarted after a crash (default), or one per test",
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.option.kata_no_sandbox or not hasattr(os, "fork"):
        return
    if secrets.has_secrets([]):  # every harness process holds the key: xdist's controller too
        secrets.hide_process()
        secrets.hide_environment()
    config.pluginmanager.register(Sandbox(config), "gpu-katas-sandbox")


class Sandbox:
    """Routes kata tests to a child; one live child per pytest process (per xdist worker)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.child: Child | None = None
        self.notes: set[str] = set()
        self._kata_nodeids: dict[Any, set[str]] = {}

    # ----------------------------------------------------------------- which tests
    def _info(self, item: pytest.Item) -> KataItemInfo | None:
        info = item_info(item)
        if info is None or info.fail_reason or item.get_closest_marker("skip") is not None:
            return None  # not a kata test, or no learner code will run
        return info

    def _limits(self, info: KataItemInfo) -> Limits:
        m = info.manifest
        wall = 0.0 if self.config.option.kata_no_timeout else float(m.time_limit)
        return Limits(
            wall_s=wall,
            memory_mb=int(m.memory_limit_mb),
            cpu_s=max(2.0, 2 * wall) if wall else 24 * 3600.0,
            # RLIMIT_AS is off where it would break the run, not only slow it: ASan reserves
            # terabytes of shadow, and the CUDA driver reserves a unified address range of the
            # GPU's size at cuInit. The memory cgroup (where writable) still bounds real use.
            address_space=not self.config.option.kata_sanitize and not self._uses_gpu(m),
        )

    def _uses_gpu(self, manifest: Any) -> bool:
        caps = capabilities(self.config)
        if caps is None or not caps.has_tier("gpu"):
            return False
        return manifest.tier == "gpu" or any(t.tier == "gpu" for t in manifest.tasks)

    def _nodeids(self, session: pytest.Session, kata_dir: Any) -> set[str]:
        if kata_dir not in self._kata_nodeids:
            ids = set()
            for it in session.items:
                info = self._info(it)
                if info is not None and info.manifest.dir == kata_dir:
                    ids.add(it.nodeid)
            self._kata_nodeids[kata_dir] = ids
        return self._kata_nodeids[kata_dir]

    # ----------------------------------------------------------------- running
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        info = self._info(item)
        if info is None or in_sandbox_child():
            return None
        ihook = item.ihook
        ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        outcome = self._run(item, nextitem, info)
        for rep in self._reports(item, info, outcome):
            ihook.pytest_runtest_logreport(report=rep)
        ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True

    def _run(self, item: pytest.Item, nextitem: pytest.Item | None, info: KataItemInfo) -> Outcome:
        kata_dir = info.manifest.dir
        next_info = self._info(nextitem) if nextitem is not None else None
        keep = (
            self.config.option.kata_sandbox == "kata"
            and next_info is not None
            and next_info.manifest.dir == kata_dir
        )
        child = self.child
        if child is not None and (not child.alive or child.spec.kata_dir != kata_dir):
            child.stop()
            child = self.child = None
        if child is None:
            hangs.clear_slot()
            secret_paths = self._secret_paths()
            if secret_paths:  # a key file or bundle to mask
                secrets.hide_process()
            spec = ChildSpec(
                kata_dir=kata_dir,
                limits=self._limits(info),
                secrets=secret_paths,
                nodeids=self._nodeids(item.session, kata_dir),
                keep_caps=info.manifest.keep_capabilities,
                learner=frozenset(Path(f).name for f in info.manifest.files),
            )
            try:
                child = self.child = Child(item.session, spec)
            except ChildGone as e:
                return Outcome(failure=f"the sandbox could not start: {e.message}", kind="crash")
            self.notes.update(child.notes)
        limit = wall_limit(item)
        outcome = child.run(item, nextitem if keep else None, limit.seconds, limit.why)
        if not keep or not child.alive:
            child.stop(kill=not child.alive)
            self.child = None
        return outcome

    def _secret_paths(self) -> list[str]:
        """Files the child masks: what the plugins holding secrets say (harness.hookspec)."""
        answers = self.config.hook.pytest_kata_secret_paths(config=self.config)
        return [path for paths in answers for path in paths]

    def _reports(self, item: pytest.Item, info: KataItemInfo, outcome: Outcome) -> list[TestReport]:
        config = self.config
        if not outcome.failure:
            reports = []
            for data in outcome.reports:
                rep = config.hook.pytest_report_from_serializable(config=config, data=data)
                if isinstance(rep, TestReport) and rep.nodeid == item.nodeid:
                    if isinstance(rep.longrepr, list):  # a skip's (path, line, reason) via JSON
                        rep.longrepr = tuple(rep.longrepr)
                    reports.append(rep)
            if reports:
                return reports
            outcome.failure, outcome.kind = "the sandbox child sent no usable report", "crash"
        return [_failure_report(item, info, outcome)]

    def pytest_sessionfinish(self) -> None:
        if self.child is not None:
            self.child.stop(kill=True)
            self.child = None

    # ----------------------------------------------------------------- telling people
    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        mode = "a child per kata" if config.option.kata_sandbox == "kata" else "a child per test"
        lines = [f"gpu-katas sandbox: learner code runs in {mode} (limits from kata.toml)"]
        lines += [f"  not isolated here: {n}" for n in isolation_notes()]
        return lines

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        notes = sorted(set(isolation_notes()) | self.notes)  # the machine's, and each child's
        if notes and not hasattr(self.config, "workerinput"):
            terminalreporter.write_line("sandbox: not isolated here: " + "; ".join(notes))


def _failure_report(item: pytest.Item, info: KataItemInfo, outcome: Outcome) -> TestReport:
    rec = KataReportInfo(
        info.manifest.id,
        info.task.id if info.task else None,
        info.hidden,
        message=outcome.failure,
        sandbox=outcome.kind,
        gate=info.gate,  # a hang (or os._exit) fails a gate as surely as a wrong answer
        hang=outcome.hang,
        # A crash in the learner's native code is an honest mistake, like an exception of their
        # Python: it fails the test, never the gate's property.
        raised=native_crash_in_learner_code(outcome, info),
    )
    report = TestReport(
        item.nodeid,
        item.location,
        {k: 1 for k in item.keywords},
        "failed",
        outcome.failure,
        "call",
        sections=[],
        duration=round(outcome.wall_s, 4),
        start=0.0,
        stop=0.0,
    )
    rec.attach(report)
    return report


def native_crash_in_learner_code(outcome: Outcome, info: KataItemInfo) -> str:
    """ "SIGSEGV in allocator.c:42 (in arena_alloc)" when the child died by a crash signal in
    native code of the learner's (the innermost frame of a kata library that is not a system
    one, resolved to one of the kata's `files`, or unresolved: no addr2line, no debug info);
    "" for anything else: a hang, os._exit, a signal sent from Python (no native frame), a
    crash in given or test code."""
    if outcome.kind != "crash" or outcome.signal not in CRASH_SIGNALS:
        return ""
    learner = {Path(f).name for f in info.manifest.files}
    site = pick_site(native_sites(outcome.fault), learner)
    if site is None or (site.file and site.file not in learner):
        return ""
    return f"{signal.Signals(outcome.signal).name} in {site.text()}"


# --------------------------------------------------------------------------- in the child
@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """In a child: a MemoryError or a time-limit alarm reads the way the parent's verdicts do."""
    report: TestReport = yield
    if not in_sandbox_child() or call.excinfo is None or not report.failed:
        return report
    info = item_info(item)
    if info is None:
        return report
    if call.excinfo.errisinstance(MemoryError):
        text = messages.memory(
            info.manifest.memory_limit_mb, messages.requested_from(str(call.excinfo.value))
        )
    elif call.excinfo.errisinstance(KataTimeout):
        e = call.excinfo.value
        text = messages.timeout(e.seconds, e.why, getattr(e, "where", ""))
    else:
        return report
    rec = KataReportInfo.of(report)
    if rec is not None:
        rec.message = text
        rec.attach(report)
    report.longrepr = text
    return report


__all__ = ["Sandbox"]
