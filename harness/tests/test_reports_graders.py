"""The grader entry points, run the way Gradescope and PrairieLearn run them, against a demo
course in a temporary directory (every grader path overridden)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import KataRepo
from .test_reports import validate

GRADERS = Path(__file__).resolve().parent.parent / "graders"

# A submission that also checks the grader hid the reference solution from it.
SUBMISSION = """\
import pathlib


def add(a, b):
    if list(pathlib.Path.cwd().glob("solutions/**/calc.py")):
        raise RuntimeError("the reference solution is readable from the learner's code")
    return a + b


def mul(a, b):
    return a + b
"""


def run_entry(script: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, KATA_PYTHON=sys.executable, **env)
    full.pop("GITHUB_STEP_SUMMARY", None)
    return subprocess.run(
        ["bash", str(script)], env=full, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.fixture
def course(repo: KataRepo) -> Path:
    repo.add_demo()
    return repo.root


def test_gradescope_run_autograder(course: Path, tmp_path: Path) -> None:
    submission = tmp_path / "submission"
    (submission / "tests").mkdir(parents=True)
    (submission / "calc.py").write_text(SUBMISSION)
    # A learner cannot replace tests by submitting them.
    (submission / "tests" / "test_calc_demo.py").write_text("def test_add():\n    pass\n")
    results = tmp_path / "autograder" / "results" / "results.json"
    proc = run_entry(
        GRADERS / "gradescope_zip" / "run_autograder",
        {
            "KATA_GS_SOURCE": str(course),
            "KATA_GS_SUBMISSION": str(submission),
            "KATA_GS_RESULTS": str(results),
        },
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(results.read_text())
    validate("gradescope", data)
    by_name = {t["name"]: t for t in data["tests"]}
    assert by_name["demo › add › test_add"]["status"] == "passed", by_name["demo › add › test_add"]
    assert by_name["demo › mul › test_mul"]["status"] == "failed"
    assert by_name["demo › add › test_add_hidden (hidden)"]["visibility"] == "after_published"
    assert data["score"] == 10, "add (10) passes; mul and the gpu task do not"
    assert (course / "katas/phase01/demo/calc.py").read_text() != SUBMISSION, "course untouched"


def test_gradescope_without_kata_files_still_writes_valid_results(
    course: Path, tmp_path: Path
) -> None:
    submission = tmp_path / "submission"
    submission.mkdir()
    (submission / "notes.txt").write_text("I did not do it")
    results = tmp_path / "results.json"
    proc = run_entry(
        GRADERS / "gradescope_zip" / "run_autograder",
        {
            "KATA_GS_SOURCE": str(course),
            "KATA_GS_SUBMISSION": str(submission),
            "KATA_GS_RESULTS": str(results),
        },
    )
    assert proc.returncode == 0
    data = json.loads(results.read_text())
    validate("gradescope", data)
    assert data["score"] == 0 and data["extra_data"]["status"] == "error"
    assert "katas/phase01/demo/calc.py" in data["output"], "says which files were expected"


def test_prairielearn_entry_point(course: Path, tmp_path: Path) -> None:
    grade = tmp_path / "grade"
    shutil.copytree(course, grade / "serverFilesCourse" / "gpu-katas")
    (grade / "student").mkdir()
    (grade / "student" / "calc.py").write_text(SUBMISSION)
    (grade / "data").mkdir()
    (grade / "data" / "data.json").write_text(json.dumps({"params": {"kata": "demo"}}))
    proc = run_entry(GRADERS / "run_prairielearn.sh", {"KATA_PL_ROOT": str(grade)})
    assert proc.returncode == 0, proc.stderr
    data = json.loads((grade / "results" / "results.json").read_text())
    validate("prairielearn", data)
    assert data["gradable"] is True
    assert data["score"] == pytest.approx(10 / 20)
    assert {t["name"] for t in data["tests"]} >= {"demo › add › test_add_hidden (hidden)"}


def test_prairielearn_unknown_kata_is_not_gradable(course: Path, tmp_path: Path) -> None:
    grade = tmp_path / "grade"
    shutil.copytree(course, grade / "serverFilesCourse" / "gpu-katas")
    (grade / "student").mkdir()
    (grade / "data").mkdir()
    (grade / "data" / "data.json").write_text(json.dumps({"params": {"kata": "nope"}}))
    proc = run_entry(GRADERS / "run_prairielearn.sh", {"KATA_PL_ROOT": str(grade)})
    assert proc.returncode == 0
    data = json.loads((grade / "results" / "results.json").read_text())
    validate("prairielearn", data)
    assert data["gradable"] is False and "nope" in data["message"]
