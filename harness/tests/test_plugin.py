"""The plugin seen from the outside: what learners, instructors and graders get from a run."""

from __future__ import annotations

import json

import pytest

from .conftest import KataRepo, summary_of


def test_stubs_show_not_started_without_tracebacks(repo: KataRepo) -> None:
    repo.add_demo()
    result = repo.pytester.runpytest("katas/phase01")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert "NotImplementedError" not in out and "KataTodo" not in out
    assert "Traceback" not in out
    summary = summary_of(out)
    assert any("add" in line and "not started" in line and "0/10" in line for line in summary)
    assert any("mul" in line and "failing" in line for line in summary)
    assert any("total: 0/20 points" in line for line in summary)
    assert any("next: add" in line for line in summary)


def test_failure_shows_assertion_message_and_first_hint(repo: KataRepo) -> None:
    repo.add_demo()
    out = repo.pytester.runpytest("katas").stdout.str()
    assert "2*3 should be 6" in out
    assert "hint for task 'mul'" in out and "use *" in out
    assert "return a + b" not in out, "only the first hint is shown in a run"


def test_solution_run_passes_with_full_points_for_available_tiers(repo: KataRepo) -> None:
    repo.add_demo()
    result = repo.pytester.runpytest("katas", "--kata-impl=solution")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=4, skipped=1)
    summary = summary_of(result.stdout.str())
    assert any("add" in line and "10/10" in line and "passed" in line for line in summary)
    assert any("needs the gpu tier" in line for line in summary)


def test_hidden_failure_shows_message_but_not_source(repo: KataRepo) -> None:
    repo.add_demo(
        stub="def add(a, b):\n    return a + b if a < 10 else 5\n\ndef mul(a, b):\n    return a * b\n"
    )
    result = repo.pytester.runpytest("katas")
    out = result.stdout.str()
    assert "hidden test failed: AssertionError: add must work for large numbers too" in out
    assert "secret_operand" not in out, "hidden test source leaked into the output"


def test_a_hidden_failure_without_a_message_names_its_test(repo: KataRepo) -> None:
    """Never only "a hidden test failed": the test's name says the property it checks."""
    repo.add_demo(
        stub="def add(a, b):\n    return 5\n\ndef mul(a, b):\n    return a * b\n",
        hidden="def test_add_big(calc):\n    secret_operand = 41\n"
        "    assert calc.add(secret_operand, 1) == 42\n",
    )
    out = repo.pytester.runpytest("katas").stdout.str()
    assert "test_add_big failed (AssertionError, without a message)" in out, out
    assert "secret_operand" not in out, "hidden test source leaked into the output"


def test_a_hidden_failure_raised_in_learner_code_says_where(repo: KataRepo) -> None:
    """ "KeyError: 2" alone names nothing: the learner's function, file and line, and the test."""
    repo.add_demo(
        stub="def add(a, b):\n    table = {1: 2}\n    return table[a] + b\n\n"
        "def mul(a, b):\n    return a * b\n",
        hidden="def test_add_big(calc):\n    secret_operand = 41\n"
        "    assert calc.add(secret_operand, 1) == 42, 'add of big numbers'\n",
    )
    out = repo.pytester.runpytest("katas").stdout.str()
    assert (
        "hidden test failed: KeyError: 41 — raised in add() at calc.py:3, during the hidden test"
        " test_add_big" in out
    ), out
    assert "secret_operand" not in out, "hidden test source leaked into the output"


def test_an_instructor_run_shows_a_hidden_tests_whole_failure(repo: KataRepo) -> None:
    """--kata-impl=solution (or a shortcut) has solutions/ at hand: nothing there is secret."""
    repo.add_demo(solution="def add(a, b):\n    return 5\n\ndef mul(a, b):\n    return a * b\n")
    result = repo.pytester.runpytest("katas", "--kata-impl=solution")
    out = result.stdout.str()
    assert "add must work for large numbers too" in out
    assert "assert calc.add(secret_operand, 1) == 42" in out and "assert 5 == 42" in out, out
    assert "hidden test failed:" not in out


