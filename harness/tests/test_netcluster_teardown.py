"""multinode-faults' netcluster.py leaves nothing behind, whatever the hosts' code does.

A cluster is network namespaces (anonymous: no `ip netns add`), veth pairs, a bridge, a relay
and a host process per host. Code that crashes, code that hangs past the deadline, a host
stopped with SIGSTOP, and a test process SIGKILLed in the middle of a run must all end with no
process of the cluster alive, no process in any of its namespaces, nothing new in this
namespace's links or in `ip netns`, and the checkpoint directory gone.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from harness.loader import context_for

KATA = Path(__file__).resolve().parents[2] / "katas" / "phase08" / "multinode-faults"

pytestmark = pytest.mark.skipif(
    not (hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("ip")),
    reason="network namespaces need root and iproute2 (the cluster-sim tier)",
)


@pytest.fixture(scope="module")
def netcluster() -> Any:
    return context_for(KATA / "kata.toml", "solution").module("netcluster")


def _links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, timeout=10)
    return {line.split(":")[1].strip() for line in out.stdout.splitlines()}


def _state(pid: int) -> str | None:
    """The process's state letter (Z: a zombie waiting for init to reap it), None if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def _started(pid: int) -> int | None:
    """When the process started, in clock ticks since boot (/proc/PID/stat field 22)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _boot_ticks() -> int:
    return int(float(Path("/proc/uptime").read_text().split()[0]) * os.sysconf("SC_CLK_TCK")) + 1


def _netns() -> str:
    return subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True, timeout=10
    ).stdout


def crash(node: Any, cfg: Any) -> None:
    node.connect(node.hosts, 0)
    if node.host == 0:
        time.sleep(5)  # stopped at 0.3 s, killed at the deadline
    if node.host == 1:
        raise RuntimeError("boom")
    os._exit(3) if node.host == 2 else None


def hang(node: Any, cfg: Any) -> None:
    node.connect(node.hosts, 0)
    if node.host == 1:  # a grandchild: no PR_SET_PDEATHSIG, reparented when host 1 dies
        pid = os.fork()
        if pid == 0:
            os.setsid()
            time.sleep(60)
            os._exit(0)
        Path(cfg, "grandchild").write_text(str(pid))
    while True:
        time.sleep(0.05)


@pytest.mark.parametrize("fn", [crash, hang], ids=["crash", "hang"])
def test_crashing_and_hanging_hosts_leave_nothing(netcluster: Any, fn: Any, tmp_path: Path) -> None:
    links, netns = _links(), _netns()
    with netcluster.Cluster(3) as c:
        res = c.run(fn, str(tmp_path), faults=[netcluster.Fault("stop", host=0, at=0.3)],
                    deadline=2.0)  # fmt: skip
    assert c.namespaces, "the cluster recorded no namespace"
    assert c.leftovers() == []
    assert _links() == links and _netns() == netns
    if fn is crash:
        assert "boom" in (res.results[1].error or "")
        assert res.results[2].killed is not None or res.results[2].error
    else:
        assert {r.killed for r in res.results[1:]} == {"deadline"}
        grandchild = int((tmp_path / "grandchild").read_text())
        assert _state(grandchild) in (None, "Z"), "host 1's grandchild outlived the cluster"
    assert res.results[0].killed == "stopped"


def test_killed_test_process_leaves_nothing(netcluster: Any, tmp_path: Path) -> None:
    """The process that built the cluster dies by SIGKILL mid-run: PR_SET_PDEATHSIG takes
    every host and the relay with it, and their namespaces go with them."""
    links = _links()
    script = tmp_path / "victim.py"
    script.write_text(
        textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
        from harness.loader import context_for
        from pathlib import Path
        nc = context_for(Path({str(KATA / "kata.toml")!r}), "solution").module("netcluster")

        def hang(node, cfg):
            node.connect(node.hosts, 0)
            time.sleep(60)

        c = nc.Cluster(3)
        import os, threading
        def report():
            time.sleep(1.0)
            print(" ".join(str(p) for p in c.pids), flush=True)
            print(" ".join(str(i) for i in c.namespaces), flush=True)
        threading.Thread(target=report, daemon=True).start()
        c.run(hang, None, deadline=60)
    """)
    )
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        pids = [int(x) for x in proc.stdout.readline().split()]
        inodes = {int(x) for x in proc.stdout.readline().split()}
        assert len(pids) == 4 and len(inodes) == 4, (pids, inodes)
    finally:
        killed_at = _boot_ticks()
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def ours() -> list[int]:
        # The kernel recycles a dead namespace's inode number (the sandbox makes one per test
        # child): a process in a recycled one started after the kill, so it is not ours.
        return [p for p in netcluster.processes_in(inodes) if (_started(p) or 0) <= killed_at]

    until = time.monotonic() + 10
    while time.monotonic() < until and ours():
        time.sleep(0.1)
    assert ours() == []
    for pid in pids:
        assert _state(pid) in (None, "Z"), f"process {pid} of the cluster is still running"
    assert _links() == links
