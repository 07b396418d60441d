"""Gates and shortcuts: a caught shortcut earns at most its task's gate_fraction, everywhere.

A demo kata whose `add` task has a hidden gate (`test_add_gate`), run with a submission that
passes every public test but dodges the point (it handles only the public example), with an honest
partial submission, and through ``--kata-impl=shortcut:<name>``.
"""

from __future__ import annotations

import base64
import html
import json
import re
import shutil
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.manifest import ManifestError, load_manifest
from harness.results import ERROR, FAILED, NOT_STARTED, PASSED, TaskResult
from harness.results import TestRecord as Record

from .conftest import KataRepo, summary_of

SENTENCE = "add returns the public example's answer instead of adding"

GATED_MANIFEST = """\
id = "{id}"
title = "Gated kata"
phase = 1
summary = "adds and multiplies"
languages = ["python"]
files = ["calc.py"]
time_limit = 10
{top}

[[tasks]]
id = "add"
title = "Add two numbers"
points = 10
tests = ["test_add*"]
hints = ["use +"]
{add_extra}

[[tasks]]
id = "mul"
title = "Multiply"
points = 6
tests = ["test_mul*"]
hints = ["use *"]
"""

# `calc` comes from the demo kata's tests/conftest.py (KataRepo.add_demo), hidden tests too.
PUBLIC = """\
def test_add_example(calc):
    assert calc.add(2, 3) == 5


def test_add_zero(calc):
    assert calc.add(0, 0) == 0 or calc.add(2, 3) == 5


def test_mul_example(calc):
    assert calc.mul(2, 3) == 6


def test_mul_one(calc):
    assert calc.mul(1, 9) == 9
"""

HIDDEN = f"""\
import pytest


@pytest.mark.kata_gate("{SENTENCE}")
def test_add_gate(calc):
    assert calc.add(40, 2) == 42, "add(40, 2) should be 42"


def test_mul_big(calc):
    assert calc.mul(7, 6) == 42, "mul(7, 6) should be 42"
"""

REFERENCE = "def add(a, b):\n    return a + b\n\ndef mul(a, b):\n    return a * b\n"
# Passes every public add test, dodges the task: the gate catches it.
SHORTCUT = "def add(a, b):\n    return 5\n\ndef mul(a, b):\n    return a * b\n"
# The learner's starting point, for `kata verify`: not started on every task.
STUB = "from harness import todo\n\ndef add(a, b):\n    todo('add')\n\ndef mul(a, b):\n    todo('mul')\n"
# Honest partial work: add is right, mul is wrong only for one hidden case (no gate on mul).
PARTIAL = "def add(a, b):\n    return a + b\n\ndef mul(a, b):\n    return a * b if a < 5 else 0\n"


def gated_kata(
    repo: KataRepo,
    stub: str = SHORTCUT,
    kata_id: str = "gated",
    top: str = "",
    add_extra: str = "",
) -> Path:
    return repo.add_demo(
        kata_id,
        stub=stub,
        solution=REFERENCE,
        public=PUBLIC,
        hidden=HIDDEN,
        manifest=GATED_MANIFEST.format(id=kata_id, top=top, add_extra=add_extra),
    )


def task_json(repo: KataRepo, task: str) -> dict:
    data = json.loads((repo.root / ".kata" / "last-run.json").read_text())
    return next(t for t in data["katas"][0]["tasks"] if t["id"] == task)


# --------------------------------------------------------------------------- scoring
def test_failed_gate_takes_the_task_and_says_why(repo: KataRepo) -> None:
    gated_kata(repo)
    result = repo.pytester.runpytest("katas")
    out = result.stdout.str()
    summary = summary_of(out)
    add = next(line for line in summary if " add " in line)
    assert "0/10" in add and "a gate failed: 0" in add, summary
    assert any(line.strip() == f"gate: {SENTENCE}" for line in summary), summary
    assert any("mul" in line and "6/6" in line for line in summary), "the other task is untouched"
    assert any("total: 6/16 points" in line for line in summary)
    assert "gate of task 'add'" in out and "earns no points while this test fails" in out
    add_json = task_json(repo, "add")
    # 2 of 3 equal tests of 10 points: 20/3, in quarter-point shares (harness.results).
    assert add_json["earned"] == 0 and add_json["earned_before_gate"] == pytest.approx(
        20 / 3, abs=0.25
    )
    assert add_json["gate_reasons"] == [SENTENCE]
    gate_record = next(r for r in add_json["tests"] if r["name"] == "test_add_gate")
    assert gate_record["gate"] == SENTENCE and gate_record["outcome"] == FAILED


def test_gate_fraction_caps_instead_of_zeroing(repo: KataRepo) -> None:
    gated_kata(repo, add_extra="gate_fraction = 0.25")
    summary = summary_of(repo.pytester.runpytest("katas").stdout.str())
    add = next(line for line in summary if " add " in line)
    assert "2.5/10" in add and "a gate failed: at most 2.5" in add, summary
    assert task_json(repo, "add")["earned"] == 2.5


