"""Grade mode (`pytest --kata-grade`, `kata grade`): the canonical tests count, not the
learner's edited tests or conftest files; harness files are checked against the hash manifest
and a difference is tampering, never a silent grade."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import KataRepo
from .test_hidden import KEY_HEX, add_kata, last_run, publish, records, run

# A learner's edits that make every public test pass, whatever the code does.
ASSERT_TRUE = """\
def test_add():
    assert True


def test_mul():
    assert True


def test_gpu():
    assert True
"""
# ... and a conftest that turns every failure into a pass.
FORGING_CONFTEST = """\
import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    report.outcome = "passed"
    return report
"""
PUBLIC = "katas/phase01/demo/tests/test_demo.py"


@pytest.fixture
def learner(repo: KataRepo, tmp_path: Path) -> Path:
    add_kata(repo)
    return publish(repo, tmp_path / "out")[0]


def _earned(tree: Path) -> float:
    return last_run(tree).earned


def test_edited_public_tests_and_conftests_do_not_change_the_grade(learner: Path) -> None:
    assert run(learner, "katas", "--kata-grade").returncode == 1
    graded = _earned(learner)
    (learner / PUBLIC).write_text(ASSERT_TRUE)
    (learner / "katas/phase01/demo/tests/conftest.py").write_text(FORGING_CONFTEST)
    (learner / "katas/phase01/conftest.py").write_text(FORGING_CONFTEST)
    run(learner)
    assert _earned(learner) > graded, "without grade mode the edits do change the points"
    proc = run(learner, "katas", "--kata-grade")
    assert proc.returncode == 1, proc.stdout
    assert _earned(learner) == graded
    assert records(learner)["test_mul"].outcome == "failed"
    assert f"grade mode: {PUBLIC}: edited; the published copy is graded instead" in proc.stdout
    proc = run(learner, "katas", "--kata-grade", "-n", "2")
    assert _earned(learner) == graded, "the same under xdist"


def test_a_stray_test_module_outside_a_kata_is_not_collected(learner: Path) -> None:
    (learner / "katas" / "test_stray.py").write_text(
        "import harness.results as r\nr.TaskResult.earned = property(lambda self: self.points)\n"
    )
    proc = run(learner, "katas", "--kata-grade")
    assert proc.returncode == 1 and _earned(learner) < 20, proc.stdout


def test_changed_harness_file_is_tampering(learner: Path) -> None:
    toml = learner / "katas/phase01/demo/kata.toml"
    toml.write_text(toml.read_text().replace("points = 5", "points = 500"))
    proc = run(learner, "katas", "--kata-grade")
    assert proc.returncode == 1
    assert "TAMPERING: 1 harness file(s) differ from the published ones" in proc.stdout
    errors = last_run(learner).errors
    assert errors == ["tampering: katas/phase01/demo/kata.toml: changed since it was published"]
    assert last_run(learner).status == "error"


def test_rewritten_or_deleted_manifest_is_tampering(learner: Path) -> None:
    manifest = learner / "grading" / "integrity.json"
    data = json.loads(manifest.read_text())
    data["files"].pop("katas/phase01/demo/kata.toml")
    manifest.write_text(json.dumps(data))
    proc = run(learner, "katas", "--kata-grade")
    assert "grading/integrity.json: changed since it was published" in proc.stdout
    manifest.unlink()
    proc = run(learner, "katas", "--kata-grade")
    assert proc.returncode == 1
    assert "grading/integrity.json: deleted (it was published with the bundle)" in proc.stdout


def test_grade_mode_needs_a_canonical_source(learner: Path, repo: KataRepo) -> None:
    proc = run(learner, "katas", "--kata-grade", key=None)
    assert proc.returncode == 4 and "needs the hidden-test key" in proc.stderr
    proc = run(learner, "katas", "--kata-grade", "--kata-hidden=off")
    assert proc.returncode == 4 and "cannot be combined with --kata-hidden=off" in proc.stderr
    # The instructor tree is canonical by itself: no key needed.
    proc = run(repo.root, "katas", "--kata-grade", "--kata-impl=solution", key=None)
    assert proc.returncode == 0, proc.stdout
    assert {t.name for t in records(repo.root).values() if t.hidden} == {
        "test_add_hidden",
        "test_mul_hidden",
    }


def test_kata_grade_command(learner: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KATA_HIDDEN")}
    cmd = [sys.executable, "-m", "harness.cli", "grade", "--report", "json:out.json"]
    proc = subprocess.run(cmd, cwd=learner, env={**env, "KATA_HIDDEN_KEY": KEY_HEX},
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert json.loads((learner / "out.json").read_text())["earned"] == _earned(learner)
    proc = subprocess.run(cmd, cwd=learner, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "needs the hidden-test key" in proc.stderr


def test_gradescope_grader_with_a_bundle_supplied_at_grading_time(
    learner: Path, tmp_path: Path
) -> None:
    """The course is a learner branch without its bundle; the grader keeps the bundle and key."""
    from .test_reports_graders import GRADERS, run_entry

    bundle = tmp_path / "secure" / "course.bundle"
    bundle.parent.mkdir()
    (learner / "grading" / "hidden.bundle").rename(bundle)
    submission = tmp_path / "submission"
    submission.mkdir()
    (submission / "calc.py").write_text("def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n"
                                        "    return a * b\n")  # fmt: skip
    (submission / "test_demo.py").write_text(ASSERT_TRUE)  # not taken: tests are canonical
    results = tmp_path / "results.json"
    env = {"KATA_GS_SOURCE": str(learner), "KATA_GS_SUBMISSION": str(submission),
           "KATA_GS_RESULTS": str(results), "KATA_HIDDEN_BUNDLE": str(bundle),
           "KATA_HIDDEN_KEY": KEY_HEX, "KATA_WORKERS": "0"}  # fmt: skip
    proc = run_entry(GRADERS / "gradescope_zip" / "run_autograder", env)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(results.read_text())
    names = {t["name"]: t["status"] for t in data["tests"]}
    assert names["demo › add › test_add_hidden (hidden)"] == "passed", names
    assert data["score"] == 15, "add and mul pass, the gpu task is skipped"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="masking files needs a mount namespace (root)")  # fmt: skip
def test_grade_mode_masks_plaintext_hidden_tests_from_learner_code(repo: KataRepo) -> None:
    """In a grader's course copy the hidden tests are plaintext: learner code reads nothing
    (the sandbox masks the file, and the fence's audit hook refuses the open before that)."""
    peeking = """\
        import subprocess
        from pathlib import Path


        def add(a, b):
            try:
                text = Path("solutions/phase01/demo/tests/test_hidden_demo.py").read_text()
            except PermissionError:  # the import fence refuses learner opens under solutions/
                text = ""
            # A child process is out of the fence's sight: the sandbox's mask must hold there.
            text += subprocess.run(
                ["cat", "solutions/phase01/demo/tests/test_hidden_demo.py"],
                capture_output=True, text=True,
            ).stdout
            if text:
                raise RuntimeError("the hidden tests are readable: " + text[:40])
            return a + b


        def mul(a, b):
            return a * b
    """
    repo.add_demo(stub=peeking)
    proc = run(repo.root, "katas", "--kata-grade", key=None)
    recs = records(repo.root)
    assert recs["test_add"].outcome == "passed", recs["test_add"].message + proc.stdout[-2000:]
    assert recs["test_add_hidden"].outcome == "passed"
