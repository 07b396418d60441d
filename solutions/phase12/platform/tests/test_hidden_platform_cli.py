"""Hidden tests of platformctl (tasks cli-commands and cli-errors): every command on random
names, ids and numbers from the run seed against a recording fake of the platform; the tables
and lines on random jobs, nodes and licenses; the exit statuses on random server errors, a
catalogue of bad command lines, an unreachable server, a server that never answers and one that
answers HTML."""

from __future__ import annotations

import json
import string
from datetime import UTC, datetime
from typing import Any

import pytest

JOB_STATES = ("pending", "running", "done", "failed", "cancelled")
# Characters an id or name from a user may hold that mean something in a URL.
RESERVED = "/?#%&=+ :@;,$!'()*[]"


def _label(rng: Any, n: int | None = None) -> str:
    """A random DNS label (a job or node name)."""
    n = n or int(rng.integers(1, 20))
    first = string.ascii_lowercase[int(rng.integers(0, 26))]
    rest = "".join(rng.choice(list(string.ascii_lowercase + string.digits + "-"), size=n - 1))
    return (first + rest).rstrip("-") or first


def _awkward(rng: Any) -> str:
    """A random id with reserved URL characters in it (never empty, '.' or '..')."""
    parts = [_label(rng, int(rng.integers(1, 5)))]
    for _ in range(int(rng.integers(1, 4))):
        parts.append(str(rng.choice(list(RESERVED))))
        parts.append(_label(rng, int(rng.integers(1, 4))))
    return "".join(parts)


def _job(rng: Any, i: int) -> dict[str, Any]:
    state = str(rng.choice(JOB_STATES))
    running = state == "running"
    return {"id": f"job-{i}", "name": _label(rng), "gpus": int(rng.integers(1, 9)),
            "priority": int(rng.integers(0, 10)), "state": state,
            "node": f"node-{int(rng.integers(0, 6))}" if running else None,
            "attempts": int(rng.integers(0 if state == "pending" else 1, 4)),
            "reason": None if state != "failed" else "node node-1 lost after 3 attempts"}  # fmt: skip


def _jobs(rng: Any, n: int) -> list[dict[str, Any]]:
    ids = rng.permutation(range(1, 10 * n + 2))[:n]  # the server's order, not sorted by id
    return [_job(rng, int(i)) for i in ids]


def _node(rng: Any, i: int) -> dict[str, Any]:
    lost = bool(rng.random() < 0.3)
    jobs = [] if lost else [f"job-{int(j)}" for j in rng.permutation(40)[: int(rng.integers(0, 4))]]
    gpus = int(rng.choice([4, 8, 16]))
    return {"name": f"{_label(rng, 5)}-{i}", "gpus": gpus,
            "allocated": 0 if lost else int(rng.integers(0, gpus + 1)),
            "state": "lost" if lost else "ready", "jobs": jobs}  # fmt: skip


def _run_one(cli: Any, fake: Any, *args: str) -> tuple[Any, Any]:
    run = cli.run("--server", fake.url, *args)
    got = fake.take()
    assert len(got) == 1, f"{run.said()}: it sent {len(got)} requests, expected exactly one"
    return run, got[0]


def _check_request(req: Any, run: Any, method: str, target: str, body: Any) -> None:
    where = run.said()
    assert (req.method, req.target) == (method, target), (
        f"{where}: it asked {req.method} {req.target}, expected {method} {target}"
    )
    if body is None:
        assert req.body == b"", f"{where}: a {method} without a body sent {req.body[:200]!r}"
        return
    ctype = req.headers.get("content-type", "")
    assert ctype.split(";")[0].strip() == "application/json", (
        f"{where}: the body's Content-Type is {ctype!r}, expected application/json"
    )
    try:
        sent = req.json()
    except ValueError:
        raise AssertionError(f"{where}: the body {req.body[:200]!r} is not JSON") from None
    assert sent == body and _types(sent) == _types(body), (
        f"{where}: the body was {req.body[:300]!r}, expected {json.dumps(body)}"
    )


def _types(value: Any) -> Any:
    """The value with each leaf replaced by its type (2 == 2.0 == True in Python, not in JSON)."""
    if isinstance(value, dict):
        return {k: _types(v) for k, v in value.items()}
    return type(value).__name__


