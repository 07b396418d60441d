"""Hostile submissions (issue 5, item 5): learner code that crashes, hangs, forks, allocates,
exits, lies on stdout, rewires the harness, edits its tests, forges results or phones home.

Each case replaces the demo kata's ``calc.py`` (tasks ``add`` 10 points, ``mul`` 5 points). The
``mul`` in every case is honest, so "only the points it honestly earned" is checked too: ``add``
must earn nothing, the run must end with a complete, valid report, and the harness must be
unharmed (results written, no stray processes). The sandbox (harness/sandbox) does the work.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from harness.hidden.keys import Key

from .conftest import DEMO_MANIFEST, KataRepo

HONEST_MUL = "\n\ndef mul(a, b):\n    return a * b\n"

# name -> (calc.py, what the failure of test_add must say, or None when any failure will do)
CASES: dict[str, tuple[str, str | None]] = {
    "segfault": ("import ctypes\n\ndef add(a, b):\n    return ctypes.string_at(0)\n", "SIGSEGV"),
    "abort": ("import os\n\ndef add(a, b):\n    os.abort()\n", "SIGABRT"),
    "infinite-loop": ("def add(a, b):\n    while True:\n        pass\n", "wall time"),
    "fork-bomb": (
        "import os, time\n\n"
        "def add(a, b):\n"
        "    for _ in range(3000):\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(30)\n"
        "            os._exit(0)\n"
        "    return a + b\n",
        None,
    ),
    "allocate-forever": (
        "def add(a, b):\n"
        "    hoard = []\n"
        "    for _ in range(200):  # 200 x 64 MiB = 12.5 GiB, far above the 512 MiB limit\n"
        "        hoard.append(bytearray(64 << 20))\n"
        "    return a + b\n",
        "limit",
    ),
    "sys-exit-at-import": ("import sys\nsys.exit(0)\n\ndef add(a, b):\n    return a + b\n", None),
    "os-exit-at-import": ("import os\nos._exit(0)\n\ndef add(a, b):\n    return a + b\n", None),
    "sys-exit-in-test": ("import sys\n\ndef add(a, b):\n    sys.exit(0)\n", None),
    "os-exit-in-test": ("import os\n\ndef add(a, b):\n    os._exit(0)\n", None),
    "fake-passed-lines": (
        "import os\n\n"
        "def add(a, b):\n"
        "    fake = 'test_demo.py::test_add PASSED\\n== 3 passed in 0.01s ==\\n'\n"
        "    print(fake, flush=True)\n"
        "    os.write(1, fake.encode())\n"
        "    os.write(2, fake.encode())\n"
        "    return 0\n",
        None,
    ),
    "patch-perf-counter": (
        "import time\ntime.perf_counter = lambda: 0.0\n\ndef add(a, b):\n    return 0\n",
        None,
    ),
    "patch-pytest-reports": (
        "from _pytest.reports import TestReport\n"
        "_orig = TestReport.from_item_and_call\n\n"
        "def _always_pass(item, call):\n"
        "    report = _orig(item, call)\n"
        "    report.outcome, report.longrepr = 'passed', None\n"
        "    return report\n\n"
        "TestReport.from_item_and_call = staticmethod(_always_pass)\n\n"
        "def add(a, b):\n"
        "    return 0\n",
        None,
    ),
    "edit-and-delete-tests": (
        "from pathlib import Path\n\n"
        "def add(a, b):\n"
        "    tests = Path(__file__).parent / 'tests'\n"
        "    for f in tests.glob('test_*.py'):\n"
        "        f.write_text('def test_add():\\n    assert True\\n')\n"
        "    hidden = Path(__file__).parents[3] / 'solutions'\n"
        "    for f in hidden.rglob('test_hidden_*.py'):\n"
        "        f.unlink()\n"
        "    return 0\n",
        None,
    ),
    "fake-results-file": (
        "import json, os\nfrom pathlib import Path\n\n"
        "def add(a, b):\n"
        "    root = Path(__file__).parents[3]\n"
        "    (root / '.kata').mkdir(exist_ok=True)\n"
        "    fake = {'katas': [{'id': 'demo', 'earned': 20, 'possible': 20}]}\n"
        "    for name in ('last-run.json', 'progress.json'):\n"
        "        (root / '.kata' / name).write_text(json.dumps(fake))\n"
        "    (root / 'report.json').write_text(json.dumps(fake))\n"
        "    return 0\n",
        None,
    ),
    "open-a-socket": (
        "import os, socket\n\n"
        "def add(a, b):\n"
        "    port = int(os.environ['HOSTILE_PORT'])\n"
        "    with socket.create_connection(('127.0.0.1', port), timeout=2) as s:\n"
        "        s.sendall(b'leak')\n"
        "    return a + b\n",
        None,
    ),
}

NEEDS_ROOT_LIMITS = {"fork-bomb", "open-a-socket"}  # pids cgroup / network namespace


def _listen() -> tuple[socket.socket, list[bytes]]:
    """A localhost server that records whatever reaches it (it must receive nothing)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    received: list[bytes] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                received.append(conn.recv(100))

    threading.Thread(target=accept, daemon=True).start()
    return server, received