def test_kata_wide_gate_fraction_and_task_override(repo: KataRepo) -> None:
    gated_kata(repo, top="gate_fraction = 0.3")
    repo.pytester.runpytest("katas")
    assert task_json(repo, "add")["earned"] == 3
    gated_kata(repo, kata_id="gated", top="gate_fraction = 0.3", add_extra="gate_fraction = 0.1")
    repo.pytester.runpytest("katas")
    assert task_json(repo, "add")["earned"] == 1


def test_honest_partial_work_keeps_partial_credit(repo: KataRepo) -> None:
    gated_kata(repo, stub=PARTIAL)
    summary = summary_of(repo.pytester.runpytest("katas").stdout.str())
    assert any(" add " in line and "10/10" in line for line in summary), summary
    mul = next(line for line in summary if " mul " in line)
    assert "4/6" in mul and "gate" not in mul, "a failed non-gate test costs only its share"
    assert not any("gate:" in line for line in summary)


def test_gate_that_is_not_started_caps_nothing(repo: KataRepo) -> None:
    """A stub the gate test reaches is unfinished work, not a shortcut."""
    stub = (
        "from harness import todo\n\n"
        "def add(a, b):\n    if (a, b) == (40, 2):\n        todo('add')\n    return a + b\n\n"
        "def mul(a, b):\n    return a * b\n"
    )
    gated_kata(repo, stub=stub)
    repo.pytester.runpytest("katas")
    add = task_json(repo, "add")
    gate = next(r for r in add["tests"] if r["name"] == "test_add_gate")
    assert gate["outcome"] == NOT_STARTED
    assert add["gate_reasons"] == [] and add["earned"] == pytest.approx(20 / 3, abs=0.25)


@pytest.mark.parametrize(
    "add",
    [
        "def add(a, b):\n    if (a, b) == (40, 2):\n        return a // 0\n    return a + b\n",
        "def add(a, b):\n    if (a, b) == (40, 2):\n        assert a < 40, 'mine'\n    return a + b\n",
        "def add(a, b):\n    return helper(a, b)\n\ndef helper(a, b):\n"
        "    return {}[(a, b)] if a == 40 else a + b\n",
    ],
    ids=["zero-division", "learner-assert", "key-error-deeper"],
)
def test_an_exception_of_the_learners_code_trips_no_gate(repo: KataRepo, add: str) -> None:
    """An honest mistake that raises fails the gate test (no points for it), but the task is not
    capped and the learner reads the exception, not the gate's sentence."""
    gated_kata(repo, stub=add + "\ndef mul(a, b):\n    return a * b\n")
    result = repo.pytester.runpytest("katas")
    out = result.stdout.str()
    task = task_json(repo, "add")
    gate = next(r for r in task["tests"] if r["name"] == "test_add_gate")
    assert gate["outcome"] == FAILED and re.fullmatch(r"\w+Error in calc\.py:\d+", gate["raised"])
    assert task["gate_reasons"] == [] and task["earned"] == pytest.approx(20 / 3, abs=0.25)
    assert SENTENCE not in out and "gate of task" not in out, out


def test_every_failed_test_says_whether_the_learners_code_raised(repo: KataRepo) -> None:
    """Not only gates: a test that failed on an exception of the learner's code records where
    (kata verify --mutants tells such survivors apart); a failed check records nothing."""
    raising = "def add(a, b):\n    return a + b\n\ndef mul(a, b):\n    return {}[a] if a == 7 else a * b\n"
    for stub, raised in ((raising, r"KeyError in calc\.py:\d+"), (PARTIAL, "")):
        gated_kata(repo, stub=stub)
        repo.pytester.runpytest("katas")
        big = next(r for r in task_json(repo, "mul")["tests"] if r["name"] == "test_mul_big")
        assert big["outcome"] == FAILED and re.fullmatch(raised, big["raised"]), big


def test_sources_that_do_not_load_trip_no_gate(repo: KataRepo) -> None:
    gated_kata(repo, stub="def add(a, b):\n    return a +\n")
    repo.pytester.runpytest("katas")
    task = task_json(repo, "add")
    gate = next(r for r in task["tests"] if r["name"] == "test_add_gate")
    assert gate["outcome"] in (FAILED, ERROR) and "do not load" in gate["raised"], gate
    assert task["gate_reasons"] == []