# ------------------------------------------------------------------------------ cli-commands
def _place(rng: Any, words: list[str], options: list[list[str]]) -> list[str]:
    """`words` with each option (["--server", URL] or ["--server=URL"]) put at a random place:
    options may come anywhere on the line (CLI.md)."""
    units = [[w] for w in words]
    for opt in options:  # an option and its value stay together
        at = int(rng.integers(0, len(units) + 1))
        units.insert(at, opt)
    return [w for unit in units for w in unit]


def _server(rng: Any, url: str) -> list[str]:
    return ["--server", url] if rng.random() < 0.5 else [f"--server={url}"]


@pytest.mark.kata_gate("a command sends another method, path or body than CLI.md's table, or --json prints another document than the answer, on random arguments with the options anywhere")  # fmt: skip
def test_cli_commands_every_request_on_random_arguments(cli: Any, fake_platform: Any, kata_rng: Any) -> None:  # fmt: skip
    rng = kata_rng
    jobs = _jobs(rng, int(rng.integers(0, 6)))
    job = _job(rng, int(rng.integers(1, 99)))
    name, gpus = _label(rng), int(rng.integers(1, 2**40))
    prio = int(rng.integers(-5, 20))
    jid, node = f"job-{int(rng.integers(1, 10**6))}", f"{_label(rng, 6)}-{int(rng.integers(0, 99))}"
    state = str(rng.choice(JOB_STATES))
    pt, mt = int(rng.integers(1, 10**6)), int(rng.integers(1, 10**6))
    nodes = {"nodes": [_node(rng, i) for i in range(int(rng.integers(1, 5)))]}
    gen = {"ttft_s": float(rng.random()), "tpot_s": float(rng.random() / 50), "tokens": int(rng.integers(1, 999))}  # fmt: skip
    lic = {"state": str(rng.choice(["valid", "grace", "expired"])), "licensee": _label(rng),
           "features": ["jobs"], "expires_at": 1.5e9, "grace_ends_at": 1.6e9}  # fmt: skip
    health = {"status": "ok", "version": f"1.{int(rng.integers(0, 9))}.0"}
    # words, gpus option (placed anywhere), method, target, body, answer
    cases: list[tuple[list[str], list[list[str]], str, str, Any, Any]] = [
        (["health"], [], "GET", "/healthz", None, health),
        (["jobs", "list"], [], "GET", "/v1/jobs", None, {"jobs": jobs}),
        (
            ["jobs", "list"],
            [["--state", state]],
            "GET",
            f"/v1/jobs?state={state}",
            None,
            {"jobs": jobs[:1]},
        ),  # fmt: skip
        (
            ["jobs", "submit", name],
            [[f"--gpus={gpus}"]],
            "POST",
            "/v1/jobs",
            {"name": name, "gpus": gpus},
            job,
        ),  # fmt: skip
        (
            ["jobs", "submit", name],
            [["--priority", str(prio)], ["--gpus", str(gpus)]],
            "POST",
            "/v1/jobs",
            {"name": name, "gpus": gpus, "priority": prio},
            job,
        ),  # fmt: skip
        (["jobs", "get", jid], [], "GET", f"/v1/jobs/{jid}", None, job),
        (
            ["jobs", "cancel", jid],
            [],
            "DELETE",
            f"/v1/jobs/{jid}",
            None,
            {**job, "state": "cancelled"},
        ),  # fmt: skip
        (["nodes", "list"], [], "GET", "/v1/nodes", None, nodes),
        (["nodes", "fail", node], [], "POST", f"/v1/nodes/{node}/fail", {}, nodes["nodes"][0]),
        (
            ["generate"],
            [["--max-tokens", str(mt)], ["--prompt-tokens", str(pt)]],
            "POST",
            "/v1/generate",
            {"prompt_tokens": pt, "max_tokens": mt},
            gen,
        ),  # fmt: skip
        (["license"], [], "GET", "/v1/license", None, lic),
    ]
    by_env = int(rng.integers(0, len(cases)))  # one run finds the server in $PLATFORM_URL
    for i, (words, options, method, target, body, answer) in enumerate(cases):
        fake_platform.answer(method, target, 201 if target == "/v1/jobs" and method == "POST" else 200, answer)  # fmt: skip
        as_json = i % 2 == int(rng.integers(0, 2))
        server = [] if i == by_env else [_server(rng, fake_platform.url)]
        line = _place(rng, words, [*options, *server, *([["--json"]] if as_json else [])])
        run = cli.run(*line, env={"PLATFORM_URL": fake_platform.url} if i == by_env else None)
        got = fake_platform.take()
        env = f" (PLATFORM_URL={fake_platform.url}, no --server)" if i == by_env else ""
        assert len(got) == 1, (
            f"{run.said()}{env}: it sent {len(got)} requests, expected exactly one"
        )
        _check_request(got[0], run, method, target, body)
        assert run.code == 0, f"{run.said()}: the server answered 2xx, expected exit 0"
        if as_json:
            try:
                printed = json.loads(run.stdout)
            except ValueError:
                raise AssertionError(f"{run.said()}: --json printed something that is not one JSON document") from None  # fmt: skip
            assert printed == answer, f"{run.said()}: --json printed {printed}, the server answered {answer}"  # fmt: skip


