"""kata verify's layout checks (harness.kata_layout): docs/kata-layout.md, checked statically."""

from __future__ import annotations

import pytest

from harness.kata_layout import check
from harness.manifest import load_manifest

from .conftest import KataRepo

KATA = "katas/phase01/demo"
MIRROR = "solutions/phase01/demo"


def findings(repo: KataRepo) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for rule, sentence in check(load_manifest(repo.root / KATA)):
        out.setdefault(rule, []).append(sentence)
    return out


def test_the_demo_kata_follows_the_layout(repo: KataRepo) -> None:
    repo.add_demo()
    repo.write(f"{MIRROR}/mutants.toml", "")  # its equivalent mutants belong in the mirror
    assert findings(repo) == {}


def test_each_departure_says_what_to_move_where(repo: KataRepo) -> None:
    repo.add_demo()
    (repo.root / KATA / "tests" / "test_demo.py").rename(
        repo.root / KATA / "tests" / "test_calc.py"
    )
    repo.write(f"{KATA}/tests/input.json", "{}")
    repo.write(f"{KATA}/tests/test_demo_more.py", "def test_sum_of_two(calc):\n    pass\n")
    repo.write(f"{MIRROR}/given_helper.py", "X = 1\n")
    repo.write(
        f"{MIRROR}/tests/test_hidden_demo_extra.py",
        "import pytest\nfrom hypothesis import settings\n\n\n@pytest.fixture\n"
        "def calc(kata):\n    return kata.module('calc')\n",
    )
    got = findings(repo)
    assert got["file-names"] == [
        "katas/.../demo/tests/test_calc.py: rename to test_demo.py (or test_demo_<part>.py, "
        "test_demo_gpu.py)"
    ]
    assert got["tests-dir"] == [
        "katas/.../demo/tests/input.json: a data file in tests/: move it to tests/data/input.json"
    ]
    assert got["fixtures-once"] == [
        "solutions/.../demo/tests/test_hidden_demo_extra.py:6: fixture calc is already in "
        "tests/conftest.py: delete this copy"
    ]
    assert got["hidden-settings"] == [
        "solutions/.../demo/tests/test_hidden_demo_extra.py: imports hypothesis.settings: use "
        "harness.testing.hidden_settings(N) (seeded by the run seed, no database, no shrinking)"
    ]
    assert len(got["mirror"]) == 1 and "given_helper.py: not a learner file" in got["mirror"][0]
    # test_sum_of_two matches no task's pattern: verify's run reports it, not the layout check
    assert "test-names" not in got


def test_a_test_is_named_after_its_task(repo: KataRepo) -> None:
    manifest = (repo.add_demo() / "kata.toml").read_text()
    repo.write(
        f"{KATA}/kata.toml", manifest.replace('tests = ["test_mul*"]', 'tests = ["test_times*"]')
    )
    repo.write(f"{KATA}/tests/test_demo_times.py", "def test_times_two(calc):\n    pass\n")
    assert findings(repo)["test-names"] == [
        "katas/.../demo/tests/test_demo_times.py::test_times_two: belongs to task mul: rename it "
        "test_mul_... (tests are named after their task's id)"
    ]


@pytest.mark.parametrize("name", ["test_demo.py", "test_demo_gpu.py", "test_demo_part_two.py"])
def test_good_file_names(repo: KataRepo, name: str) -> None:
    repo.add_demo()
    (repo.root / KATA / "tests" / "test_demo.py").rename(repo.root / KATA / "tests" / name)
    assert findings(repo) == {}


def test_a_shortcut_holds_its_toml_and_patch_only(repo: KataRepo) -> None:
    repo.add_demo()
    repo.write(f"{MIRROR}/shortcuts/ok/shortcut.toml", 'task = "add"\nwhy = "w"\n')
    repo.write(f"{MIRROR}/shortcuts/ok/shortcut.patch", "")
    repo.write(f"{MIRROR}/shortcuts/copy/shortcut.toml", 'task = "add"\nwhy = "w"\n')
    repo.write(f"{MIRROR}/shortcuts/copy/calc.py", "X = 1\n")
    assert findings(repo) == {
        "shortcut-files": [
            "solutions/.../demo/shortcuts/copy/calc.py: a shortcut is shortcut.toml and "
            "shortcut.patch, a diff against the reference: run `kata shortcut convert "
            "katas/.../demo` (it turns copies into the patch)"
        ]
    }


UNMESSAGED = """\
import numpy as np
import pytest


def test_add_quiet(calc):
    assert calc.add(1, 2) == 3
    assert calc.add(2, 2) == 4, "add(2, 2) is wrong"
    np.testing.assert_allclose(calc.add(1.0, 2.0), 3.0)
    np.testing.assert_allclose(calc.add(1.0, 2.0), 3.0, err_msg="add(1.0, 2.0)")
    with pytest.raises(TypeError):
        calc.add(None, 1)
"""


def test_every_hidden_check_carries_a_message(repo: KataRepo) -> None:
    repo.add_demo(hidden=UNMESSAGED)
    got = findings(repo)["hidden-messages"]
    assert [s.split(": ", 1)[0] for s in got] == [
        "solutions/.../demo/tests/test_hidden_demo.py:6",
        "solutions/.../demo/tests/test_hidden_demo.py:8",
        "solutions/.../demo/tests/test_hidden_demo.py:10",
    ]
    assert "an assert without a message" in got[0] and "err_msg" in got[1]
    assert "harness.testing.raises" in got[2]


def test_hidden_messages_fail_verify_once_a_kata_is_off_the_pending_list(
    repo: KataRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness import kata_layout
    from harness.verify import KataVerdict, _judge_layout

    repo.add_demo(hidden=UNMESSAGED)
    m = load_manifest(repo.root / KATA)
    verdict = KataVerdict(m.id, KATA)
    _judge_layout(m, verdict)
    assert [p for p in verdict.problems if "hidden-messages" in p] and kata_layout.enforced(
        "hidden-messages", "demo"
    )
    monkeypatch.setattr(kata_layout, "MESSAGES_PENDING", {"demo"})
    pending = KataVerdict(m.id, KATA)
    _judge_layout(m, pending)
    assert not pending.problems and any("hidden-messages" in n for n in pending.notes)


def test_testing_raises_teaches() -> None:
    from harness.testing import raises

    with raises(ValueError, "f(-1) must refuse -1", match="-1"):
        raise ValueError("n=-1 is negative")
    with pytest.raises(AssertionError, match=r"f\(-1\) must refuse -1: it raised nothing"):
        with raises(ValueError, "f(-1) must refuse -1"):
            pass
    with pytest.raises(AssertionError, match="which does not say"):
        with raises(ValueError, "f(-1) must refuse -1", match="negative"):
            raise ValueError("bad")
    with pytest.raises(KeyError):  # the learner's own exception passes through
        with raises(ValueError, "f(-1) must refuse -1"):
            raise KeyError("x")
