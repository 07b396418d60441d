"""Hints for what failed: a hint belongs to the tests (or learner functions) it helps with, a
failure shows its own, and each hint is printed once per task in a run (also under -n 2)."""

from __future__ import annotations

import json

import pytest

from .conftest import DEMO_MANIFEST, KataRepo

MANIFEST = DEMO_MANIFEST.format(id="demo", time_limit=10).replace(
    'hints = ["use *"]',
    """hints = [
    "use *",
    { text = "zero times anything is zero", tests = ["test_mul_zero"] },
    { text = "square(x) is mul(x, x)", functions = ["square"] },
]""",
)
STUB = """\
from harness import todo


def add(a, b):
    todo("add(a, b)")


def mul(a, b):
    return a + b


def square(x):
    return x + x
"""
PUBLIC = """\
def test_add(calc):
    assert calc.add(2, 3) == 5


def test_mul(calc):
    assert calc.mul(2, 3) == 6, "2*3 should be 6"


def test_mul_again(calc):
    assert calc.mul(3, 4) == 12, "3*4 should be 12"


def test_mul_zero(calc):
    assert calc.mul(0, 5) == 0, "0*5 should be 0"


def test_mul_square(calc):
    assert calc.square(3) == 9, "3 squared should be 9"


def test_gpu(calc):
    assert calc.mul(1, 1) == 1
"""
HIDDEN = """\
def test_mul_hidden(calc):
    assert calc.mul(7, 6) == 42, "mul(7, 6) should be 42"
"""


def add(repo: KataRepo) -> None:
    repo.add_demo(manifest=MANIFEST, stub=STUB, public=PUBLIC, hidden=HIDDEN)


def sections(out: str) -> list[str]:
    """The text under each `hint for task` section of the failures' output."""
    lines = out.splitlines()
    return [lines[i + 1] for i, line in enumerate(lines) if "hint for task 'mul'" in line]


@pytest.mark.parametrize("xdist", [False, True], ids=["serial", "n2"])
def test_each_failure_gets_its_own_hint_once_per_run(repo: KataRepo, xdist: bool) -> None:
    add(repo)
    args = ["katas", "-p", "no:randomly", "--kata-report=markdown:report.md",
            "--kata-report=json:report.json"]  # fmt: skip
    if xdist:
        result = repo.pytester.runpytest_subprocess(*args, "-n", "2")
    else:
        result = repo.pytester.runpytest(*args)
    out = result.stdout.str()
    shown = sections(out)
    # test_mul and test_mul_again (and the hidden test) share the general hint: shown once.
    assert sorted(shown) == sorted(
        ["use *", "zero times anything is zero", "square(x) is mul(x, x)"]
    ), out
    data = json.loads((repo.root / "report.json").read_text())
    (task,) = [t for t in data["katas"][0]["tasks"] if t["id"] == "mul"]
    hints = {t["name"]: t["hint"] for t in task["tests"]}
    assert hints == {
        "test_mul": "use *",
        "test_mul_again": "use *",
        "test_mul_zero": "zero times anything is zero",
        "test_mul_square": "square(x) is mul(x, x)",
        "test_mul_hidden": "use *",
    }
    md = (repo.root / "report.md").read_text()
    assert md.count("Hint: use *") == 1 and md.count("Hint: zero times") == 1
    assert md.count("Hint: square(x)") == 1
    assert "Hint: use +" in md, "a not-started task: its first hint"


def test_a_hint_for_a_function_on_the_stack(repo: KataRepo) -> None:
    """A failure inside the learner's function (not on the test's line) finds its hint too."""
    add(repo)
    stub = STUB.replace("    return x + x", "    raise ValueError('no squares today')")
    repo.write("katas/phase01/demo/calc.py", stub)
    # The failing line names no function: only the traceback says square() raised.
    call = 'f = getattr(calc, "squ" + "are")\n    assert f(3) == 9'
    public = PUBLIC.replace("assert calc.square(3) == 9", call)
    repo.write("katas/phase01/demo/tests/test_demo.py", public)
    out = repo.pytester.runpytest("katas/phase01/demo/tests", "-k", "square").stdout.str()
    assert "no squares today" in out and sections(out) == ["square(x) is mul(x, x)"], out
