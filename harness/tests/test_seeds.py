"""The run seed: hidden tests draw fresh inputs each run, the seed is in the summary and the
reports, and `--kata-seed` / $KATA_SEED reproduce a run (every xdist worker uses the controller's)."""

from __future__ import annotations

import json
import uuid

import pytest

from harness import seeds
from harness.testing import hidden_settings

from .conftest import KataRepo

# Hidden tests that report what they drew (kata_metrics travels to the JSON report).
DRAWING = """\
from hypothesis import given, strategies as st

from harness.testing import hidden_settings, random_for, rng, run_seed


def test_add_rng(calc, kata_rng, kata_random, kata_seed, kata_metrics):
    kata_metrics["rng"] = [int(x) for x in kata_rng.integers(0, 1 << 40, size=4)]
    kata_metrics["random"] = kata_random.getrandbits(40)
    kata_metrics["seed"] = kata_seed
    kata_metrics["helpers"] = [int(rng().integers(1 << 40)), random_for("k").getrandbits(40)]
    kata_metrics["run_seed"] = run_seed()
    assert calc.add(1, 2) == 3, "add(1, 2) is wrong"


def test_add_other(calc, kata_rng, kata_metrics):
    kata_metrics["rng"] = [int(x) for x in kata_rng.integers(0, 1 << 40, size=4)]
    kata_metrics["run_seed"] = run_seed()
    assert calc.add(2, 2) == 4, "add(2, 2) is wrong"


@hidden_settings(8)
@given(n=st.integers(0, 1 << 40))
def test_add_hypothesis(calc, kata_metrics, n):
    kata_metrics.setdefault("hypothesis", []).append(n)
    assert calc.add(n, 0) == n, f"add({n}, 0) is wrong"
"""


def _drawn(repo: KataRepo, *args: str) -> dict[str, object]:
    """One subprocess run of the solution: its seed and what each hidden test drew."""
    out = repo.root / "out" / f"{uuid.uuid4().hex}.json"
    result = repo.pytester.runpytest_subprocess(
        "katas", "--kata-impl=solution", f"--kata-report=json:{out}", *args
    )
    assert result.ret == 0, result.stdout.str()[-3000:]
    data = json.loads(out.read_text())
    tests = {
        r["name"]: r["metrics"]
        for k in data["katas"]
        for t in k["tasks"]
        for r in t["tests"]
        if r["hidden"]
    }
    return {"seed": data["seed"], "tests": tests}


@pytest.fixture
def drawing(repo: KataRepo, monkeypatch: pytest.MonkeyPatch) -> KataRepo:
    monkeypatch.delenv(seeds.ENV, raising=False)
    repo.add_demo(hidden=DRAWING)
    return repo


def test_two_runs_draw_different_inputs(drawing: KataRepo) -> None:
    a, b = _drawn(drawing), _drawn(drawing)
    assert a["seed"] != b["seed"]
    for name in ("test_add_rng", "test_add_other", "test_add_hypothesis"):
        assert a["tests"][name] != b["tests"][name], f"{name} drew the same inputs twice"
    rng_a = a["tests"]["test_add_rng"]
    assert rng_a["run_seed"] == a["seed"]
    assert rng_a["rng"] != a["tests"]["test_add_other"]["rng"], "two tests share one stream"


def test_the_same_seed_reproduces_the_inputs(
    drawing: KataRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = _drawn(drawing, "--kata-seed=123456")
    monkeypatch.setenv(seeds.ENV, "123456")
    b = _drawn(drawing)
    assert a["seed"] == b["seed"] == 123456
    assert a["tests"] == b["tests"]
    assert a["tests"]["test_add_rng"]["seed"] == seeds.derive(
        "test_hidden_demo.py::test_add_rng", 123456
    )


def test_xdist_workers_use_the_controllers_seed(drawing: KataRepo) -> None:
    serial = _drawn(drawing, "--kata-seed=777", "-p", "no:xdist")
    parallel = _drawn(drawing, "--kata-seed=777", "-n", "2")
    assert serial["tests"] == parallel["tests"]
    fresh = _drawn(drawing, "-n", "2")  # a fresh seed: each worker still has the controller's
    seen = {m["run_seed"] for m in fresh["tests"].values() if "run_seed" in m}
    assert seen == {fresh["seed"]}


def test_seed_in_summary_reports_and_failure_message(drawing: KataRepo) -> None:
    drawing.write(
        "solutions/phase01/demo/calc.py",
        "def add(a, b):\n    return 3\n\ndef mul(a, b):\n    return a * b\n",
    )
    result = drawing.pytester.runpytest(
        "katas", "--kata-impl=solution", "--kata-seed=4242",
        "--kata-report=json:out/r.json", "--kata-report=markdown:out/r.md",
        "--kata-report=junit:out/r.xml", "--kata-report=html:out/r.html",
    )  # fmt: skip
    out = result.stdout.str()
    assert "seed: 4242 (the same inputs again: --kata-seed=4242)" in out
    assert "reproduce with --kata-seed=4242" in out
    data = json.loads((drawing.root / "out/r.json").read_text())
    assert data["seed"] == 4242
    messages = [r["message"] for k in data["katas"] for t in k["tasks"] for r in t["tests"]]
    assert any("add(2, 2) is wrong (reproduce with --kata-seed=4242)" in m for m in messages)
    assert "--kata-seed=4242" in (drawing.root / "out/r.md").read_text()
    assert '<property name="seed" value="4242"' in (drawing.root / "out/r.xml").read_text()
    assert "seed <b>4242</b>" in (drawing.root / "out/r.html").read_text()


def test_a_bad_seed_is_a_usage_error(drawing: KataRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    result = drawing.pytester.runpytest("katas", "--kata-seed=-3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    monkeypatch.setenv(seeds.ENV, "many")
    result = drawing.pytester.runpytest("katas")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "KATA_SEED" in result.stderr.str() + result.stdout.str()


def test_hidden_settings_leave_the_seed_to_the_run() -> None:
    s = hidden_settings(7)
    assert not s.derandomize and s.database is None and s.max_examples == 7


def test_derive_depends_on_seed_and_key() -> None:
    assert seeds.derive("a", 1) == seeds.derive("a", 1)
    assert len({seeds.derive("a", 1), seeds.derive("b", 1), seeds.derive("a", 2)}) == 3
    assert 0 <= seeds.fresh() < seeds.SEED_LIMIT


def test_env_without_a_run_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(seeds.ENV, " 99 ")
    assert seeds.from_env() == 99
    with pytest.raises(ValueError, match="not a seed"):
        seeds.parse("x")
