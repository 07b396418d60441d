"""Report formats seen from the outside: each validates against a schema written from its
graders' documentation (``schemas/``), they agree on the score with each other and with the
terminal, error runs still give valid files, and nothing leaks hidden tests or reference code."""

from __future__ import annotations

import base64
import functools
import json
import operator
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.reports import WRITERS, check_spec, write_reports
from harness.results import PASSED, TaskResult
from harness.results import TestRecord as Record

from .conftest import DEMO_HIDDEN, KataRepo

SCHEMAS = Path(__file__).parent / "schemas"
MACHINE = ("gradescope", "prairielearn", "exercism", "github", "junit")
FILES = {
    "gradescope": "gradescope.json",
    "prairielearn": "prairielearn.json",
    "exercism": "exercism.json",
    "github": "github.env",
    "junit": "junit.xml",
    "html": "report.html",
    "markdown": "summary.md",
    "json": "results.json",
}

# A third add test makes shares fractional (10 points over 3 tests: 3.25 + 3.5 + 3.25).
EXTRA_PUBLIC = """
def test_add_negative(kata):
    assert kata.module("calc").add(-2, -3) == -5
"""


@pytest.fixture(autouse=True)
def _no_job_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    # The harness's own CI sets GITHUB_STEP_SUMMARY: inner runs must not write to it.
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def report_args(out: str = "out", formats: tuple[str, ...] = tuple(FILES)) -> list[str]:
    return [f"--kata-report={fmt}:{out}/{FILES[fmt]}" for fmt in formats]