def test_hidden_tests_can_be_switched_off(repo: KataRepo) -> None:
    repo.add_demo()
    result = repo.pytester.runpytest("katas", "--kata-impl=solution", "--kata-hidden=off")
    result.assert_outcomes(passed=2, skipped=1)


def test_xdist_gives_identical_summary(repo: KataRepo) -> None:
    repo.add_demo()
    serial = repo.pytester.runpytest_subprocess("katas", "-p", "no:xdist")
    parallel = repo.pytester.runpytest_subprocess("katas", "-n", "2")
    assert summary_of(serial.stdout.str()) == summary_of(parallel.stdout.str())
    assert serial.ret == parallel.ret == pytest.ExitCode.TESTS_FAILED


def test_two_katas_with_same_module_name_under_xdist(repo: KataRepo) -> None:
    repo.add_demo("alpha")
    repo.add_demo(
        "beta",
        phase_dir="phase02",
        solution="def add(a, b):\n    return a + b\n\ndef mul(a, b):\n    return a * b  # beta\n",
    )
    result = repo.pytester.runpytest_subprocess("katas", "-n", "2", "--kata-impl=solution")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(passed=8, skipped=2)
    data = json.loads((repo.root / ".kata" / "last-run.json").read_text())
    assert [k["id"] for k in data["katas"]] == ["alpha", "beta"]


def test_kata_module_is_the_right_one_for_each_kata(repo: KataRepo) -> None:
    """Two katas both named calc.py: each test gets its own kata's module."""
    repo.add_demo(
        "alpha",
        solution="WHO = 'alpha'\ndef add(a, b):\n    return a + b\ndef mul(a, b):\n    return a * b\n",
    )
    repo.add_demo(
        "beta",
        phase_dir="phase02",
        solution="WHO = 'beta'\ndef add(a, b):\n    return a + b\ndef mul(a, b):\n    return a * b\n",
    )
    for name in ("alpha", "beta"):
        repo.write(
            f"katas/phase0{1 if name == 'alpha' else 2}/{name}/tests/test_who.py",
            f"""
            def test_add_who(kata):
                assert kata.module("calc").WHO == "{name}"
        """,
        )
    result = repo.pytester.runpytest("katas", "--kata-impl=solution")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()


def test_tier_skip_reason_and_require_tier(repo: KataRepo) -> None:
    repo.add_demo()
    out = repo.pytester.runpytest("katas", "--kata-impl=solution", "-rs").stdout.str()
    assert "needs the gpu tier" in out
    strict = repo.pytester.runpytest("katas", "--kata-impl=solution", "--kata-require-tier=gpu")
    assert strict.ret == pytest.ExitCode.TESTS_FAILED
    assert "--kata-require-tier=gpu" in strict.stdout.str()


def test_forced_cpu_tier_shows_in_header(repo: KataRepo) -> None:
    repo.add_demo()
    out = repo.pytester.runpytest("katas", "--kata-tier=cpu", "--kata-impl=solution").stdout.str()
    assert "tiers: cpu" in out and "cluster-sim tier is switched off" in out


def test_capability_marker_skips_with_reason(repo: KataRepo) -> None:
    repo.add_demo()
    repo.write(
        "katas/phase01/demo/tests/test_needs.py",
        """
        import pytest
        @pytest.mark.needs("no-such-tool")
        def test_add_needs(kata):
            pass
    """,
    )
    out = repo.pytester.runpytest("katas", "--kata-impl=solution", "-rs").stdout.str()
    assert "needs no-such-tool" in out


def test_learner_syntax_error_is_a_clear_failure(repo: KataRepo) -> None:
    repo.add_demo(stub="def add(a, b)\n    return a + b\n")
    result = repo.pytester.runpytest("katas")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "calc.py, line 1: SyntaxError" in out
    assert "INTERNALERROR" not in out


