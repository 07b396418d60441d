"""Graders read the score right (issue 10 §5), checked on the writers' output directly:

- per-test points add up, left to right in IEEE doubles (as GitHub's reporter adds them in
  JavaScript and Gradescope sums ``max_score``), to exactly the total the terminal prints, for
  many random point splits; with node installed, by node itself;
- GitHub runner ids are letters and digits only, and unique;
- JUnit validates against pytest's xunit2 schema and has no duplicate testcases;
- Exercism lists tests in test-file order, numbers tasks uniquely per file, reports ``error``
  only when no test ran, and fills ``test_code`` for public tests.
"""

from __future__ import annotations

import base64
import json
import random
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.reports import ReportOptions, exercism, github, gradescope, junit, prairielearn
from harness.results import ERROR, FAILED, PASSED, SKIPPED, KataResult, RunResult, TaskResult
from harness.results import TestRecord as Record
from harness.terminal import fmt_points

from .conftest import KataRepo
from .test_reports import js_sum, junit_cases, xunit2_schema

RUNNER_ID = re.compile(r"^[a-zA-Z0-9]+$")  # the reporter's own check of its `runners` input
OPTIONS = ReportOptions(root=Path("/nonexistent"), results_dir=Path("/nonexistent/.kata"))


def make_run(spec: list[tuple[str, list[tuple[int, list[tuple[float, str]]]]]]) -> RunResult:
    """A run from [(kata id, [(task points, [(weight, outcome), ...]), ...]), ...]."""
    katas = []
    for kid, tasks in spec:
        task_results = []
        for ti, (points, tests) in enumerate(tasks):
            records = [
                Record(
                    f"katas/phase01/{kid}/tests/test_{kid}.py::test_t{ti}_{i}",
                    f"test_t{ti}_{i}",
                    f"test_{kid}.py",
                    kid,
                    f"task{ti}",
                    False,
                    outcome,
                    weight=w,
                    seq=i,
                )
                for i, (w, outcome) in enumerate(tests)
            ]
            task_results.append(TaskResult(f"task{ti}", f"Task {ti}", points, [], records))
        katas.append(KataResult(kid, kid.title(), 1, f"katas/phase01/{kid}", task_results))
    return RunResult(katas)


weights = st.one_of(st.sampled_from([1.0, 0.5, 2.0, 3.0]), st.floats(0.01, 50.0))
outcomes = st.sampled_from([PASSED, PASSED, PASSED, FAILED, SKIPPED, ERROR])
tasks_st = st.lists(
    st.tuples(st.integers(1, 100), st.lists(st.tuples(weights, outcomes), max_size=40)),
    min_size=1,
    max_size=6,
)
runs = st.lists(
    st.tuples(st.sampled_from(["simt", "memory-hierarchy", "vector-add", "memoryhierarchy"]), tasks_st),
    min_size=1,
    max_size=4,
    unique_by=lambda k: k[0],
)  # fmt: skip


def terminal_earned(result: RunResult) -> float:
    """The total the terminal prints, read back as a number."""
    return float(fmt_points(result.earned))


@settings(max_examples=300, deadline=None)
@given(spec=runs, seed=st.integers(0, 2**32 - 1))
def test_per_test_points_add_up_exactly_in_any_order(spec: Any, seed: int) -> None:
    result = make_run(spec)
    total = terminal_earned(result)
    assert total == result.earned, "the printed total is the model's total, not a rounding"
    gs = gradescope.build(result, OPTIONS)
    scores = [t["score"] for t in gs["tests"]]
    max_scores = [t["max_score"] for t in gs["tests"]]
    assert js_sum(scores) == total and gs["score"] == total
    assert js_sum(max_scores) == result.points
    # The graders may add in any order (per runner, per kata): still exact.
    random.Random(seed).shuffle(scores)
    assert js_sum(scores) == total
    pl = prairielearn.build(result, OPTIONS)
    assert js_sum([t["points"] for t in pl["tests"]]) == total
    payloads = github.payloads(result)
    # NotifyClassroom: runners with max_score 0 are left out; the rest add test by test.
    counted = [p for p in payloads.values() if p["max_score"]]
    assert js_sum([t["score"] for p in counted for t in p["tests"]]) == total
    assert js_sum([p["max_score"] for p in counted]) == result.points


def test_the_issue_example_prints_its_total_exactly() -> None:
    # 198.92-style runs: 200 points over many tests with a handful failing.
    spec = [
        ("simt", [(100, [(1.0, PASSED)] * 43 + [(1.0, FAILED)] * 3)]),
        ("memory-hierarchy", [(60, [(1.0, PASSED)] * 29 + [(2.0, FAILED)]), (40, [(1.0, PASSED)] * 7)]),
    ]  # fmt: skip
    result = make_run(spec)
    payloads = github.payloads(result)
    total = js_sum([t["score"] for p in payloads.values() for t in p["tests"]])
    assert fmt_points(total) == fmt_points(result.earned)
    assert total == float(fmt_points(result.earned))


