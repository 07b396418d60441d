"""One status vocabulary (harness.results.STATUSES) for tasks, katas and the run, said the same
way by the terminal summary and every report: a kata with a task passed and the rest not
started is "in progress"; a test skipped for a missing tool makes its task and kata "passed
with skips", never "failing"."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

from harness.results import (
    ERROR,
    FAILED,
    NOT_STARTED,
    PASSED,
    SKIPPED,
    STATUSES,
    combined_status,
    task_status,
)

from .conftest import KataRepo, summary_of

SOLVED = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
STARTED = "from harness import todo\n\n" + SOLVED.replace("return a * b", "todo('mul')")
NEEDS_TOOL = """\
import pytest


@pytest.mark.needs("no-such-tool")
def test_add_with_the_tool(calc):
    assert calc.add(1, 1) == 2
"""


@pytest.mark.parametrize(
    ("outcomes", "status"),
    [
        ({PASSED}, "passed"),
        ({PASSED, SKIPPED}, "passed with skips"),
        ({PASSED, NOT_STARTED}, "in progress"),
        ({PASSED, NOT_STARTED, SKIPPED}, "in progress"),
        ({NOT_STARTED, SKIPPED}, "not started"),
        ({PASSED, SKIPPED, FAILED}, "failing"),
        ({NOT_STARTED, ERROR}, "failing"),
        ({SKIPPED}, "skipped"),
        (set(), "not run"),
    ],
)
def test_task_status(outcomes: set[str], status: str) -> None:
    assert task_status(outcomes) == status and status in STATUSES


@pytest.mark.parametrize(
    ("tasks", "status"),
    [
        (["passed", "not started", "not started"], "in progress"),
        (["passed", "passed with skips", "skipped"], "passed with skips"),
        (["passed", "skipped"], "passed with skips"),
        (["skipped", "skipped"], "skipped"),
        (["not started", "skipped"], "not started"),
        (["in progress", "not started"], "in progress"),
        (["passed", "not run"], "in progress"),
        (["passed", "failing", "not started"], "failing"),
        (["passed"], "passed"),
    ],
)
def test_kata_status_follows_its_tasks(tasks: list[str], status: str) -> None:
    assert combined_status(tasks) == status
    assert combined_status(tasks, error=True) == "error"


def test_status_words_agree_in_every_format(repo: KataRepo) -> None:
    """The same run, read from the terminal, JSON, Markdown, HTML and JUnit."""
    repo.add_demo("started", stub=STARTED)
    repo.add_demo("skips", stub=SOLVED, hidden=None)
    repo.write("katas/phase01/skips/tests/test_tool.py", NEEDS_TOOL)
    formats = {"json": "r.json", "markdown": "r.md", "html": "r.html", "junit": "r.xml"}
    args = [f"--kata-report={f}:{p}" for f, p in formats.items()]
    result = repo.pytester.runpytest("katas", "--kata-tier=cpu", "-p", "no:randomly", *args)
    want = {"started": "in progress", "skips": "passed with skips"}
    want_tasks = {
        ("started", "add"): "passed",
        ("started", "mul"): "not started",
        ("started", "gpu"): "skipped",
        ("skips", "add"): "passed with skips",  # 2 of 3 pass, the third needs a missing tool
        ("skips", "mul"): "passed",
        ("skips", "gpu"): "skipped",
    }
    summary = "\n".join(summary_of(result.stdout.str()))
    data = json.loads((repo.root / "r.json").read_text())
    md = (repo.root / "r.md").read_text()
    html = (repo.root / "r.html").read_text()
    junit = ET.parse(repo.root / "r.xml").getroot()
    assert data["status"] == "in progress"
    assert "Status: **in progress**" in md and 'class="pill todo">in progress</span>' in html
    for kata, status in want.items():
        assert re.search(rf"^phase 01 · {kata} — .* points · {status}$", summary, re.M), summary
        (k,) = [k for k in data["katas"] if k["id"] == kata]
        assert k["status"] == status
        assert f"| | **{kata}** | **total** | {status} |" in md, md
        pill = re.search(
            rf'<code>{kata}</code></td>\s*<td><span class="pill \w+">([^<]+)</span>', html
        )
        assert pill and pill.group(1) == status
        (suite,) = [s for s in junit.iter("testsuite") if s.get("name") == kata]
        props = {p.get("name"): p.get("value") for p in suite.iter("property")}
        assert props["status"] == status
        for t in k["tasks"]:
            task_want = want_tasks[(kata, t["id"])]
            assert t["status"] == task_want
            assert props[f"task:{t['id']}:status"] == task_want
            assert re.search(rf"^  \S {t['id']} .* — {task_want}\b", summary, re.M), summary
            assert f"(`{t['id']}`) | " in md
            row = re.search(rf"\(`{t['id']}`\) \| \S+ ([a-z ]+) \|", md[md.index(f"| {kata} |") :])
            assert row and row.group(1) == task_want, md
    assert "failing" not in summary and "failing" not in md and ">failing<" not in html
