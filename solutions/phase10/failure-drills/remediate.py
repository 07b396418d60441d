"""Task "remediate": the runbook's automated steps, driven through the fleet's control API.

step() runs once per tick with that tick's new incidents and samples. Per node, in this order:
cordon, drain (wait until the jobs have checkpointed and left), then the fix the fault needs
(reset the GPU for ecc, reboot for gpu-lost) and the escalations (row-remap-failure, thermal,
nic-flap, disk-full: people must act), then verification (uncordon when the next sample shows
the fixed GPUs healthy, escalate when it does not). Never more than policy.max_out(nodes) nodes
cordoned at once: an incident that would need one more is escalated and the node left alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .fleet import Control, Incident, NodeSample, Policy

FIXES = {"ecc": "reset_gpu", "gpu-lost": "reboot"}  # a reset or a reboot clears these
ESCALATE = ("row-remap-failure", "thermal", "nic-flap", "disk-full")  # people must act
NO_DRAIN = ("disk-full",)  # running jobs keep going; nothing new lands once cordoned


@dataclass
class _Work:
    """A node this remediator cordoned, and where its runbook stands."""

    incidents: dict[tuple[str, str], Incident] = field(default_factory=dict)  # (kind, device)
    drained: bool = False
    rebooted: bool = False
    reset: set[str] = field(default_factory=set)  # devices reset
    fixed_at: int = -1  # the tick of the last reset or reboot
    checking: dict[str, str] = field(default_factory=dict)  # device -> kind, to verify
    verified: set[str] = field(default_factory=set)
    escalated: set[tuple[str, str]] = field(default_factory=set)


def healthy(sample: NodeSample, device: str) -> bool:
    """GPU `device` ("gpu3") is present, with no row remap pending and none failed."""
    g = next((g for g in sample.gpus if f"gpu{g.index}" == device), None)
    return g is not None and g.present and not g.remap_pending and not g.remap_failure


class Remediator:
    def __init__(self, control: Control, policy: Policy) -> None:
        self.c = control
        self.cap = policy.max_out(len(control.nodes()))
        self.work: dict[str, _Work] = {}
        self.left_alone: dict[str, set[tuple[str, str]]] = {}  # escalated without touching

    def step(
        self, tick: int, incidents: list[Incident], samples: dict[str, NodeSample | None]
    ) -> None:
        for node in sorted(self.work):
            self._progress(tick, node, samples.get(node))
        for inc in incidents:
            self._take(tick, inc)
        for node in sorted(self.work):
            self._progress(tick, node, samples.get(node))

    def _take(self, tick: int, inc: Incident) -> None:
        key = (inc.kind, inc.device)
        node = inc.node
        if node in self.left_alone:
            if key not in self.left_alone[node]:
                self.left_alone[node].add(key)
                self.c.escalate(node, inc.kind, list(inc.evidence))
            return
        if node not in self.work:
            out = len(self.c.cordoned())
            if out >= self.cap:
                self.left_alone[node] = {key}
                self.c.escalate(node, inc.kind, [*inc.evidence,
                                f"not cordoned: {out} nodes out already, the cap is {self.cap}"])  # fmt: skip
                return
            self.c.cordon(node)
            self.work[node] = _Work()
        w = self.work[node]
        w.incidents.setdefault(key, inc)
        if inc.kind not in NO_DRAIN and not w.drained:
            self.c.drain(node)
            w.drained = True

    def _progress(self, tick: int, node: str, sample: NodeSample | None) -> None:
        w = self.work[node]
        if w.drained and self.c.jobs_on(node):
            return  # the jobs are still checkpointing
        lost = [d for k, d in w.incidents if k == "gpu-lost"]
        ecc = [d for k, d in w.incidents if k == "ecc"]
        if lost and not w.rebooted:
            self.c.reboot(node)
            w.rebooted, w.fixed_at = True, tick
            w.checking.update({d: "gpu-lost" for d in lost})
            w.checking.update({d: "ecc" for d in ecc})
        elif not lost:
            for d in ecc:
                if d not in w.reset:
                    self.c.reset_gpu(node, int(d[3:]))
                    w.reset.add(d)
                    w.fixed_at = tick
                    w.checking[d] = "ecc"
        for (kind, dev), inc in w.incidents.items():
            if kind in ESCALATE and (kind, dev) not in w.escalated:
                w.escalated.add((kind, dev))
                self.c.escalate(node, kind, list(inc.evidence))
        if w.checking and sample is not None and tick > w.fixed_at:
            for dev, kind in sorted(w.checking.items()):
                if healthy(sample, dev):
                    w.verified.add(dev)
                else:
                    w.escalated.add((kind, dev))
                    self.c.escalate(node, kind, [*w.incidents[(kind, dev)].evidence,
                                    f"{dev} still unhealthy at tick {tick} after the fix"])  # fmt: skip
            w.checking.clear()
        fixable = {d for k, d in w.incidents if k in FIXES}
        if fixable and fixable <= w.verified and not w.escalated:
            self.c.uncordon(node)
            del self.work[node]
