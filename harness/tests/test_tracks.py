"""Katas outside the phases (katas/system-design/, katas/interview-prep/) and the explanations
a passed test shows (`kata_explain`)."""

from __future__ import annotations

import json

import pytest

from harness.cli import main as kata_main
from harness.guide import missing_path, phases
from harness.manifest import ManifestError, load_manifest
from harness.scaffold import scaffold

from .conftest import DEMO_MANIFEST, DEMO_SOLUTION, KataRepo, summary_of

TRACK = 'track = "system-design"\n'


def _track_demo(repo: KataRepo, manifest: str | None = None) -> None:
    base = DEMO_MANIFEST.format(id="sizing", time_limit=10)
    text = manifest if manifest is not None else base.replace("phase = 1\n", "phase = 7\n" + TRACK)
    repo.add_demo("sizing", phase_dir="system-design", manifest=text)


def test_a_track_kata_loads_with_its_track_and_phase(repo: KataRepo) -> None:
    _track_demo(repo)
    m = load_manifest(repo.root / "katas/system-design/sizing/kata.toml")
    assert (m.track, m.phase, m.where) == ("system-design", 7, "system-design (phase 07)")


@pytest.mark.parametrize(
    ("folder", "line", "problem"),
    [
        ("system-design", "", "a kata in katas/system-design/ must say track = 'system-design'"),
        ("phase07", TRACK, "a system-design kata lives in katas/system-design/<kata>, not in phase07/"),
        ("interview-prep", TRACK, "must say track = 'interview-prep'"),
        ("system-design", 'track = "quiz"\n', "must be one of system-design, interview-prep; got 'quiz'"),
    ],
)  # fmt: skip
def test_the_track_and_the_folder_must_agree(
    repo: KataRepo, folder: str, line: str, problem: str
) -> None:
    text = DEMO_MANIFEST.format(id="sizing", time_limit=10).replace("phase = 1\n", line)
    text = "phase = 7\n" + text
    repo.add_demo("sizing", phase_dir=folder, manifest=text)
    with pytest.raises(ManifestError) as e:
        load_manifest(repo.root / f"katas/{folder}/sizing/kata.toml")
    assert e.value.field == "track" and problem in e.value.problem, str(e.value)


def test_tracks_are_listed_with_the_phases_and_named_when_missing(repo: KataRepo) -> None:
    repo.add_demo()
    _track_demo(repo)
    katas = repo.root / "katas"
    assert phases(katas) == {"phase01": ["demo"], "system-design": ["sizing"]}
    why = missing_path(repo.root, repo.root, ["katas/system-design/nope"])
    assert why == (
        "katas/system-design/nope: katas/system-design has no kata nope. Its katas are: sizing."
    )


def test_a_track_kata_runs_and_its_summary_names_the_track(repo: KataRepo) -> None:
    _track_demo(repo)
    result = repo.pytester.runpytest("katas/system-design", "--kata-impl=solution")
    head = next(line for line in summary_of(result.stdout.str()) if "sizing" in line)
    assert head.startswith("system-design (phase 07) · sizing"), head


def test_kata_list_shows_a_track_after_the_phases(repo: KataRepo, capsys) -> None:
    repo.add_demo()
    _track_demo(repo)
    assert kata_main(["--root", str(repo.root), "list"]) == 0
    out = capsys.readouterr().out
    assert out.index("demo") < out.index("system-design") < out.index("sizing"), out
    assert kata_main(["--root", str(repo.root), "list", "--weeks"]) == 0
    weeks = capsys.readouterr().out
    assert "any week from phase 07 on: system-design sizing" in weeks, weeks
    assert "sizing names no week" not in weeks, weeks


def test_kata_new_scaffolds_a_track_kata_that_loads(tmp_path) -> None:
    written = scaffold(tmp_path, 7, "kv-sizing", track="system-design")
    manifest = tmp_path / "katas/system-design/kv-sizing/kata.toml"
    assert manifest in written
    m = load_manifest(manifest)
    assert (m.track, m.phase, m.weeks) == ("system-design", 7, ())
    assert (tmp_path / "solutions/system-design/kv-sizing/kv_sizing.py").is_file()


EXPLAINED = """
def test_add_explained(kata):
    assert kata.module("calc").add(2, 2) == 4, "add(2, 2) should be 4"
    kata_explain_it("Addition of 2 and 2: the first line of why.\\nAnd a second line.")


def test_mul_explained(kata):
    assert kata.module("calc").mul(3, 3) == 9, "mul(3, 3) should be 9"
    kata_explain_it("never shown: the check above fails first")
"""


@pytest.fixture
def explained(repo: KataRepo) -> KataRepo:
    repo.add_demo(solution=DEMO_SOLUTION.replace("return a * b", "return a * b + 1"))
    body = EXPLAINED.replace("(kata):", "(kata, kata_explain):").replace(
        "kata_explain_it", "kata_explain"
    )
    repo.write("katas/phase01/demo/tests/test_explained.py", body)
    return repo


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["inline", "xdist"])
def test_an_explanation_is_shown_after_a_pass_only(explained: KataRepo, workers) -> None:
    result = explained.pytester.runpytest_subprocess(
        "katas", "--kata-impl=solution", "--kata-report=json:r.json", "--kata-report=html:r.html",
        *workers,
    )  # fmt: skip
    out = result.stdout.str()
    assert "why test_add_explained: Addition of 2 and 2: the first line of why." in out, out
    assert "And a second line." in out, out
    assert "never shown" not in out, out
    data = json.loads((explained.root / "r.json").read_text())
    recs = {r["name"]: r for t in data["katas"][0]["tasks"] for r in t["tests"]}
    assert recs["test_add_explained"]["metrics"]["explanation"].startswith("Addition")
    assert "explanation" not in recs["test_mul_explained"]["metrics"]
    html = (explained.root / "r.html").read_text()
    assert '<p class="why">Addition of 2 and 2' in html
