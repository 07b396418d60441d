"""Fixtures of the failure-drills tests: your modules and the given fleet, a drill runner, the
judge of a remediation run (what the runbook's rules expect on each node, from the injection's
ground truth) and the runbook parser."""

from __future__ import annotations

import dataclasses
import gc
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from harness import KataTodo

# The runbooks: one "# Runbook: <kind>" per kind, these sections in this order.
RUNBOOK_KINDS = (
    "gpu-lost",
    "ecc",
    "row-remap-failure",
    "thermal",
    "nic-flap",
    "disk-full",
    "application-xid",
)
SECTIONS = ("Symptoms", "Impact", "Detection", "Mitigation", "Escalation", "Verification")
CONTROL_CALLS = ("cordon", "drain", "reset_gpu", "reboot", "escalate", "uncordon")


@pytest.fixture(scope="module")
def fleet(kata: Any) -> Any:
    """fleet.py (given): the simulated fleet, its telemetry, its control API, the scenarios."""
    return kata.module("fleet")


@pytest.fixture(scope="module")
def detect(kata: Any) -> Any:
    """detect.py (yours): task "detect"."""
    return kata.module("detect")


@pytest.fixture(scope="module")
def remediate(kata: Any) -> Any:
    """remediate.py (yours): task "remediate"."""
    return kata.module("remediate")


@pytest.fixture(scope="module")
def runbooks(kata: Any) -> dict[str, dict[str, str]]:
    """runbooks.md (yours), parsed: kind -> section -> text (task "runbooks")."""
    text = kata.source("runbooks.md").read_text(encoding="utf-8")
    if "<!-- not started" in text:
        raise KataTodo("runbooks.md is the stub still")
    return parse_runbooks(text)


def parse_runbooks(text: str) -> dict[str, dict[str, str]]:
    """kind -> {section title: its text} for every "# Runbook: <kind>" heading; the sections
    are the "## " headings under it, in order (dict order)."""
    books: dict[str, dict[str, str]] = {}
    section: list[str] | None = None
    fence = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
        if not fence and (m := re.match(r"#\s+Runbook:\s*(\S+)\s*$", line)):
            book: dict[str, str] = {}
            books[m.group(1)] = book
            section = None
        elif not fence and (m := re.match(r"##\s+(.+?)\s*$", line)) and books:
            book = list(books.values())[-1]
            book[m.group(1)] = ""
            section = [m.group(1)]
        elif section is not None and books:
            book = list(books.values())[-1]
            book[section[0]] += line + "\n"
    return books


def too_thin(text: str) -> bool:
    """A section that says nothing: under 6 words, or a TODO / TBD left in it."""
    return len(re.findall(r"[A-Za-z0-9_`'-]+", text)) < 6 or bool(
        re.search(r"\b(TODO|TBD)\b", text)
    )


def xids_named(text: str) -> set[int]:
    """The XIDs a text names ("XID 79", "Xid 48")."""
    return {int(x) for x in re.findall(r"\bXID\s+(\d+)", text, flags=re.IGNORECASE)}


def mitigation_steps(text: str) -> list[str]:
    """The control calls of a Mitigation section: the first `call` code span of each item of
    its numbered list that names one (an item without one is a manual step)."""
    steps = []
    for line in text.splitlines():
        if re.match(r"\s*\d+[.)]\s", line):
            calls = [
                c for c in re.findall(r"`([a-z_]+)(?:\([^`]*\))?`", line) if c in CONTROL_CALLS
            ]
            if calls:
                steps.append(calls[0])
    return steps


def _recorded(fleet: Any, sc: Any) -> tuple[list[Any], list[dict[str, Any]], dict[str, str]]:
    """The scenario's telemetry, recorded before any detector runs, under fresh node names:
    (the renamed inventory, each tick's renamed samples, alias -> real name). The Fleet that
    played it is gone when this returns."""
    fl = fleet.Fleet(sc)
    ticks = []
    for _ in range(sc.horizon):
        ticks.append(fl.sample())
        fl.advance()
    salt = sum(ord(c) for n in sc.nodes for c in n.name)  # new names, stable per scenario
    alias = {
        n.name: f"host-{(salt * 7919 + k * 104729) % 1000003:06d}-{k}"
        for k, n in enumerate(sc.nodes)
    }
    inventory = [dataclasses.replace(n, name=alias[n.name]) for n in sc.nodes]
    renamed = [
        {alias[name]: None if s is None else fleet.NodeSample(alias[name], s.tick, s.gpus, s.nics,
                                                              s.disks, s.kernel_log)
         for name, s in samples.items()}
        for samples in ticks
    ]  # fmt: skip
    return inventory, renamed, {a: real for real, a in alias.items()}


