"""The platform's control plane: jobs, nodes, the license, generation (the reference)."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

from .components import (
    FEATURE_JOBS,
    FEATURE_SERVING,
    FINISHED_STATES,
    HTTP_BUCKETS,
    JOB_STATES,
    LICENSE_STATES,
    TTFT_BUCKETS,
    VERSION,
    ApiError,
    Components,
    JobView,
    NodeSpec,
    NodeView,
)
from .metrics import Histogram, escape, family

NAME = re.compile(r"[a-z][a-z0-9-]{0,62}")


@dataclass
class _Job:
    seq: int
    id: str
    name: str
    gpus: int
    priority: int
    state: str = "pending"
    node: str | None = None
    attempts: int = 0
    reason: str | None = None

    def json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "gpus": self.gpus,
            "priority": self.priority,
            "state": self.state,
            "node": self.node,
            "attempts": self.attempts,
            "reason": self.reason,
        }


@dataclass
class _Node:
    name: str
    gpus: int
    state: str = "ready"
    allocated: int = 0


def _is_int(v: object) -> bool:
    return type(v) is int  # a bool is not a count


def _fields(body: object, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict:
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    missing = [k for k in required if k not in body]
    if missing:
        raise ApiError(400, f"the request body lacks {', '.join(missing)}")
    unknown = sorted(set(body) - set(required) - set(optional))
    if unknown:
        raise ApiError(400, f"the request body has unknown fields: {', '.join(unknown)}")
    return body


class Platform:
    def __init__(
        self, components: Components, nodes: list[NodeSpec], max_attempts: int = 2
    ) -> None:
        self.c = components
        self.max_attempts = max_attempts
        self.lock = threading.RLock()
        self.nodes = {n.name: _Node(n.name, n.gpus) for n in nodes}
        self.jobs: dict[str, _Job] = {}
        self.seq = 0
        self.submitted = 0
        self.rescheduled = 0
        self.tokens = 0
        self.ttft = Histogram(TTFT_BUCKETS)
        self.http_count: dict[tuple[str, str, str], int] = {}
        self.http_latency: dict[str, Histogram] = {}

    # -------------------------------------------------------------- jobs
    def health(self) -> dict[str, Any]:
        return {"status": "ok", "version": VERSION}

    def submit(self, body: object) -> dict[str, Any]:
        with self.lock:
            self._reconcile()
            self._require(FEATURE_JOBS)
            b = _fields(body, ("name", "gpus"), ("priority",))
            name, gpus, priority = b["name"], b["gpus"], b.get("priority", 0)
            if not isinstance(name, str) or NAME.fullmatch(name) is None:
                raise ApiError(400, "name must be a DNS label: [a-z][a-z0-9-]*, 1-63 characters")
            if not _is_int(gpus) or gpus < 1:
                raise ApiError(400, "gpus must be an integer >= 1")
            largest = max((n.gpus for n in self.nodes.values()), default=0)
            if gpus > largest:
                raise ApiError(400, f"gpus {gpus} fits on no node (the largest has {largest})")
            if not _is_int(priority) or not 0 <= priority <= 9:
                raise ApiError(400, "priority must be an integer 0..9")
            self.seq += 1
            job = _Job(self.seq, f"job-{self.seq}", name, gpus, priority)
            self.jobs[job.id] = job
            self.submitted += 1
            self._reconcile()
            return job.json()

    def list_jobs(self, state: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            if state is not None and state not in JOB_STATES:
                raise ApiError(400, f"unknown state {state!r}: one of {', '.join(JOB_STATES)}")
            self._reconcile()
            return [j.json() for j in self._ordered() if state is None or j.state == state]

    def get_job(self, job_id: str) -> dict[str, Any]:
        with self.lock:
            self._reconcile()
            return self._job(job_id).json()

    def cancel_job(self, job_id: str) -> dict[str, Any]:
        with self.lock:
            self._reconcile()
            job = self._job(job_id)
            if job.state in FINISHED_STATES:
                raise ApiError(409, f"{job_id} is already {job.state}")
            if job.state == "running":
                self.c.runner.stop(job.id)
                self._release(job)
            job.state, job.reason = "cancelled", "cancelled by a DELETE request"
            self._reconcile()
            return job.json()

    def reconcile(self) -> None:
        with self.lock:
            self._reconcile()

    def _ordered(self) -> list[_Job]:
        return sorted(self.jobs.values(), key=lambda j: j.seq)

    def _job(self, job_id: str) -> _Job:
        job = self.jobs.get(job_id)
        if job is None:
            raise ApiError(404, f"no job {job_id!r}")
        return job

    def _release(self, job: _Job) -> None:
        if job.node is not None:
            self.nodes[job.node].allocated -= job.gpus
        job.node = None

    def _reconcile(self) -> None:
        for job in self._ordered():
            if job.state != "running":
                continue
            outcome = self.c.runner.poll(job.id)
            if outcome == "done":
                self._release(job)
                job.state = "done"
            elif outcome == "failed":
                node = job.node
                self._release(job)
                job.state, job.reason = "failed", f"the runner reported a failure on {node}"
        pending = [j for j in self.jobs.values() if j.state == "pending"]
        for job in sorted(pending, key=lambda j: (-j.priority, j.seq)):
            ready = [n for n in sorted(self.nodes.values(), key=lambda n: n.name)]
            views = [
                NodeView(n.name, n.gpus, n.gpus - n.allocated) for n in ready if n.state == "ready"
            ]
            if not any(v.free >= job.gpus for v in views):
                continue
            choice = self.c.scheduler.place(
                JobView(job.id, job.name, job.gpus, job.priority), views
            )
            node = self.nodes.get(choice) if isinstance(choice, str) else None
            if node is None or node.state != "ready" or node.gpus - node.allocated < job.gpus:
                continue  # the scheduler only proposes
            node.allocated += job.gpus
            job.state, job.node, job.reason = "running", node.name, None
            job.attempts += 1
            self.c.runner.start(job.id, node.name, job.gpus)

    # -------------------------------------------------------------- nodes
    def _node_json(self, n: _Node) -> dict[str, Any]:
        jobs = [j.id for j in self._ordered() if j.state == "running" and j.node == n.name]
        return {
            "name": n.name,
            "gpus": n.gpus,
            "allocated": n.allocated,
            "state": n.state,
            "jobs": jobs,
        }

    def list_nodes(self) -> list[dict[str, Any]]:
        with self.lock:
            self._reconcile()
            return [self._node_json(self.nodes[k]) for k in sorted(self.nodes)]

    def fail_node(self, name: str) -> dict[str, Any]:
        with self.lock:
            self._reconcile()
            node = self.nodes.get(name)
            if node is None:
                raise ApiError(404, f"no node {name!r}")
            if node.state == "lost":
                raise ApiError(409, f"node {name} is already lost")
            node.state = "lost"
            for job in self._ordered():
                if job.state != "running" or job.node != name:
                    continue
                self.c.runner.stop(job.id)
                self._release(job)
                if job.attempts < self.max_attempts:
                    job.state = "pending"
                    self.rescheduled += 1
                else:
                    job.state = "failed"
                    job.reason = f"node {name} lost after {job.attempts} attempts"
            node.allocated = 0
            self._reconcile()
            return self._node_json(node)

    # -------------------------------------------------------------- license
    def _license(self) -> tuple[str, Any]:
        t = self.c.licenser.terms()
        now = self.c.clock.now()
        if now < t.expires_at:
            return "valid", t
        if now < t.expires_at + t.grace_s:
            return "grace", t
        return "expired", t

    def _require(self, feature: str) -> None:
        state, t = self._license()
        if state == "expired":
            raise ApiError(403, "the license has expired (its grace period is over)")
        if feature not in t.features:
            raise ApiError(403, f"the license does not include the feature {feature!r}")

    def license(self) -> dict[str, Any]:
        with self.lock:
            state, t = self._license()
            return {
                "state": state,
                "licensee": t.licensee,
                "features": sorted(t.features),
                "expires_at": float(t.expires_at),
                "grace_ends_at": float(t.expires_at + t.grace_s),
            }

    # -------------------------------------------------------------- serving
    def generate(self, body: object) -> dict[str, Any]:
        with self.lock:
            self._require(FEATURE_SERVING)
            b = _fields(body, ("prompt_tokens", "max_tokens"))
            for k in ("prompt_tokens", "max_tokens"):
                if not _is_int(b[k]) or b[k] < 1:
                    raise ApiError(400, f"{k} must be an integer >= 1")
        # the simulator runs outside the lock: generations overlap as on a real server
        g = self.c.serving.generate(b["prompt_tokens"], b["max_tokens"])
        with self.lock:
            self.ttft.observe(float(g.ttft_s))
            self.tokens += int(g.tokens)
        return {"ttft_s": float(g.ttft_s), "tpot_s": float(g.tpot_s), "tokens": int(g.tokens)}

    # -------------------------------------------------------------- metrics
    def observe_http(self, route: str, method: str, status: int, seconds: float) -> None:
        with self.lock:
            key = (route, method, str(status))
            self.http_count[key] = self.http_count.get(key, 0) + 1
            h = self.http_latency.setdefault(route, Histogram(HTTP_BUCKETS))
            h.observe(seconds)

    def metrics(self) -> str:
        with self.lock:
            self._reconcile()
            state, t = self._license()
            nodes = [self.nodes[k] for k in sorted(self.nodes)]
            by_state = {s: 0 for s in JOB_STATES}
            for j in self.jobs.values():
                by_state[j.state] += 1

            def node_samples(metric: str, value: Any) -> list[str]:
                return [f'{metric}{{node="{escape(n.name)}"}} {value(n)}' for n in nodes]

            out = [
                family(
                    "platform_build_info",
                    "gauge",
                    "The platform's version (always 1).",
                    [f'platform_build_info{{version="{escape(VERSION)}"}} 1'],
                ),
                family(
                    "platform_node_up",
                    "gauge",
                    "1 when the node is ready, 0 when it is lost.",
                    node_samples("platform_node_up", lambda n: int(n.state == "ready")),
                ),
                family(
                    "platform_node_gpus",
                    "gauge",
                    "GPUs of the node.",
                    node_samples("platform_node_gpus", lambda n: n.gpus),
                ),
                family(
                    "platform_node_gpus_allocated",
                    "gauge",
                    "GPUs of the node held by running jobs.",
                    node_samples("platform_node_gpus_allocated", lambda n: n.allocated),
                ),
                family(
                    "platform_jobs",
                    "gauge",
                    "Jobs by state.",
                    [f'platform_jobs{{state="{s}"}} {by_state[s]}' for s in JOB_STATES],
                ),
                family(
                    "platform_jobs_submitted_total",
                    "counter",
                    "Jobs accepted.",
                    [f"platform_jobs_submitted_total {self.submitted}"],
                ),
                family(
                    "platform_jobs_rescheduled_total",
                    "counter",
                    "Jobs put back to pending because their node was lost.",
                    [f"platform_jobs_rescheduled_total {self.rescheduled}"],
                ),
                family(
                    "platform_http_requests_total",
                    "counter",
                    "HTTP requests answered, by route template, method and status code.",
                    [
                        f'platform_http_requests_total{{route="{escape(r)}",method="{escape(m)}",'
                        f'code="{c}"}} {v}'
                        for (r, m, c), v in sorted(self.http_count.items())
                    ],
                ),
                family(
                    "platform_http_request_duration_seconds",
                    "histogram",
                    "Wall time of HTTP requests, by route template.",
                    [
                        line
                        for r, h in sorted(self.http_latency.items())
                        for line in h.lines("platform_http_request_duration_seconds", {"route": r})
                    ],
                ),
                family(
                    "platform_generate_ttft_seconds",
                    "histogram",
                    "Time to first token of successful generations.",
                    self.ttft.lines("platform_generate_ttft_seconds"),
                ),
                family(
                    "platform_generate_tokens_total",
                    "counter",
                    "Tokens generated.",
                    [f"platform_generate_tokens_total {self.tokens}"],
                ),
                family(
                    "platform_license_state",
                    "gauge",
                    "1 for the license's current state (valid, grace, expired), 0 for the others.",
                    [
                        f'platform_license_state{{state="{s}"}} {int(s == state)}'
                        for s in LICENSE_STATES
                    ],
                ),
                family(
                    "platform_license_expiry_timestamp_seconds",
                    "gauge",
                    "When the license expires (unix seconds); the grace period follows.",
                    [f"platform_license_expiry_timestamp_seconds {float(t.expires_at)!r}"],
                ),
            ]
            return "".join(out)

    def close(self) -> None:
        """Nothing to release: the platform starts no thread and opens no file."""
