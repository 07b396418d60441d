"""JUnit XML in the shape of pytest's ``--junitxml``: ``testsuites/testsuite/testcase``.

Two shapes, as pytest's ``junit_family``: ``xunit2`` (default) validates against the Jenkins
xunit schema pytest tests itself with (``junit-10.xsd``), which allows ``<properties>`` on a
``testsuite`` only: the suite carries the kata's points and each task's ``earned/points``.
``xunit1`` (``--kata-junit-family=xunit1``) also puts ``kata``, ``task``, ``points`` (the test's
share), ``score`` and ``hidden`` on every ``testcase``, as older CI views expect.

One ``testsuite`` per kata, one ``testcase`` per test with pytest's ``classname``/``name``/
``time`` and ``failure``/``error``/``skipped`` children; no two testcases share classname and
name. Failure text is the learner-facing message (hidden tests: the message only, never their
source). Run errors outside any kata are a ``gpu-katas`` suite with ``error`` testcases.
"""

from __future__ import annotations

import platform
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from ..results import ERROR, PASSED, SKIPPED, RunResult
from .common import NOT_RUN, Row, fmt_points, kata_rows
from .options import ReportOptions

FAMILIES = ("xunit2", "xunit1")


class _Cases:
    """Testcase names already used in the document: a clash gets " (2)", " (3)" ... appended."""

    def __init__(self) -> None:
        self.seen: set[tuple[str, str]] = set()

    def add(self, suite: ET.Element, classname: str, name: str, seconds: float) -> ET.Element:
        unique, n = name, 1
        while (classname, unique) in self.seen:
            n += 1
            unique = f"{name} ({n})"
        self.seen.add((classname, unique))
        return ET.SubElement(
            suite, "testcase", classname=classname, name=unique, time=f"{seconds:.3f}"
        )


def _classname(row: Row) -> str:
    """pytest's classname: the test file's dotted path (classes included)."""
    if row.record is None:
        return f"{row.kata.id}.{row.task.id}"
    file_part, _, rest = row.record.nodeid.partition("::")
    parts = file_part.removesuffix(".py").split("/") + rest.split("::")[:-1]
    return ".".join(parts)


def _props(parent: ET.Element, values: dict[str, str]) -> None:
    props = ET.SubElement(parent, "properties")
    for name, value in values.items():
        ET.SubElement(props, "property", name=name, value=value)


def _case(suite: ET.Element, cases: _Cases, row: Row, family: str) -> str:
    name = row.test_name if row.record else f"{row.task.id}: not run"
    case = cases.add(suite, _classname(row), name, row.record.duration if row.record else 0.0)
    if family == "xunit1":
        _props(
            case,
            {
                "kata": row.kata.id,
                "task": row.task.id,
                "points": fmt_points(row.max_points),
                "score": fmt_points(row.score),
                "hidden": "true" if row.hidden else "false",
            },
        )
    outcome = row.outcome
    if outcome == PASSED:
        return "passed"
    first_line = row.message.splitlines()[0][:300] if row.message else ""
    if outcome in (SKIPPED, NOT_RUN):
        ET.SubElement(case, "skipped", type="pytest.skip", message=first_line).text = row.text()
        return "skipped"
    tag = "error" if outcome == ERROR else "failure"
    ET.SubElement(case, tag, message=first_line).text = row.text()
    return tag


def build(result: RunResult, family: str = "xunit2") -> ET.Element:
    if family not in FAMILIES:
        raise ValueError(f"unknown JUnit family {family!r} (families: {', '.join(FAMILIES)})")
    root = ET.Element("testsuites", name="gpu-katas")
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(result.started or time.time()))
    cases = _Cases()
    for kata in result.katas:
        suite = ET.SubElement(root, "testsuite", name=kata.id)
        props = {
            "phase": str(kata.phase),
            "points": str(kata.points),
            "earned": fmt_points(kata.earned),
            "status": kata.status,
        }
        if result.seed is not None:
            props["seed"] = str(result.seed)  # the run seed: --kata-seed reproduces the inputs
        for task in kata.tasks:
            props[f"task:{task.id}"] = f"{fmt_points(task.earned)}/{task.points}"
            props[f"task:{task.id}:status"] = task.status
        _props(suite, props)
        counts = {"failure": 0, "error": 0, "skipped": 0, "passed": 0}
        elapsed = 0.0
        for row in kata_rows(result, kata):
            counts[_case(suite, cases, row, family)] += 1
            elapsed += row.record.duration if row.record else 0.0
        for err in kata.errors:
            _error_case(suite, cases, kata.id, "kata error", err, family)
            counts["error"] += 1
        _totals(suite, counts, elapsed, stamp)
    if result.errors:
        suite = ET.SubElement(root, "testsuite", name="gpu-katas")
        for err in result.errors:
            _error_case(suite, cases, "gpu-katas", "collection", err, family)
        _totals(suite, {"error": len(result.errors)}, 0.0, stamp)
    return root


def _error_case(
    suite: ET.Element, cases: _Cases, classname: str, name: str, error: str, family: str
) -> None:
    """An error outside any test (collection, a crashed process): worth no points."""
    case = cases.add(suite, classname, name, 0.0)
    if family == "xunit1":
        _props(case, {"points": "0", "score": "0"})
    ET.SubElement(case, "error", message=error.splitlines()[0][:300]).text = error


def _totals(suite: ET.Element, counts: dict[str, int], elapsed: float, stamp: str) -> None:
    suite.set("errors", str(counts.get("error", 0)))
    suite.set("failures", str(counts.get("failure", 0)))
    suite.set("skipped", str(counts.get("skipped", 0)))
    suite.set("tests", str(sum(counts.values())))
    suite.set("time", f"{elapsed:.3f}")
    suite.set("timestamp", stamp)
    suite.set("hostname", platform.node())


def write(result: RunResult, path: Path, options: ReportOptions) -> None:
    tree = ET.ElementTree(build(result, options.junit_family))
    ET.indent(tree)
    tree.write(path, encoding="utf-8", xml_declaration=True)