def test_a_native_build_that_fails_trips_no_gate(repo: KataRepo) -> None:
    """A compile error of C, C++, CUDA or Rust sources (harness.native.build.BuildError, raised
    by the kata's fixture) is sources that do not load: never a gate's property."""
    gated_kata(repo, stub=REFERENCE)
    repo.write(
        "katas/phase01/gated/tests/conftest.py",
        """
        import pytest
        from harness.native.build import BuildError


        @pytest.fixture
        def calc(kata):
            raise BuildError("calc.c:3: error: expected ';' before '}' token", log="", command=())
        """,
    )
    repo.pytester.runpytest("katas")
    task = task_json(repo, "add")
    gate = next(r for r in task["tests"] if r["name"] == "test_add_gate")
    assert gate["outcome"] in (FAILED, ERROR) and "do not load" in gate["raised"], gate
    assert task["gate_reasons"] == []


def test_a_child_process_crash_of_learner_code_trips_no_gate(repo: KataRepo) -> None:
    """A kata whose tests run the learner's C in a child process says so with an exception that
    carries `kata_learner_crash`: the test fails with that sentence, the task is not capped."""
    gated_kata(repo, stub=REFERENCE)
    repo.write(
        "katas/phase01/gated/tests/conftest.py",
        """
        import pytest


        class ChildCrash(AssertionError):
            kata_learner_crash = "the test program died of SIGSEGV inside calc.c"


        @pytest.fixture
        def calc(kata):
            raise ChildCrash("the test program died of SIGSEGV inside calc.c")
        """,
    )
    repo.pytester.runpytest("katas")
    task = task_json(repo, "add")
    gate = next(r for r in task["tests"] if r["name"] == "test_add_gate")
    assert gate["outcome"] in (FAILED, ERROR) and "SIGSEGV" in gate["raised"], gate
    assert task["gate_reasons"] == []


def test_reference_passes_its_gates(repo: KataRepo) -> None:
    gated_kata(repo)
    result = repo.pytester.runpytest("katas", "--kata-impl=solution")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert any("16/16" in line for line in summary_of(result.stdout.str()))


def test_gate_marker_without_a_sentence_is_a_usage_error(repo: KataRepo) -> None:
    gated_kata(repo)
    repo.write(
        "solutions/phase01/gated/tests/test_hidden_more.py",
        """
        import pytest

        @pytest.mark.kata_gate()
        def test_add_bare(kata):
            assert kata.module("calc").add(1, 1) == 2
        """,
    )
    result = repo.pytester.runpytest("katas")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "test_add_bare: @pytest.mark.kata_gate takes one sentence" in result.stderr.str()


def test_gate_marker_is_registered_for_strict_markers(repo: KataRepo) -> None:
    gated_kata(repo)
    result = repo.pytester.runpytest("katas", "--strict-markers", "--kata-impl=solution")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()


def test_gate_in_a_subprocess_and_under_xdist(repo: KataRepo) -> None:
    gated_kata(repo, add_extra="gate_fraction = 0.2")
    serial = repo.pytester.runpytest_subprocess("katas", "-p", "no:xdist")
    parallel = repo.pytester.runpytest_subprocess("katas", "-n", "2")
    assert summary_of(serial.stdout.str()) == summary_of(parallel.stdout.str())
    summary = summary_of(parallel.stdout.str())
    assert any(" add " in line and "2/10" in line for line in summary), summary
    assert any(SENTENCE in line for line in summary)


def test_gate_test_that_crashes_the_sandbox_still_gates(repo: KataRepo) -> None:
    stub = "import os\n\ndef add(a, b):\n    if a == 40:\n        os._exit(3)\n    return 5\n\n"
    stub += "def mul(a, b):\n    return a * b\n"
    gated_kata(repo, stub=stub)
    repo.pytester.runpytest_subprocess("katas")
    add = task_json(repo, "add")
    assert add["gate_reasons"] == [SENTENCE] and add["earned"] == 0


# --------------------------------------------------------------------------- every report
def test_the_sentence_and_capped_points_reach_every_report(repo: KataRepo) -> None:
    gated_kata(repo, add_extra="gate_fraction = 0.25")
    out = repo.root / "out"
    formats = ["json", "junit", "gradescope", "github", "exercism", "html", "markdown"]
    formats.append("prairielearn")
    args = [f"--kata-report={f}:{out / f}" for f in formats]
    repo.pytester.runpytest("katas", *args)
    for f in formats:
        text = (out / f).read_text()
        if f == "github":
            text = "".join(
                base64.b64decode(line.split("=", 1)[1]).decode()
                for line in text.splitlines()
                if "_RESULTS=" in line
            )
        if f == "html":
            text = html.unescape(text)
        assert SENTENCE in text, f"the gate's sentence is missing from the {f} report"

    grades = json.loads((out / "gradescope").read_text())
    add_tests = [t for t in grades["tests"] if t["tags"][1] == "add"]
    assert sum(t["score"] for t in add_tests) == 2.5  # exact: quarter-point scores
    assert grades["score"] == 8.5
    gate_test = next(t for t in add_tests if "test_add_gate" in t["name"])
    assert gate_test["output"].startswith(f"Gate failed: {SENTENCE}")
    assert "earns at most 2.5 of 10 points" in gate_test["output"]

    pl = json.loads((out / "prairielearn").read_text())
    assert sum(t["points"] for t in pl["tests"]) == 8.5

    ex = json.loads((out / "exercism").read_text())
    assert any(t["message"] and SENTENCE in t["message"] for t in ex["tests"])

    suite = ET.parse(out / "junit").getroot().find("testsuite")
    case = next(c for c in suite.iter("testcase") if c.get("name") == "test_add_gate")
    assert SENTENCE in case.find("failure").get("message")
    assert "Gate failed" in (out / "html").read_text()


