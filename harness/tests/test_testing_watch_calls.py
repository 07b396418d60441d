"""harness.testing.watch_calls: what a gate uses to catch a submission that calls a given
simulator, the grader's oracle or another program instead of computing the answer."""

from __future__ import annotations

import json
import subprocess
import sys

from harness.testing import fresh_module, watch_calls


def test_calls_into_a_module_are_recorded() -> None:
    with watch_calls(json) as log:
        json.dumps({"a": 1})
    assert log and "json.dumps" in str(log)


def test_module_name_prefixes_match_submodules() -> None:
    import harness.cuda.static as static

    with watch_calls("harness.cuda") as log:
        static.classify_sass("FFMA")
    assert "harness.cuda.static.opcodes.classify_sass" in log.calls


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


def test_fresh_module_runs_the_file_again_and_shows_import_time_calls(tmp_path) -> None:
    pkg = tmp_path / "freshpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helper.py").write_text("def value():\n    return 41\n")
    (pkg / "table.py").write_text(
        "import json\nfrom dataclasses import dataclass\nfrom .helper import value\n"
        "TABLE = json.loads('[1]')\nANSWER = value() + 1\n"
        "@dataclass\nclass Row:\n    x: int\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        import freshpkg.table as table

        with watch_calls(json) as log:
            again = fresh_module(table)
        assert again is not table and again.ANSWER == 42, "relative imports still resolve"
        assert "json.loads" in log.calls, "the import-time call is seen"
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.startswith("freshpkg")]:
            del sys.modules[name]
