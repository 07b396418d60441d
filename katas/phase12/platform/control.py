"""The platform's control plane: jobs, nodes, the license, generation (the file you edit).

    platform = Platform(components, [NodeSpec("node-0", 8), ...], max_attempts=2)
    platform.submit({"name": "train-a", "gpus": 2})      # -> the job as API.md's JSON object

Every method answers the JSON object (a dict) of API.md, or raises components.ApiError(status,
sentence). routes.py calls them; the tests call them through HTTP only. Many request threads
call them at once: one lock around the state.

The rules (README, "The glue"):
- reconcile() first, in every method: poll the runner for every running job (done, failed),
  then place pending jobs, highest priority first, then oldest: the scheduler picks among the
  ready nodes (NodeView: free GPUs now); an answer that is not a ready node with enough free
  GPUs leaves the job pending.
- a lost node's running jobs are stopped and go back to pending while attempts < max_attempts
  (placed again at once), else they fail; nothing runs on a lost node, no job holds two nodes.
- the license's state comes from the clock: valid before expires_at, grace until
  expires_at + grace_s, expired from then on. Writes need their feature and a license that is
  not expired (403, before the body is looked at); reads never need one.
- generate() calls the serving component outside the lock: a generation takes as long as the
  model does, and meanwhile other generations run and every other request is answered.
"""

from __future__ import annotations

from typing import Any

from harness import todo

from .components import (  # noqa: F401  (what the glue uses)
    FEATURE_JOBS,
    FEATURE_SERVING,
    FINISHED_STATES,
    JOB_STATES,
    LICENSE_STATES,
    VERSION,
    ApiError,
    Components,
    JobView,
    NodeSpec,
    NodeView,
)


class Platform:
    def __init__(
        self, components: Components, nodes: list[NodeSpec], max_attempts: int = 2
    ) -> None:
        todo("Platform.__init__")

    # -------------------------------------------------------------- jobs (task jobs)
    def health(self) -> dict[str, Any]:
        """{"status": "ok", "version": VERSION}."""
        todo("Platform.health")

    def submit(self, body: object) -> dict[str, Any]:
        """Validate a job request (API.md), give it the next id, place it if it fits: the job."""
        todo("Platform.submit")

    def list_jobs(self, state: str | None = None) -> list[dict[str, Any]]:
        """Every job (or those in `state`), by id."""
        todo("Platform.list_jobs")

    def get_job(self, job_id: str) -> dict[str, Any]:
        todo("Platform.get_job")

    def cancel_job(self, job_id: str) -> dict[str, Any]:
        """Stop it if it runs; pending or running -> cancelled; 409 if already finished."""
        todo("Platform.cancel_job")

    def reconcile(self) -> None:
        """Runner outcomes in, then pending jobs placed (see the module's docstring)."""
        todo("Platform.reconcile")

    # -------------------------------------------------------------- nodes (task failover)
    def list_nodes(self) -> list[dict[str, Any]]:
        todo("Platform.list_nodes")

    def fail_node(self, name: str) -> dict[str, Any]:
        """The drill: the node is lost; its jobs are rescheduled or failed (max_attempts)."""
        todo("Platform.fail_node")

    # -------------------------------------------------------------- license (task license)
    def license(self) -> dict[str, Any]:
        """The license object of API.md, its state computed from the clock now."""
        todo("Platform.license")

    # -------------------------------------------------------------- serving (task serving)
    def generate(self, body: object) -> dict[str, Any]:
        """Validate, check the license, ask the serving component; record TTFT and tokens."""
        todo("Platform.generate")

    # -------------------------------------------------------------- metrics (task metrics)
    def observe_http(self, route: str, method: str, status: int, seconds: float) -> None:
        """Count one answered request (transport.py calls it before the answer goes out)."""
        todo("Platform.observe_http")

    def metrics(self) -> str:
        """The exposition text of API.md's table (metrics.py renders it)."""
        todo("Platform.metrics")

    def close(self) -> None:
        """Release whatever the platform started (threads, files): nothing may outlive it."""
        todo("Platform.close")