def schema(name: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


def validate(name: str, data: Any) -> None:
    jsonschema.Draft202012Validator.check_schema(schema(name))
    jsonschema.Draft202012Validator(schema(name)).validate(data)


def github_payloads(path: Path) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """{runner id: decoded payload}, and the KATA_RUNNERS list, from KEY=VALUE lines."""
    env = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        assert sep and re.fullmatch(r"[A-Z_][A-Z0-9_]*", key), f"not a KEY=VALUE line: {line!r}"
        env[key] = value
    runners = env["KATA_RUNNERS"].split(",")
    payloads = {}
    for runner in runners:
        # How the reporter finds them: process.env[`${runner.toUpperCase()}_RESULTS`].
        payloads[runner] = json.loads(base64.b64decode(env[f"{runner.upper()}_RESULTS"]))
    return payloads, runners


def js_sum(values: list[float]) -> float:
    """Left to right in IEEE doubles, as JavaScript's reduce adds (Python 3.12's sum() does not)."""
    return functools.reduce(operator.add, values, 0.0)


@functools.cache
def xunit2_schema() -> Any:
    """pytest's own junit-10.xsd (the Jenkins xunit2 shape), copied from pytest's repository
    (testing/example_scripts/junit-10.xsd, MIT), validated with xmlschema as pytest does."""
    xmlschema = pytest.importorskip("xmlschema")
    return xmlschema.XMLSchema(str(SCHEMAS / "junit-10.xsd"))


def junit_cases(path: Path, family: str = "xunit2") -> list[ET.Element]:
    if family == "xunit2":
        xunit2_schema().validate(str(path))
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    keys = [(c.get("classname"), c.get("name")) for c in root.iter("testcase")]
    assert len(keys) == len(set(keys)), "duplicate testcases"
    for suite in root:
        assert suite.tag == "testsuite"
        for attr in ("name", "errors", "failures", "skipped", "tests", "time", "timestamp"):
            assert attr in suite.attrib, f"testsuite lacks {attr}"
        cases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(cases)
        outcome = [[e.tag for e in c if e.tag != "properties"] for c in cases]
        kinds = [tags[0] if tags else "passed" for tags in outcome]
        assert int(suite.get("failures")) == kinds.count("failure")
        assert int(suite.get("errors")) == kinds.count("error")
        assert int(suite.get("skipped")) == kinds.count("skipped")
        for case in cases:
            assert {"classname", "name", "time"} <= set(case.attrib)
            children = [c.tag for c in case]
            if family == "xunit1":
                assert children[0] == "properties", "properties come first, as in pytest's xunit1"
                children = children[1:]
            assert all(c in ("failure", "error", "skipped") for c in children), children
    return root.findall("testsuite/testcase")


def junit_suite_points(path: Path) -> tuple[float, float]:
    """(earned, points) from the suites' properties (xunit2 keeps points there only)."""
    earned, points = [], []
    for suite in ET.parse(path).getroot().findall("testsuite"):
        if suite.find("properties") is not None and prop(suite, "points") is not None:
            earned.append(float(prop(suite, "earned")))
            points.append(float(prop(suite, "points")))
    return js_sum(earned), js_sum(points)


def prop(case: ET.Element, name: str) -> str | None:
    for p in case.iter("property"):
        if p.get("name") == name:
            return p.get("value")
    return None


def validate_all(out: Path, formats: tuple[str, ...] = MACHINE) -> dict[str, Any]:
    """Load and validate every machine format in `out`; returns the parsed data."""
    data: dict[str, Any] = {}
    for fmt in formats:
        path = out / FILES[fmt]
        assert path.is_file(), f"{fmt} report missing"
        if fmt == "github":
            payloads, _ = github_payloads(path)
            for p in payloads.values():
                validate("github", p)
            data[fmt] = payloads
        elif fmt == "junit":
            data[fmt] = junit_cases(path)
        else:
            data[fmt] = json.loads(path.read_text())
            validate(fmt, data[fmt])
    return data


def scores(out: Path, data: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """(earned, points) as each format states it, and as the sum of its per-test points."""
    gs, pl, gh = data["gradescope"], data["prairielearn"], data["github"]
    model = json.loads((out / FILES["json"]).read_text())
    md = re.search(r"gpu-katas: ([\d.]+)/(\d+) points", (out / FILES["markdown"]).read_text())
    html = re.search(
        r"<title>.* — ([\d.]+)/(\d+) points</title>", (out / FILES["html"]).read_text()
    )
    # Per-test points summed left to right in doubles, as the graders' own code adds them.
    return {
        "json": (model["earned"], model["points"]),
        "gradescope": (gs["score"], js_sum([t["max_score"] for t in gs["tests"]])),
        "gradescope tests": (js_sum([t["score"] for t in gs["tests"]]), None),
        "prairielearn": (js_sum([t["points"] for t in pl["tests"]]), js_sum([t["max_points"] for t in pl["tests"]])),
        "github": (js_sum([t["score"] for p in gh.values() for t in p["tests"]]), js_sum([p["max_score"] for p in gh.values()])),
        "junit": junit_suite_points(out / FILES["junit"]),
        "markdown": (float(md[1]), float(md[2])),
        "html": (float(html[1]), float(html[2])),
    }  # fmt: skip


def terminal_total(output: str) -> tuple[float, float]:
    m = re.search(r"^total: ([\d.]+)/(\d+) points", output, re.M)
    assert m, "no total line in the terminal summary"
    return float(m[1]), float(m[2])


def assert_scores_agree(out: Path, data: dict[str, Any], terminal: tuple[float, float]) -> None:
    """Exactly equal, not approximately: what the graders print must be what the terminal says."""
    earned, points = terminal
    for fmt, (e, p) in scores(out, data).items():
        assert e == earned, f"{fmt} says {e!r} points earned, terminal {earned!r}"
        if p is not None:
            assert p == points, f"{fmt} says {p!r} points, terminal {points!r}"
    pl = data["prairielearn"]
    assert pl["score"] == pytest.approx(earned / points if points else 0, abs=1e-4)


# --------------------------------------------------------------------------- the acceptance run
def test_phase_under_xdist_writes_every_format_valid_and_agreeing(repo: KataRepo) -> None:
    repo.add_demo(
        "alpha", stub="def add(a, b):\n    return a + b\n\ndef mul(a, b):\n    return a\n"
    )
    repo.add_demo(
        "beta",
        stub="def add(a, b):\n    return a + b\n\ndef mul(a, b):\n    return a * b\n",
    )
    repo.write("katas/phase01/beta/tests/test_more.py", EXTRA_PUBLIC)
    repo.write("katas/phase01/alpha/tests/test_more.py", EXTRA_PUBLIC.replace("-5", "-6"))
    result = repo.pytester.runpytest_subprocess("katas/phase01", "-n", "2", *report_args())
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = repo.root / "out"
    data = validate_all(out)
    terminal = terminal_total(result.stdout.str())
    assert terminal[0] % 1 != 0, "the run should have fractional points to check rounding"
    assert_scores_agree(out, data, terminal)
    # Every format holds every test: 3 tasks, 6 + 5 tests per kata (one task not run: none).
    assert len(data["gradescope"]["tests"]) == len(data["prairielearn"]["tests"]) == 12
    assert len(data["exercism"]["tests"]) == len(data["junit"]) == 12
    assert sorted(data["github"]) == ["alpha", "beta"], "one runner per kata"
    assert data["exercism"]["status"] == "fail"
    # Task ids are unique per results file: 3 tasks in each of the 2 katas.
    assert {t["task_id"] for t in data["exercism"]["tests"]} == {1, 2, 3, 4, 5, 6}


def test_per_test_points_add_up_to_the_task(repo: KataRepo) -> None:
    repo.add_demo(stub="def add(a, b):\n    return a + b\n\ndef mul(a, b):\n    return a * b\n")
    repo.write("katas/phase01/demo/tests/test_more.py", EXTRA_PUBLIC.replace("-5", "-6"))
    repo.pytester.runpytest("katas", *report_args(formats=("gradescope",)))
    tests = json.loads((repo.root / "out" / FILES["gradescope"]).read_text())["tests"]
    add = [t for t in tests if t["tags"] == ["demo", "add"]]
    assert [t["max_score"] for t in add] == [3.25, 3.5, 3.25]
    assert js_sum([t["max_score"] for t in add]) == 10


# --------------------------------------------------------------------------- error runs
CRASHING_STUB = """\
import ctypes
import os


def add(a, b):
    os._exit(1)


def mul(a, b):
    return ctypes.string_at(0)  # a segfault
"""


def test_crashed_workers_still_give_complete_valid_reports(repo: KataRepo) -> None:
    repo.add_demo(stub=CRASHING_STUB, hidden=None)
    # No sandbox: the crash must take the xdist worker down (the sandbox would catch it in its
    # child), so this covers the controller's handling of a dead worker.
    result = repo.pytester.runpytest_subprocess(
        "katas", "-n", "2", "--kata-no-sandbox", *report_args()
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = repo.root / "out"
    data = validate_all(out)
    assert_scores_agree(out, data, terminal_total(result.stdout.str()))
    reason = re.compile(
        r"the test process crashed \(worker gw\d+ exited unexpectedly\) while running this test"
    )
    gs = {t["name"].split(" › ")[-1]: t for t in data["gradescope"]["tests"]}
    for name in ("test_add", "test_mul"):
        assert gs[name]["status"] == "failed" and gs[name]["score"] == 0
        assert reason.search(gs[name]["output"]), gs[name]["output"]
    assert data["gradescope"]["extra_data"]["status"] == "error"
    ex = {t["name"].split(" › ")[-1]: t for t in data["exercism"]["tests"]}
    assert ex["test_add"]["status"] == ex["test_mul"]["status"] == "error"
    assert data["exercism"]["status"] == "fail", "Exercism: error only when no test ran"
    assert data["github"]["demo"]["status"] == "error"
    assert data["prairielearn"]["gradable"] and data["prairielearn"]["message"].startswith("error")
    errors = [c for c in data["junit"] if c.find("error") is not None]
    assert {c.get("name") for c in errors} >= {"test_add", "test_mul"}
    html = (out / FILES["html"]).read_text()
    assert reason.search(html) and "test_add" in html
    assert "the test process crashed" in (out / FILES["markdown"]).read_text()


BAD_MANIFEST = """\
id = "demo"
title = "Broken"
phase = 1
summary = "s"
languages = ["python"]
files = ["calc.py"]
[[tasks]]
id = "add"
title = "Add"
points = -3
tests = ["test_add*"]
"""


def test_bad_manifest_still_gives_valid_reports_that_say_error(repo: KataRepo) -> None:
    repo.add_demo(manifest=BAD_MANIFEST)
    result = repo.pytester.runpytest_subprocess("katas", "-n", "2", *report_args())
    assert result.ret != pytest.ExitCode.OK
    out = repo.root / "out"
    data = validate_all(out)
    assert data["exercism"]["status"] == "error"
    assert "tasks[0].points" in data["exercism"]["message"]
    assert data["gradescope"]["extra_data"]["status"] == "error"
    assert "tasks[0].points" in data["gradescope"]["output"]
    assert data["prairielearn"]["gradable"] is False
    assert data["github"]["harness"]["status"] == "error"
    assert any(c.find("error") is not None for c in data["junit"])
    assert "tasks[0].points" in (out / FILES["html"]).read_text()
    assert "tasks[0].points" in (out / FILES["markdown"]).read_text()


# --------------------------------------------------------------------------- no leaks
REFERENCE_MARK = "REFERENCE-ONLY-LINE"
LEAKY_SOLUTION = f"""\
def add(a, b):
    return 5  # {REFERENCE_MARK}


def mul(a, b):
    raise ValueError("mul is broken")  # {REFERENCE_MARK} too
"""
HIDDEN_SOURCE_LINE = "secret_operand = 41"  # from conftest.DEMO_HIDDEN
HIDDEN_MESSAGE = "add must work for large numbers too"


@pytest.mark.parametrize("impl", ["learner", "solution"])
def test_no_format_shows_hidden_source_or_reference_code(repo: KataRepo, impl: str) -> None:
    assert HIDDEN_SOURCE_LINE in DEMO_HIDDEN
    repo.add_demo(
        solution=LEAKY_SOLUTION,
        stub="def add(a, b):\n    return 5\n\ndef mul(a, b):\n    return a + b\n",
    )
    result = repo.pytester.runpytest_subprocess(
        "katas", "-n", "2", f"--kata-impl={impl}", *report_args()
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = repo.root / "out"
    validate_all(out)
    texts = {fmt: (out / name).read_text() for fmt, name in FILES.items()}
    gh_lines = (out / FILES["github"]).read_text().splitlines()
    for line in (x for x in gh_lines if "_RESULTS=" in x):
        texts["github"] += base64.b64decode(line.split("=", 1)[1]).decode()
    for fmt, text in texts.items():
        assert HIDDEN_SOURCE_LINE not in text and "secret_operand" not in text, (
            f"{fmt} leaks a hidden test"
        )
        assert REFERENCE_MARK not in text, f"{fmt} leaks reference code"
        assert "add must work for" in text, f"{fmt} lacks the hidden test's message"


def test_public_failure_shows_source_lines_and_hint(repo: KataRepo) -> None:
    repo.add_demo()
    repo.pytester.runpytest("katas", *report_args(formats=("html", "gradescope", "markdown")))
    html = (repo.root / "out" / FILES["html"]).read_text()
    assert "2*3 should be 6" in html
    assert 'class="ln hit"><span class="no">6</span>' in html, "the failing line, numbered"
    assert "use *" in html, "the hint of the failing task"
    assert "needs the gpu tier" in html, "the skipped-for-tier note"
    assert "return a + b" not in html, "only the first hint is shown"
    gs = json.loads((repo.root / "out" / FILES["gradescope"]).read_text())
    mul = next(t for t in gs["tests"] if t["name"] == "demo › mul › test_mul")
    assert 'assert calc.mul(2, 3) == 6, "2*3 should be 6"' in mul["output"]
    assert "Hint: use *" in mul["output"]
    md = (repo.root / "out" / FILES["markdown"]).read_text()
    assert "| 01 | demo | Multiply (`mul`) | ❌ failing | 0/5 |" in md
    assert "💡 Hint: use *" in md


def test_html_says_a_not_started_task_in_one_line(repo: KataRepo) -> None:
    """A task not started is one line saying where to start, not a box per test; a failure keeps
    its box with the test's source lines."""
    repo.add_demo()
    repo.pytester.runpytest("katas", *report_args(formats=("html",)))
    html = (repo.root / "out" / FILES["html"]).read_text()
    lines = re.findall(r'<div class="todo-line">.*?</div>', html)
    assert len(lines) == 1, lines  # the add task: its public and hidden tests
    assert "2 tests not started — start at add(a, b) (calc.py:" in lines[0], lines
    assert '<span class="name">test_add</span>' not in html, "no box per not-started test"
    assert '<span class="name">test_mul</span>' in html and 'class="ln hit"' in html


# --------------------------------------------------------------------------- format details
def test_gradescope_hidden_visibility_and_leaderboard(repo: KataRepo) -> None:
    repo.add_demo()
    repo.write(
        "katas/phase01/demo/tests/test_budget.py",
        """
        def test_add_fast(kata, kata_metrics):
            kata_metrics.update(ratio=1.25, budget=2.0)
        """,
    )
    repo.pytester.runpytest("katas", *report_args(formats=("gradescope",)))
    gs = json.loads((repo.root / "out" / FILES["gradescope"]).read_text())
    vis = {t["name"]: t["visibility"] for t in gs["tests"]}
    assert vis["demo › add › test_add_hidden (hidden)"] == "after_published"
    assert vis["demo › add › test_add"] == "visible"
    assert gs["leaderboard"] == [{"name": "demo test_add_fast", "value": 1.25, "order": "asc"}]
    repo.pytester.runpytest(
        "katas", "--kata-hidden-visibility=hidden", *report_args(formats=("gradescope",))
    )
    gs = json.loads((repo.root / "out" / FILES["gradescope"]).read_text())
    hidden = [t["visibility"] for t in gs["tests"] if t["name"].endswith("(hidden)")]
    assert hidden and set(hidden) == {"hidden"}


def test_hidden_visibility_option_rejects_unknown_values(repo: KataRepo) -> None:
    repo.add_demo()
    result = repo.pytester.runpytest("katas", "--kata-hidden-visibility=sometimes")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "sometimes" in result.stderr.str() and "after_published" in result.stderr.str()


def test_exercism_output_is_capped_at_500_characters(repo: KataRepo) -> None:
    repo.add_demo(hidden=None)
    repo.write(
        "katas/phase01/demo/tests/test_noisy.py",
        """
        def test_add_noisy(kata):
            print("x" * 3000)
            assert kata.module("calc").add(1, 1) == 3
        """,
    )
    repo.pytester.runpytest("katas", *report_args(formats=("exercism",)))
    ex = json.loads((repo.root / "out" / FILES["exercism"]).read_text())
    validate("exercism", ex)
    noisy = next(t for t in ex["tests"] if t["name"].endswith("test_add_noisy"))
    assert len(noisy["output"]) == 500 and noisy["output"].endswith("[... truncated]")


def test_github_lines_append_and_name_runners_the_reporter_finds(repo: KataRepo) -> None:
    repo.add_demo("my-kata", hidden=None)
    env_file = repo.root / "github.env"
    env_file.write_text("EXISTING=1\n")
    repo.pytester.runpytest("katas", f"--kata-report=github:{env_file}")
    lines = env_file.read_text().splitlines()
    assert lines[0] == "EXISTING=1", "GITHUB_ENV is appended to, never replaced"
    env_file.write_text("\n".join(lines[1:]) + "\n")
    payloads, runners = github_payloads(env_file)
    assert runners == ["mykata"], "the reporter accepts ids of letters and digits only"
    p = payloads["mykata"]
    validate("github", p)
    assert p["max_score"] == 20 and p["status"] == "fail"
    assert all(
        t["filename"].startswith("katas/") for t in p["tests"] if t["name"].endswith("test_mul")
    )


def test_junit_has_pytest_junitxml_structure_plus_points(repo: KataRepo) -> None:
    repo.add_demo()
    repo.pytester.runpytest("katas", "--junitxml=pytest.xml", *report_args(formats=("junit",)))
    ours = junit_cases(repo.root / "out" / FILES["junit"])
    theirs = ET.parse(repo.root / "pytest.xml").getroot().findall("testsuite/testcase")
    key = lambda c: (c.get("classname"), c.get("name"))
    assert {key(c) for c in theirs} <= {key(c) for c in ours}
    outcome = lambda c: next(
        (e.tag for e in c if e.tag != "properties" and e.tag != "system-out"), "passed"
    )
    ours_by_key = {key(c): c for c in ours}
    for case in theirs:
        mine = outcome(ours_by_key[key(case)])
        assert (mine == "passed") == (outcome(case) == "passed"), key(case)
    add = ours_by_key[("katas.phase01.demo.tests.test_demo", "test_add")]
    assert add.find("properties") is None, "xunit2 has no per-testcase properties"
    suite = ET.parse(repo.root / "out" / FILES["junit"]).getroot().find("testsuite")
    assert prop(suite, "task:add") == "0/10" and prop(suite, "points") == "20"
    # The xunit1 shape, asked for, carries each test's points on the testcase.
    repo.pytester.runpytest("katas", "--kata-junit-family=xunit1", "--kata-report=junit:x1.xml")
    x1 = {key(c): c for c in junit_cases(repo.root / "x1.xml", family="xunit1")}
    add = x1[("katas.phase01.demo.tests.test_demo", "test_add")]
    assert prop(add, "task") == "add" and prop(add, "points") == "5" and prop(add, "kata") == "demo"


def test_html_is_self_contained_and_embeds_pictures(repo: KataRepo) -> None:
    repo.add_demo()
    art = repo.root / ".kata" / "artifacts"
    art.mkdir(parents=True)
    (art / "roofline.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 32)
    (repo.root / "secret.png").write_bytes(b"\x89PNG\r\n\x1a\nSECRET")
    repo.write(
        "katas/phase01/demo/tests/test_pictures.py",
        """
        def test_add_pictures(kata, kata_metrics):
            kata_metrics["ratio"], kata_metrics["budget"] = 2.5, 2.0
            kata_metrics["svg"] = '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'
            kata_metrics["artifact"] = ["roofline.png", "../../secret.png"]
            kata_metrics["label"] = "roofline"
        """,
    )
    repo.pytester.runpytest("katas", *report_args(formats=("html",)))
    html = (repo.root / "out" / FILES["html"]).read_text()
    assert "<script" not in html, "a picture's script must not reach the page"
    assert "<link" not in html and "@import" not in html and "@font-face" not in html
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", html), "nothing to fetch"
    assert 'src="data:image/svg+xml;base64,' in html, "the test's SVG, as an image"
    assert 'src="data:image/png;base64,' in html, "the artefact under .kata/artifacts/"
    assert "outside" in html and "U0VDUkVU" not in html, "paths outside artifacts/ are refused"
    assert "2.50× reference" in html and "over budget" in html, "the budget chart"


@pytest.mark.skipif(
    not any(Path(d, n).exists() for d in ("/usr/bin", "/usr/local/bin") for n in ("chromium", "chromium-browser")),
    reason="chromium is not installed (apt-get install chromium) - the headless render check needs it",
)  # fmt: skip
def test_html_renders_in_headless_chromium_without_network(repo: KataRepo, tmp_path: Path) -> None:
    import shutil
    import subprocess

    repo.add_demo()
    repo.pytester.runpytest("katas", *report_args(formats=("html",)))
    shot = tmp_path / "shot.png"
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    args = [
        # --disable-gpu-sandbox: Chromium 156 still starts a GPU process, whose sandbox aborts
        # (Permission denied) in containers like this one even with --disable-gpu.
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-gpu-sandbox",
        "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run",
        "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",  # no network
        f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1280,1600",
        (repo.root / "out" / FILES["html"]).as_uri(),
    ]  # fmt: skip
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000, "a real, non-blank screenshot"


def test_step_summary_is_appended_when_github_sets_it(
    repo: KataRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.add_demo()
    summary = repo.root / "step-summary.md"
    summary.write_text("# earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    repo.pytester.runpytest("katas")
    text = summary.read_text()
    assert text.startswith("# earlier step\n") and "## gpu-katas: 0/20 points" in text
    repo.pytester.runpytest("katas", "--kata-no-step-summary")
    assert summary.read_text() == text


def test_one_broken_writer_does_not_cost_the_others(
    repo: KataRepo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.results import RunResult

    def broken(*args: Any) -> None:
        raise RuntimeError("template exploded")

    monkeypatch.setitem(WRITERS, "html", broken)
    written = write_reports(["html:a.html", "markdown:b.md"], RunResult(katas=[]), repo.root, None)
    assert written == [str(repo.root / "b.md")]
    assert "html:a.html was not written" in capsys.readouterr().err


def test_check_spec_names_the_problem() -> None:
    with pytest.raises(ValueError, match="unknown report format 'pdf'.*gradescope"):
        check_spec("pdf:x.pdf")
    with pytest.raises(ValueError, match="expected FORMAT:PATH"):
        check_spec("gradescope")
    assert check_spec("junit:out/j.xml") == ("junit", "out/j.xml")


# --------------------------------------------------------------------------- the model's shares
@given(
    points=st.integers(1, 200),
    tests=st.lists(st.tuples(st.sampled_from([0.5, 1.0, 2.0, 3.0]), st.booleans()), min_size=1, max_size=12),
)  # fmt: skip
def test_shares_sum_to_the_task_points_and_earned_is_their_sum(
    points: int, tests: list[tuple[float, bool]]
) -> None:
    records = [
        Record(f"t::{i}", f"t{i}", "t.py", "k", "x", False, PASSED if ok else "failed", weight=w)
        for i, (w, ok) in enumerate(tests)
    ]
    task = TaskResult("x", "X", points, [], records)
    shares = task.shares
    assert js_sum(shares) == points
    assert all(s > 0 for s in shares), "every weighted test is worth something"
    assert task.earned == js_sum([s for s, (_, ok) in zip(shares, tests, strict=True) if ok])
    exact = points * sum(w for w, ok in tests if ok) / sum(w for w, _ in tests)
    assert abs(task.earned - exact) <= task.unit * len(tests), "shares stay close to exact"
