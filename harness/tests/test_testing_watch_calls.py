"""harness.testing.watch_calls: what a gate uses to catch a submission that calls a given
simulator, the grader's oracle or another program instead of computing the answer."""

from __future__ import annotations

import json
import subprocess
import sys

from harness.testing import watch_calls


def test_calls_into_a_module_are_recorded() -> None:
    with watch_calls(json) as log:
        json.dumps({"a": 1})
    assert log and "json.dumps" in str(log)


def test_module_name_prefixes_match_submodules() -> None:
    import harness.cuda.static as static

    with watch_calls("harness.cuda") as log:
        static.classify_sass("FFMA")
    assert "harness.cuda.static.classify_sass" in log.calls


def test_starting_another_program_is_recorded() -> None:
    with watch_calls() as log:
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert "_posixsubprocess.fork_exec (another program)" in str(log)
    with watch_calls(processes=False) as quiet:
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert not quiet


def test_other_calls_are_not_and_the_profiler_is_restored() -> None:
    before = sys.getprofile()
    with watch_calls(json) as log:
        sorted([3, 1, 2])
        _ = json.JSONDecoder  # an attribute, not a call
    assert not log and str(log) == "nothing forbidden"
    assert sys.getprofile() is before
