"""The learner's view (issue 10, section 4): what a run and the `kata` command tell a learner."""

from __future__ import annotations

import json

import pytest

from .conftest import DEMO_STUB, KataRepo, summary_of

# add: passes for small numbers, not started for big ones; mul: solved.
HALF_DONE = """\
from harness import todo


def add(a, b):
    if a > 10:
        todo("big numbers")
    return a + b


def mul(a, b):
    return a * b
"""

DEMO_STUB_MUL_FIXED = DEMO_STUB.replace("return a + b  # wrong on purpose", "return a * b  #")


def _last_run(repo: KataRepo) -> dict[str, dict[str, str]]:
    """{task id: {test name: outcome}} of the demo kata's last run."""
    data = json.loads((repo.root / ".kata" / "last-run.json").read_text())
    return {
        t["id"]: {r["name"]: r["outcome"] for r in t["tests"]} for t in data["katas"][0]["tasks"]
    }


def test_passes_and_not_started_without_a_failure_is_in_progress(repo: KataRepo) -> None:
    repo.add_demo(stub=HALF_DONE)
    result = repo.pytester.runpytest("katas")
    summary = summary_of(result.stdout.str())
    add = next(line for line in summary if " add " in line)
    assert "in progress (1 of 2 tests pass)" in add and "failing" not in add
    assert any("mul" in line and "passed" in line for line in summary)
    assert any("next: add" in line for line in summary)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, "a task not yet done is not a green run"


def test_a_failure_beside_passes_is_still_failing(repo: KataRepo) -> None:
    repo.add_demo(stub=HALF_DONE.replace("return a * b", "return a * b if a < 5 else 0"))
    summary = summary_of(repo.pytester.runpytest("katas").stdout.str())
    assert any(" mul " in line and "failing (1 of 2 tests pass)" in line for line in summary)


def test_x_stops_at_the_first_real_failure_not_at_a_stub(repo: KataRepo) -> None:
    repo.add_demo()  # add: not started (first in the file), mul: wrong, then gpu, then hidden
    result = repo.pytester.runpytest("katas", "-x")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "2*3 should be 6" in result.stdout.str(), "-x stopped before the real failure"
    ran = _last_run(repo)
    assert ran["add"] == {"test_add": "not_started"}
    assert ran["mul"] == {"test_mul": "failed"}, "-x must stop at test_mul"
    assert ran["gpu"] == {}


def test_lf_reruns_real_failures_only(repo: KataRepo) -> None:
    # The demo repository switches the cache off; --lf needs it.
    (repo.root / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\naddopts = "--import-mode=importlib"\n'
    )
    repo.add_demo()
    first = repo.pytester.runpytest("katas")
    first.assert_outcomes(failed=2, skipped=1)  # test_mul, test_mul_hidden; gpu skipped
    again = repo.pytester.runpytest("katas", "--lf")
    again.assert_outcomes(failed=2)
    assert "not started" not in again.stdout.str(), "--lf reran a not-started test"
    ran = _last_run(repo)
    assert ran["add"] == {} and set(ran["mul"]) == {"test_mul", "test_mul_hidden"}


def test_not_started_in_junit_is_a_skip_with_its_message(repo: KataRepo) -> None:
    repo.add_demo()
    repo.pytester.runpytest("katas", "--junitxml=j.xml")
    xml = (repo.root / "j.xml").read_text()
    assert "not started: add(a, b) (calc.py:5)" in xml


def _progress(repo: KataRepo) -> dict[str, tuple[str, dict[str, str]]]:
    """{task id: (status, {test name: outcome})} of the demo kata in `kata progress`'s file."""
    data = json.loads((repo.root / ".kata" / "progress.json").read_text())
    tasks = data["katas"]["demo"]["tasks"]
    return {t["id"]: (t["status"], {r["name"]: r["outcome"] for r in t["tests"]}) for t in tasks}


def test_partial_runs_update_only_the_tests_they_ran(repo: KataRepo) -> None:
    repo.add_demo()  # add: not started, mul: wrong
    repo.pytester.runpytest("katas")
    before = _progress(repo)
    assert before["add"][0] == "not started" and before["mul"][0] == "failing"

    repo.add_demo(stub=DEMO_STUB_MUL_FIXED)
    repo.pytester.runpytest("katas", "-k", "mul")
    after_k = _progress(repo)
    assert after_k["mul"][0] == "passed"
    assert after_k["add"] == before["add"], "-k mul must not touch the add task"
    assert after_k["gpu"] == before["gpu"]

    repo.add_demo(stub=HALF_DONE)  # test_add passes; the hidden big-number test is not started
    repo.pytester.runpytest("katas/phase01/demo/tests/test_calc_demo.py")
    after_file = _progress(repo)
    assert after_file["add"] == (
        "in progress",
        {"test_add": "passed", "test_add_hidden": "not_started"},
    ), "a one-file run must keep the hidden test's earlier result"
    data = json.loads((repo.root / ".kata" / "progress.json").read_text())["katas"]["demo"]
    assert data["earned"] == 5 + 5 and data["status"] == "failed"


def test_kata_progress_shows_the_merged_state(repo: KataRepo, capsys) -> None:
    from harness.cli import main

    repo.add_demo()
    repo.pytester.runpytest("katas")
    repo.add_demo(stub=DEMO_STUB_MUL_FIXED)
    repo.pytester.runpytest("katas", "-k", "mul")
    assert main(["--root", str(repo.root), "progress"]) == 0
    out = capsys.readouterr().out
    assert "add" in out and "not started" in out and "Multiply — passed" in out
    assert "total: 5/20 points" in out