# --------------------------------------------------------------------------- shortcut runner
def add_shortcut(repo: KataRepo, name: str, files: dict[str, str], kata: str = "gated") -> Path:
    """A shortcut whose learner files are `files`: shortcut.patch against today's reference."""
    from harness.patches import make_patch

    base = f"solutions/phase01/{kata}/shortcuts/{name}"
    repo.write(f"{base}/shortcut.toml", f'task = "add"\nwhy = "{SENTENCE}"\n')
    ref = repo.root / f"solutions/phase01/{kata}"
    changes = {
        rel: ((ref / rel).read_text() if (ref / rel).is_file() else None, text)
        for rel, text in files.items()
    }
    if changes:
        (repo.root / base / "shortcut.patch").write_text(make_patch(changes))
    return repo.root / base


def test_shortcut_impl_loads_the_shortcut_over_the_reference(repo: KataRepo) -> None:
    gated_kata(repo, stub="")  # the learner's file is empty: never what a shortcut run loads
    repo.write("katas/phase01/gated/given.py", "BASE = 5\n")
    repo.write("solutions/phase01/gated/calc.py", REFERENCE + "from .given import BASE\n")
    add_shortcut(
        repo,
        "five",
        {
            "calc.py": "from .given import BASE\n\ndef add(a, b):\n    return BASE\n\ndef mul(a, b):\n    return a * b\n"
        },
    )
    result = repo.pytester.runpytest("katas", "--kata-impl=shortcut:five")
    summary = summary_of(result.stdout.str())
    assert "implementation: shortcut:five" in summary
    assert any(" add " in line and "0/10" in line for line in summary), summary
    assert any(" mul " in line and "6/6" in line for line in summary), "hidden tests ran too"
    result.assert_outcomes(passed=5, failed=1)


def test_shortcut_missing_files_come_from_the_reference(repo: KataRepo) -> None:
    gated_kata(repo, stub="")
    repo.write("katas/phase01/gated/extra.py", "def helper():\n    return 'kata'\n")
    repo.write("solutions/phase01/gated/extra.py", "def helper():\n    return 'reference'\n")
    add_shortcut(repo, "only-toml", {})
    repo.write(
        "katas/phase01/gated/tests/test_which.py",
        """
        def test_add_which(kata):
            assert kata.module("extra").helper() == "reference"
            assert kata.search_path[0].name == "only-toml"
        """,
    )
    result = repo.pytester.runpytest("katas", "--kata-impl=shortcut:only-toml")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()


def test_missing_shortcut_names_the_path(repo: KataRepo) -> None:
    gated_kata(repo)
    add_shortcut(repo, "five", {"calc.py": SHORTCUT})
    result = repo.pytester.runpytest("katas", "--kata-impl=shortcut:nope")
    assert result.ret != pytest.ExitCode.OK
    out = result.stdout.str()
    assert "no shortcut 'nope'" in out and "solutions/phase01/gated/shortcuts/nope" in out
    assert "its shortcuts: five" in out


def test_bad_impl_is_a_usage_error(repo: KataRepo) -> None:
    gated_kata(repo)
    result = repo.pytester.runpytest("katas", "--kata-impl=shortcut:")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "a shortcut is named by its directory" in result.stderr.str()


def test_shortcut_run_under_xdist(repo: KataRepo) -> None:
    gated_kata(repo, stub="")
    add_shortcut(repo, "five", {"calc.py": SHORTCUT})
    result = repo.pytester.runpytest_subprocess("katas", "-n", "2", "--kata-impl=shortcut:five")
    summary = summary_of(result.stdout.str())
    assert any(" add " in line and "0/10" in line for line in summary), summary
    assert any(SENTENCE in line for line in summary)


# --------------------------------------------------------------------------- manifest fields
def manifest(tmp_path: Path, top: str = "", task: str = "") -> Path:
    (tmp_path / "calc.py").write_text("")
    (tmp_path / "sim.py").write_text("")
    path = tmp_path / "kata.toml"
    path.write_text(
        GATED_MANIFEST.format(id="m", top=top, add_extra=task).replace("\n\n\n", "\n\n")
    )
    return path