@pytest.mark.kata_gate("an id, node name or state with URL characters ('/', '?', '#', '%', ...) is not percent-encoded in the request")  # fmt: skip
def test_cli_commands_path_arguments_are_percent_encoded(cli: Any, fake_platform: Any, kata_rng: Any, cli_kit: Any) -> None:  # fmt: skip
    enc = cli_kit.encode_segment
    jid, node, state = _awkward(kata_rng), _awkward(kata_rng), _awkward(kata_rng)
    cases = [
        (["jobs", "get", jid], "GET", f"/v1/jobs/{enc(jid)}"),
        (["jobs", "cancel", jid], "DELETE", f"/v1/jobs/{enc(jid)}"),
        (["nodes", "fail", node], "POST", f"/v1/nodes/{enc(node)}/fail"),
        (["jobs", "list", "--state", state], "GET", f"/v1/jobs?state={enc(state)}"),
    ]
    for args, method, target in cases:
        fake_platform.answer(method, target, 200, {"jobs": []} if "list" in args else _job(kata_rng, 1))  # fmt: skip
        run, req = _run_one(cli, fake_platform, *args)
        assert req.method == method and _same_target(req.target, target), (
            f"{run.said()}: it asked {req.method} {req.target}, expected {method} {target} "
            f"(the argument {args[-1]!r} percent-encoded as encodeURIComponent does; any "
            "encoding that decodes to the same path segments and query value is accepted)"
        )


def _same_target(got: str, want: str) -> bool:
    """The same request target once decoded: the same path segments (a '/' or '?' left raw
    splits them differently) and query pairs. Encodings differ honestly: WHATWG URL (node's
    URL, fetch) also escapes ' in a query, URLSearchParams writes a space as '+'."""
    import urllib.parse as up

    def parts(target: str, decode: Any) -> tuple[list[str], list[tuple[str, str]]]:
        path, _, query = target.partition("?")
        pairs = [kv.partition("=") for kv in query.split("&")] if query else []
        return [up.unquote(x) for x in path.split("/")], [
            (decode(k), decode(v)) for k, _, v in pairs
        ]

    return "#" not in got and parts(want, up.unquote) in (
        parts(got, up.unquote),
        parts(got, up.unquote_plus),
    )


@pytest.mark.kata_gate("the jobs or nodes table does not show the server's rows, in its order, with their fields")  # fmt: skip
def test_cli_commands_tables_on_random_jobs_and_nodes(cli: Any, fake_platform: Any, kata_rng: Any, cli_kit: Any) -> None:  # fmt: skip
    rng = kata_rng
    jobs = _jobs(rng, int(rng.integers(2, 8)))
    nodes = [_node(rng, i) for i in rng.permutation(8)[: int(rng.integers(2, 6))]]

    def cells(v: Any) -> str:
        return "-" if v is None else str(v)

    want_jobs = [{"ID": j["id"], "NAME": j["name"], "GPUS": str(j["gpus"]), "PRIORITY": str(j["priority"]),
                  "STATE": j["state"], "NODE": cells(j["node"]), "ATTEMPTS": str(j["attempts"])} for j in jobs]  # fmt: skip
    want_nodes = [{"NAME": n["name"], "GPUS": str(n["gpus"]), "ALLOCATED": str(n["allocated"]),
                   "STATE": n["state"], "JOBS": ",".join(n["jobs"]) or "-"} for n in nodes]  # fmt: skip
    fake_platform.answer("GET", "/v1/jobs", 200, {"jobs": jobs})
    fake_platform.answer("GET", "/v1/nodes", 200, {"nodes": nodes})
    fake_platform.answer("DELETE", f"/v1/jobs/{jobs[0]['id']}", 200, jobs[0])
    fake_platform.answer("POST", f"/v1/nodes/{nodes[0]['name']}/fail", 200, nodes[0])
    for args, want in ((["jobs", "list"], want_jobs), (["nodes", "list"], want_nodes),
                       (["jobs", "cancel", jobs[0]["id"]], want_jobs[:1]),
                       (["nodes", "fail", nodes[0]["name"]], want_nodes[:1])):  # fmt: skip
        run, _ = _run_one(cli, fake_platform, *args)
        assert run.code == 0, run.said()
        header = run.stdout.splitlines()[0].split() if run.stdout.strip() else []
        assert header == list(want[0]), f"{run.said()}: the header is {header}, expected {list(want[0])}"  # fmt: skip
        rows = cli_kit.parse_table(run.stdout)
        assert rows == want, f"{run.said()}: the rows are {rows}, expected {want} (the server's order)"  # fmt: skip


