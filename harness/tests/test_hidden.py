"""Hidden-test bundles: the format and its failures, and the plugin running a published learner
tree with the key (tests in memory, nothing decrypted on disk), without it, and with a wrong key
or a modified bundle. Trees are published from the `repo` demo kata and run in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.hidden.bundle import BundleError, KataTests, count_tests, pack, read_header, unpack
from harness.hidden.keys import Key, KeyProblem, load_key, parse_key
from harness.publish.trees import build
from harness.results import RunResult

from .conftest import KataRepo

KEY_HEX = "5a" * 32
OTHER_HEX = "c3" * 32
KEY = Key(bytes.fromhex(KEY_HEX), "test key")
MARKER = "zebra-quartz-7731"  # appears in the hidden tests only: must never reach the disk

# Hidden tests that import a sibling module relatively, as a hidden tests dir may.
HIDDEN = """\
import pytest

from .helpers import MARKER, big


@pytest.fixture
def calc(kata):
    return kata.module("calc")


def test_add_hidden(calc):
    secret_operand = big()
    assert calc.add(secret_operand, 1) == 42, "add must work for large numbers too"


def test_mul_hidden(calc):
    assert MARKER.startswith("zebra")
    assert calc.mul(7, 6) == 42, "mul(7, 6) should be 42"
