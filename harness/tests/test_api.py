"""harness.api and harness.hookspec as a plugin author meets them: the record, a run error, the hooks."""

from __future__ import annotations

import json

import pytest
from _pytest.reports import TestReport

from harness.api import PROPS_KEY, KataReportInfo
from harness.hangs import IMPORT, Hang

from .conftest import DEMO_PUBLIC, KataRepo, summary_of


def _report(user_properties: list) -> TestReport:
    return TestReport("t.py::test_x", ("t.py", 0, "test_x"), {}, "passed", None, "call",
                      user_properties=user_properties)  # fmt: skip


def test_the_report_record_round_trips_through_json_and_leaves_defaults_out() -> None:
    hang = Hang(IMPORT, "k", "calc.py", "test_add", "exceeded 1 s")
    full = KataReportInfo(
        "demo", "add", True, gate="a gate", outcome="not started", message="m",
        metrics={"ratio": 1.5}, hang=hang, more_hangs=[hang], tier_skip=True, skip_reason="r",
        missing="gpu", fail_fast=True, kata_error="e", load_error="SyntaxError", line=3,
        source="x = 1", sandbox="crash",
    )  # fmt: skip
    assert KataReportInfo.from_json(json.loads(json.dumps(full.to_json()))) == full
    assert KataReportInfo("demo", None).to_json() == {"kata": "demo", "task": None, "hidden": False}
    with pytest.raises(TypeError):  # a writer that drifted from the record is caught at once
        KataReportInfo.from_json({"kata": "demo", "task": None, "colour": "red"})


def test_attach_replaces_the_record_and_of_reads_it_back() -> None:
    report = _report([("other", 1)])
    assert KataReportInfo.of(report) is None
    KataReportInfo("demo", "add", message="first").attach(report)
    KataReportInfo("demo", "add", message="second").attach(report)
    assert [name for name, _ in report.user_properties] == ["other", PROPS_KEY]
    assert KataReportInfo.of(report) == KataReportInfo("demo", "add", message="second")


# A plugin of the test repository that uses only harness.api and harness.hookspec's hooks.
PLUGIN = """
import os
from pathlib import Path

import pytest

from harness.api import add_run_error


@pytest.hookimpl(trylast=True)  # after the kata plugin has set up its session
def pytest_configure(config):
    add_run_error(config, "the grader's image is out of date")


def pytest_kata_secret_paths(config):
    with open(Path(str(config.rootpath)) / "asked.txt", "a") as f:
        f.write(f"{os.getpid()}\\n")
    return []


def pytest_kata_forget_secrets(config, kata_dir):
    os.environ["FORGOT_IN"] = f"{os.getpid()} {Path(kata_dir).name}"
"""

CHILD_TEST = """

def test_add_in_a_child_that_forgot(calc):
    import os

    pid, kata_name = os.environ["FORGOT_IN"].split()
    assert (int(pid), kata_name) == (os.getpid(), "demo"), "forgotten in this child, for this kata"
"""


def test_a_plugin_adds_a_run_error_and_meets_the_sandbox_through_the_hooks(
    repo: KataRepo,
) -> None:
    repo.add_demo(public=DEMO_PUBLIC + CHILD_TEST)
    conftest = repo.root / "conftest.py"
    conftest.write_text(conftest.read_text() + PLUGIN)
    result = repo.pytester.runpytest_subprocess("katas", "--kata-impl=solution", "-p", "no:xdist")
    out = result.stdout.str()
    # test_add_in_a_child_that_forgot passes: the forget hook ran in its sandbox child
    result.assert_outcomes(passed=5, skipped=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, "a run error fails the run"
    assert any("! the grader's image is out of date" in line for line in summary_of(out))
    data = json.loads((repo.root / ".kata" / "last-run.json").read_text())
    assert data["errors"][0] == "the grader's image is out of date"
    assert (repo.root / "asked.txt").read_text().split(), "the sandbox asked for secret paths"
