"""harness.testing.no_peeking: what a hidden test uses to catch learner code that reads the
answer out of the test (its frame's locals, its code's constants, its source in linecache)
instead of working it out (red team rt26)."""

from __future__ import annotations

import importlib.util
import linecache
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from harness.testing import no_peeking

LEARNER = """\
import gc
import inspect
import sys
import traceback


def honest(x):
    return sorted([x, 2 * x])[-1]


def frame_local():
    return sys._getframe(1).f_locals.get("want")


def via_inspect():
    return inspect.currentframe().f_back.f_locals.get("want")


def via_traceback():
    return [f.name for f in traceback.extract_stack()]


def via_code():
    return honest.__code__.co_consts


def via_gc():
    return len(gc.get_objects())
"""


@pytest.fixture(scope="module")
def learner(tmp_path_factory: pytest.TempPathFactory) -> Any:
    kata = tmp_path_factory.mktemp("peek") / "kata"
    kata.mkdir()
    (kata / "answers.py").write_text(LEARNER)
    spec = importlib.util.spec_from_file_location("peek_answers", kata / "answers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_honest_answer_reads_nothing(learner: Any) -> None:
    with no_peeking(learner, __file__) as peeks:
        got = learner.honest(21)
    assert got == 42 and peeks == []


@pytest.mark.parametrize(
    ("name", "event"),
    [
        ("frame_local", "sys._getframe"),
        ("via_inspect", "sys._getframe"),
        ("via_traceback", "sys._getframe"),
        ("via_code", ".__code__"),
        ("via_gc", "gc.get_objects"),
    ],
)
def test_reading_frames_or_code_is_recorded(learner: Any, name: str, event: str) -> None:
    want = 42  # noqa: F841 - what frame_local would steal
    with no_peeking(learner, __file__) as peeks:
        getattr(learner, name)()
    assert event in peeks, f"{name}: recorded {peeks}"


def test_outside_the_block_and_in_the_tests_own_code_nothing_is_recorded(learner: Any) -> None:
    learner.frame_local()  # no block: the hook is idle
    with no_peeking(learner, __file__) as peeks:
        sys._getframe(0)  # this file is not in the learner's folder
    assert peeks == []


def test_the_tests_source_is_dropped_from_linecache(learner: Any, tmp_path: Path) -> None:
    hidden = tmp_path / "test_hidden_x.py"
    hidden.write_text(textwrap.dedent("ANSWER = 42\n"))
    linecache.getline(str(hidden), 1)
    assert str(hidden) in linecache.cache
    with no_peeking(learner, str(hidden)):
        assert str(hidden) not in linecache.cache