"""
HELPERS = f'MARKER = "{MARKER}"\n\n\ndef big():\n    return 41\n'
SOLUTION_HIDDEN = "solutions/phase01/demo/tests"


def add_kata(repo: KataRepo) -> None:
    repo.add_demo(hidden=HIDDEN)
    repo.write(f"{SOLUTION_HIDDEN}/helpers.py", HELPERS)


def publish(repo: KataRepo, out: Path) -> tuple[Path, Path]:
    pub = build(repo.root, out, KEY)
    return pub.learner, pub.solutions


def run(tree: Path, *args: str, key: str | None = KEY_HEX, **env: str):
    full = {k: v for k, v in os.environ.items() if not k.startswith("KATA_HIDDEN")}
    full.pop("GITHUB_STEP_SUMMARY", None)
    # The demo kata's gpu task: without a GPU, a graded run would be an error (harness.grading).
    full["KATA_OPTIONAL"] = "gpu"
    full.update(env)
    if key is not None:
        full["KATA_HIDDEN_KEY"] = key
    cmd = [sys.executable, "-m", "pytest", *(args or ("katas",)), "-p", "no:randomly"]
    return subprocess.run(cmd, cwd=tree, env=full, capture_output=True, text=True, timeout=300)


def last_run(tree: Path) -> RunResult:
    return RunResult.load(tree / ".kata" / "last-run.json")


def records(tree: Path) -> dict[str, object]:
    run_ = last_run(tree)
    return {t.name: t for k in run_.katas for task in k.tasks for t in task.tests}


@pytest.fixture
def learner(repo: KataRepo, tmp_path: Path) -> Path:
    add_kata(repo)
    return publish(repo, tmp_path / "out")[0]


# --------------------------------------------------------------------------- keys and format
def test_keys_parse_hex_and_base64_and_name_their_origin(tmp_path: Path) -> None:
    import base64

    raw = bytes(range(32))
    assert parse_key(raw.hex(), "x") == raw
    assert parse_key(base64.b64encode(raw).decode(), "x") == raw
    assert parse_key(base64.urlsafe_b64encode(raw).decode() + "\n", "x") == raw
    with pytest.raises(KeyProblem, match=r"KATA_HIDDEN_KEY: not a hidden-test key \(5 char"):
        load_key({"KATA_HIDDEN_KEY": "short"})
    with pytest.raises(KeyProblem, match=r"KATA_HIDDEN_KEY_FILE=.*nokey.*cannot read"):
        load_key({"KATA_HIDDEN_KEY_FILE": str(tmp_path / "nokey")})
    (tmp_path / "k").write_text(raw.hex())
    key = load_key({"KATA_HIDDEN_KEY_FILE": str(tmp_path / "k")})
    assert key is not None and key.secret == raw and key.path == (tmp_path / "k").resolve()
    assert load_key({}) is None


def _tests() -> list[KataTests]:
    return [KataTests("katas/phase01/demo", "demo", {"test_a.py": "def test_a(): pass\n"},
                      {"test_hidden_a.py": HIDDEN, "helpers.py": HELPERS})]  # fmt: skip


def test_bundle_round_trip_and_header_without_key(tmp_path: Path) -> None:
    data = pack(_tests(), KEY, "ab" * 32)
    assert MARKER.encode() not in data and b"secret_operand" not in data
    header, katas = unpack(data, KEY)
    assert katas[0].hidden["helpers.py"] == HELPERS and katas[0].public == _tests()[0].public
    assert header.integrity_sha256 == "ab" * 32
    (tmp_path / "b").write_bytes(data)
    assert read_header(tmp_path / "b").hidden_count("katas/phase01/demo") == 2
    assert pack(_tests(), KEY) != pack(_tests(), KEY), "a fresh nonce per bundle"


def test_wrong_key_is_named_as_such() -> None:
    other = Key(bytes.fromhex(OTHER_HEX), "KATA_HIDDEN_KEY")
    with pytest.raises(BundleError, match=rf"wrong key: .*sealed with key {KEY.fingerprint}.*"
                       rf"KATA_HIDDEN_KEY is key {other.fingerprint}"):  # fmt: skip
        unpack(pack(_tests(), KEY), other)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_any_changed_byte_is_refused(data: st.DataObject) -> None:
    sealed = bytearray(pack(_tests(), KEY))
    pos = data.draw(st.integers(0, len(sealed) - 1), label="position")
    sealed[pos] ^= data.draw(st.integers(1, 255), label="xor")
    with pytest.raises(BundleError):
        unpack(bytes(sealed), KEY)


def test_bad_files_are_named() -> None:
    with pytest.raises(BundleError, match="x.bundle: not a gpu-katas hidden-test bundle"):
        unpack(b"PK\x03\x04 zip", KEY, "x.bundle")
    sealed = pack(_tests(), KEY)
    with pytest.raises(BundleError, match="cut short"):
        unpack(sealed[: sealed.index(b"}\n") + 10], KEY)
    body = sealed[: sealed.index(b"}\n") + 2] + b"\0" * 40
    with pytest.raises(BundleError, match="failed authentication: it was modified"):
        unpack(body, KEY)


def test_count_tests_counts_functions_and_test_class_methods() -> None:
    src = "def test_a(): pass\ndef helper(): pass\nclass TestX:\n    def test_b(self): pass\n"
    assert count_tests(src) == 2
    assert count_tests("def test_(:") == 0


# --------------------------------------------------------------------------- the plugin
def _listing(*dirs: Path) -> dict[Path, bytes]:
    out = {}
    for d in dirs:
        for p in d.rglob("*"):
            if p.is_file():
                out[p] = p.read_bytes()
    return out


def test_with_key_hidden_tests_run_from_memory_and_nothing_decrypted_is_written(
    learner: Path, tmp_path: Path
) -> None:
    assert not (learner / "solutions").exists()
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    before = _listing(learner, tmp)
    proc = run(learner, TMPDIR=str(tmp))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    recs = records(learner)
    assert recs["test_add_hidden"].hidden and recs["test_add_hidden"].outcome == "not_started"
    assert recs["test_mul_hidden"].outcome == "failed"  # the stub's mul is wrong
    assert recs["test_mul_hidden"].message.startswith(
        "AssertionError: mul(7, 6) should be 42 (reproduce with --kata-seed="
    )
    assert "secret_operand" not in proc.stdout and MARKER not in proc.stdout
    after = _listing(learner, tmp)
    new = {p: b for p, b in after.items() if before.get(p) != b}
    assert new, "the run wrote its results (a listing that can see writes)"
    for path, data in new.items():
        assert MARKER.encode() not in data and b"secret_operand" not in data, path
        assert "hidden" not in path.name or path.suffix == ".json", path


def test_without_key_the_summary_counts_the_hidden_tests(learner: Path) -> None:
    proc = run(learner, key=None)
    assert proc.returncode == 1
    assert ("hidden tests: 2 more (demo: 2) are in grading/hidden.bundle and run at grading"
            in proc.stdout), proc.stdout  # fmt: skip
    assert not any(t.hidden for t in records(learner).values())


def test_wrong_key_or_modified_bundle_is_a_clear_error(learner: Path) -> None:
    proc = run(learner, key=OTHER_HEX)
    assert proc.returncode == 4
    assert "grading/hidden.bundle: wrong key: the bundle was sealed with key" in proc.stderr
    bundle = learner / "grading" / "hidden.bundle"
    data = bytearray(bundle.read_bytes())
    data[-5] ^= 1
    bundle.write_bytes(bytes(data))
    proc = run(learner)
    assert proc.returncode == 4
    assert "failed authentication: it was modified after it was published" in proc.stderr


def test_explicit_bundle_needs_the_key_and_replaces_plaintext_hidden_tests(
    repo: KataRepo, tmp_path: Path
) -> None:
    add_kata(repo)
    learner, _ = publish(repo, tmp_path / "out")
    bundle = tmp_path / "grader.bundle"
    bundle.write_bytes((learner / "grading" / "hidden.bundle").read_bytes())
    proc = run(repo.root, "katas", f"--kata-hidden={bundle}", key=None)
    assert proc.returncode == 4 and "needs the hidden-test key" in proc.stderr
    # The instructor tree has solutions/ in the clear too: the bundle's copies are used, once.
    proc = run(repo.root, "katas", f"--kata-hidden={bundle}", "--kata-impl=solution")
    assert proc.returncode == 0, proc.stdout
    hidden = [t for t in records(repo.root).values() if t.hidden]
    assert sorted(t.name for t in hidden) == ["test_add_hidden", "test_mul_hidden"]
    assert all(t.outcome == "passed" for t in hidden)


def test_hidden_conftest_fixtures_and_assert_rewriting_in_memory(
    repo: KataRepo, tmp_path: Path
) -> None:
    hidden = """\
        def test_add_hidden(calc, answer):
            assert calc.add(40, 2) == answer
    """
    conftest = """\
        import pytest


        @pytest.fixture
        def answer():
            return 42


        @pytest.fixture
        def calc(kata):
            return kata.module("calc")
    """
    repo.add_demo(
        hidden=hidden, stub="def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return 0\n"
    )
    repo.write(f"{SOLUTION_HIDDEN}/conftest.py", conftest)
    learner, _ = publish(repo, tmp_path / "out")
    proc = run(learner, "katas", "--kata-grade")
    rec = records(learner)
    assert rec["test_add_hidden"].outcome == "failed", proc.stdout
    # Public tests in grade mode come from memory too, with pytest's assertion explanations.
    assert "assert -1 == 5\n +  where -1 = <function add" in rec["test_add"].message, rec[
        "test_add"
    ]
    summary = json.loads((learner / ".kata" / "last-run.json").read_text())
    assert summary["status"] == "failing"


def test_hidden_tests_see_the_public_conftest_fixtures_in_every_mode(
    repo: KataRepo, tmp_path: Path
) -> None:
    """docs/kata-layout.md: a fixture both need is defined once, in the public tests/conftest.py."""
    public_conftest = """\
        import pytest


        @pytest.fixture(scope="module")
        def calc(kata):
            return kata.module("calc")


        @pytest.fixture
        def answer():
            return 42
    """
    hidden = """\
        def test_add_hidden(calc, answer):
            assert calc.add(40, 2) == answer, "add(40, 2)"
    """
    repo.add_demo(hidden=hidden)
    repo.write("katas/phase01/demo/tests/conftest.py", public_conftest)
    # the instructor tree, plaintext hidden tests
    proc = run(repo.root, "katas", "--kata-impl=solution", key=None)
    assert records(repo.root)["test_add_hidden"].outcome == "passed", proc.stdout
    learner, _ = publish(repo, tmp_path / "out")
    # A learner tree with the key (hidden tests from the bundle, in memory), then grade mode
    # (public tests from the bundle too): the fixtures resolve and the test reaches the stub.
    for args in [(), ("katas", "--kata-grade")]:
        proc = run(learner, *args)
        rec = records(learner)["test_add_hidden"]
        assert rec.hidden and rec.outcome == "not_started", proc.stdout
        assert "add(a, b)" in rec.message, rec