def test_hanging_learner_code_hits_the_time_limit(repo: KataRepo) -> None:
    repo.add_demo(
        time_limit=1,
        stub="def add(a, b):\n    while True:\n        pass\n\ndef mul(a, b):\n    return a * b\n",
    )
    result = repo.pytester.runpytest_subprocess("katas", "-k", "test_add")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "time limit" in result.stdout.str() or "wall time" in result.stdout.str()


def test_crashing_worker_still_completes_the_run(repo: KataRepo) -> None:
    repo.add_demo(
        stub="import os\ndef add(a, b):\n    os._exit(3)\n\ndef mul(a, b):\n    return a * b\n"
    )
    result = repo.pytester.runpytest_subprocess(
        "katas", "-n", "2", "--kata-report=json:out/results.json"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    data = json.loads((repo.root / "out" / "results.json").read_text())
    add = next(t for t in data["katas"][0]["tasks"] if t["id"] == "add")
    assert add["earned"] == 0 and add["status"] == "failing"
    mul = next(t for t in data["katas"][0]["tasks"] if t["id"] == "mul")
    assert mul["status"] == "passed", "the run went on after the crash"


def test_results_are_saved_for_kata_progress(repo: KataRepo) -> None:
    repo.add_demo()
    repo.pytester.runpytest("katas")
    progress = json.loads((repo.root / ".kata" / "progress.json").read_text())
    assert progress["katas"]["demo"]["earned"] == 0
    repo.pytester.runpytest("katas", "--kata-impl=solution")
    again = json.loads((repo.root / ".kata" / "progress.json").read_text())
    assert again["katas"]["demo"]["earned"] == 0, "solution runs must not count as progress"


def test_partial_credit_by_weight(repo: KataRepo) -> None:
    manifest = """
        id = "demo"
        title = "Weights"
        phase = 1
        summary = "s"
        languages = ["python"]
        files = ["calc.py"]
        [[tasks]]
        id = "add"
        title = "Add"
        points = 12
        tests = ["test_add*"]
        weights = { "test_add_big" = 2 }
    """
    repo.add_demo(
        manifest=manifest,
        hidden=None,
        public="""
        def test_add_small(kata):
            assert kata.module("calc").add(1, 1) == 2
        def test_add_big(kata):
            assert kata.module("calc").add(10**6, 1) == 10**6 + 1
        def test_add_wrong(kata):
            assert kata.module("calc").add(1, 1) == 3
    """,
        solution="def add(a, b):\n    return a + b\n",
    )
    repo.pytester.runpytest("katas", "--kata-impl=solution", "--kata-report=json:r.json")
    data = json.loads((repo.root / "r.json").read_text())
    assert data["katas"][0]["tasks"][0]["earned"] == 9.0, "(1 + 2) of 4 weight units of 12 points"


def test_plugin_stays_out_of_non_kata_runs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_plain():\n    assert 1\n")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    assert "gpu-katas ===" not in result.stdout.str()


def test_kata_metrics_reach_the_results(repo: KataRepo) -> None:
    repo.add_demo()
    repo.write(
        "katas/phase01/demo/tests/test_metrics.py",
        """
        def test_add_metrics(kata, kata_metrics):
            kata_metrics["ratio"] = 1.5
            kata_metrics["svg"] = "<svg/>"
    """,
    )
    repo.pytester.runpytest_subprocess("katas", "-n", "2", "--kata-report=json:r.json")
    data = json.loads((repo.root / "r.json").read_text())
    add = next(t for t in data["katas"][0]["tasks"] if t["id"] == "add")
    rec = next(r for r in add["tests"] if r["name"] == "test_add_metrics")
    assert rec["metrics"] == {"ratio": 1.5, "svg": "<svg/>"}