def _observe_all(detector_class: Any, inventory: list[Any], policy: Any,
                 ticks: list[dict[str, Any]], out: list[Any], err: list[BaseException]) -> None:  # fmt: skip
    try:
        det = detector_class(inventory, policy)
        for t, samples in enumerate(ticks):
            out.extend((t, i) for i in det.observe(t, samples))
    except BaseException as e:  # re-raised by the test's thread (KataTodo: "not started")
        err.append(e)


def detect_apart(fleet: Any, sc: Any, detector_class: Any) -> list[tuple[int, Any]]:
    """Run `detector_class` on the scenario's telemetry where nothing else can be reached: the
    samples are recorded first, the nodes renamed (as another fleet would name them), and the
    detector is built and fed in a thread of its own (its callers' frames hold the samples
    only). Returns (tick, incident) with the real node names back; an incident on a node the
    detector was not given keeps a name that is no node's."""
    # The recording is thousands of small acyclic objects that live through the detection:
    # left to the collector they would be scanned (with the whole test session's heap) again
    # and again. Frozen while the detector runs, unfrozen after.
    collecting = gc.isenabled()
    gc.disable()
    try:
        inventory, ticks, real = _recorded(fleet, sc)
        gc.freeze()
    finally:
        if collecting:
            gc.enable()
    out: list[tuple[int, Any]] = []
    err: list[BaseException] = []
    try:
        worker = threading.Thread(target=_observe_all, args=(detector_class, inventory, sc.policy,
                                                             ticks, out, err), daemon=True)  # fmt: skip
        worker.start()
        while worker.is_alive():  # a short join: the test's time limit (SIGALRM) still interrupts
            worker.join(0.05)
    finally:
        gc.unfreeze()
    if err:
        raise err[0]
    return [
        (t, dataclasses.replace(i, node=real.get(i.node, f"<not a node of the drill: {i.node!r}>")))
        if isinstance(getattr(i, "node", None), str)
        else (t, i)
        for t, i in out
    ]


@pytest.fixture(scope="module")
def drill(fleet: Any) -> Callable[..., Any]:
    """drill(scenario, detector_class=None, remediator_class=None, feed=None) -> (fleet,
    reported). With detector_class: your Detector on the recorded telemetry under fresh node
    names, in a thread of its own (detect_apart); fleet is then None. Else fleet.run with your
    Remediator built on the drill's own control API, fed `feed`'s incidents."""

    def play(sc: Any, detector_class: Any = None, remediator_class: Any = None,
             feed: Any = None) -> Any:  # fmt: skip
        if detector_class is not None:
            return None, detect_apart(fleet, sc, detector_class)
        fl = fleet.Fleet(sc)
        rem = None if remediator_class is None else remediator_class(fl.control, sc.policy)
        seen: list[tuple[int, Any]] = []
        for t in range(sc.horizon):
            samples = fl.sample()
            incs = list((feed or {}).get(t, []))
            seen += [(t, i) for i in incs]
            if rem is not None:
                rem.step(t, incs, samples)
            fl.advance()
        return fl, seen

    return play


@dataclass
class Verdict:
    """What the judge found in one remediation run (every list empty: all correct)."""

    healthy: list[str] = field(default_factory=list)  # actions on nodes without a fault
    killed: list[str] = field(default_factory=list)  # jobs killed by a reset or a reboot
    cap: list[str] = field(default_factory=list)  # more nodes cordoned than the cap allows
    wrong_fix: list[str] = field(default_factory=list)  # reset of a GPU that is not ecc
    broken_back: list[str] = field(default_factory=list)  # uncordoned with its fault still there
    nodes: dict[str, str] = field(default_factory=dict)  # faulty node -> what differs
    kinds: dict[str, str] = field(default_factory=dict)  # faulty node -> its fault kinds

    def problems(self) -> str:
        """Every finding, one per line ("" when the run is correct)."""
        lines = [*self.healthy, *self.killed, *self.cap, *self.wrong_fix, *self.broken_back]
        return "\n".join(lines + [f"{n}: {msg}" for n, msg in self.nodes.items()])


def expected_actions(sc: Any, fl: Any, fault: Any, at: int) -> list[tuple[int, str, Any]]:
    """The runbook on the node of `fault` (its only fault), cordoned at tick `at`:
    (tick, verb, arg) in order."""
    node, kind = fault.node, fault.kind
    out: list[tuple[int, str, Any]] = [(at, "cordon", None)]
    if kind == "disk-full":
        return [*out, (at, "escalate", kind)]
    out.append((at, "drain", None))
    here: set[str] = set()
    empty = None
    events = sorted(fl.job_events)
    t = 0
    for t in range(sc.horizon):  # the first tick >= at with no job on the node
        for tick, job, n, what in events:
            if tick == t and n == node:
                (here.add if what == "landed" else here.discard)(job)
        if t >= at and not here:
            empty = t
            break
    if empty is None:
        return out
    if kind == "ecc":
        return [*out, (empty, "reset_gpu", int(fault.device[3:])), (empty + 1, "uncordon", None)]
    if kind == "gpu-lost":
        back = empty + sc.reboot_ticks + 1
        last = (back, "uncordon", None) if fault.fixed_by_fix else (back, "escalate", kind)
        return [*out, (empty, "reboot", None), last]
    return [*out, (empty, "escalate", kind)]


