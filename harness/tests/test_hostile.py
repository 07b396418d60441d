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

import pytest

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
        "    fake = 'test_calc_demo.py::test_add PASSED\\n== 3 passed in 0.01s ==\\n'\n"
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
        assert (
            "assert True" in (repo.root / "katas/phase01/demo/tests/test_calc_demo.py").read_text()
        )
    if case == "fork-bomb":
        _assert_no_survivors()


def _assert_no_survivors() -> None:
    """The sandbox reaps the whole process tree: no forked sleeper outlives the run."""
    deadline = time.monotonic() + 10
    while True:
        ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
        sleepers = [line for line in ps.splitlines() if "pytest" in line and "katas" in line]
        if not sleepers or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    for line in sleepers:
        os.kill(int(line.split()[0]), signal.SIGKILL)
    assert not sleepers, f"processes outlived the sandbox: {sleepers}"
