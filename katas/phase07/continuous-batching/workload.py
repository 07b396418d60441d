"""GIVEN (not graded): load a trace, build its engine, and change its load.

trace = workload.load("chat")              # traces/chat.json (see gen_traces.py)
engine = workload.engine_for(trace)        # its step cost, KV blocks, swap space
result = engine.run(scheduler, workload.requests_of(trace))
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import engine as _engine
from .engine import Engine, Request

TRACES = Path(__file__).parent / "traces"


def load(kind: str) -> dict[str, Any]:
    return json.loads((TRACES / f"{kind}.json").read_text())


def requests_of(trace: dict[str, Any], rate_scale: float = 1.0) -> list[Request]:
    """The trace's requests; `rate_scale` > 1 makes them arrive that many times faster."""
    if rate_scale <= 0:
        raise ValueError(f"rate_scale must be positive, got {rate_scale}")
    return [
        Request(i, arrival / rate_scale, prompt, output, max_tokens, priority)
        for i, arrival, prompt, output, max_tokens, priority in trace["requests"]
    ]


def engine_for(trace: dict[str, Any]) -> Engine:
    return Engine(
        getattr(_engine, trace["cost"]),
        num_blocks=trace["num_blocks"],
        block_size=trace["block_size"],
        num_cpu_blocks=trace["num_cpu_blocks"],
    )