# --------------------------------------------------------------------------- the reporter, in node
# Our replica of the reporter's arithmetic (src/main.js + src/notify-classroom.js of
# classroom-resources/autograding-grading-reporter): the runners input checked against its own
# pattern, each <ID>_RESULTS decoded, runners with a max_score summed test by test in JavaScript
# numbers, and "Points X/Y" printed with JavaScript's number formatting.
REPORTER_JS = r"""
const fs = require("fs");
const cases = JSON.parse(fs.readFileSync(process.argv[2], "utf-8"));
const out = [];
for (const c of cases) {
  if (!/^([a-zA-Z0-9]+,)*[a-zA-Z0-9]+$/.test(c.runners)) { out.push("bad runners " + c.runners); continue; }
  const results = c.runners.split(/[\s,]/).filter(Boolean).map((runner) => {
    const encoded = c.env[`${runner.trim().toUpperCase()}_RESULTS`];
    return { runner, results: JSON.parse(Buffer.from(encoded, "base64").toString("utf-8")) };
  });
  const { totalPoints, maxPoints } = results.reduce((acc, { results }) => {
    if (!results.max_score) return acc;
    acc.maxPoints += results.max_score;
    results.tests.forEach(({ score }) => { acc.totalPoints += score; });
    return acc;
  }, { totalPoints: 0, maxPoints: 0 });
  out.push(`Points ${totalPoints}/${maxPoints}`);
}
console.log(JSON.stringify(out));
"""


