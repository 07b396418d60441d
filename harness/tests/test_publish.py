"""`kata publish`: the learner and solutions trees, committed as branches of a git repository
and run from clones of those branches, the leak check, the real tree published whole, and the
real SIMT kata run from its branches (CI's end-to-end check, item 7 of the publishing issue)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.publish.check import normalise, trivial
from harness.publish.private_keys import private_key_in

from .conftest import KataRepo
from .test_hidden import HIDDEN, KEY_HEX, MARKER, add_kata, records, run

REPO_ROOT = Path(__file__).resolve().parents[2]
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def kata_cli(cwd: Path, *args: str, key: str | None = KEY_HEX):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KATA_HIDDEN")}
    if key is not None:
        env["KATA_HIDDEN_KEY"] = key
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def clone(repo: Path, branch: str, dest: Path) -> Path:
    subprocess.run(["git", "clone", "-q", "-b", branch, str(repo), str(dest)], check=True,
                   capture_output=True, timeout=120)  # fmt: skip
    return dest


def secret_lines(root: Path) -> set[str]:
    """Independent of the publisher's own check: non-trivial lines that exist only under
    solutions/ (no other file of the instructor repository has them)."""
    sol, public = set(), set()
    for p in root.rglob("*"):
        if not p.is_file() or {".git", ".venv", "__pycache__", ".kata", "build"} & set(p.parts):
            continue
        try:
            lines = {normalise(x) for x in p.read_text(encoding="utf-8").splitlines()}
        except UnicodeDecodeError:
            continue
        (sol if "solutions" in p.relative_to(root).parts[:1] else public).update(lines)
    return {line for line in sol - public if not trivial(line)}


def assert_no_secret_lines(tree: Path, secrets: set[str]) -> None:
    assert secrets, "there is something to leak"
    for p in tree.rglob("*"):
        if p.is_file() and ".git" not in p.parts:
            text = p.read_bytes().decode("utf-8", errors="replace")
            found = secrets & {normalise(x) for x in text.splitlines()}
            assert not found, f"{p.relative_to(tree)} holds lines of solutions/: {found}"


@needs_git
def test_publish_to_branches_and_run_both(repo: KataRepo, tmp_path: Path) -> None:
    add_kata(repo)
    target = tmp_path / "course.git"
    proc = kata_cli(repo.root, "publish", "--out", str(tmp_path / "out"), "--repo", str(target))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 hidden test functions sealed with key" in proc.stdout
    learner = clone(target, "learner", tmp_path / "learner")
    solutions = clone(target, "solutions", tmp_path / "solutions")
    assert not (learner / "solutions").exists()
    assert {p.name for p in (learner / "grading").iterdir()} == {"hidden.bundle", "integrity.json"}
    assert_no_secret_lines(learner, secret_lines(repo.root))
    assert (solutions / "katas/phase01/demo/calc.py").read_text() == (
        repo.root / "solutions/phase01/demo/calc.py"
    ).read_text()
    assert MARKER in (solutions / "solutions/phase01/demo/tests/helpers.py").read_text()
    # learner: stubs fail cleanly (no errors), hidden tests run with the key.
    proc = run(learner)
    assert proc.returncode == 1, proc.stdout
    recs = records(learner)
    assert recs["test_add"].outcome == "not_started" and recs["test_add_hidden"].hidden
    assert "error" not in {t.outcome for t in recs.values()}
    # solutions: everything passes, hidden tests in the clear, no key needed.
    proc = run(solutions, key=None)
    assert proc.returncode == 0, proc.stdout
    assert {t.outcome for t in records(solutions).values()} == {"passed", "skipped"}
    assert records(solutions)["test_mul_hidden"].outcome == "passed"
    # A second publish is one more commit on each branch.
    kata_cli(repo.root, "publish", "--out", str(tmp_path / "out"), "--repo", str(target))
    log = subprocess.run(["git", "-C", str(target), "rev-list", "--count", "learner"],
                         capture_output=True, text=True, check=True)  # fmt: skip
    assert log.stdout.strip() == "2"


def test_check_finds_a_leaked_line(repo: KataRepo, tmp_path: Path) -> None:
    add_kata(repo)
    out = tmp_path / "out"
    assert kata_cli(repo.root, "publish", "--out", str(out)).returncode == 0
    proc = kata_cli(repo.root, "publish", "--out", str(out), "--check")
    assert proc.returncode == 0 and "no line of reference code" in proc.stdout
    readme = out / "learner" / "katas/phase01/demo/README.md"
    leaked = 'assert calc.mul(7, 6) == 42, "mul(7, 6) should be 42"'
    readme.write_text(f"# Demo\n\nTry this:\n\n        {leaked}\n")
    (out / "learner" / "notes.py").write_text("def f():\n    secret_operand = big()\n")
    proc = kata_cli(repo.root, "publish", "--out", str(out), "--check")
    assert proc.returncode == 1
    hidden = "solutions/phase01/demo/tests/test_hidden_demo.py"
    line = 1 + [x.strip() for x in HIDDEN.splitlines()].index(leaked)
    assert f"katas/phase01/demo/README.md:5: repeats {hidden}:{line}" in proc.stderr
    assert f"notes.py:2: repeats {hidden}:12" in proc.stderr


def _ed25519_forms() -> dict[str, bytes]:
    """One fresh Ed25519 key (made here: none is stored in the tree) in the forms it takes on disk."""
    import base64

    from cryptography.hazmat.primitives import serialization as s
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key, none = Ed25519PrivateKey.generate(), s.NoEncryption()
    der = key.private_bytes(s.Encoding.DER, s.PrivateFormat.PKCS8, none)
    raw = key.private_bytes(s.Encoding.Raw, s.PrivateFormat.Raw, none)
    return {
        "vendor.pem": key.private_bytes(s.Encoding.PEM, s.PrivateFormat.PKCS8, none),
        "id_ed25519": key.private_bytes(s.Encoding.PEM, s.PrivateFormat.OpenSSH, none),
        "locked.pem": key.private_bytes(
            s.Encoding.PEM, s.PrivateFormat.PKCS8, s.BestAvailableEncryption(b"pw")
        ),
        "vendor.der": der,
        "keys.py": b'VENDOR = "' + base64.b64encode(der) + b'"\n',
        "keys_hex.py": b'VENDOR = "' + der.hex().encode() + b'"\n',
        "signing.seed": raw,
        "private_hex.txt": raw.hex().encode() + b"\n",
        "make.py": b"k = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(SEED))\n",
    }


def test_private_key_forms_are_found() -> None:
    """Every on-disk form of an Ed25519 private key is found; its public half is not a key leak."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    for name, data in _ed25519_forms().items():
        assert private_key_in(name, data) is not None, f"{name} holds a private key"
    public = Ed25519PrivateKey.generate().public_key().public_bytes_raw()
    assert private_key_in("vendor.pub", public) is None, "a raw public key ships on purpose"
    assert private_key_in("public_signing.key", public.hex().encode()) is None, "named public"
    assert private_key_in("notes.md", b"-----BEGIN PRIVATE KEY-----\n(a PEM file)\n") is None, (
        "a README may name the PEM header without a key under it"
    )
    scanner = REPO_ROOT / "harness/publish/private_keys.py"
    assert private_key_in(scanner.name, scanner.read_bytes()) is None, (
        "the scanner ships in every learner tree: its markers must not match itself"
    )


