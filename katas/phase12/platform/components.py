"""The platform's parts, as the glue sees them (given: read it, do not edit it).

The platform composes five components. Each is a Protocol here, so the glue you write
(control.py, routes.py, metrics.py) depends on the contract, never on one implementation:

- Scheduler   picks a node for a job (phase 06's placement policies)
- Runner      runs a placed job (phase 09's HAL on its cpu backend)
- Serving     answers a generation request (phase 07's continuous-batching simulator)
- Licenser    hands over the verified license terms (phase 11's verifier)
- Clock       says what time it is (a fake one in tests: a license expires without a sleep)

wiring.py builds a Components from your earlier katas (or from the simple ones below); the
tests build their own. Nothing here is graded; everything here is what the grader's fakes obey.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

VERSION = "1.0.0"

JOB_STATES = ("pending", "running", "done", "failed", "cancelled")
FINISHED_STATES = ("done", "failed", "cancelled")
NODE_STATES = ("ready", "lost")
LICENSE_STATES = ("valid", "grace", "expired")

# The features a license must name for the write endpoints (reads never need one).
FEATURE_JOBS = "jobs"
FEATURE_SERVING = "serving"

# Histogram buckets (upper bounds, seconds; +Inf is implied).
HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
TTFT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

# The route templates of API.md, for the `route` label ("other" for anything else).
ROUTES = (
    "/healthz",
    "/v1/jobs",
    "/v1/jobs/{id}",
    "/v1/nodes",
    "/v1/nodes/{name}/fail",
    "/v1/generate",
    "/v1/license",
    "/metrics",
)

CONTENT_TYPE_JSON = "application/json"
CONTENT_TYPE_METRICS = "text/plain; version=0.0.4; charset=utf-8"


class ApiError(Exception):
    """An answer that is an error: `status` (4xx/5xx) and a one-sentence `message`.

    Raise it from Platform's methods; routes.route turns it into {"error": message}."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class NodeSpec:
    """A node of the cluster as configured: its name and how many GPUs it has."""

    name: str
    gpus: int


@dataclass(frozen=True)
class NodeView:
    """A ready node as the scheduler sees it: its GPUs and how many are free right now."""

    name: str
    gpus: int
    free: int


@dataclass(frozen=True)
class JobView:
    """A job to place, as the scheduler sees it."""

    id: str
    name: str
    gpus: int
    priority: int


@runtime_checkable
class Scheduler(Protocol):
    def place(self, job: JobView, nodes: list[NodeView]) -> str | None:
        """The name of the node (one of `nodes`) the job should run on, or None to wait."""
        ...


@runtime_checkable
class Runner(Protocol):
    def start(self, job_id: str, node: str, gpus: int) -> None:
        """Start the job on the node (its GPUs are reserved by the platform)."""
        ...

    def poll(self, job_id: str) -> str:
        """ "running", "done" or "failed": what became of a started job."""
        ...

    def stop(self, job_id: str) -> None:
        """Stop a started job (cancelled, or its node was lost); stopping twice is harmless."""
        ...


@dataclass(frozen=True)
class Generation:
    """One generation: time to first token, time per output token (seconds), tokens out."""

    ttft_s: float
    tpot_s: float
    tokens: int


@runtime_checkable
class Serving(Protocol):
    def generate(self, prompt_tokens: int, max_tokens: int) -> Generation: ...


@dataclass(frozen=True)
class LicenseTerms:
    """What a verified license grants: who, which features, until when (unix seconds), and
    how long the grace period after expiry lasts (seconds)."""

    licensee: str
    features: frozenset[str]
    expires_at: float
    grace_s: float


@runtime_checkable
class Licenser(Protocol):
    def terms(self) -> LicenseTerms:
        """The terms of the installed, verified license."""
        ...


@runtime_checkable
class Clock(Protocol):
    def now(self) -> float:
        """Unix seconds."""
        ...


@dataclass
class Components:
    scheduler: Scheduler
    runner: Runner
    serving: Serving
    licenser: Licenser
    clock: Clock


# ------------------------------------------------------------------ simple implementations
# Enough to run the platform by hand (wiring.py falls back to them); the graders use their own.


class FirstFit:
    """The first node (in the order given) with enough free GPUs."""

    def place(self, job: JobView, nodes: list[NodeView]) -> str | None:
        for n in nodes:
            if n.free >= job.gpus:
                return n.name
        return None


@dataclass
class ManualRunner:
    """Jobs run until someone calls finish(job_id, "done" | "failed")."""

    states: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, job_id: str, node: str, gpus: int) -> None:
        with self.lock:
            self.states[job_id] = "running"

    def poll(self, job_id: str) -> str:
        with self.lock:
            return self.states.get(job_id, "failed")

    def stop(self, job_id: str) -> None:
        with self.lock:
            self.states.pop(job_id, None)

    def finish(self, job_id: str, outcome: str = "done") -> None:
        with self.lock:
            if job_id in self.states:
                self.states[job_id] = outcome


@dataclass(frozen=True)
class RooflineServing:
    """Prefill is compute-bound, decode memory-bound: TTFT = overhead + prompt x per_prompt,
    TPOT = per_token (an H100 serving a 7B model in fp16 is near these numbers)."""

    overhead_s: float = 0.02
    per_prompt_token_s: float = 0.00012
    per_output_token_s: float = 0.012

    def generate(self, prompt_tokens: int, max_tokens: int) -> Generation:
        return Generation(
            ttft_s=self.overhead_s + prompt_tokens * self.per_prompt_token_s,
            tpot_s=self.per_output_token_s,
            tokens=max_tokens,
        )


@dataclass(frozen=True)
class StaticLicenser:
    """Terms given as they are (no signature: for running by hand only)."""

    given: LicenseTerms

    def terms(self) -> LicenseTerms:
        return self.given


@dataclass
class ManualClock:
    """A clock that moves only when told to."""

    t: float = 1_767_225_600.0  # 2026-01-01T00:00:00Z

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds
