"""GIVEN (not graded): when each operation of a stream plan runs, on a model of a GPU.

The model has three engines, each doing one operation at a time: the host-to-device copy engine
("h2d"), the SMs ("kernel") and the device-to-host copy engine ("d2h"). Two rules decide when an
operation starts:

- stream order: after the previous operation of its stream has finished;
- engine order: after every operation issued earlier *to the same engine* has finished (each
  engine takes its work first in, first out, in the order the host issued it).

An operation takes `seconds_per_item[kind] * (stop - start) + overhead_s`. Real GPUs add launch
latencies, more than one copy engine per direction on some parts, and kernels from different
streams that share the SMs; the model keeps only what decides overlap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

KINDS = ("h2d", "kernel", "d2h")


@dataclass(frozen=True)
class Span:
    op: Any  # the Op (stream, kind, start, stop)
    begin: float
    end: float


def simulate(
    ops: Sequence[Any], seconds_per_item: Mapping[str, float], overhead_s: float = 0.0
) -> list[Span]:
    """Run `ops` (in issue order) on the three-engine model; one Span per op, same order."""
    stream_ready: dict[int, float] = {}
    engine_free = dict.fromkeys(KINDS, 0.0)
    spans = []
    for i, op in enumerate(ops):
        if op.kind not in KINDS:
            raise ValueError(f"ops[{i}].kind: must be one of {KINDS}, got {op.kind!r}")
        if op.stop < op.start:
            raise ValueError(f"ops[{i}]: stop {op.stop} < start {op.start}")
        begin = max(stream_ready.get(op.stream, 0.0), engine_free[op.kind])
        end = begin + seconds_per_item[op.kind] * (op.stop - op.start) + overhead_s
        stream_ready[op.stream] = engine_free[op.kind] = end
        spans.append(Span(op, begin, end))
    return spans


def makespan(spans: Sequence[Span]) -> float:
    """When the last operation finishes."""
    return max((s.end for s in spans), default=0.0)