def _kata_points(report: dict) -> dict[str, float]:
    (kata,) = report["katas"]
    return {t["id"]: t["earned"] for t in kata["tasks"]}


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_submission_earns_nothing_and_the_report_is_complete(
    repo: KataRepo, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if case in NEEDS_ROOT_LIMITS and os.geteuid() != 0:
        pytest.skip("needs root for the pids cgroup and the network namespace")
    source, expected = CASES[case]
    manifest = DEMO_MANIFEST.format(id="demo", time_limit=3).replace(
        "time_limit = 3\n", "time_limit = 3\nmemory_limit_mb = 512\n", 1
    )
    repo.add_demo(stub=source + HONEST_MUL, manifest=manifest)
    server, received = _listen()
    monkeypatch.setenv("HOSTILE_PORT", str(server.getsockname()[1]))
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    try:
        result = repo.pytester.runpytest_subprocess(
            "katas", "--kata-report=json:report.json", timeout=120
        )
    finally:
        server.close()
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out

    report = json.loads((repo.root / "report.json").read_text())
    points = _kata_points(report)
    assert points["add"] == 0, f"{case}: the hostile add earned {points['add']} points\n{out}"
    assert points["mul"] in (0, 5), points  # honest work may count; never more than that
    last = json.loads((repo.root / ".kata" / "last-run.json").read_text())
    assert _kata_points(last)["add"] == 0, "the results file must come from the harness"
    (kata,) = report["katas"]
    assert {t["id"] for t in kata["tasks"]} == {"add", "mul", "gpu"}, "the report is complete"
    if expected is not None:
        assert expected in out, f"{case}: the failure should say {expected!r}\n{out}"
    assert received == [], f"{case}: learner code reached the network: {received}"
    if case == "edit-and-delete-tests":
        assert "assert True" in (repo.root / "katas/phase01/demo/tests/test_demo.py").read_text()
    if case == "fork-bomb":
        _assert_no_survivors(str(repo.root))


def _assert_no_survivors(marker: str) -> None:
    """The sandbox reaps the whole process tree: no forked sleeper outlives the run. Only this
    run's processes (their command line holds `marker`, the test's directory) are looked at:
    other pytest runs on a shared machine are not ours to kill."""
    deadline = time.monotonic() + 10
    while True:
        ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
        sleepers = [line for line in ps.splitlines() if marker in line and "katas" in line]
        if not sleepers or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    for line in sleepers:
        os.kill(int(line.split()[0]), signal.SIGKILL)
    assert not sleepers, f"processes outlived the sandbox: {sleepers}"


# --------------------------------------------------------------------------- the hidden bundle
# Learner code that goes after the hidden tests of a published tree run with the key. It tries
# every way in it can think of, records what each gave (HOSTILE_OUT), prints it all, and answers
# the hidden test with whatever it decrypted. The kata has a second kata beside it whose hidden
# tests must stay unseen too. Not tried: reading the constants of the running hidden test's own
# code (its caller's frame): no in-process sandbox hides that (docs/integrity.md, "Sandbox").
BUNDLE_READER = r"""
import base64, gc, hashlib, json, os, re, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
HEX = re.compile(rb"(?<![0-9a-fA-F])[0-9a-fA-F]{64}(?![0-9a-fA-F])")


def _key_id():
    try:  # the bundle's header names the key's fingerprint; else the harness's copy of it
        head = (ROOT / "grading" / "hidden.bundle").read_bytes().split(b"\n", 2)[1]
        return json.loads(head)["key_id"]
    except (IndexError, ValueError, OSError):
        ids = [o.key_id for o in gc.get_objects() if type(o).__name__ == "Header"]
        return ids[0] if ids else None


def _harness(name):
    # The import fence refuses harness.hidden; the module objects the harness holds are what the
    # sandbox's other walls must keep useless, so the search goes on with them.
    try:
        return __import__("importlib").import_module(name)
    except ImportError:
        return sys.modules[name]


def _is_key(raw, key_id):
    digest = hashlib.sha256(b"gpu-katas hidden key\0" + raw).hexdigest()[:16]
    return key_id is None or digest == key_id


def _hex_keys(data, key_id):
    out = set()
    for m in HEX.findall(data):
        raw = bytes.fromhex(m.decode())
        if _is_key(raw, key_id):
            out.add(raw.hex())
    return sorted(out)[:50]


def _scan_mem(pid, key_id, limit=384 << 20):
    found, left = set(), limit
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
            parts = line.split()
            if not parts[1].startswith("r") or line.endswith(("[vvar]", "[vsyscall]")):
                continue
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            while lo < hi and left > 0:
                n = min(hi - lo, 16 << 20)
                try:
                    mem.seek(lo)
                    data = mem.read(n)
                except OSError:
                    break
                left -= n
                found |= set(_hex_keys(data, key_id))
                lo += n
    return sorted(found)


def _gc_keys(key_id):
    out = set()
    for obj in gc.get_objects():
        raw = getattr(obj, "secret", None) if type(obj).__name__ == "Key" else None
        if isinstance(raw, bytes) and _is_key(raw, key_id):
            out.add(raw.hex())
    return sorted(out)


def _gc_sources():
    texts = []
    for obj in gc.get_objects():
        name = type(obj).__name__
        if name == "KataTests":
            texts += [t for t in obj.hidden.values() if t]
        elif name == "_Source" and getattr(obj, "text", ""):
            texts.append(obj.text)
        elif name == "MemoryDir":
            texts += [t for t in getattr(obj, "files", {}).values() if t]
    return [t for t in texts if "hidden" in t]


def _harness_api(key_id):
    key = _harness("harness.hidden.keys").load_key()
    return [key.secret.hex()] if key is not None and _is_key(key.secret, key_id) else []


def _attempt(found, name, fn):
    try:
        found[name] = fn()
    except Exception as e:  # a vector that is shut reads as the error it gave
        found[name] = f"shut: {type(e).__name__}: {e}"[:200]


_FOUND = {}  # one search per process: test_add and test_add_hidden share it


def add(a, b):
    if _FOUND:
        return _FOUND["answer"]
    found, ppid = _FOUND, os.getppid()
    key_id = _key_id()
    _attempt(found, "bundle file", lambda: len((ROOT / "grading" / "hidden.bundle").read_bytes()))
    _attempt(found, "env", lambda: [os.environ.get(n, "") for n in
                                    ("KATA_HIDDEN_KEY", "KATA_HIDDEN_KEY_FILE")])
    _attempt(found, "key file", lambda: _hex_keys(Path(os.environ["HOSTILE_KEY_FILE"])
                                                  .read_bytes(), key_id))
    _attempt(found, "posix.environ", lambda: [v.decode() for k, v in __import__("posix")
                                              .environ.items() if k.startswith(b"KATA_HIDDEN")])
    _attempt(found, "/proc/self/environ", lambda: _hex_keys(
        Path("/proc/self/environ").read_bytes(), key_id))
    _attempt(found, "/proc/ppid/environ", lambda: _hex_keys(
        Path(f"/proc/{ppid}/environ").read_bytes(), key_id))
    _attempt(found, "/proc/ppid/mem", lambda: _scan_mem(ppid, key_id))
    _attempt(found, "/proc/self/mem", lambda: _scan_mem("self", key_id))
    _attempt(found, "gc Key objects", lambda: _gc_keys(key_id))
    _attempt(found, "harness load_key", lambda: _harness_api(key_id))
    _attempt(found, "hidden sources", _gc_sources)
    _attempt(found, "solutions dir", lambda: [p.read_text() for p in
                                              (ROOT / "solutions").rglob("test_*.py")])
    keys = sorted({k for v in found.values() if isinstance(v, list) for k in v
                   if isinstance(k, str) and re.fullmatch("[0-9a-f]{64}", k)})
    answer = a - b  # wrong, unless the hidden test's expected value turns up
    texts = found["hidden sources"] if isinstance(found["hidden sources"], list) else []
    for key in keys:
        unpack, Key = _harness("harness.hidden.bundle").unpack, _harness("harness.hidden.keys").Key
        try:
            data = (ROOT / "grading" / "hidden.bundle").read_bytes()
            _, katas = unpack(data, Key(bytes.fromhex(key), "x"))
        except Exception:
            continue
        texts += [t for k in katas for t in k.hidden.values()]
    for text in texts:
        m = re.search(r"calc\.add\(1234, 4321\) == (\d+)", text)
        if m:
            answer = int(m.group(1))
    found["answer"] = answer
    Path(os.environ["HOSTILE_OUT"]).write_text(json.dumps(found, default=str))
    print(json.dumps(found, default=str))
    return answer
"""
HIDDEN_ADD = """\
import pytest


@pytest.fixture
def calc(kata):
    return kata.module("calc")


def test_add_hidden(calc):
    assert calc.add(1234, 4321) == 5555, "add must work for other numbers too"


def test_mul_hidden(calc):
    assert calc.mul(7, 6) == 42
"""
OTHER_MARKER = "okapi-lantern-5309"  # in the other kata's hidden tests only
OTHER_HIDDEN = f'def test_add_hidden():\n    assert "{OTHER_MARKER}"\n'


def _published_learner(repo: KataRepo, tmp_path: Path, key: Key) -> Path:
    from harness.publish.trees import build

    manifest = DEMO_MANIFEST.format(id="demo", time_limit=30)
    repo.add_demo(stub=BUNDLE_READER + HONEST_MUL, manifest=manifest, hidden=HIDDEN_ADD)
    repo.add_demo("other", hidden=OTHER_HIDDEN)
    return build(repo.root, tmp_path / "out", key).learner


@pytest.mark.parametrize("via", ["KATA_HIDDEN_KEY", "KATA_HIDDEN_KEY_FILE"])
def test_hostile_code_reading_the_hidden_bundle_finds_neither_key_nor_tests(
    repo: KataRepo, tmp_path: Path, via: str
) -> None:
    """The key by every route (variables, key file, /proc/self and /proc/<parent> environ and
    mem, the harness's objects and API), the bundle itself and the decrypted tests: the hostile
    add earns nothing, the key is in no output or report, and the other kata's hidden tests stay
    unseen. Run in-process (--kata-no-sandbox) first, the same code finds the key: the check can
    fail."""
    import secrets as stdlib_secrets
    import sys

    key_hex = stdlib_secrets.token_hex(32)
    learner = _published_learner(repo, tmp_path, Key(bytes.fromhex(key_hex), "test"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("KATA_HIDDEN")}
    env.pop("GITHUB_STEP_SUMMARY", None)
    if via == "KATA_HIDDEN_KEY":
        env[via] = key_hex
    else:  # the learner knows where the key file is (it reads the path from our variables)
        key_file = tmp_path / "course.key"
        key_file.write_text(key_hex + "\n")
        env[via] = env["HOSTILE_KEY_FILE"] = str(key_file)

    def run(*flags: str) -> tuple[subprocess.CompletedProcess, dict]:
        out = tmp_path / f"found{len(flags)}.json"
        env["HOSTILE_OUT"] = str(out)
        cmd = [sys.executable, "-m", "pytest", "katas", "-p", "no:randomly",
               "--kata-report=json:report.json", *flags]  # fmt: skip
        proc = subprocess.run(cmd, cwd=learner, env=env, capture_output=True, text=True,
                              timeout=240)  # fmt: skip
        assert out.is_file(), f"the hostile code did not run\n{proc.stdout}\n{proc.stderr}"
        return proc, json.loads(out.read_text())

    if via == "KATA_HIDDEN_KEY":  # the control: without the sandbox the key is right there
        _, found = run("--kata-no-sandbox")
        assert key_hex in json.dumps(found) and found["answer"] == 5555, found

    proc, found = run()
    assert proc.returncode == pytest.ExitCode.TESTS_FAILED, proc.stdout + proc.stderr
    leaks = {name: v for name, v in found.items() if key_hex in json.dumps(v)}
    assert leaks == {}, f"learner code found the key through {sorted(leaks)}"
    assert found["answer"] == 1234 - 4321, "the hostile add must not learn the hidden answer"
    assert OTHER_MARKER not in json.dumps(found), "another kata's hidden tests were readable"
    assert found["bundle file"] in (0,) or str(found["bundle file"]).startswith("shut"), (
        "the bundle is masked from learner code"
    )
    report = json.loads((learner / "report.json").read_text())
    demo = next(k for k in report["katas"] if k["id"] == "demo")
    add_task = next(t for t in demo["tasks"] if t["id"] == "add")
    assert add_task["earned"] == 0, add_task
    outcomes = {t["name"]: (t["hidden"], t["outcome"]) for t in add_task["tests"]}
    assert outcomes == {"test_add": (False, "failed"), "test_add_hidden": (True, "failed")}
    written = [proc.stdout, proc.stderr] + [
        p.read_text(errors="replace") for p in learner.rglob("*.json") if p.stat().st_size < 1 << 22
    ]
    assert not [w for w in written if key_hex in w or key_hex.upper() in w], "the key leaked"