def test_gate_fraction_defaults_to_zero_and_inherits_the_kata_default(tmp_path: Path) -> None:
    assert load_manifest(manifest(tmp_path)).task("add").gate_fraction == 0.0
    m = load_manifest(manifest(tmp_path, top="gate_fraction = 0.2", task="gate_fraction = 0.1"))
    assert (m.gate_fraction, m.task("add").gate_fraction, m.task("mul").gate_fraction) == (
        0.2,
        0.1,
        0.2,
    )
    tabled = manifest(tmp_path / "t", task="") if (tmp_path / "t").mkdir() is None else None
    text = tabled.read_text() + "\n[kata]\ngate_fraction = 0.4\n"
    tabled.write_text(text)
    assert load_manifest(tabled).task("mul").gate_fraction == 0.4


@pytest.mark.parametrize(
    "top, task, field, problem",
    [
        ("", "gate_fraction = 1", "tasks[0].gate_fraction", "up to (not including) 1, got 1"),
        ("", "gate_fraction = -0.1", "tasks[0].gate_fraction", "got -0.1"),
        ("", 'gate_fraction = "half"', "tasks[0].gate_fraction", "a number from 0 to 1, got 'half'"),
        ("gate_fraction = true", "", "gate_fraction", "got True"),
        ("gate_fraction = 0.1\n[kata]\ngate_fraction = 0.2", "", "gate_fraction", "keep one"),
        ('given = ["calc.py"]', "", "given[0]", "is a learner file"),
        ('given = ["nothere.py"]', "", "given[0]", "'nothere.py' does not exist"),
        ('given = ["../x.py"]', "", "given[0]", "must be relative to the kata"),
    ],
)  # fmt: skip
def test_bad_gate_fraction_and_given_name_file_field_value(
    tmp_path: Path, top: str, task: str, field: str, problem: str
) -> None:
    path = manifest(tmp_path, top=top, task=task)
    with pytest.raises(ManifestError) as e:
        load_manifest(path)
    assert e.value.field == field and str(path) in str(e.value)
    assert problem in e.value.problem


def test_given_lists_the_kata_modules(tmp_path: Path) -> None:
    assert load_manifest(manifest(tmp_path, top='given = ["sim.py"]')).given == ("sim.py",)


# --------------------------------------------------------------------------- the model
def rec(i: int, ok: bool, gate: str = "", outcome: str | None = None) -> Record:
    return Record(
        f"t::{i}", f"t{i}", "t.py", "k", "x", True, outcome or (PASSED if ok else FAILED), gate=gate
    )


@given(
    points=st.integers(1, 200),
    fraction=st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.9]),
    oks=st.lists(st.booleans(), min_size=1, max_size=12),
)
def test_gated_scores_add_up_to_the_capped_earned(
    points: int, fraction: float, oks: list[bool]
) -> None:
    records = [rec(i, ok) for i, ok in enumerate(oks)] + [rec(99, False, gate="caught")]
    task = TaskResult("x", "X", points, [], records, fraction)
    ungated = TaskResult(
        "x", "X", points, [], [rec(i, ok) for i, ok in enumerate(oks)] + [rec(99, False)]
    )
    assert task.earned_before_gate == ungated.earned
    # The cap is gate_fraction of the points rounded down to the task's unit (dyadic: exact sums).
    assert task.gate_cap <= points * fraction < task.gate_cap + task.unit
    assert task.earned == min(ungated.earned, task.gate_cap)
    assert sum(task.scores) == task.earned
    assert all(s == 0 for s, r in zip(task.scores, records, strict=True) if not r.ok)
    assert all(s >= 0 for s in task.scores)


def test_only_failed_or_errored_gates_cap() -> None:
    for outcome, gated in ((FAILED, True), (ERROR, True), (NOT_STARTED, False), ("skipped", False)):
        task = TaskResult("x", "X", 10, [], [rec(0, True), rec(1, False, "g", outcome)])
        assert bool(task.gate_reasons) is gated, outcome
        assert task.earned == (0 if gated else 5)


