"""Nothing outlives a ring-allreduce test, whatever the learner's ranks do (issue 23).

The kata forks N rank processes per test and connects them with TCP sockets (its given
cluster.py). A submission whose ranks crash (os._exit), raise, hang (sleep) and fork a
grandchild that holds a listening socket runs through the real kata's tests with
``--kata-impl=patch:FILE``, in a pytest subprocess: once that run is over -- normally, and when
a grader kills the pytest process in the middle of a test -- no process it started may be left,
and no socket of theirs (listening or connected) may be open. Each process the submission
started writes its pid, its start time and its sockets' ports to a directory first, so the test
knows exactly what to look for (and that the crash really happened); and every process of the
run, the tests' own ranks included, inherits a marker in its environment that a scan of /proc
looks for afterwards.
"""

from __future__ import annotations

import difflib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KATA = ROOT / "katas" / "phase08" / "ring-allreduce"
REFERENCE = ROOT / "solutions" / "phase08" / "ring-allreduce" / "ring.py"
TESTS = "faults_dead_rank or faults_stalled_rank"  # a ring job and a recursive-doubling job

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/stat").is_file() or not REFERENCE.is_file(),
    reason="needs Linux's /proc and the kata's reference",
)

CRASH = '''

def _crash(comm):
    """Rank 0 exits at once, rank 1 forks a grandchild that listens on a socket and sleeps,
    then raises; every other rank sleeps (hangs) holding its sockets."""
    import os, socket, time

    def note(tag, ports):
        start = open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19]
        with open(os.path.join({out!r}, f"{{tag}}-{{os.getpid()}}"), "w") as f:
            f.write(f"{{os.getpid()}} {{start}} {{' '.join(map(str, ports))}}\\n")
        with open(os.path.join({out!r}, f"env-{{os.getpid()}}"), "w") as f:
            f.write(os.environ.get("RING_CLEANUP_MARK", ""))

    ports = [s.getsockname()[1] for s in comm.peers.values()]
    if comm.rank == 0:
        note("exit", ports)
        os._exit(3)
    if comm.rank == 1:
        lst = socket.socket()
        lst.bind(("127.0.0.1", 0))
        lst.listen()
        if os.fork() == 0:
            note("grandchild", ports + [lst.getsockname()[1]])
            time.sleep(3600)
            os._exit(0)
        note("raise", ports + [lst.getsockname()[1]])
        raise RuntimeError("rank 1 crashes")
    note("hang", ports)
    time.sleep(3600)
'''


def _crash_patch(tmp: Path, out: Path) -> Path:
    """A unified diff of the reference: every collective starts with _crash(comm)."""
    ref = REFERENCE.read_text()
    new = ref.replace(
        "    n, r = comm.size, comm.rank\n", "    n, r = comm.size, comm.rank\n    _crash(comm)\n"
    )
    assert new.count("_crash(comm)") >= 2, "the reference's collectives changed: update the patch"
    new += CRASH.format(out=str(out))
    diff = difflib.unified_diff(
        ref.splitlines(keepends=True), new.splitlines(keepends=True), "a/ring.py", "b/ring.py"
    )
    patch = tmp / "crash.patch"
    patch.write_text("".join(diff))
    return patch


def _alive(pid: int, start: str) -> bool:
    """The process `pid` that started at `start` (clock ticks since boot) still exists."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = stat.rsplit(")", 1)[1].split()
    return fields[19] == start and fields[0] != "Z"


def _open_sockets(ports: set[int]) -> list[str]:
    """/proc/net/tcp{,6} entries on these local ports that a process still holds (inode != 0:
    a socket in TIME_WAIT belongs to nobody)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            port = int(f[1].rsplit(":", 1)[1], 16)
            if port in ports and f[9] != "0":
                found.append(f"{table}: local port {port}, state {f[3]}, inode {f[9]}")
    return found


def _marked(mark: str) -> list[str]:
    """Every process whose environment holds RING_CLEANUP_MARK=mark: whatever the run started,
    recorded or not (the tests' own ranks too)."""
    found, needle = [], f"RING_CLEANUP_MARK={mark}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            env = (proc / "environ").read_bytes()
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        if needle in env.split(b"\0") and stat.rsplit(")", 1)[1].split()[0] != "Z":
            found.append(f"pid {proc.name}: {(proc / 'cmdline').read_bytes()[:80]!r}")
    return found


