"""pytest plugin: hidden tests from an encrypted bundle, held in memory; grade mode.

- ``--kata-hidden=auto`` (default): hidden tests from ``solutions/`` where the instructor tree
  has them (collected by the kata plugin's kata directories), else from ``grading/hidden.bundle``
  when the key is set (``KATA_HIDDEN_KEY`` or ``KATA_HIDDEN_KEY_FILE``). Without the key the
  summary says how many hidden tests there are and that they run at grading.
- ``--kata-hidden=PATH``: the bundle a grader supplies at grading time (the key is required).
- ``--kata-grade``: the tests that count are the canonical ones (the bundle's, or the instructor
  tree's), loaded in memory; the learner's test and conftest files are never imported, and the
  harness files are checked against ``grading/integrity.json`` (:mod:`.integrity`).

Modules: :mod:`.keys`, :mod:`.bundle` (format, AES-256-GCM), :mod:`.memload` (in-memory
modules and their collectors), :mod:`.canonical` (which source), :mod:`.integrity`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .. import layout
from ..api import add_run_error, is_kata_dir, run_result
from ..layout import solution_dir
from .canonical import BUNDLE, TREE, Source, SourceError, resolve
from .integrity import BUNDLE_PATH, MANIFEST_PATH, IntegrityReport, check_tree
from .memload import MemoryDir, MemoryLoadError, install, uninstall


@dataclass
class HiddenState:
    source: Source
    grade: bool
    integrity: IntegrityReport | None = None
    notes: list[str] = field(default_factory=list)
    skipped_katas: list[str] = field(default_factory=list)  # grade mode: not in the bundle
    secret_paths: list[str] = field(default_factory=list)  # what learner code must not read


HIDDEN = pytest.StashKey[HiddenState]()


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("gpu-katas")
    g.addoption(
        "--kata-grade",
        action="store_true",
        help="grade mode: run the canonical tests (bundle or instructor tree), not the "
        "learner's test or conftest files, and check harness files against "
        f"{MANIFEST_PATH}",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    # Grade mode imports no conftest.py from disk: a learner's conftest could rewire the run
    # before any check. Canonical conftests come in memory with their kata's tests.
    if getattr(early_config.known_args_namespace, "kata_grade", False):
        early_config.known_args_namespace.noconftest = True


@pytest.hookimpl(trylast=True)  # after the kata plugin's, whose run errors it adds to
def pytest_configure(config: pytest.Config) -> None:
    root = config.rootpath
    grade = bool(config.option.kata_grade)
    try:
        source = resolve(root, config.option.kata_hidden, grade, config.invocation_params.dir)
    except SourceError as e:
        raise pytest.UsageError(str(e)) from None
    state = HiddenState(source, grade, secret_paths=source.secret_paths(grade))
    config.stash[HIDDEN] = state
    install(config)
    if grade:
        state.integrity = _check_integrity(root, source, state.notes)
        for t in state.integrity.tampered:
            add_run_error(config, f"tampering: {t}")


def pytest_unconfigure(config: pytest.Config) -> None:
    if HIDDEN in config.stash:
        uninstall()


# --------------------------------------------------------------------------- secrets (harness.hookspec)
def pytest_kata_secret_paths(config: pytest.Config) -> list[str]:
    state = config.stash.get(HIDDEN, None)
    return list(state.secret_paths) if state is not None else []


def pytest_kata_forget_secrets(config: pytest.Config, kata_dir: Path) -> None:
    state = config.stash.get(HIDDEN, None)
    if state is not None:
        from .forget import forget

        forget(state.source, kata_dir, Path(config.rootpath))


def _check_integrity(root: Path, source: Source, notes: list[str]) -> IntegrityReport:
    path = root / MANIFEST_PATH
    if not path.is_file():
        report = IntegrityReport()
        if source.kind == BUNDLE:
            report.tampered.append(f"{MANIFEST_PATH}: deleted (it was published with the bundle)")
        else:
            notes.append(f"no {MANIFEST_PATH} (an instructor tree): harness files not checked")
        return report
    data = path.read_bytes()
    report = check_tree(root, data)
    expected = source.header.integrity_sha256 if source.header else ""
    if source.kind == BUNDLE and expected and hashlib.sha256(data).hexdigest() != expected:
        report.tampered.insert(0, f"{MANIFEST_PATH}: changed since it was published")
    return report


# --------------------------------------------------------------------------- collection
def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Grade mode collects kata directories only: no stray test module (or its imports) runs."""
    state = config.stash.get(HIDDEN, None)
    if state is None or not state.grade:
        return None
    from ..manifest import find_kata_dir

    katas = (config.rootpath / layout.KATAS).resolve()
    path = collection_path.resolve()
    if path == katas or katas in path.parents:
        return True if path.is_file() and find_kata_dir(path) is None else None
    return True if path not in katas.parents else None


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    report = yield
    state = collector.config.stash.get(HIDDEN, None)
    if state is None or not is_kata_dir(collector) or report.outcome != "passed":
        return report
    try:
        report.result = _kata_children(collector, state, list(report.result or []))
    except (MemoryLoadError, SyntaxError, OSError, UnicodeDecodeError, ValueError) as e:
        report.outcome, report.longrepr, report.result = "failed", str(e), []
    return report


