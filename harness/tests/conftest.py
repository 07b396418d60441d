"""Fixtures for testing the plugin the way pytest's own plugins are tested: with `pytester`."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

# No harness test takes a minute; one that hangs (a lock, a child that never answers) must fail
# CI with its stacks dumped, not run into CI's 90-minute limit. The thread method, because the
# plugin under test uses SIGALRM for its own per-test limits inside inline pytester runs.
HANG_LIMIT_S = 300


def pytest_configure(config: pytest.Config) -> None:
    """Under xdist (`pytest -n 2`, what CI runs), hand each worker one test at a time: with the
    longest tests first (below), a free worker always takes the longest test left, so the run
    never ends with one worker finishing a multi-minute `kata verify` while the other idles.
    (xdist's default sends each worker a quarter of the suite at once, in collection order.)"""
    if getattr(config.option, "numprocesses", None) and config.option.maxschedchunk is None:
        config.option.maxschedchunk = 1


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_expected_cost, reverse=True)  # stable: the rest keep their order
    if not config.pluginmanager.hasplugin("timeout"):
        return
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(HANG_LIMIT_S, method="thread"))


def _expected_cost(item: pytest.Item) -> int:
    """How long a test takes, roughly, for the order: a kata's `kata verify` (minutes, one pytest
    run for its reference, one for its stubs, one per shortcut) first, the most runs first;
    every other test 0 (seconds)."""
    callspec = getattr(item, "callspec", None)
    if item.name.startswith("test_kata_verifies[") and callspec is not None:
        kata_dir = Path(callspec.params["kata_dir"])
        mirror = kata_dir.parents[2] / "solutions" / kata_dir.parent.name / kata_dir.name
        shortcuts = mirror / "shortcuts"
        return 2 + (sum(1 for d in shortcuts.iterdir() if d.is_dir()) if shortcuts.is_dir() else 0)
    return 0


DEMO_MANIFEST = """\
id = "{id}"
title = "Demo kata {id}"
phase = 1
summary = "adds and multiplies"
languages = ["python"]
files = ["calc.py"]
time_limit = {time_limit}

[[tasks]]
id = "add"
title = "Add two numbers"
points = 10
tests = ["test_add*"]
hints = ["use +", "return a + b"]

[[tasks]]
id = "mul"
title = "Multiply"
points = 5
tests = ["test_mul*"]
hints = ["use *"]

[[tasks]]
id = "gpu"
title = "On the GPU"
points = 5
tier = "gpu"
tests = ["test_gpu*"]
"""

DEMO_STUB = """\
from harness import todo


def add(a, b):
    todo("add(a, b)")


def mul(a, b):
    return a + b  # wrong on purpose: a started-but-failing task
"""

DEMO_SOLUTION = """\
def add(a, b):
    return a + b


def mul(a, b):
    return a * b
"""

# The demo's shared fixture, as docs/kata-layout.md asks: once, in the public tests/conftest.py.
DEMO_CONFTEST = """\
import pytest


@pytest.fixture
def calc(kata):
    return kata.module("calc")
"""
DEMO_PUBLIC = """\
def test_add(calc):
    assert calc.add(2, 3) == 5


def test_mul(calc):
    assert calc.mul(2, 3) == 6, "2*3 should be 6"


def test_gpu(calc):
    assert calc.mul(1, 1) == 1
"""

DEMO_HIDDEN = """\
def test_add_hidden(calc):
    secret_operand = 41
    assert calc.add(secret_operand, 1) == 42, "add must work for large numbers too"


def test_mul_hidden(calc):
    assert calc.mul(7, 6) == 42, "mul(7, 6) should be 42"
"""


class KataRepo:
    """A kata repository laid out in a pytester directory."""

    def __init__(self, pytester: pytest.Pytester) -> None:
        self.pytester = pytester
        self.root = Path(pytester.path)
        (self.root / "pyproject.toml").write_text(
            '[tool.pytest.ini_options]\naddopts = "--import-mode=importlib -p no:cacheprovider"\n'
        )
        (self.root / "conftest.py").write_text('collect_ignore = ["solutions"]\n')

    def write(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        return path

    def add_demo(self, kata_id: str = "demo", phase_dir: str = "phase01", time_limit: int = 10,
                 stub: str = DEMO_STUB, solution: str = DEMO_SOLUTION, public: str = DEMO_PUBLIC,
                 hidden: str | None = DEMO_HIDDEN, manifest: str | None = None) -> Path:  # fmt: skip
        kata = f"katas/{phase_dir}/{kata_id}"
        sol = f"solutions/{phase_dir}/{kata_id}"
        self.write(
            f"{kata}/kata.toml", manifest or DEMO_MANIFEST.format(id=kata_id, time_limit=time_limit)
        )
        self.write(f"{kata}/calc.py", stub)
        self.write(f"{kata}/tests/conftest.py", DEMO_CONFTEST)
        self.write(f"{kata}/tests/test_{kata_id.replace('-', '_')}.py", public)
        self.write(f"{sol}/calc.py", solution)
        if hidden is not None:
            self.write(f"{sol}/tests/test_hidden_{kata_id}.py", hidden)
        return self.root / kata


@pytest.fixture
def repo(pytester: pytest.Pytester) -> KataRepo:
    return KataRepo(pytester)


def summary_of(output: str) -> list[str]:
    """The gpu-katas summary block of a pytest run's output, without the timing line and the
    run seed's line (a fresh seed each run: harness/tests/test_seeds.py checks it)."""
    lines = output.splitlines()
    start = next(
        i for i, line in enumerate(lines) if line.startswith("=") and " gpu-katas " in line
    )
    block = []
    for line in lines[start + 1 :]:
        if line.startswith("=") or line.startswith("report written"):
            break
        if not line.startswith("seed: "):
            block.append(line)
    return block