def judge(fleet: Any, sc: Any, fl: Any) -> Verdict:
    """Judge a remediation run of a scenario whose faults are on distinct nodes, fed with the
    ground truth's incidents (fleet.truth_incidents): every node's actions against the
    runbook's, and the fleet-wide rules (cap, killed jobs, healthy nodes, resets)."""
    v = Verdict()
    truth = fleet.truth_incidents(sc)
    cap = sc.policy.max_out(len(sc.nodes))
    faulty = {f.node: f for f in sc.faults}
    by_node: dict[str, list[Any]] = {}
    out = set(sc.maintenance)
    first_out: dict[str, int] = {}  # node -> cordoned nodes when its first action came
    for a in fl.actions:
        by_node.setdefault(a.node, []).append(a)
        first_out.setdefault(a.node, len(out))
        if a.verb == "cordon":
            out.add(a.node)
            if len(out) > cap:
                v.cap.append(f"tick {a.tick}: cordon({a.node}) made {len(out)} cordoned, cap {cap}")
        elif a.verb == "uncordon":
            out.discard(a.node)
            still = [f for f in sc.faults if f.node == a.node and fl._active(f, a.tick)]
            if still:
                v.broken_back.append(f"tick {a.tick}: uncordon({a.node}) while its "
                                     f"{still[0].kind} on {still[0].device} is still there")  # fmt: skip
        if a.node not in faulty:
            v.healthy.append(
                f"tick {a.tick}: {a.verb}({a.node}{'' if a.arg is None else ', ' + str(a.arg)})"
            )
        elif a.verb == "reset_gpu" and not (
            faulty[a.node].kind == "ecc" and faulty[a.node].device == f"gpu{a.arg}"
        ):
            f = faulty[a.node]
            v.wrong_fix.append(f"tick {a.tick}: reset_gpu({a.node}, {a.arg}) on a {f.kind} "
                               f"fault of {f.device}")  # fmt: skip
    v.killed = [f"tick {t}: {job} killed by {what}" for t, job, what in fl.killed]
    for node, f in faulty.items():
        v.kinds[node] = f.kind
        at = sc.detect_tick(f)
        got = [(a.tick, a.verb, a.arg if a.verb in ("reset_gpu", "escalate") else None)
               for a in by_node.get(node, [])]  # fmt: skip
        if got[:1] == [(at, "escalate", f.kind)] and first_out.get(node, 0) >= cap:
            want = [(at, "escalate", f.kind)]  # the cap was reached: left alone
        else:
            want = expected_actions(sc, fl, f, at)
        if got != want:
            v.nodes[node] = (f"{f.kind} on {f.device} reported at tick {at}: expected "
                             f"{want}, got {got}")  # fmt: skip
        told = set(next(i.evidence for incs in truth.values() for i in incs if i.node == node))
        for a in by_node.get(node, []):
            if a.verb == "escalate" and not told <= set(a.evidence):
                v.nodes[node] = (f"escalate({node}, {a.arg!r}, ...) at tick {a.tick} does not "
                                 f"carry the incident's evidence lines {sorted(told)}: it "
                                 f"carries {list(a.evidence)}")  # fmt: skip
    return v


@pytest.fixture(scope="module")
def judged(fleet: Any, drill: Any) -> Callable[..., Any]:
    """judged(scenario, remediator_class) -> Verdict of your Remediator fed the truth."""

    def run(sc: Any, remediator_class: Any) -> Verdict:
        fl, _ = drill(sc, remediator_class=remediator_class, feed=fleet.truth_incidents(sc))
        return judge(fleet, sc, fl)

    return run


@pytest.fixture(scope="module")
def incidents_of() -> Callable[..., Any]:
    """incidents_of(reported) -> sorted (tick reported, kind, node, device, first_seen)."""

    def key(reported: list[tuple[int, Any]]) -> list[tuple[int, str, str, str, int]]:
        return sorted((t, i.kind, i.node, i.device, i.first_seen) for t, i in reported)

    return key


@pytest.fixture(scope="module")
def books() -> Any:
    """The runbook checker's pieces: KINDS (the runbooks required), SECTIONS (in order),
    xids_named(text), mitigation_steps(text), parse(text), too_thin(section text)."""
    from types import SimpleNamespace

    return SimpleNamespace(KINDS=RUNBOOK_KINDS, SECTIONS=SECTIONS, xids_named=xids_named,
                           mitigation_steps=mitigation_steps, parse=parse_runbooks,
                           too_thin=too_thin)  # fmt: skip
