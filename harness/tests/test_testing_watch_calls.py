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


def test_calls_from_other_threads_are_recorded() -> None:
    """A call into a target made inside a new thread (threading.Thread, an executor's worker)
    is the same call: a per-thread hook alone would miss it."""
    import concurrent.futures
    import threading

    with watch_calls(json) as log:
        worker = threading.Thread(target=json.dumps, args=({"a": 1},))
        worker.start()
        worker.join()
    assert "json.dumps" in log.calls, f"a call in a threading.Thread is unseen: {log}"
    with watch_calls(json) as pooled:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            assert pool.submit(json.loads, "[1]").result() == [1]
    assert "json.loads" in pooled.calls, f"a call in an executor's worker is unseen: {pooled}"
    assert threading.getprofile() is None, "the hook for new threads is removed again"


def test_a_callee_reached_through_sys_modules_is_recorded() -> None:
    """The watch knows a call by the code it runs, not by how the caller found the function."""
    import harness.cuda.static  # noqa: F401  (loaded, as a given module would have it)

    with watch_calls("harness.cuda") as log:
        sys.modules["harness.cuda.static"].classify_sass("FFMA")
    assert "harness.cuda.static.opcodes.classify_sass" in log.calls, str(log)


def test_allowed_callers_may_call_the_targets(tmp_path) -> None:
    """With `allow`, a given wrapper's own calls into the targets are not recorded, a direct
    call (or one from a thread) still is."""
    import threading

    (tmp_path / "wrapperpkg_given.py").write_text(
        "import json\ndef text(x):\n    return json.dumps(x)\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        import wrapperpkg_given as given

        with watch_calls(json, processes=False, allow=(given,)) as log:
            assert given.text([1]) == "[1]"
        assert not log, f"the allowed wrapper's call was recorded: {log}"
        with watch_calls(json, processes=False, allow=(given,)) as direct:
            json.dumps([1])
            worker = threading.Thread(target=json.loads, args=("[2]",))
            worker.start()
            worker.join()
        assert "json.dumps" in direct.calls and "json.loads" in direct.calls, str(direct)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("wrapperpkg_given", None)


def test_a_prefix_target_loaded_again_under_another_name_is_recorded() -> None:
    """The grader's calculator loaded from its file as module `scratch` is the same code."""
    import importlib.util

    import harness.cuda.static.calculator as calc

    spec = importlib.util.spec_from_file_location("scratch_calc", calc.__file__)
    assert spec is not None and spec.loader is not None
    scratch = importlib.util.module_from_spec(spec)
    sys.modules["scratch_calc"] = scratch
    try:
        spec.loader.exec_module(scratch)
        with watch_calls("harness.cuda") as log:
            scratch.occupancy("sm_80", 128, 32, 0)
    finally:
        del sys.modules["scratch_calc"]
    assert "scratch_calc.occupancy" in log.calls


def test_a_program_started_through_ctypes_is_recorded() -> None:
    """libc's system() through ctypes is no call the profile sees: its child process is."""
    import ctypes

    libc = ctypes.CDLL(None)
    with watch_calls() as log:
        assert libc.system(b"true") == 0
    assert "a child process (another program)" in log.calls
    with watch_calls() as quiet:
        sorted([2, 1])
    assert not quiet
