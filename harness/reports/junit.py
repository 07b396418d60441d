"""JUnit XML in the shape of pytest's ``--junitxml``: ``testsuites/testsuite/testcase``.

One ``testsuite`` per kata (its points as ``<properties>``), one ``testcase`` per test with
pytest's ``classname``/``name``/``time`` and ``failure``/``error``/``skipped`` children, and
properties ``kata``, ``task``, ``points`` (the test's share), ``score`` and ``hidden``. Failure
text is the learner-facing message (hidden tests: the message only, never their source). Run
errors outside any kata are a ``gpu-katas`` suite with an ``error`` testcase.
"""

from __future__ import annotations

import platform
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from ..results import ERROR, PASSED, SKIPPED, RunResult
from . import ReportOptions
from .common import NOT_RUN, Row, fmt_points, kata_rows


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


def _case(suite: ET.Element, row: Row) -> str:
    name = row.test_name if row.record else f"{row.task.id}: not run"
    case = ET.SubElement(
        suite,
        "testcase",
        classname=_classname(row),
        name=name,
        time=f"{row.record.duration:.3f}" if row.record else "0.000",
    )
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


def build(result: RunResult) -> ET.Element:
    root = ET.Element("testsuites", name="gpu-katas")
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(result.started or time.time()))
    for kata in result.katas:
        suite = ET.SubElement(root, "testsuite", name=kata.id)
        _props(
            suite,
            {
                "phase": str(kata.phase),
                "points": str(kata.points),
                "earned": fmt_points(kata.earned),
                "status": kata.status,
            },
        )
        counts = {"failure": 0, "error": 0, "skipped": 0, "passed": 0}
        elapsed = 0.0
        for row in kata_rows(result, kata):
            counts[_case(suite, row)] += 1
            elapsed += row.record.duration if row.record else 0.0
        for err in kata.errors:
            _error_case(suite, kata.id, "kata error", err)
            counts["error"] += 1
        _totals(suite, counts, elapsed, stamp)
    if result.errors:
        suite = ET.SubElement(root, "testsuite", name="gpu-katas")
        for err in result.errors:
            _error_case(suite, "gpu-katas", "collection", err)
        _totals(suite, {"error": len(result.errors)}, 0.0, stamp)
    return root


def _error_case(suite: ET.Element, classname: str, name: str, error: str) -> None:
    """An error outside any test (collection, a crashed process): worth no points."""
    case = ET.SubElement(suite, "testcase", classname=classname, name=name, time="0.000")
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
    tree = ET.ElementTree(build(result))
    ET.indent(tree)
    tree.write(path, encoding="utf-8", xml_declaration=True)