def _kata_children(kata: pytest.Collector, state: HiddenState, children: list) -> list:
    source = state.source
    mirror = solution_dir(kata.path)
    mirror_tests = _has_plaintext(kata.path)
    if state.grade:
        tests = source.tests_for(kata.path)
        if tests is None:
            state.skipped_katas.append(layout.rel(kata.path, kata.config.rootpath))
            return []
        public = MemoryDir.create(kata, kata.path / "tests", tests.public, "public", True)
        hidden_base = layout.hidden_tests_dir(kata.path) or kata.path / "tests"
        return [public, MemoryDir.create(kata, hidden_base, tests.hidden, "hidden", False, public)]
    if source.kind != BUNDLE or source.locked:
        return children
    if mirror_tests and kata.config.option.kata_hidden == "auto":
        return children  # the instructor tree's plaintext hidden tests win under auto
    tests = source.tests_for(kata.path)
    if mirror is not None:  # an explicit bundle replaces the plaintext hidden tests
        children = [c for c in children if not layout.in_mirror(Path(c.path), kata.path)]
    if tests is None or not tests.hidden:
        return children
    base = layout.hidden_tests_dir(kata.path) or kata.path / "tests"
    hidden = MemoryDir.create(kata, base, tests.hidden, "hidden", False, kata.path)
    return [*children, hidden]


def _has_plaintext(kata_dir: Path) -> bool:
    """Whether the instructor tree has this kata's hidden tests in the clear (they ran)."""
    mirror = solution_dir(kata_dir)
    return mirror is not None and any(mirror.rglob("test_*.py"))


# --------------------------------------------------------------------------- telling people
def pytest_report_header(config: pytest.Config) -> list[str]:
    state = config.stash.get(HIDDEN, None)
    if state is None:
        return []
    src = state.source
    lines = []
    if src.kind == BUNDLE:
        where = _shown(src.bundle_path, config.rootpath)
        if src.locked:
            lines.append(f"gpu-katas hidden tests: {where} is locked (no key): they run at grading")
        else:
            lines.append(f"gpu-katas hidden tests: from {where} (key {src.key.fingerprint}), "
                         "in memory")  # fmt: skip
    if state.grade:
        origin = (
            "the instructor tree" if src.kind == TREE else _shown(src.bundle_path, config.rootpath)
        )
        lines.append(f"gpu-katas grade mode: canonical tests from {origin}")
    return lines


def _shown(path: Path | None, root: Path) -> str:
    return "?" if path is None else layout.rel(path, root)


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash.get(HIDDEN, None)
    if state is None or hasattr(config, "workerinput"):
        return
    write = terminalreporter.write_line
    for line in locked_summary(config, state):
        write(line)
    if state.grade:
        report = state.integrity or IntegrityReport()
        if report.tampered:
            write(f"TAMPERING: {len(report.tampered)} harness file(s) differ from the "
                  "published ones; this grade is not valid:", red=True, bold=True)  # fmt: skip
            for t in report.tampered[:20]:
                write(f"  {t}", red=True)
        for line in report.ignored[:20]:
            write(f"grade mode: {line}")
        for line in state.notes:
            write(f"grade mode: {line}")
        for kata in state.skipped_katas:
            write(f"grade mode: {kata} is not in the canonical tests: not graded")


def locked_summary(config: pytest.Config, state: HiddenState) -> list[str]:
    """Lines for a run without the key: how many hidden tests each kata of this run has."""
    src = state.source
    if not src.locked or src.header is None:
        return []
    result = run_result(config)
    ran = {k.path for k in result.katas} if result is not None else set()
    root = config.rootpath
    counts = [(k["id"], int(k.get("hidden_tests", 0))) for k in src.header.katas
              if k.get("path") in ran and k.get("hidden_tests")
              and not _has_plaintext(root / k["path"])]  # fmt: skip
    if not counts:
        return []
    total = sum(n for _, n in counts)
    each = ", ".join(f"{kid}: {n}" for kid, n in counts)
    return [
        f"hidden tests: {total} more ({each}) are in {_shown(src.bundle_path, config.rootpath)} "
        "and run at grading; this run has no key (KATA_HIDDEN_KEY), so they were not run"
    ]


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash.get(HIDDEN, None)
    if state is not None and state.integrity is not None and state.integrity.tampered:
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED  # a tampered run never passes


__all__ = ["BUNDLE_PATH", "HIDDEN", "HiddenState"]