def github_env(result: RunResult, path: Path) -> dict[str, str]:
    github.write(result, path, OPTIONS)
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_node_sums_github_payloads_to_the_terminal_total(tmp_path: Path) -> None:
    rng = random.Random(20261204)
    cases, expected = [], []
    for n in range(200):
        spec = []
        for kid in rng.sample(
            ["simt", "memory-hierarchy", "vector-add", "matmul"], rng.randint(1, 4)
        ):
            tasks = []
            for _ in range(rng.randint(1, 5)):
                tests = [
                    (
                        rng.choice([1.0, 1.0, 0.5, 2.0, rng.uniform(0.01, 9)]),
                        rng.choice([PASSED, PASSED, FAILED]),
                    )
                    for _ in range(rng.randint(1, 60))
                ]
                tasks.append((rng.randint(1, 100), tests))
            spec.append((kid, tasks))
        result = make_run(spec)
        env = github_env(result, tmp_path / f"env{n}")
        cases.append({"runners": env["KATA_RUNNERS"], "env": env})
        expected.append(f"Points {fmt_points(result.earned)}/{result.points}")
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    (tmp_path / "reporter.js").write_text(REPORTER_JS)
    out = subprocess.run(
        ["node", str(tmp_path / "reporter.js"), str(tmp_path / "cases.json")],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert json.loads(out.stdout) == expected


# --------------------------------------------------------------------------- GitHub runner ids
def test_runner_ids_are_letters_and_digits_and_unique() -> None:
    spec = [
        (kid, [(10, [(1.0, PASSED)])])
        for kid in ("memory-hierarchy", "memoryhierarchy", "memory_hierarchy", "harness", "simt")
    ]
    result = make_run(spec)
    result.errors.append("a collection error outside any kata")
    ids = list(github.payloads(result))
    assert all(RUNNER_ID.match(i) for i in ids), ids
    assert len(ids) == len(set(ids)) == 6
    assert ids[0] == "memoryhierarchy" and "harness" in ids and ids.count("harness") == 1


# --------------------------------------------------------------------------- JUnit
def test_junit_is_xunit2_valid_without_duplicates_even_with_repeated_errors(tmp_path: Path) -> None:
    result = make_run([("simt", [(10, [(1.0, PASSED), (1.0, FAILED)]), (5, [])])])
    result.katas[0].errors += ["worker gw0 crashed", "worker gw1 crashed"]
    result.errors += ["collection failed", "collection failed again"]
    for family in ("xunit2", "xunit1"):
        path = tmp_path / f"{family}.xml"
        opts = ReportOptions(root=tmp_path, results_dir=tmp_path, junit_family=family)
        junit.write(result, path, opts)
        cases = junit_cases(path, family)  # validates (xunit2) and checks uniqueness
        names = [c.get("name") for c in cases]
        assert names.count("kata error") == 1 and "kata error (2)" in names
        assert "task1: not run" in names
        has_props = [c.find("properties") is not None for c in cases]
        assert all(has_props) if family == "xunit1" else not any(has_props)


def test_junit_xunit1_would_not_validate_as_xunit2(tmp_path: Path) -> None:
    # The schema check has teeth: per-testcase properties are what it rejects.
    result = make_run([("simt", [(10, [(1.0, PASSED)])])])
    path = tmp_path / "x1.xml"
    junit.write(result, path, ReportOptions(tmp_path, tmp_path, junit_family="xunit1"))
    assert not xunit2_schema().is_valid(str(path))
    assert ET.parse(path).getroot().find("testsuite/testcase/properties") is not None


# --------------------------------------------------------------------------- Exercism
def test_exercism_task_ids_are_unique_per_file_and_order_follows_collection() -> None:
    spec = [
        ("simt", [(10, [(1.0, PASSED), (1.0, FAILED)]), (10, [(1.0, PASSED)])]),
        ("vector-add", [(10, [(1.0, PASSED)]), (5, [(1.0, PASSED)])]),
    ]
    result = make_run(spec)
    # The file defines task1's test before task0's: file order, not task order.
    t0, t1 = result.katas[0].tasks
    t1.tests[0].seq, t0.tests[0].seq, t0.tests[1].seq = 0, 1, 2
    data = exercism.build(result, OPTIONS)
    names = [t["name"].split(" › ")[-1] for t in data["tests"]]
    assert names[:3] == ["test_t1_0", "test_t0_0", "test_t0_1"]
    per_task = {
        (t["name"].split(" › ")[0], t["name"].split(" › ")[1]): t["task_id"] for t in data["tests"]
    }
    assert sorted(per_task.values()) == [1, 2, 3, 4], "one id per task across the whole file"
    assert data["status"] == "fail" and data["message"] is None


def test_exercism_error_only_when_no_test_ran() -> None:
    ran = make_run([("simt", [(10, [(1.0, PASSED)])])])
    ran.errors.append("tests/test_extra.py: SyntaxError")
    data = exercism.build(ran, OPTIONS)
    assert data["status"] == "fail", "a test ran: the run is graded, the error is an entry"
    assert any(t["status"] == "error" and "SyntaxError" in t["message"] for t in data["tests"])
    nothing = make_run([("simt", [(10, [])])])
    nothing.katas[0].errors.append("simt.py did not import")
    data = exercism.build(nothing, OPTIONS)
    assert data["status"] == "error" and "did not import" in data["message"]


PUBLIC_ORDER = """
import pytest


def test_add_zeta(kata):
    assert kata.module("calc").add(1, 1) == 2


@pytest.mark.parametrize("n", [10, 2, 33])
def test_add_many(kata, n):
    assert kata.module("calc").add(n, 0) == n


class TestMul:
    def test_mul_one(self, kata):
        assert kata.module("calc").mul(1, 5) == 5
"""


def test_exercism_from_a_run_is_in_file_order_with_test_code(repo: KataRepo) -> None:
    repo.add_demo(stub="def add(a, b):\n    return a + b\n\ndef mul(a, b):\n    return a * b\n")
    repo.write("katas/phase01/demo/tests/test_order.py", PUBLIC_ORDER)
    for xdist in ([], ["-n", "2"]):
        repo.pytester.runpytest_subprocess("katas", *xdist, "--kata-report=exercism:ex.json")
        data = json.loads((repo.root / "ex.json").read_text())
        names = [t["name"].split(" › ")[-1] for t in data["tests"]]
        order = [n for n in names if n in ("test_add_zeta", "test_add_many[10]", "test_add_many[2]", "test_add_many[33]", "test_mul_one")]  # fmt: skip
        assert order == ["test_add_zeta", "test_add_many[10]", "test_add_many[2]", "test_add_many[33]", "test_mul_one"], xdist  # fmt: skip
        by_name = {n: t for n, t in zip(names, data["tests"], strict=True)}
        assert by_name["test_add_zeta"]["test_code"].startswith("def test_add_zeta(kata):")
        assert by_name["test_add_many[2]"]["test_code"].startswith("@pytest.mark.parametrize")
        assert by_name["test_mul_one"]["test_code"].startswith("def test_mul_one(self, kata):")
        hidden = [t for t in data["tests"] if "(hidden)" in t["name"]]
        assert hidden and all(t["test_code"] == "" for t in hidden), "hidden source stays hidden"


def test_runner_payloads_decode_as_the_reporter_reads_them(tmp_path: Path) -> None:
    result = make_run([("memory-hierarchy", [(10, [(1.0, PASSED), (1.0, FAILED)])])])
    env = github_env(result, tmp_path / "env")
    assert env["KATA_RUNNERS"] == "memoryhierarchy"
    payload = json.loads(base64.b64decode(env["MEMORYHIERARCHY_RESULTS"]))
    assert payload["max_score"] == 10 and js_sum([t["score"] for t in payload["tests"]]) == 5