@pytest.mark.kata_gate("the health, generate or license line is not CLI.md's on a random answer")
def test_cli_commands_lines_for_health_generate_license(cli: Any, fake_platform: Any, kata_rng: Any) -> None:  # fmt: skip
    rng = kata_rng
    version = f"{int(rng.integers(0, 9))}.{int(rng.integers(0, 30))}.{int(rng.integers(0, 30))}"
    # Numbers that Python's repr and JavaScript's String() write alike (no exponent, no
    # trailing .0), and times whose milliseconds are exact in binary (Date truncates).
    digits = int(rng.integers(1, 5))
    ttft = int(rng.integers(1, 10**digits)) / 10**digits
    ttft = ttft if repr(ttft) == f"{ttft:.{digits}f}".rstrip("0") else 0.5
    gen = {"ttft_s": ttft, "tpot_s": 0.025, "tokens": int(rng.integers(1, 4096))}
    expires = float(rng.integers(1.7e9, 2.0e9)) + float(rng.choice([0, 0.25, 0.5, 0.75]))
    features = sorted({str(f) for f in rng.choice(["jobs", "serving", "metrics"], size=int(rng.integers(0, 3)))})  # fmt: skip
    lic = {"state": "grace", "licensee": _label(rng), "features": features, "expires_at": expires,
           "grace_ends_at": expires + 7 * 86400}  # fmt: skip

    def iso(t: float) -> str:
        return datetime.fromtimestamp(round(t * 1000) / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"  # fmt: skip

    cases = [
        (["health"], "GET", "/healthz", {"status": "ok", "version": version}, f"ok {version}"),
        (
            ["generate", "--prompt-tokens", "3", "--max-tokens", "4"],
            "POST",
            "/v1/generate",
            gen,
            f"tokens={gen['tokens']} ttft_s={gen['ttft_s']!r} tpot_s=0.025",
        ),  # fmt: skip
        (
            ["license"],
            "GET",
            "/v1/license",
            lic,
            f"state=grace licensee={lic['licensee']} features={','.join(features) or '-'} "
            f"expires_at={iso(expires)} grace_ends_at={iso(expires + 7 * 86400)}",
        ),  # fmt: skip
    ]
    for args, method, target, answer, line in cases:
        fake_platform.answer(method, target, 200, answer)
        run, _ = _run_one(cli, fake_platform, *args)
        assert run.code == 0, run.said()
        assert run.stdout.split() == line.split(), f"{run.said()}: expected the line {line!r}"


# ------------------------------------------------------------------------------ cli-errors
@pytest.mark.kata_gate("a 4xx or 5xx answer does not exit 1 with the answer's error sentence on stderr and nothing on stdout")  # fmt: skip
def test_cli_errors_random_server_errors(cli: Any, fake_platform: Any, kata_rng: Any) -> None:
    statuses = [int(kata_rng.choice([400, 403, 404, 405, 409, 422, 429])), int(kata_rng.integers(400, 500)),
                int(kata_rng.choice([500, 502, 503, 504])), int(kata_rng.integers(500, 600))]  # fmt: skip
    for status in statuses:
        sentence = (
            f"{_label(kata_rng)} refused: {_label(kata_rng)} {int(kata_rng.integers(0, 10**6))}"
        )
        fake_platform.answer("POST", "/v1/jobs", status, {"error": sentence})
        run, _ = _run_one(cli, fake_platform, "jobs", "submit", "a", "--gpus", "1")
        assert run.code == 1, f"{run.said()}: the server answered {status}, expected exit 1"
        line = _one_error_line(run, f"the server answered {status}")
        want = f"error: {sentence} (HTTP {status})"
        assert line.strip() == want, f"{run.said()}: stderr should be {want!r}"
        assert run.stdout == "", f"{run.said()}: stdout should be empty on an error"


def _one_error_line(run: Any, what: str) -> str:
    """The run's stderr, which CLI.md says is one `error: ...` line (not a stack trace)."""
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), (
        f"{run.said()}: {what}; stderr should be one line `error: ...`, it has {len(lines)} lines"
    )
    return lines[0]


