"""harness.patches: unified diffs against the reference, applied strictly and materialised.

A shortcut (and a mutant) is the reference plus a patch: these check the applier byte for byte
(multi-hunk, new files, no final newline, CRLF, shifted hunks), the sentence of a hunk that no
longer applies, the patches `make_patch` writes, and materialisation into a content-addressed
directory, twice at once from two xdist workers.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import patches
from harness.manifest import load_manifest
from harness.patches import PatchError
from harness.shortcuts import shortcuts

from .conftest import KataRepo, summary_of
from .test_gates import REFERENCE, SENTENCE, SHORTCUT, STUB, gated_kata

REF = "".join(f"line {i}\n" for i in range(1, 31))


def write(base: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_bytes(text.encode())
    return base


def edit(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


def test_multi_hunk_and_new_file_apply_byte_for_byte(tmp_path: Path) -> None:
    write(tmp_path, {"calc.py": REF})
    edited = edit(edit(REF, "line 3\n", "LINE 3\nextra\n"), "line 27\n", "")
    patch = patches.make_patch({"calc.py": (REF, edited), "pkg/new.py": (None, "x = 1\n")})
    assert patch.count("@@ -") == 3 and "--- /dev/null" in patch
    assert patches.touched(patch) == ["calc.py", "pkg/new.py"]
    out = patches.apply(tmp_path, patch)
    assert out == {"calc.py": edited.encode(), "pkg/new.py": b"x = 1\n"}


@pytest.mark.parametrize(
    "old, new",
    [
        ("a\nb\nc", "a\nB\nc"),  # no newline at the end of either
        ("a\nb\nc\n", "a\nb\nc"),  # the patch removes the final newline
        ("a\nb\nc", "a\nb\nc\n"),  # ... or adds it
        ("a\r\nb\r\nc\r\n", "a\r\nB\r\nc\r\n"),  # CRLF kept as it is
        ("a\fb\nc\x1cd\n", "a\fb\nC\x1cd\n"),  # \f and \x1c are not line breaks in a diff
    ],
)
def test_line_endings_survive(tmp_path: Path, old: str, new: str) -> None:
    write(tmp_path, {"f.c": old})
    patch = patches.make_patch({"f.c": (old, new)})
    assert patches.apply(tmp_path, patch)["f.c"] == new.encode()


def test_a_shifted_hunk_applies_where_its_lines_are(tmp_path: Path) -> None:
    """Lines added above a hunk move it, as `patch` and `git apply` allow; no fuzz."""
    edited = edit(REF, "line 20\n", "line twenty\n")
    patch = patches.make_patch({"calc.py": (REF, edited)})
    write(tmp_path, {"calc.py": "# a new header\n# of two lines\n" + REF})
    assert patches.apply(tmp_path, patch)["calc.py"].decode() == (
        "# a new header\n# of two lines\n" + edited
    )


def test_a_hunk_that_no_longer_applies_names_file_hunk_and_line(tmp_path: Path) -> None:
    patch = patches.make_patch({"calc.py": (REF, edit(REF, "line 12\n", "line XII\n"))})
    write(tmp_path, {"calc.py": edit(REF, "line 11\n", "line eleven\n")})
    with pytest.raises(PatchError) as e:
        patches.apply(tmp_path, patch)
    assert str(e.value) == (
        "calc.py: hunk @@ -9,7 +9,7 @@ does not apply: line 11 of the reference is "
        "'line eleven', the patch expects 'line 11'"
    )


def test_a_hunk_past_the_end_says_where_the_reference_ends(tmp_path: Path) -> None:
    patch = patches.make_patch({"calc.py": (REF, edit(REF, "line 29\n", "x\n"))})
    write(tmp_path, {"calc.py": "".join(REF.splitlines(True)[:27])})
    with pytest.raises(
        PatchError, match=r"the reference ends at line 27, the patch expects line 28"
    ):
        patches.apply(tmp_path, patch)


@pytest.mark.parametrize(
    "patch, files, problem",
    [
        ("", {}, "changes no file"),
        ("just words\n", {}, "changes no file"),
        ("--- a/gone.py\n+++ b/gone.py\n@@ -1 +1 @@\n-a\n+b\n", {}, "gone.py: the patch changes it, but the reference has no such file"),
        ("--- /dev/null\n+++ b/calc.py\n@@ -0,0 +1 @@\n+b\n", {"calc.py": "a\n"}, "adds it, but the reference has it already"),
        ("--- a/calc.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n", {"calc.py": "a\n"}, "the patch deletes it"),
        ("--- a/../x.py\n+++ b/../x.py\n@@ -1 +1 @@\n-a\n+b\n", {}, "relative to the reference directory"),
        ("--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n-a\n+b\n", {"calc.py": "a\n"}, "not a unified diff"),
    ],
)  # fmt: skip
def test_malformed_patches_say_why(
    tmp_path: Path, patch: str, files: dict[str, str], problem: str
) -> None:
    write(tmp_path, files)
    with pytest.raises(PatchError, match=problem.replace("(", r"\(").replace(".", r"\.")):
        patches.apply(tmp_path, patch)


LINE = st.text(alphabet="ab \t\r\f", max_size=4)


@settings(max_examples=60, deadline=None, database=None, derandomize=True)
@given(st.lists(LINE, max_size=12), st.lists(LINE, max_size=12), st.booleans(), st.booleans())
def test_make_patch_then_apply_gives_the_edited_text(
    tmp_path_factory: pytest.TempPathFactory, a: list[str], b: list[str], end_a: bool, end_b: bool
) -> None:
    old = "\n".join(a) + ("\n" if end_a and a else "")
    new = "\n".join(b) + ("\n" if end_b and b else "")
    base = write(tmp_path_factory.mktemp("ref"), {"f.py": old})
    patch = patches.make_patch({"f.py": (old, new)})
    if old == new:
        assert patch == ""
        return
    assert patches.apply(base, patch)["f.py"] == new.encode()


def test_materialise_is_content_addressed_and_holds_only_the_patched_files(
    tmp_path: Path,
) -> None:
    ref = write(tmp_path / "ref", {"calc.py": REF, "other.py": "x = 1\n"})
    patch = patches.make_patch({"calc.py": (REF, edit(REF, "line 5\n", "five\n"))})
    first = patches.materialise(ref, patch, root=tmp_path / "cache")
    again = patches.materialise(ref, patch, root=tmp_path / "cache")
    assert first == again and first.is_relative_to(tmp_path / "cache")
    assert sorted(p.name for p in first.iterdir()) == ["calc.py"]
    assert "five\n" in (first / "calc.py").read_text()
    other = patches.make_patch({"calc.py": (REF, edit(REF, "line 6\n", "six\n"))})
    assert patches.materialise(ref, other, root=tmp_path / "cache") != first


CONCURRENT = """
import os, time
from pathlib import Path
import pytest
from harness import patches

