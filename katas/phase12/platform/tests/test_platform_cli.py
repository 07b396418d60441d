"""Public tests of platformctl (cli/, CLI.md), tasks cli-commands and cli-errors: one worked example of
each. The CLI talks to a recording fake of the platform (the `fake_platform` fixture), never to
your service. The hidden tests check every command on random jobs, nodes, names and numbers
drawn from the run seed, and the errors on many more bad lines and broken servers."""

from __future__ import annotations

from typing import Any

JOB = {"id": "job-1", "name": "train-a", "gpus": 2, "priority": 0, "state": "running",
       "node": "node-0", "attempts": 1, "reason": None}  # fmt: skip


def test_cli_commands_health(cli: Any, fake_platform: Any) -> None:
    fake_platform.answer("GET", "/healthz", 200, {"status": "ok", "version": "1.0.0"})
    run = cli.run("--server", fake_platform.url, "health")
    assert run.code == 0, run.said()
    assert run.stdout.split() == ["ok", "1.0.0"], run.said()
    [req] = fake_platform.take()
    assert (req.method, req.target, req.body) == ("GET", "/healthz", b""), f"request: {req}"


def test_cli_commands_jobs_submit_sends_json_and_prints_the_job(cli: Any, fake_platform: Any, cli_kit: Any) -> None:  # fmt: skip
    fake_platform.answer("POST", "/v1/jobs", 201, JOB)
    run = cli.run("jobs", "submit", "train-a", "--gpus", "2", "--server", fake_platform.url)
    assert run.code == 0, run.said()
    [req] = fake_platform.take()
    assert (req.method, req.target) == ("POST", "/v1/jobs"), f"request: {req}"
    assert req.headers.get("content-type", "").startswith("application/json"), req.headers
    assert req.json() == {"name": "train-a", "gpus": 2}, f"body: {req.body!r}"
    rows = cli_kit.parse_table(run.stdout)
    assert rows == [{"ID": "job-1", "NAME": "train-a", "GPUS": "2", "PRIORITY": "0",
                     "STATE": "running", "NODE": "node-0", "ATTEMPTS": "1"}], run.said()  # fmt: skip


def test_cli_commands_json_prints_the_servers_answer(cli: Any, fake_platform: Any) -> None:
    import json

    answer = {"jobs": [JOB, {**JOB, "id": "job-2", "state": "pending", "node": None}]}
    fake_platform.answer("GET", "/v1/jobs?state=running", 200, answer)
    run = cli.run(f"--server={fake_platform.url}", "jobs", "list", "--state", "running", "--json")
    assert run.code == 0, run.said()
    assert json.loads(run.stdout) == answer, run.said()


def test_cli_errors_a_server_error_exits_1(cli: Any, fake_platform: Any) -> None:
    fake_platform.answer("GET", "/v1/jobs/job-9", 404, {"error": "no job job-9"})
    run = cli.run("--server", fake_platform.url, "jobs", "get", "job-9")
    assert run.code == 1, run.said()
    assert "no job job-9" in run.stderr and run.stdout == "", run.said()


def test_cli_errors_a_usage_error_exits_2_and_sends_nothing(cli: Any, fake_platform: Any) -> None:
    run = cli.run("--server", fake_platform.url, "jobs", "submit", "train-a", "--gpus", "two")
    assert run.code == 2, run.said()
    assert run.stdout == "" and fake_platform.take() == [], "a usage error sends no request"
