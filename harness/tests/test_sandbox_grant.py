"""A kata's capability grant (kata.toml `[sandbox] keep_capabilities`): validated by the
manifest, honoured by the sandbox child in runs with a key, and the key still out of reach."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.hidden.keys import Key
from harness.manifest import ManifestError, parse_manifest

from .conftest import DEMO_MANIFEST, KataRepo
from .test_hostile import BUNDLE_READER, HIDDEN_ADD, HONEST_MUL

GRANT = '\n[sandbox]\nkeep_capabilities = ["CAP_SYS_ADMIN"]\n'


def _manifest(extra: str) -> dict:
    import tomllib

    return tomllib.loads(DEMO_MANIFEST.format(id="demo", time_limit=10) + extra)


def test_manifest_keep_capabilities_is_validated(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text("")
    path = tmp_path / "kata.toml"
    assert parse_manifest(path, _manifest(GRANT)).keep_capabilities == ("CAP_SYS_ADMIN",)
    assert parse_manifest(path, _manifest("")).keep_capabilities == ()
    for bad, said in (
        ('["CAP_SYS_PTRACE"]', "must be one of CAP_SYS_ADMIN; got 'CAP_SYS_PTRACE'"),
        ('"CAP_SYS_ADMIN"', "keep_capabilities"),
    ):
        with pytest.raises(ManifestError, match=said):
            parse_manifest(path, _manifest(f"\n[sandbox]\nkeep_capabilities = {bad}\n"))
    with pytest.raises(ManifestError, match="sandbox.keep: unknown field"):
        parse_manifest(path, _manifest('\n[sandbox]\nkeep = ["CAP_SYS_ADMIN"]\n'))


# What a granted child tries besides BUNDLE_READER's routes: whether it holds CAP_SYS_ADMIN,
# unmounting the masks over the key file and the bundle, a non-recursive bind of / (which
# shows the files under every mask), and the bpf(2) commands a tracing program needs.
GRANTED_READER = r"""
import ctypes, tempfile

_plain_add = add
_libc = ctypes.CDLL(None, use_errno=True)


def _cap_sys_admin():
    eff = re.search(r"CapEff:\s*([0-9a-f]+)", Path("/proc/self/status").read_text()).group(1)
    return bool(int(eff, 16) >> 21 & 1)


def _must(ret, what):
    if ret != 0:
        raise OSError(ctypes.get_errno(), what)


def _unmask_key():
    path = os.environ["HOSTILE_KEY_FILE"]
    _must(_libc.umount2(path.encode(), 2), "umount2")
    return _hex_keys(Path(path).read_bytes(), _key_id())


def _unmask_bundle():
    path = ROOT / "grading" / "hidden.bundle"
    _must(_libc.umount2(str(path).encode(), 2), "umount2")
    return len(path.read_bytes())


def _bind_root():
    _must(_libc.unshare(0x20000), "unshare")  # a mount namespace of its own
    target = tempfile.mkdtemp()
    _must(_libc.mount(b"/", target.encode(), None, ctypes.c_ulong(4096), None), "bind /")
    path = os.environ["HOSTILE_KEY_FILE"].lstrip("/")
    return _hex_keys(Path(target, path).read_bytes(), _key_id())


def _bpf():  # MAP_CREATE, PROG_TEST_RUN, RAW_TRACEPOINT_OPEN, LINK_CREATE (x86_64 numbers)
    attr = (ctypes.c_uint8 * 128)()
    out = set()
    for cmd in (0, 10, 17, 28):
        ret = _libc.syscall(321, cmd, attr, 128)
        out.add("ok" if ret >= 0 else os.strerror(ctypes.get_errno()))
    return " ".join(sorted(out))


def add(a, b):
    extra = {}
    _attempt(extra, "cap_sys_admin", _cap_sys_admin)
    if os.environ.get("HOSTILE_KEY_FILE"):
        _attempt(extra, "unmasked key file", _unmask_key)
        _attempt(extra, "bind of /", _bind_root)
    _attempt(extra, "unmasked bundle", _unmask_bundle)
    _attempt(extra, "bpf", _bpf)
    Path(os.environ["HOSTILE_OUT"] + ".grant").write_text(json.dumps(extra, default=str))
    return _plain_add(a, b)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="capabilities are dropped only for root children")
@pytest.mark.parametrize("via", ["KATA_HIDDEN_KEY", "KATA_HIDDEN_KEY_FILE"])
def test_a_granted_kata_still_cannot_read_the_key(repo: KataRepo, tmp_path: Path, via: str) -> None:
    """Key by variable: the child keeps CAP_SYS_ADMIN, may unmount the bundle's mask (it reads
    ciphertext), and finds no key anywhere; bpf(2) is refused. Key by file: the grant is
    refused (CAP_SYS_ADMIN would unmount the key file's mask), so umount and bind fail."""
    import secrets as stdlib_secrets

    from harness.publish.trees import build

    key_hex = stdlib_secrets.token_hex(32)
    manifest = DEMO_MANIFEST.format(id="demo", time_limit=30) + GRANT
    repo.add_demo(
        stub=BUNDLE_READER + GRANTED_READER + HONEST_MUL, manifest=manifest, hidden=HIDDEN_ADD
    )
    learner = build(repo.root, tmp_path / "out", Key(bytes.fromhex(key_hex), "test")).learner
    env = {k: v for k, v in os.environ.items() if not k.startswith("KATA_HIDDEN")}
    env.pop("GITHUB_STEP_SUMMARY", None)
    if via == "KATA_HIDDEN_KEY":
        env[via] = key_hex
    else:
        key_file = tmp_path / "course.key"
        key_file.write_text(key_hex + "\n")
        env[via] = env["HOSTILE_KEY_FILE"] = str(key_file)
    out = tmp_path / "found.json"
    env["HOSTILE_OUT"] = str(out)
    cmd = [sys.executable, "-m", "pytest", "katas", "-p", "no:randomly"]
    proc = subprocess.run(cmd, cwd=learner, env=env, capture_output=True, text=True, timeout=240)
    text = proc.stdout + proc.stderr
    assert out.is_file(), f"the hostile code did not run\n{text}"
    found = json.loads(out.read_text())
    grant = json.loads(Path(f"{out}.grant").read_text())
    assert key_hex not in json.dumps(found) + json.dumps(grant), (found, grant)
    assert key_hex not in text
    assert found["answer"] == 1234 - 4321
    assert str(grant["bpf"]).startswith("Operation not permitted") or not grant["cap_sys_admin"]
    if via == "KATA_HIDDEN_KEY":
        assert grant["cap_sys_admin"] is True, f"the grant was not honoured: {grant}"
        assert grant["bpf"] == "Operation not permitted", grant
        assert grant["unmasked bundle"] > 0, "CAP_SYS_ADMIN unmounts a mask: only ciphertext there"
    else:
        assert grant["cap_sys_admin"] is False, grant
        assert str(grant["unmasked key file"]).startswith("shut: PermissionError"), grant
        assert str(grant["bind of /"]).startswith("shut: PermissionError"), grant
        assert "capability grant refused (CAP_SYS_ADMIN)" in text, text[-2000:]