# Integers CLI.md refuses that parseInt() takes (a number, then more) and that Number() takes.
PARSEINT_TAKES = ("{n}.5", "{n}gpus", "{n},0", "{n}e2", "{n}.0", "{n} {n}")
NUMBER_TAKES = ("0x{n:x}", "+{n}", " {n}", "", "{n}e2", "{n}.0", "1e{d}", "99999999999999999999")


def _bad_integer(rng: Any, family: tuple[str, ...]) -> str:
    n, d = int(rng.integers(1, 1000)), int(rng.integers(1, 9))
    return str(rng.choice(family)).format(n=n, d=d)


@pytest.mark.kata_gate("a bad command line does not exit 2, prints on stdout, or sends a request")  # fmt: skip
def test_cli_errors_usage_errors_send_nothing(cli: Any, fake_platform: Any, kata_rng: Any) -> None:  # fmt: skip
    rng = kata_rng
    name, n = _label(rng), str(int(rng.integers(1, 99)))
    # Three commands given one argument too many (each command counts its own).
    every = [["health"], ["license"], ["generate", "--prompt-tokens", n, "--max-tokens", n],
             ["jobs", "list"], ["jobs", "submit", name], ["jobs", "get", "job-1"],
             ["jobs", "cancel", "job-1"], ["nodes", "list"], ["nodes", "fail", "node-1"]]  # fmt: skip
    extra_args = [(every[int(i)], [_label(rng)]) for i in rng.permutation(len(every))[:3]]
    # CLI.md's usage errors by class; one random line of each group of a class (a class whose
    # lines a common parser takes only some of has a group for each: parseInt's, Number's).
    classes: dict[str, list[list[list[str]]]] = {
        "no command": [[[], ["jobs"], ["nodes"]]],
        "an unknown command": [[[_label(rng)], ["jobs", "frobnicate"], ["nodes", "drain", name]]],
        "a missing argument": [[["jobs", "get"], ["nodes", "fail"], ["jobs", "submit", "--gpus", n],
                                ["jobs", "cancel"]]],
        "an extra argument": [[[*cmd, *(["--gpus", n] if "submit" in cmd else []), *extra]]
                              for cmd, extra in extra_args],
        "an option without its value": [[["jobs", "submit", name, "--gpus"], ["jobs", "list", "--state"]],
                                        [["health", "--server"], ["license", "--timeout"]]],
        "a required option missing": [[["jobs", "submit", name], ["generate", "--prompt-tokens", n],
                                       ["generate", "--max-tokens", n]]],
        "an integer option that is not a decimal integer": [
            [["jobs", "submit", name, "--gpus", _bad_integer(rng, PARSEINT_TAKES)],
             ["generate", "--prompt-tokens", _bad_integer(rng, PARSEINT_TAKES), "--max-tokens", n]],
            [["jobs", "submit", name, "--gpus", n, "--priority", _bad_integer(rng, NUMBER_TAKES)],
             ["generate", "--prompt-tokens", n, f"--max-tokens={_bad_integer(rng, NUMBER_TAKES)}"]],
        ],
        "a path argument that is empty, . or ..": [[["jobs", "get", "."], ["nodes", "fail", "."]],
                                                   [["jobs", "cancel", ".."], ["nodes", "fail", ".."]],
                                                   [["jobs", "get", ""], ["jobs", "cancel", ""]]],
        "an unknown option": [[["health", f"--{_label(rng)}"], ["jobs", "list", "--all"]],
                              [["nodes", "list", "--state", "ready"], ["health", "--gpus", n],
                               ["jobs", "get", "job-1", "--priority", n], ["license", "--max-tokens", n]],
                              # each command with a body checks its own options: all three
                              [["generate", "--prompt-tokens", n, "--max-tokens", n, "--gpus", n]],
                              [["jobs", "submit", name, "--gpus", n, "--state", "done"]],
                              [["nodes", "fail", "node-1", "--priority", n]]],
        "a bad --timeout": [[["--timeout", t, "health"] for t in ("0", "-1", "soon", "")],
                            [["--timeout", t, "license"] for t in ("1s", "2.5x")],
                            [["--timeout", "0x10", "health"]]],
    }  # fmt: skip
    picks = [(what, group[int(rng.integers(0, len(group)))]) for what, groups in classes.items() for group in groups]  # fmt: skip
    for what, args in picks:
        run = cli.run("--server", fake_platform.url, *args)
        got = fake_platform.take()
        assert run.code == 2, f"{run.said()}: {what} is a usage error, expected exit 2"
        assert got == [], f"{run.said()}: {what} is a usage error, yet it sent {[(r.method, r.target) for r in got]}"  # fmt: skip
        assert run.stdout == "", f"{run.said()}: stdout should be empty on a usage error ({what})"
    run = cli.run("--server", fake_platform.url, "--help")
    assert run.code == 0 and "usage" in run.stdout.lower() and fake_platform.take() == [], (
        f"{run.said()}: --help prints the usage on stdout, exits 0 and sends nothing"
    )
    usage = " ".join(run.stdout.split())
    for command in ("health", "jobs list", "jobs submit", "jobs get", "jobs cancel", "nodes list",
                    "nodes fail", "generate", "license"):  # fmt: skip
        assert command in usage, f"{run.said()}: the usage does not name the command `{command}`"