# --------------------------------------------------------------------------- kata verify
def verify_out(repo: KataRepo, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from harness.cli import main

    code = main(["--root", str(repo.root), "verify"])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_verify_passes_caught_shortcuts_and_prints_the_table(repo: KataRepo, capsys) -> None:
    gated_kata(repo, stub=STUB)
    add_shortcut(repo, "five", {"calc.py": SHORTCUT})
    add_shortcut(repo, "off-by-one", {"calc.py": SHORTCUT.replace("return 5", "return a + b + 1")})
    code, out = verify_out(repo, capsys)
    assert code == 0, out
    assert "✓ gated" in out and "shortcut" not in out.split("shortcuts, points")[0]
    lines = out.split("shortcuts, points of the task each dodges:")[1].splitlines()
    five = next(line for line in lines if " five " in line)
    assert five.split() == ["gated", "five", "add", "6.75", "→", "0", "of", "10"], five
    off = next(line for line in lines if "off-by-one" in line)
    assert off.split()[3:] == ["0", "→", "0", "of", "10"], "it fails the public tests too"


def test_verify_fails_a_shortcut_no_gate_catches(repo: KataRepo, capsys) -> None:
    gated_kata(repo, stub=STUB)
    add_shortcut(repo, "five", {"calc.py": SHORTCUT})
    sneaky = (
        "def add(a, b):\n    return a + b\n\ndef mul(a, b):\n    return 6 if a == 2 else a * b\n"
    )
    base = add_shortcut(repo, "mul-example", {"calc.py": sneaky})
    (base / "shortcut.toml").write_text('task = "mul"\nwhy = "mul hard-codes the example"\n')
    code, out = verify_out(repo, capsys)
    assert code == 1, out
    assert (
        "shortcut 'mul-example' earns 6 of task 'mul''s 6 points (more than 50%); no gate "
        "catches it: mul hard-codes the example" in out
    )
    assert "MORE THAN 50%" in out


def test_verify_runs_a_named_sample_of_the_shortcuts(repo: KataRepo, capsys) -> None:
    """--shortcut-sample N:SEED runs N shortcuts of a kata, the same N for the same seed, and
    names them; an unsampled shortcut earning too much is not judged (the full run judges it)."""
    from harness.cli import main

    gated_kata(repo, stub=STUB)
    sneaky = (
        "def add(a, b):\n    return a + b\n\ndef mul(a, b):\n    return 6 if a == 2 else a * b\n"
    )
    add_shortcut(repo, "five", {"calc.py": SHORTCUT})
    base = add_shortcut(repo, "mul-example", {"calc.py": sneaky})
    (base / "shortcut.toml").write_text('task = "mul"\nwhy = "mul hard-codes the example"\n')
    runs = {}
    for seed in range(8):
        code = main(["--root", str(repo.root), "verify", "--shortcut-sample", f"1:{seed}"])
        out = capsys.readouterr().out
        ran = "mul-example" if "mul-example" in out.split("shortcuts, points")[1] else "five"
        assert f"1 of its 2 shortcuts run (sample seed {seed}: {ran});" in out, out
        assert code == (1 if ran == "mul-example" else 0), out
        runs[seed] = ran
    assert set(runs.values()) == {"five", "mul-example"}, runs
    assert main(["--root", str(repo.root), "verify", "--shortcut-sample", "x"]) == 2
    assert "--shortcut-sample 'x': expected N or N:SEED" in capsys.readouterr().err


@pytest.mark.parametrize(
    "toml, files, problem",
    [
        ('why = "w"\n', {"calc.py": SHORTCUT}, "task: must name a task of gated (add, mul); got missing"),
        ('task = "div"\nwhy = "w"\n', {"calc.py": SHORTCUT}, "task: must name a task of gated (add, mul); got 'div'"),
        ('task = "add"\n', {"calc.py": SHORTCUT}, "why: must be one sentence"),
        ('task = "add"\nwhy = "w"\nsee = 1\n', {"calc.py": SHORTCUT}, "see: unknown field"),
        ('task = "add"\nwhy = "w"\n', {"calc.py": SHORTCUT, "tests/test_x.py": "X = 1\n"}, "tests/test_x.py: a shortcut changes learner code, not tests"),
        ('task = "add"\nwhy = "w"\n', {}, "replaces no learner file"),
        (None, {"calc.py": SHORTCUT}, "shortcut.toml: (file): not found"),
    ],
)  # fmt: skip
def test_verify_names_a_malformed_shortcut(
    repo: KataRepo, capsys, toml: str | None, files: dict[str, str], problem: str
) -> None:
    gated_kata(repo, stub=STUB)
    add_shortcut(repo, "five", {"calc.py": SHORTCUT})
    base = add_shortcut(repo, "bad", files)
    if toml is None:
        (base / "shortcut.toml").unlink()
    else:
        (base / "shortcut.toml").write_text(toml)
    from harness.shortcuts import shortcuts

    found, problems = shortcuts(load_manifest(repo.root / "katas/phase01/gated"))
    assert [s.name for s in found] == ["five"]
    assert len(problems) == 1 and problems[0].startswith("shortcut 'bad': ")
    assert problem in problems[0] and "shortcuts/bad" in problems[0]


def test_too_few_shortcuts_fails_verify(
    repo: KataRepo, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    gated_kata(repo, stub=STUB)
    add_shortcut(repo, "five", {"calc.py": SHORTCUT})
    code, out = verify_out(repo, capsys)
    assert code == 1 and "✗ gated" in out and "1 shortcut(s); every kata ships" in out, out
    import harness.verify

    # The switch still works the other way (a note, not a failure), for a tree being migrated.
    monkeypatch.setattr(harness.verify, "FEWER_SHORTCUTS_IS_ERROR", False)
    code, out = verify_out(repo, capsys)
    assert code == 0 and "note: 1 shortcut(s); every kata ships at least 2" in out, out


CRASHES_ON_GATE = (
    "import os, signal\n\n"
    "def add(a, b):\n"
    "    if (a, b) == (40, 2):\n"
    "        os.kill(os.getpid(), signal.SIGSEGV)\n"
    "    return 5\n\n"
    "def mul(a, b):\n    return a * b\n"
)


def test_a_shortcut_that_crashes_is_judged_on_what_it_earned(repo: KataRepo, capsys) -> None:
    # Its gate test dies with the submission (the sandbox reports a crash): the gate failed,
    # the task earns nothing, and the crash is a note, not a verify problem.
    gated_kata(repo, stub=STUB)
    add_shortcut(repo, "five", {"calc.py": SHORTCUT})
    add_shortcut(repo, "crashes", {"calc.py": CRASHES_ON_GATE})
    code, out = verify_out(repo, capsys)
    assert code == 0, out
    assert "crashes   add   6.75 → 0 of 10" in out, out


def test_a_shortcut_that_never_gets_a_verdict_is_named(repo: KataRepo, capsys) -> None:
    # A shortcut that cannot even be imported proves nothing: verify says so.
    gated_kata(repo, stub=STUB)
    add_shortcut(repo, "five", {"calc.py": SHORTCUT})
    add_shortcut(repo, "broken", {"calc.py": "def add(a, b:\n"})
    code, out = verify_out(repo, capsys)
    assert (
        "shortcut 'broken': its run had errors (none of its task's tests reached a verdict" in out
    ), out


def test_bench_shortcuts_prints_before_and_after(repo: KataRepo, capsys, monkeypatch) -> None:
    from harness.benchmarks import bench_shortcuts

    gated_kata(repo, stub=STUB)
    add_shortcut(repo, "five", {"calc.py": SHORTCUT})
    monkeypatch.setattr(bench_shortcuts, "ROOT", repo.root)
    code = bench_shortcuts.main([str(repo.root / "katas"), "--markdown"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "| gated | five | add | 6.75/10 | 0/10 |" in out
    assert "1 shortcuts, 0 earn more than 50% of their task" in out


def test_gates_hold_in_grade_mode_from_the_encrypted_bundle(repo: KataRepo, tmp_path) -> None:
    """A published learner tree: the gate comes from the bundle, and caps the task the same."""
    from .test_hidden import last_run, publish, run

    gated_kata(repo, stub=SHORTCUT)
    learner = publish(repo, tmp_path / "out")[0]
    proc = run(learner, "katas", "--kata-grade")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    add = next(t for t in last_run(learner).katas[0].tasks if t.id == "add")
    assert add.gate_reasons == [SENTENCE] and add.earned == 0
    assert f"gate: {SENTENCE}" in proc.stdout


# --------------------------------------------------------------------------- native crashes
NATIVE_MANIFEST = """\
id = "cgated"
title = "Gated C kata"
phase = 1
summary = "adds in C"
languages = ["c"]
files = ["calc.c"]
time_limit = 20

[[tasks]]
id = "add"
title = "Add two numbers"
points = 10
tests = ["test_add*"]
"""

NATIVE_CONFTEST = """\
import pytest


@pytest.fixture(scope="module")
def lib(kata):
    from harness.native.fixtures import NativeBuilder

    return NativeBuilder(kata.source, kata.search_path, ())("calc.c", declarations="int add(int, int);")
"""

NATIVE_PUBLIC = """\
def test_add_example(lib):
    assert lib.add(2, 3) == 5


def test_add_zero(lib):
    assert lib.add(0, 0) == 0
"""

NATIVE_HIDDEN = f"""\
import pytest


@pytest.mark.kata_gate("{SENTENCE}")
def test_add_gate(lib):
    assert lib.add(40, 2) == 42, "add(40, 2) should be 42"
"""

NATIVE_CALC = {
    "segfault": "int add(int a, int b) {\n  if (a == 40) {\n    volatile int *p = 0;\n"
    "    return *p;\n  }\n  return a + b;\n}\n",
    "abort": "#include <stdlib.h>\n\nint add(int a, int b) {\n  if (a == 40)\n    abort();\n"
    "  return a + b;\n}\n",
    "wrong-answer": "int add(int a, int b) {\n  return a == 40 ? 5 : a + b;\n}\n",
}


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
@pytest.mark.parametrize(
    "case, mode",
    [("segfault", "inline"), ("abort", "subprocess"), ("wrong-answer", "inline")],
)
def test_a_crash_in_the_learners_native_code_trips_no_gate(
    repo: KataRepo, case: str, mode: str
) -> None:
    """A C function of the learner's that dies by SIGSEGV or SIGABRT (cffi-loaded, in the
    sandbox child) fails the gate test with the signal and the function, like an exception of
    the learner's Python: the test earns nothing, the task is not capped. The same kata whose C
    returns a wrong answer on the gate's input is capped (the gate still works)."""
    kata, sol = "katas/phase01/cgated", "solutions/phase01/cgated"
    repo.write(f"{kata}/kata.toml", NATIVE_MANIFEST)
    repo.write(f"{kata}/calc.c", NATIVE_CALC[case])
    repo.write(f"{kata}/tests/conftest.py", NATIVE_CONFTEST)
    repo.write(f"{kata}/tests/test_cgated.py", NATIVE_PUBLIC)
    repo.write(f"{sol}/calc.c", "int add(int a, int b) { return a + b; }\n")
    repo.write(f"{sol}/tests/test_hidden_cgated.py", NATIVE_HIDDEN)
    run = repo.pytester.runpytest if mode == "inline" else repo.pytester.runpytest_subprocess
    out = run("katas").stdout.str()
    task = task_json(repo, "add")
    gate = next(r for r in task["tests"] if r["name"] == "test_add_gate")
    assert gate["outcome"] == FAILED, gate
    if case == "wrong-answer":
        assert gate["raised"] == "" and task["gate_reasons"] == [SENTENCE], task
        assert task["earned"] == 0, task
        return
    signal_name = {"segfault": "SIGSEGV", "abort": "SIGABRT"}[case]
    assert re.fullmatch(rf"{signal_name} in calc\.c:\d+ \(in add\)", gate["raised"]), gate
    assert signal_name in gate["message"] and "(in add)" in gate["message"], gate["message"]
    assert task["gate_reasons"] == [] and task["earned"] == pytest.approx(20 / 3, abs=0.25), task
    assert SENTENCE not in out, out


# A given wrapper of the learner's native code (a cffi module, a kernel launcher) raises its own
# exception for the learner's failure: Python sees no learner frame.
WRAPPED_CALC = """\
import pytest
{prelude}

class Calc:
    def __init__(self, calc):
        self.calc = calc

    def add(self, a, b):
        if a == 40:  # the learner's native code failed on this call
            raise {error}
        return self.calc.add(a, b)

    def mul(self, a, b):
        return self.calc.mul(a, b)


@pytest.fixture
def calc(kata):
    return Calc(kata.module("calc"))
"""


def gate_of_a_wrapped_failure(repo: KataRepo, prelude: str, error: str) -> tuple[dict, dict]:
    """Run the reference through a `calc` fixture that raises `error` (an expression, with
    `prelude`'s imports and classes) on add(40, _): the gate test's record and its task's."""
    gated_kata(repo, stub=REFERENCE)
    conftest = WRAPPED_CALC.format(prelude=textwrap.dedent(prelude), error=error)
    repo.write("katas/phase01/gated/tests/conftest.py", conftest)
    repo.pytester.runpytest("katas")
    task = task_json(repo, "add")
    return next(r for r in task["tests"] if r["name"] == "test_add_gate"), task


def test_a_native_fault_raised_by_given_code_trips_no_gate(repo: KataRepo) -> None:
    """A panic of the learner's Rust that a given wrapper turns into an exception
    (harness.NativeFault: Python sees no learner frame) is the learner's, not a wrong answer."""
    gate, task = gate_of_a_wrapped_failure(
        repo,
        """
        from harness import NativeFault


        class RustPanic(NativeFault, AssertionError):
            pass
        """,
        # what a given cffi wrapper does with lib.rs's KATA_PANIC status
        'RustPanic("calc.rs panicked in add: attempt to add with overflow at calc.rs:3:5")',
    )
    assert gate["outcome"] == FAILED, gate
    assert (
        gate["raised"] == "RustPanic: calc.rs panicked in add: attempt to add with overflow "
        "at calc.rs:3:5"
    ), gate
    assert task["gate_reasons"] == [], task


@pytest.mark.parametrize("error", ["BarrierDeadlock", "OutOfBounds", "RaceDetected"])
def test_a_cuda_kernel_error_trips_no_gate(repo: KataRepo, error: str) -> None:
    """A learner's kernel that deadlocks, reads out of bounds or races (harness.cuda's errors,
    raised with no learner frame in Python) fails the gate test with its message, as a crash
    does: an honest missing barrier is not told that its gate's property failed."""
    made = {
        "BarrierDeadlock": 'hc.BarrierDeadlock("kernel k: __syncthreads() not reached", kernel="k")',
        "OutOfBounds": 'hc.OutOfBounds("kernel k: out-of-bounds read", kernel="k", address=0, '
        "argument=0)",
        "RaceDetected": 'hc.RaceDetected("kernel k: outputs differ", kernel="k", '
        'schedules=("forward", "reverse"), argument=1, mismatches=3)',
    }[error]
    # what a launch of the learner's kernel raises
    gate, task = gate_of_a_wrapped_failure(repo, "import harness.cuda as hc", made)
    assert gate["outcome"] == FAILED, gate
    assert gate["raised"].startswith(f"{error}: kernel k"), gate
    assert task["gate_reasons"] == [], task
