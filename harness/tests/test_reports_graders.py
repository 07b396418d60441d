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
    (submission / "tests" / "test_demo.py").write_text("def test_add():\n    pass\n")
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
    # gpu is declared optional for PrairieLearn (run_prairielearn.sh): its 5 points leave.
    assert data["score"] == pytest.approx(10 / 15, abs=1e-4)
    assert "gpu is optional on this grader: 5 points left out" in data["output"]
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


WORKFLOW = Path(__file__).resolve().parents[2] / ".github" / "workflows" / "autograde.yml"


def test_autograde_workflow_runs_the_reports_the_reporter_reads(repo: KataRepo) -> None:
    """The workflow's pytest command, run here: it must leave <ID>_RESULTS for every runner
    in KATA_RUNNERS, which is what the reporter step is given."""
    import base64
    import re

    from harness.reports import check_spec

    text = WORKFLOW.read_text()
    for needle in (
        "checks: write",
        "actions: read",
        "contents: read",
        "name: Autograding Tests",
        "actions/checkout@v4",
        "actions/setup-python@v5",
        "bash harness/graders/install.sh . -",
        "--kata-grader",
        "actions/upload-artifact@v4",
        "classroom-resources/autograding-grading-reporter@v1",
        "runners: ${{ env.KATA_RUNNERS }}",
    ):
        assert needle in text, f"autograde.yml lacks {needle!r}"
    command = re.search(r"run: >-\n((?:\s{10}.*\n)+)", text)
    assert command, "the 'Run the katas' step is not where the test expects it"
    args = command[1].split()
    specs = [a.split("=", 1)[1].replace('"', "") for a in args if a.startswith("--kata-report=")]
    assert {check_spec(s)[0] for s in specs} >= {"github", "html"}
    repo.add_demo("alpha")
    repo.add_demo("beta", phase_dir="phase02")
    env_file = repo.root / "github_env"
    specs = [s.replace("$GITHUB_ENV", str(env_file)) for s in specs]
    plain = [a for a in args[args.index("pytest") + 1 :] if not a.startswith("--kata-report=")]
    assert plain == ["katas", "-n", "2", "--kata-grader"]
    result = repo.pytester.runpytest_subprocess(
        *plain, "--kata-optional=gpu", *(f"--kata-report={s}" for s in specs)
    )
    assert (repo.root / "kata-report" / "report.html").is_file()
    env = dict(line.split("=", 1) for line in env_file.read_text().splitlines())
    runners = env["KATA_RUNNERS"].split(",")
    assert runners == ["alpha", "beta"]
    total = 0.0  # added as the reporter adds them: JavaScript numbers, left to right
    for r in runners:
        for t in json.loads(base64.b64decode(env[f"{r.upper()}_RESULTS"]))["tests"]:
            total += t["score"]
    m = re.search(r"^total: ([\d.]+)/(\d+) points", result.stdout.str(), re.M)
    assert m and total == float(m[1]), "the reporter's Points X equals the terminal's"