@pytest.mark.kata_gate("a server that cannot be reached (nothing listening, or --server not a URL) does not give exit 1 with one `error:` line")  # fmt: skip
def test_cli_errors_unreachable_server_exits_1(cli: Any, cli_kit: Any) -> None:
    port = cli_kit.closed_port()
    run = cli.run("--server", f"http://127.0.0.1:{port}", "nodes", "list")
    assert run.code == 1, f"{run.said()}: nothing listens on port {port}, expected exit 1"
    assert run.stdout == "", f"{run.said()}: stdout should stay empty"
    line = _one_error_line(run, f"nothing listens on port {port}")
    assert f"127.0.0.1:{port}" in line, f"{run.said()}: the error should name the URL it could not reach"  # fmt: skip
    for server in ("127.0.0.1", f"ftp//127.0.0.1:{port}"):  # not a URL: nothing can be reached
        run = cli.run("--server", server, "license")
        assert run.code == 1 and run.stdout == "", f"{run.said()}: --server {server!r} is not a URL, expected exit 1"  # fmt: skip
        _one_error_line(run, f"--server {server!r} is not a URL")


@pytest.mark.kata_gate("platformctl does not keep to --timeout: it waits past it for a server that never answers, or gives up on one that answers within it")  # fmt: skip
def test_cli_errors_timeout_bounds_a_silent_server(cli: Any, fake_platform: Any, kata_rng: Any) -> None:  # fmt: skip
    timeout = float(kata_rng.choice([0.5, 1, 1.5]))
    fake_platform.hang("/v1/license")
    run = cli.run("--server", fake_platform.url, "--timeout", f"{timeout:g}", "license", wait_s=timeout + 12)  # fmt: skip
    assert run.code == 1 and run.stdout == "", (
        f"{run.said()}: the server never answers; expected exit 1 after --timeout {timeout:g} s"
    )
    _one_error_line(run, "the server never answers")
    assert run.seconds < timeout + 5, f"{run.said()}: it took {run.seconds:.1f} s with --timeout {timeout:g}"  # fmt: skip
    # A server that answers after `delay` s, well within a longer --timeout: the answer counts.
    delay = float(kata_rng.choice([0.6, 0.8, 1.0]))
    fake_platform.answer("GET", "/healthz", 200, {"status": "ok", "version": "1.0.0"})
    fake_platform.slow("/healthz", delay)
    run = cli.run("--server", fake_platform.url, "--timeout", f"{delay + 4:g}", "health")
    assert run.code == 0 and run.stdout.split() == ["ok", "1.0.0"], (
        f"{run.said()}: the server answers after {delay:g} s, within --timeout {delay + 4:g}; expected exit 0 and its answer"  # fmt: skip
    )


@pytest.mark.kata_gate("an answer that is not JSON (an HTML error page, with status 502 or 200) does not give exit 1 with one `error:` line and nothing on stdout")  # fmt: skip
def test_cli_errors_an_answer_that_is_not_json_exits_1(cli: Any, fake_platform: Any) -> None:
    page = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
    for status in (502, 200):
        fake_platform.answer("GET", "/healthz", status, page)
        run, _ = _run_one(cli, fake_platform, "health")
        assert run.code == 1 and run.stdout == "", (
            f"{run.said()}: the server answered {status} with HTML, expected exit 1 and no output"
        )
        _one_error_line(run, f"the server answered {status} with HTML")
