"""Task "remediate": the runbook's automated steps, driven through the fleet's control API.

step() runs once per tick with that tick's new incidents (in the order to handle them) and
samples. Per node (README.md, "Remediation rules"):
- a new incident on a node you are not handling: if policy.max_out(len(control.nodes())) nodes
  are cordoned already (control.cordoned(), maintenance included), escalate(node, kind,
  evidence) and never touch that node (its later incidents: escalate each, once). Otherwise
  cordon it, then drain it (every kind but disk-full: its jobs keep running);
- once a drained node has no jobs left (control.jobs_on(node) == []): ecc -> reset_gpu(node,
  gpu) of each ecc GPU; gpu-lost -> reboot(node) (a reset cannot reach a GPU off the bus);
  row-remap-failure, thermal, nic-flap -> escalate(node, kind, evidence) (disk-full: right
  after the cordon). Never a reset or a reboot while a job runs there;
- verification: at the first sample of the node after the reset or reboot (a later tick; a
  rebooting node ships None), each fixed GPU must be present with no remap pending or failed:
  then uncordon(node) if nothing was escalated; a GPU that is not: escalate(node, kind,
  evidence), and the node stays cordoned.
Each step happens once, as early as the rules allow (cordon and drain in the step that
receives the incident). Work on nodes you already handle first, then the new incidents.
"""

from __future__ import annotations

from harness import todo

from .fleet import Control, Incident, NodeSample, Policy


class Remediator:
    def __init__(self, control: Control, policy: Policy) -> None:
        todo("Remediator.__init__")

    def step(
        self, tick: int, incidents: list[Incident], samples: dict[str, NodeSample | None]
    ) -> None:
        """Act on `tick`'s new incidents and on the nodes you are working on."""
        todo("Remediator.step")
