"""Public tests, cpu tier: one worked example per task on a three-node cluster (8, 8 and 4
GPUs). The hidden tests check the same properties on random clusters, random job streams,
concurrent clients, random node losses and random license terms drawn from the run seed,
against a model of the platform written in the tests."""

from __future__ import annotations

import threading
from typing import Any

DAY = 86400.0


def test_jobs_submit_get_finish_cancel(make_live: Any) -> None:
    live = make_live()
    job = live.ok("POST", "/v1/jobs", {"name": "train-a", "gpus": 6}, want=201)
    assert job == {
        "id": "job-1",
        "name": "train-a",
        "gpus": 6,
        "priority": 0,
        "state": "running",
        "node": "node-0",
        "attempts": 1,
        "reason": None,
    }, f"POST /v1/jobs answered {job}"
    assert live.runner.starts == [("job-1", "node-0", 6)], "the runner should start job-1"
    # 6 of node-0's 8 are taken: a 4-GPU job goes to node-1 (first fit)
    second = live.ok("POST", "/v1/jobs", {"name": "eval-b", "gpus": 4, "priority": 3}, want=201)
    assert (second["id"], second["node"]) == ("job-2", "node-1"), f"second job: {second}"
    assert live.ok("GET", "/v1/jobs/job-1") == job, "GET /v1/jobs/job-1 should be the job"

    live.runner.finish("job-1", "done")
    assert live.ok("GET", "/v1/jobs/job-1")["state"] == "done", "job-1 finished: done"
    nodes = {n["name"]: n for n in live.ok("GET", "/v1/nodes")["nodes"]}
    assert nodes["node-0"]["allocated"] == 0, f"node-0 is free again: {nodes['node-0']}"

    cancelled = live.ok("DELETE", "/v1/jobs/job-2")
    assert cancelled["state"] == "cancelled" and cancelled["node"] is None, f"{cancelled}"
    assert live.runner.stops == ["job-2"], "cancelling a running job stops it"
    assert live.call("DELETE", "/v1/jobs/job-1").status == 409, "job-1 is already done: 409"
    assert live.call("GET", "/v1/jobs/job-9").status == 404, "no job-9: 404"
    bad = live.call("POST", "/v1/jobs", {"name": "x", "gpus": 0})
    assert bad.status == 400 and isinstance(bad.body.get("error"), str), f"gpus 0: {bad}"
    assert live.call("GET", "/v1/nope").status == 404, "an unknown path: 404"
    assert live.call("PUT", "/v1/jobs").status == 405, "PUT /v1/jobs: 405"
    listed = live.ok("GET", "/v1/jobs")["jobs"]
    assert [j["id"] for j in listed] == ["job-1", "job-2"], f"GET /v1/jobs: {listed}"


def test_failover_lost_node_reschedules(make_live: Any) -> None:
    live = make_live(nodes=[("node-0", 8), ("node-1", 8)], max_attempts=2)
    live.ok("POST", "/v1/jobs", {"name": "train-a", "gpus": 8}, want=201)
    live.ok("POST", "/v1/jobs", {"name": "train-b", "gpus": 2}, want=201)  # node-1
    node = live.ok("POST", "/v1/nodes/node-0/fail")
    assert (node["state"], node["allocated"], node["jobs"]) == ("lost", 0, []), f"{node}"
    # job-1 cannot fit next to job-2 on node-1 (8 + 2 > 8): it waits
    job1 = live.ok("GET", "/v1/jobs/job-1")
    assert (job1["state"], job1["node"], job1["attempts"]) == ("pending", None, 1), f"{job1}"
    live.runner.finish("job-2")
    job1 = live.ok("GET", "/v1/jobs/job-1")
    assert (job1["state"], job1["node"], job1["attempts"]) == ("running", "node-1", 2), f"{job1}"
    # lose node-1 too: job-1 has had its 2 attempts
    live.ok("POST", "/v1/nodes/node-1/fail")
    job1 = live.ok("GET", "/v1/jobs/job-1")
    assert job1["state"] == "failed" and job1["reason"], f"job-1 after 2 attempts: {job1}"
    assert live.call("POST", "/v1/nodes/node-1/fail").status == 409, "node-1 is already lost"


def test_license_grace_then_expired(make_live: Any, components: Any, kit: Any) -> None:
    live = make_live()
    t0 = live.clock.t
    live.licenser.current = kit.terms(components, now=t0, expires_in=10 * DAY, grace_s=7 * DAY)
    assert live.ok("GET", "/v1/license")["state"] == "valid"
    live.clock.t = t0 + 12 * DAY
    lic = live.ok("GET", "/v1/license")
    assert lic["state"] == "grace", f"2 days after expiry, 7 days of grace: {lic}"
    live.ok("POST", "/v1/jobs", {"name": "in-grace", "gpus": 1}, want=201)
    live.clock.t = t0 + 18 * DAY
    assert live.ok("GET", "/v1/license")["state"] == "expired"
    refused = live.call("POST", "/v1/jobs", {"name": "too-late", "gpus": 1})
    assert refused.status == 403, f"an expired license refuses new jobs: {refused}"
    assert live.call("GET", "/v1/jobs").status == 200, "reads go on after expiry"


def test_serving_generate(make_live: Any) -> None:
    live = make_live(ttft=lambda p, m: 0.05 + p / 10_000)
    gen = live.ok("POST", "/v1/generate", {"prompt_tokens": 2000, "max_tokens": 64})
    assert gen["tokens"] == 64 and abs(gen["ttft_s"] - 0.25) < 1e-9, f"generation: {gen}"
    assert live.call("POST", "/v1/generate", {"prompt_tokens": 10}).status == 400, (
        "max_tokens is missing: 400"
    )


def test_metrics_scrape(make_live: Any, kit: Any, promtool: str) -> None:
    live = make_live(ttft=lambda p, m: 0.3 if p < 1000 else 1.5)
    live.ok("POST", "/v1/jobs", {"name": "train-a", "gpus": 2}, want=201)
    for p in (100, 200, 5000):
        live.ok("POST", "/v1/generate", {"prompt_tokens": p, "max_tokens": 8})
    scraped = live.scrape()
    assert kit.sample(scraped, "platform_jobs", state="running") == 1.0, "one job runs"
    assert kit.sample(scraped, "platform_generate_ttft_seconds_count") == 3.0, "3 generations"
    assert kit.sample(scraped, "platform_generate_ttft_seconds_bucket", le="1.0") == 2.0, (
        "two of them within 1.0 s"
    )
    text = live.call("GET", "/metrics").text
    findings = kit.promtool_check_metrics(promtool, text)
    assert findings == [], f"promtool check metrics: {findings}"


def test_scenario_concurrent_submits(make_live: Any) -> None:
    live = make_live(nodes=[("node-0", 8), ("node-1", 8)])
    answers: list[Any] = []

    def client() -> None:
        for _ in range(5):
            answers.append(live.call("POST", "/v1/jobs", {"name": "burst", "gpus": 1}))

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    ids = sorted(a.body["id"] for a in answers if a.status == 201)
    assert len(ids) == 20 and len(set(ids)) == 20, f"20 submits, 20 distinct ids: {ids}"
    nodes = live.ok("GET", "/v1/nodes")["nodes"]
    assert all(n["allocated"] <= n["gpus"] for n in nodes), f"oversubscribed: {nodes}"
    assert sum(n["allocated"] for n in nodes) == 16, f"16 GPUs busy: {nodes}"
