"""GIVEN (not graded): load a trace and build its engine.

trace = workload.load("dgx")                 # traces/dgx.json (see gen_traces.py)
jobs, durations = workload.jobs_of(trace)    # what schedulers see; what only the engine knows
result = workload.engine_for(trace).run(scheduler, jobs, durations)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .cluster import TOPOLOGIES, Topology
from .engine import Engine, Job
from .engine import jobs_of as _jobs_of

TRACES = Path(__file__).parent / "traces"


def load(kind: str) -> dict[str, Any]:
    return json.loads((TRACES / f"{kind}.json").read_text())


def topology_of(trace: dict[str, Any]) -> Topology:
    return TOPOLOGIES[trace["topology"]]


def jobs_of(trace: dict[str, Any]) -> tuple[list[Job], dict[int, float]]:
    return _jobs_of(trace["jobs"])


def engine_for(trace: dict[str, Any]) -> Engine:
    return Engine(topology_of(trace), trace["checkpoint_s"])