def _leftovers(out: Path) -> tuple[list[str], list[str], dict[str, int]]:
    """(processes still alive, sockets still held, how many of each kind were recorded)."""
    alive, ports, kinds = [], set(), {}
    for note in out.iterdir():
        if note.name.startswith("env-"):
            continue
        kind = note.name.split("-")[0]
        kinds[kind] = kinds.get(kind, 0) + 1
        pid, start, *rest = note.read_text().split()
        ports.update(int(p) for p in rest)
        if _alive(int(pid), start):
            alive.append(f"{note.name} (pid {pid})")
    return alive, _open_sockets(ports), kinds


def _wait_clean(out: Path, seconds: float = 10.0) -> tuple[list[str], list[str], dict[str, int]]:
    """What is left once the run is over (a killed process takes a moment to be reaped)."""
    deadline = time.monotonic() + seconds
    while True:
        alive, socks, kinds = _leftovers(out)
        if (not alive and not socks) or time.monotonic() > deadline:
            return alive, socks, kinds
        time.sleep(0.2)


def _kill_recorded(out: Path) -> None:
    """Kill what the test found left (so one failure does not leave sleepers behind)."""
    for note in out.iterdir():
        if note.name.startswith("env-"):
            continue
        pid, start, *_ = note.read_text().split()
        if _alive(int(pid), start):
            os.kill(int(pid), signal.SIGKILL)


def _command(patch: Path, tmp: Path) -> list[str]:
    return [
        sys.executable, "-m", "pytest", str(KATA), f"--kata-impl=patch:{patch}", "-k", TESTS,
        "-p", "no:cacheprovider", f"--kata-results-dir={tmp / 'results'}", "-q",
    ]  # fmt: skip


@pytest.fixture
def crash(tmp_path: Path) -> Iterator[tuple[Path, Path, str]]:
    out = tmp_path / "pids"
    out.mkdir()
    patch = _crash_patch(tmp_path, out)
    mark = uuid.uuid4().hex
    yield patch, out, mark
    _kill_recorded(out)
    for line in _marked(mark):
        os.kill(int(line.split()[1].rstrip(":")), signal.SIGKILL)


def _env(mark: str) -> dict[str, str]:
    return {**os.environ, "RING_CLEANUP_MARK": mark}


def _check_marked(out: Path, mark: str) -> None:
    """The marker reached the ranks (so the scan below can see them), and nothing holds it now."""
    seen = {n.read_text() for n in out.iterdir() if n.name.startswith("env-")}
    assert seen == {mark}, f"the run's marker did not reach its ranks ({seen}): nothing to scan for"
    deadline = time.monotonic() + 10
    while (left := _marked(mark)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"processes of the run outlived it: {left}"


def test_a_crashing_submission_leaves_no_process_and_no_socket(
    crash: tuple[Path, Path, str], tmp_path: Path
) -> None:
    patch, out, mark = crash
    proc = subprocess.run(
        _command(patch, tmp_path), cwd=ROOT, capture_output=True, text=True, timeout=240,
        start_new_session=True, env=_env(mark),
    )  # fmt: skip
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1, f"the crashing submission must fail its tests:\n{text[-3000:]}"
    alive, socks, kinds = _wait_clean(out)
    for kind in ("exit", "raise", "grandchild", "hang"):
        assert kinds.get(kind), f"no rank recorded {kind!r}: the crash did not run\n{text[-3000:]}"
    assert not alive, f"processes outlived the run: {alive}"
    assert not socks, f"sockets outlived the run: {socks}"
    _check_marked(out, mark)


def test_a_run_killed_mid_test_leaves_no_process_and_no_socket(
    crash: tuple[Path, Path, str], tmp_path: Path
) -> None:
    """A grader's limit: the pytest process is SIGKILLed while the ranks hang in a test."""
    patch, out, mark = crash
    child = subprocess.Popen(
        _command(patch, tmp_path), cwd=ROOT, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True, env=_env(mark),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not any(n.name.startswith("hang") for n in out.iterdir()):
            assert child.poll() is None, "the run ended before any rank hung"
            assert time.monotonic() < deadline, "no rank started within 120 s"
            time.sleep(0.1)
        time.sleep(0.5)  # every rank of that job is running
        os.kill(child.pid, signal.SIGKILL)  # only pytest itself: the rest must follow on its own
        child.wait(30)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    alive, socks, kinds = _wait_clean(out)
    assert kinds.get("hang"), "no rank hung: the kill did not land in the middle of a job"
    assert not alive, f"processes outlived the killed run: {alive}"
    assert not socks, f"sockets outlived the killed run: {socks}"
    _check_marked(out, mark)
