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
    repo.pytester.runpytest("katas/phase01/demo/tests/test_demo.py")
    after_file = _progress(repo)
    assert after_file["add"] == (
        "in progress",
        {"test_add": "passed", "test_add_hidden": "not_started"},
    ), "a one-file run must keep the hidden test's earlier result"
    data = json.loads((repo.root / ".kata" / "progress.json").read_text())["katas"]["demo"]
    assert data["earned"] == 5 + 5 and data["status"] == "in progress", "nothing fails: in progress"


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


def test_kata_progress_reads_the_results_dir_pytest_wrote(repo: KataRepo, capsys) -> None:
    from harness.cli import main

    repo.add_demo(stub=DEMO_STUB_MUL_FIXED)
    results = repo.root / "elsewhere"
    repo.pytester.runpytest("katas", f"--kata-results-dir={results}")
    assert not (repo.root / ".kata" / "progress.json").exists()
    assert main(["--root", str(repo.root), "progress"]) == 0
    assert "no results yet" in capsys.readouterr().out
    assert main(["--root", str(repo.root), "progress", "--kata-results-dir", str(results)]) == 0
    assert "Multiply — passed" in capsys.readouterr().out


# --------------------------------------------------------------------------- the kata command
def kata(repo: KataRepo, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from harness.cli import main

    code = main(["--root", str(repo.root), *args])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_hint_reset_without_a_kata_resets_every_kata(repo: KataRepo, capsys) -> None:
    repo.add_demo()
    repo.add_demo("other", phase_dir="phase02")
    for args in (("demo", "add"), ("demo", "mul"), ("other", "add")):
        kata(repo, "hint", *args, capsys=capsys)
    hints = repo.root / ".kata" / "hints.json"
    code, out = kata(repo, "hint", "demo", "--reset", capsys=capsys)
    assert code == 0 and json.loads(hints.read_text()) == {"other/add": 1}, out
    kata(repo, "hint", "demo", "add", capsys=capsys)
    code, out = kata(repo, "hint", "--reset", capsys=capsys)
    assert code == 0 and "every kata" in out
    assert json.loads(hints.read_text()) == {}


def test_hint_without_a_kata_asks_for_one_in_a_sentence(repo: KataRepo, capsys) -> None:
    repo.add_demo()
    code, out = kata(repo, "hint", capsys=capsys)
    assert code == 2 and "name a kata" in out and "the katas are: demo" in out


@pytest.mark.parametrize(
    ("args", "sentence"),
    [
        (("hint", "nope"), "kata: there is no kata called nope; the katas are: demo\n"),
        (
            ("hint", "demo", "nope"),
            "kata: kata demo has no task called nope; its tasks are: add, mul, gpu\n",
        ),
        (("hint", "demo", "nope", "--reset"), "kata demo has no task called nope"),
    ],
)
def test_errors_print_as_sentences_not_reprs(repo: KataRepo, capsys, args, sentence) -> None:
    repo.add_demo()
    code, out = kata(repo, *args, capsys=capsys)
    assert code == 2 and sentence in out
    for repr_mark in ("[", "]", '"', "Error(", "\\n"):
        assert repr_mark not in out, f"{repr_mark!r} in {out!r}"


def test_an_unwritable_state_file_is_a_sentence(repo: KataRepo, capsys) -> None:
    repo.add_demo()
    (repo.root / ".kata").write_text("not a directory")
    code, out = kata(repo, "hint", "demo", "add", capsys=capsys)
    assert code == 2 and out.startswith("kata: ") and "Traceback" not in out
    assert "Error(" not in out and "errno" not in out.lower()


def test_a_broken_manifest_prints_once(repo: KataRepo, capsys) -> None:
    repo.add_demo()
    repo.add_demo("broken", phase_dir="phase02", manifest='id = "broken"\n')
    code, out = kata(repo, "hint", "demo", "add", capsys=capsys)
    assert code == 0 and out.count("phase: is required") == 1
    code, out = kata(repo, "list", capsys=capsys)
    assert out.count("phase: is required") == 1
    result = repo.pytester.runpytest("katas")
    assert sum("phase: is required" in line for line in summary_of(result.stdout.str())) == 1


def test_list_flags_a_task_needing_what_this_machine_lacks(
    repo: KataRepo, capsys, monkeypatch
) -> None:
    from harness import tiers

    manifest = (repo.add_demo() / "kata.toml").read_text()
    manifest = manifest.replace(
        'tests = ["test_mul*"]', 'tests = ["test_mul*"]\ncapabilities = ["nvcc"]'
    )
    repo.write("katas/phase01/demo/kata.toml", manifest)
    lacking = tiers.Capabilities(("cpu",), ("cc",), {"nvcc": "nvcc not found: install it"})
    monkeypatch.setattr(tiers, "probe", lambda: lacking)
    code, out = kata(repo, "list", capsys=capsys)
    assert code == 0
    assert "demo                  cpu (!)" in out
    assert "task mul needs nvcc: nvcc not found: install it" in out
    assert "task gpu needs the gpu tier" in out


def test_list_does_not_flag_what_the_machine_has(repo: KataRepo, capsys, monkeypatch) -> None:
    from harness import tiers

    repo.add_demo()
    everything = tiers.Capabilities(("cpu", "gpu"), ("cc", "nvcc"), {})
    monkeypatch.setattr(tiers, "probe", lambda: everything)
    _, out = kata(repo, "list", capsys=capsys)
    assert "(!)" not in out


# --------------------------------------------------------------------------- a run's guidance
def test_a_missing_phase_lists_the_phases_that_are_there(repo: KataRepo) -> None:
    repo.add_demo()
    repo.add_demo("other", phase_dir="phase02")
    result = repo.pytester.runpytest("katas/phase09")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "katas/phase09 is not there" in err
    assert "The phases here are: phase01 (demo); phase02 (other)." in err
    kata_missing = repo.pytester.runpytest("katas/phase01/nope")
    assert "katas/phase01 has no kata nope. Its katas are: demo." in kata_missing.stderr.str()


def test_a_missing_phase_under_xdist_too(repo: KataRepo) -> None:
    repo.add_demo()
    result = repo.pytester.runpytest_subprocess("katas/phase09", "-n", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "The phases here are: phase01 (demo)." in result.stderr.str()


def test_paths_outside_katas_keep_pytests_message(repo: KataRepo) -> None:
    repo.add_demo()
    result = repo.pytester.runpytest("elsewhere/test_x.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "file or directory not found" in result.stderr.str()


GHOST_TASK = """
[[tasks]]
id = "ghost"
title = "Matches nothing"
points = 7
tests = ["test_ghost_*"]
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_a_task_matching_no_test_warns_at_run_time(repo: KataRepo, workers: list[str]) -> None:
    kata_dir = repo.add_demo()
    (kata_dir / "kata.toml").write_text((kata_dir / "kata.toml").read_text() + GHOST_TASK)
    result = repo.pytester.runpytest_subprocess("katas", *workers)
    summary = summary_of(result.stdout.str())
    warning = "task ghost matches no test (tests = test_ghost_*), so its 7 points cannot be earned"
    assert sum(warning in line for line in summary) == 1, summary
    assert "KataTaskWarning" in result.stdout.str(), "pytest's warnings summary names it too"


def test_a_partial_run_does_not_warn_about_tasks_it_left_out(repo: KataRepo) -> None:
    repo.add_demo()
    for args in (["-k", "mul"], ["katas/phase01/demo/tests/test_demo.py"]):
        out = repo.pytester.runpytest(*(args if args[0] != "-k" else ["katas", *args]))
        assert "matches no test" not in out.stdout.str(), args


def test_the_suggested_kata_command_runs_as_printed(repo: KataRepo) -> None:
    """Without the venv on PATH (the README's setup, not activated) and with it (activated)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo.add_demo()
    bindir = str(Path(sys.executable).parent)
    bare = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != bindir)
    for path, spelled in ((bare, "/kata hint demo add"), (bindir + os.pathsep + bare, "`kata")):
        env = {**os.environ, "PATH": path, "NO_COLOR": "1"}
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "katas"],
            cwd=repo.root, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        line = next(x for x in summary_of(run.stdout) if "next: add" in x)
        assert spelled in line, line
        suggested = line.split("`")[1]
        hint = subprocess.run(
            ["bash", "-c", suggested], cwd=repo.root, env=env, capture_output=True, text=True
        )
        assert hint.returncode == 0, hint.stderr
        assert "hint 1/2: use +" in hint.stdout


# --------------------------------------------------------------------------- kata verify
LONG = "test_add_" + "with_a_name_long_enough_to_be_cut_by_a_fixed_width_" * 2


def test_verify_does_not_cut_test_names(repo: KataRepo, capsys) -> None:
    public = "".join(
        f"def {LONG}{i}(kata):\n    assert kata.module('calc').add(1, 2) == 3\n\n" for i in range(3)
    )
    public += "def test_mul(kata):\n    assert kata.module('calc').mul(2, 3) == 6\n"
    stub = "from harness import todo\n\ndef add(a, b):\n    return a + b\n\ndef mul(a, b):\n    todo()\n"
    manifest = (repo.add_demo(public=public, stub=stub, hidden=None) / "kata.toml").read_text()
    gpu = manifest.index('[[tasks]]\nid = "gpu"')
    repo.write("katas/phase01/demo/kata.toml", manifest[:gpu])
    code, out = kata(repo, "verify", capsys=capsys)
    assert code == 1
    assert "the stub already passes every test of this task" in out
    for i in range(3):
        assert f"{LONG}{i}" in out, f"test {i}'s name was cut: {out}"


def test_a_report_that_cannot_be_written_is_a_sentence(tmp_path, capsys) -> None:
    from harness.reports import write_reports
    from harness.results import RunResult

    (tmp_path / "blocker").write_text("a file where a directory should be")
    written = write_reports(["json:blocker/r.json"], RunResult(katas=[]), tmp_path, None)
    err = capsys.readouterr().err
    assert written == [] and "report json:blocker/r.json was not written: " in err
    assert "Error(" not in err and "Errno" not in err, err


def test_verify_requires_every_stub_to_be_not_started(repo: KataRepo, capsys) -> None:
    repo.add_demo()  # DEMO_STUB: mul is wrong, so test_mul fails instead of being not started
    code, out = kata(repo, "verify", capsys=capsys)
    assert code == 1
    assert "task 'mul': the stub fails test_mul instead of being not started" in out
    assert "task 'add'" not in out, "add's stub is not started: nothing to say"


def test_verify_catches_a_stub_earning_part_of_a_task(repo: KataRepo, capsys) -> None:
    repo.add_demo(stub=HALF_DONE)  # add: test_add passes, test_add_hidden not started
    code, out = kata(repo, "verify", capsys=capsys)
    assert code == 1
    assert "task 'add': the stub earns points: test_add passes with the stub" in out


def test_the_summary_says_when_a_run_was_partial(repo: KataRepo) -> None:
    repo.add_demo()
    note = "a partial run: tasks above count only the tests that ran"
    whole = [["katas"], ["katas/phase01/demo"]]
    partial = [["katas", "-k", "mul"], ["katas/phase01/demo/tests"], ["katas", "-x"]]
    for args in whole + partial:
        out = repo.pytester.runpytest(*args).stdout.str()
        assert (note in out) == (args in partial), args


def test_kata_output_piped_into_head_ends_quietly(repo: KataRepo) -> None:
    import subprocess
    import sys

    manifest = (repo.add_demo() / "kata.toml").read_text()
    long_hint = "x" * 2_000_000  # more than a pipe holds: the write after `head` exits fails
    repo.write("katas/phase01/demo/kata.toml", manifest.replace("use +", long_hint))
    cmd = f"{sys.executable} -m harness.cli --root {repo.root} hint demo add | head -1"
    run = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert run.stdout.startswith("demo · add") and run.stderr == "", run.stderr