def test_check_finds_a_private_key(repo: KataRepo, tmp_path: Path) -> None:
    """A private key in the learner tree fails publish, with the file named (phase 11's
    licensing kata: the vendor's signing key must never ship with the verifier)."""
    add_kata(repo)
    out = tmp_path / "out"
    assert kata_cli(repo.root, "publish", "--out", str(out)).returncode == 0
    forms = _ed25519_forms()
    kata = out / "learner" / "katas/phase01/demo"
    for name, data in forms.items():
        (kata / name).write_bytes(data)
    proc = kata_cli(repo.root, "publish", "--out", str(out), "--check")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for name in forms:
        assert f"katas/phase01/demo/{name}: " in proc.stderr, f"{name} named: {proc.stderr}"
    # In the instructor's kata it never reaches a commit.
    repo.write("katas/phase01/demo/vendor.pem", forms["vendor.pem"].decode())
    proc = kata_cli(repo.root, "publish", "--out", str(out), "--repo", str(tmp_path / "c.git"))
    assert proc.returncode == 1 and "not committed: fix the leaks first" in proc.stderr
    assert "katas/phase01/demo/vendor.pem: a PEM private key" in proc.stderr, proc.stderr


def test_lines_of_shipped_files_are_not_leaks(repo: KataRepo, tmp_path: Path) -> None:
    """A hidden test's line that a shipped file also has (the harness's new-kata template, a
    workflow) is published on purpose; the same line in the instructor's README is a leak."""
    add_kata(repo)
    shared = '    assert calc.add(secret_operand, 1) == 42, "add must work for large numbers too"'
    repo.write("harness/templates/new_kata/test_hidden.py.j2", f"def test_x():\n{shared}\n")
    out = str(tmp_path / "out")
    proc = kata_cli(repo.root, "publish", "--out", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no line of reference code or hidden test" in proc.stdout
    quoted = '    assert calc.mul(7, 6) == 42, "mul(7, 6) should be 42"'
    repo.write("katas/phase01/demo/README.md", f"# Demo\n\n{shared}\n{quoted}\n")
    proc = kata_cli(repo.root, "publish", "--out", out)
    assert proc.returncode == 1 and "not committed: fix the leaks first" in proc.stderr
    assert "check: 1 line(s) of solutions/" in proc.stderr
    assert "katas/phase01/demo/README.md:4: repeats solutions/phase01/demo/tests/" in proc.stderr


@needs_git
def test_real_tree_publishes(tmp_path: Path) -> None:
    """The project's own tree, every kata, publishes and commits both branches (an instructor's
    `kata publish --repo`). Publish reads the files git sees, so the checkout itself is what a
    fresh clone of it (plus uncommitted work) would publish; the leak check is cross-checked
    by an independent scan of the learner branch."""
    if not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    target = tmp_path / "course.git"
    proc = kata_cli(REPO_ROOT, "publish", "--out", str(tmp_path / "out"), "--repo", str(target))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "check: no line of reference code or hidden test" in proc.stdout
    assert "committed learner = " in proc.stdout and "committed solutions = " in proc.stdout
    learner = clone(target, "learner", tmp_path / "learner")
    assert not (learner / "solutions").exists() and (learner / "harness/templates").is_dir()
    assert_no_secret_lines(learner, secret_lines(REPO_ROOT))


def test_publish_errors_are_named(repo: KataRepo, tmp_path: Path) -> None:
    add_kata(repo)
    out = str(tmp_path / "out")
    proc = kata_cli(repo.root, "publish", "--out", out, key=None)
    assert proc.returncode == 2 and "no hidden-test key: set KATA_HIDDEN_KEY" in proc.stderr
    proc = kata_cli(repo.root, "publish", "--out", out, "--katas", "nope")
    assert proc.returncode == 2 and "no kata nope (katas: demo)" in proc.stderr
    key = tmp_path / "keys" / "course.key"
    proc = kata_cli(repo.root, "publish", "--out", out, "--new-key", str(key), key=None)
    assert proc.returncode == 0 and key.stat().st_mode & 0o777 == 0o600
    proc = kata_cli(repo.root, "publish", "--out", out, "--new-key", str(key), key=None)
    assert proc.returncode == 2 and "the file exists; pass it as --key-file" in proc.stderr
    repo.write("solutions/phase01/demo/tests/expected.json", "{}")
    proc = kata_cli(repo.root, "publish", "--out", out)
    assert proc.returncode == 2
    assert "solutions/phase01/demo/tests/expected.json: hidden test directories may hold " \
        "Python modules only" in proc.stderr  # fmt: skip
    (repo.root / "solutions/phase01/demo/tests/expected.json").unlink()
    repo.write(
        "solutions/phase01/demo/tests/conftest.py", "def pytest_configure(config):\n    pass\n"
    )
    proc = kata_cli(repo.root, "publish", "--out", out)
    assert proc.returncode == 2 and "conftest.py: defines pytest_configure" in proc.stderr


@needs_git
def test_real_repository_simt_publishes_and_runs(tmp_path: Path) -> None:
    """The project's own SIMT kata through publish, both branches, under the published harness."""
    if not (REPO_ROOT / "solutions/phase01/simt/tests").is_dir():
        pytest.skip("no SIMT kata in this checkout")
    target = tmp_path / "course.git"
    proc = kata_cli(REPO_ROOT, "publish", "--katas", "simt", "--out", str(tmp_path / "out"),
                    "--repo", str(target))  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    learner = clone(target, "learner", tmp_path / "learner")
    solutions = clone(target, "solutions", tmp_path / "solutions")
    assert (learner / "harness/plugin.py").is_file() and not (learner / "harness/tests").exists()
    assert sorted(p.name for p in (learner / "katas").glob("*/*") if p.is_dir()) == ["simt"]
    assert (learner / "katas/phase01/README.md").is_file(), (
        "the phase's README ships with its katas"
    )
    assert_no_secret_lines(learner, secret_lines(REPO_ROOT))
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    proc = run(learner, TMPDIR=str(tmp))
    assert proc.returncode == 1, proc.stdout[-3000:]
    recs = records(learner)
    hidden = [t for t in recs.values() if t.hidden]
    assert hidden and {t.outcome for t in recs.values()} == {"not_started"}
    assert not [p for p in tmp.rglob("*") if p.is_file()], "nothing left in the temp dir"
    proc = run(solutions, key=None)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "total: 100/100 points" in proc.stdout