REF = "".join(f"line {{i}}\\n" for i in range(200))
NEW = REF.replace("line 100\\n", "one hundred\\n")

@pytest.mark.parametrize("worker", range(4))
def test_materialise(worker):
    ref = Path({ref!r})
    root = Path({root!r})
    patch = patches.make_patch({{"calc.py": (REF, NEW)}})
    out = patches.materialise(ref, patch, root=root)
    assert (out / "calc.py").read_text() == NEW
    (root / f"seen-{{worker}}").write_text(str(out))
"""


def test_two_workers_materialise_one_patch_at_once(pytester: pytest.Pytester) -> None:
    ref = write(pytester.path / "ref", {"calc.py": "".join(f"line {i}\n" for i in range(200))})
    root = pytester.path / "cache"
    root.mkdir()
    pytester.makepyfile(test_conc=textwrap.dedent(CONCURRENT.format(ref=str(ref), root=str(root))))
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=4)
    seen = {(root / f"seen-{w}").read_text() for w in range(4)}
    assert len(seen) == 1, "every worker got the same directory"
    built = (root / "compiles.log").read_text().splitlines()
    assert len(built) == 1, f"materialised once, not once per worker: {built}"


# --------------------------------------------------------------------------- shortcuts as patches
KATA = "katas/phase01/gated"
MIRROR = "solutions/phase01/gated"


def patch_shortcut(repo: KataRepo, name: str, files: dict[str, tuple[str | None, str]]) -> Path:
    base = f"{MIRROR}/shortcuts/{name}"
    repo.write(f"{base}/shortcut.toml", f'task = "add"\nwhy = "{SENTENCE}"\n')
    (repo.root / base / "shortcut.patch").write_text(patches.make_patch(files))
    return repo.root / base


def test_a_patch_shortcut_runs_over_the_reference_and_its_gate_catches_it(repo: KataRepo) -> None:
    gated_kata(repo, stub="")  # the learner's file is empty: never what a shortcut run loads
    patch_shortcut(repo, "five", {"calc.py": (REFERENCE, SHORTCUT)})
    result = repo.pytester.runpytest("katas", "--kata-impl=shortcut:five")
    summary = summary_of(result.stdout.str())
    assert any(" add " in line and "0/10" in line for line in summary), summary
    assert any(" mul " in line and "6/6" in line for line in summary), "hidden tests ran too"
    assert any(SENTENCE in line for line in summary)
    result.assert_outcomes(passed=5, failed=1)


def test_kata_impl_patch_runs_any_patch_file(repo: KataRepo) -> None:
    """How a mutant runs: --kata-impl=patch:<file>, the reference with that diff applied."""
    gated_kata(repo, stub="")
    patch = repo.root / "mutant.patch"
    patch.write_text(
        patches.make_patch({"calc.py": (REFERENCE, REFERENCE.replace("a * b", "a + b"))})
    )
    result = repo.pytester.runpytest("katas", f"--kata-impl=patch:{patch.name}")
    summary = summary_of(result.stdout.str())
    assert any(" add " in line and "10/10" in line for line in summary), summary
    assert any(" mul " in line and "0/6" in line for line in summary), summary
    bad = repo.pytester.runpytest("katas", "--kata-impl=patch:no-such.patch")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR and "is not a file" in bad.stderr.str()


def test_a_stale_patch_fails_the_run_and_verify_with_its_hunk(repo: KataRepo) -> None:
    gated_kata(repo, stub=STUB)
    patch_shortcut(repo, "five", {"calc.py": (REFERENCE, SHORTCUT)})
    repo.write(f"{MIRROR}/calc.py", REFERENCE.replace("return a + b", "return b + a"))
    result = repo.pytester.runpytest("katas", "--kata-impl=shortcut:five")
    out = result.stdout.str()
    sentence = (
        "calc.py: hunk @@ -1,5 +1,5 @@ does not apply: line 2 of the reference is "
        "'    return b + a', the patch expects '    return a + b'"
    )
    assert sentence in out and result.ret != pytest.ExitCode.OK, out
    found, problems = shortcuts(load_manifest(repo.root / KATA))
    assert found == [] and len(problems) == 1, problems
    assert problems[0].startswith("shortcut 'five': ") and sentence in problems[0]
    patch_shortcut(repo, "six", {"calc.py": (REFERENCE, SHORTCUT.replace("5", "6"))})
    from harness.verify import verify

    (v,) = verify([repo.root / KATA], repo.root, run_shortcuts=True)  # a finding, not a crash
    assert any(p.startswith("shortcut 'five': ") and sentence in p for p in v.problems), v.problems


@pytest.mark.parametrize(
    "files, extra, problem",
    [
        ({"tests/test_gated.py": ("x\n", "y\n")}, None, "not tests"),
        ({"given.py": (None, "X = 2\n")}, None, "the kata has it (given code)"),
        (
            {"calc.py": (REFERENCE, SHORTCUT)},
            "calc.py",
            "holds shortcut.toml and shortcut.patch only",
        ),
    ],
)
def test_verify_refuses_a_patch_that_changes_more_than_learner_files(
    repo: KataRepo, files: dict[str, tuple[str | None, str]], extra: str | None, problem: str
) -> None:
    gated_kata(repo, stub=STUB)
    repo.write(f"{KATA}/given.py", "X = 1\n")
    repo.write(f"{MIRROR}/tests/test_gated.py", "x\n")
    base = patch_shortcut(repo, "bad", files)
    if extra:
        (base / extra).write_text(SHORTCUT)
    found, problems = shortcuts(load_manifest(repo.root / KATA))
    assert found == [] and len(problems) == 1 and problem in problems[0], problems


def test_a_patch_may_add_a_new_module(repo: KataRepo) -> None:
    gated_kata(repo, stub="")
    with_helper = REFERENCE.replace("return a + b", "from .helper import FIVE\n    return FIVE")
    patch_shortcut(
        repo, "five", {"calc.py": (REFERENCE, with_helper), "helper.py": (None, "FIVE = 5\n")}
    )
    (sc,), problems = shortcuts(load_manifest(repo.root / KATA))
    assert not problems and sc.files == ("calc.py", "helper.py")
    result = repo.pytester.runpytest("katas", "--kata-impl=shortcut:five")
    assert any(" add " in line and "0/10" in line for line in summary_of(result.stdout.str()))


READ_PATCHED = """\
from pathlib import Path

root = next(p for p in Path(__file__).resolve().parents if (p / "solutions").is_dir())
for target in (root / ".kata" / "build-cache" / "patched").glob("*/*/calc.py"):
    exec(compile(target.read_text(), __file__, "exec"))
"""


def test_learner_code_may_not_read_a_materialised_patch(repo: KataRepo) -> None:
    """A materialised shortcut is mostly the reference: the fence guards it like solutions/."""
    gated_kata(repo, stub=READ_PATCHED)
    patch_shortcut(repo, "five", {"calc.py": (REFERENCE, SHORTCUT)})
    repo.pytester.runpytest("katas", "--kata-impl=shortcut:five")
    assert list((repo.root / ".kata/build-cache/patched").glob("*/*/calc.py")), "materialised"
    result = repo.pytester.runpytest("katas", "-p", "no:randomly")
    out = result.stdout.str()
    assert "PermissionError: learner code may not read" in out and "patched" in out, out
