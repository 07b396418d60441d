"""Fixtures of the platform tests, public and hidden: each defined once, here
(docs/kata-layout.md). Tests never import kata code: they ask the `kata` fixture for it.

The platform is graded with components of the tests' own — a scheduler that records what it
was offered, a runner whose jobs finish when the test says, a serving model whose TTFT the test
chooses, a license whose terms the test sets and a clock that moves only when told — so your
grade here does not depend on your earlier katas (wiring.py runs the platform on those).
Everything goes through HTTP: `live.call("POST", "/v1/jobs", {...})`.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

import pytest

# ------------------------------------------------------------------------------ the kata's code


@pytest.fixture(scope="module")
def components(kata: Any) -> Any:
    """components.py (given): the Protocols, ApiError, NodeSpec, VERSION, buckets."""
    return kata.module("components")


@pytest.fixture(scope="module")
def control(kata: Any) -> Any:
    """control.py (yours): Platform."""
    return kata.module("control")


@pytest.fixture(scope="module")
def routes(kata: Any) -> Any:
    """routes.py (yours): route()."""
    return kata.module("routes")


@pytest.fixture(scope="module")
def transport(kata: Any) -> Any:
    """transport.py (given): serve(), stop()."""
    return kata.module("transport")


@pytest.fixture(scope="module")
def slo_rules(kata: Any) -> str:
    """slo_rules.yml (given): the TTFT SLO's recording rules and page."""
    return kata.source("slo_rules.yml").read_text()


# ------------------------------------------------------------------------------ the test's parts


class RecordingScheduler:
    """First fit, or the answers of `choose(job, nodes)`; records every call (job id, the nodes
    offered as (name, gpus, free))."""

    def __init__(self, choose: Any = None) -> None:
        self.choose = choose
        self.calls: list[tuple[str, list[tuple[str, int, int]]]] = []
        self.lock = threading.Lock()

    def place(self, job: Any, nodes: list[Any]) -> str | None:
        offered = [(n.name, n.gpus, n.free) for n in nodes]
        with self.lock:
            self.calls.append((job.id, offered))
        if self.choose is not None:
            return self.choose(job, nodes)
        for n in nodes:
            if n.free >= job.gpus:
                return n.name
        return None


class TestRunner:
    """Started jobs run until the test calls finish(job_id, "done"|"failed"). Records starts
    (job id, node, gpus) and stops."""

    __test__ = False  # not a test class

    def __init__(self) -> None:
        self.states: dict[str, str] = {}
        self.starts: list[tuple[str, str, int]] = []
        self.stops: list[str] = []
        self.polls = 0
        self.lock = threading.Lock()

    def start(self, job_id: str, node: str, gpus: int) -> None:
        with self.lock:
            self.starts.append((job_id, node, gpus))
            self.states[job_id] = "running"

    def poll(self, job_id: str) -> str:
        with self.lock:
            self.polls += 1
            return self.states.get(job_id, "failed")

    def stop(self, job_id: str) -> None:
        with self.lock:
            self.stops.append(job_id)
            if self.states.get(job_id) == "running":
                self.states[job_id] = "stopped"

    def finish(self, job_id: str, outcome: str = "done") -> None:
        with self.lock:
            self.states[job_id] = outcome


class TestServing:
    """TTFT from `ttft(prompt_tokens, max_tokens)` (default: a roofline-like line), tokens from
    `tokens(...)` (default: max_tokens; fewer when the model stops early). Records each call."""

    __test__ = False

    def __init__(self, components: Any, ttft: Any = None, tokens: Any = None) -> None:
        self.components = components
        self.ttft = ttft or (lambda p, m: 0.02 + 0.0001 * p)
        self.tokens = tokens or (lambda p, m: m)
        self.calls: list[tuple[int, int]] = []
        self.lock = threading.Lock()

    def generate(self, prompt_tokens: int, max_tokens: int) -> Any:
        with self.lock:
            self.calls.append((prompt_tokens, max_tokens))
        t = float(self.ttft(prompt_tokens, max_tokens))  # outside the lock: calls may overlap
        n = int(self.tokens(prompt_tokens, max_tokens))
        return self.components.Generation(ttft_s=t, tpot_s=0.01 + 1e-6 * max_tokens, tokens=n)


class TestLicenser:
    """Terms the test sets (and may change between requests)."""

    __test__ = False

    def __init__(self, terms: Any) -> None:
        self.current = terms
        self.calls = 0

    def terms(self) -> Any:
        self.calls += 1
        return self.current


class TestClock:
    __test__ = False

    def __init__(self, t: float = 1_767_225_600.0) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


@dataclass
class Answer:
    status: int
    body: Any  # the JSON value, or the text when it is not JSON
    text: str
    headers: dict[str, str]


@dataclass
class Live:
    """A running platform: its parts, its URL, and a client."""

    platform: Any
    server: Any
    url: str
    scheduler: RecordingScheduler
    runner: TestRunner
    serving: TestServing
    licenser: TestLicenser
    clock: TestClock
    nodes: list[tuple[str, int]]
    seen_raised: set[str] = field(default_factory=set)

    def call(self, method: str, path: str, body: Any = None, raw: bytes | None = None) -> Answer:
        """One request. An exception of your code (a 500 that transport.py kept) is raised here
        again, so a test shows your traceback (and a todo() means "not started")."""
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                status, payload, headers = r.status, r.read(), dict(r.headers)
        except urllib.error.HTTPError as e:
            status, payload, headers = e.code, e.read(), dict(e.headers)
        except (TimeoutError, urllib.error.URLError) as e:
            reason = getattr(e, "reason", e)
            if isinstance(reason, TimeoutError):
                raise AssertionError(
                    f"{method} {path}: no answer within 10 s; is a request thread stuck on the "
                    f"platform's lock (a Lock taken twice) or in a loop?"
                ) from None
            raise AssertionError(f"{method} {path}: the request failed: {reason}") from None
        key = headers.get("X-Kata-Raised")
        if key is not None:
            self.seen_raised.add(key)
            raise self.server.kata_raised[key]
        text = payload.decode("utf-8", errors="replace")
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        return Answer(status, value, text, headers)

    def raise_kept(self) -> None:
        """An exception observe_http raised (kept by transport.py while the answer went out)."""
        for key, exc in list(self.server.kata_raised.items()):
            if key not in self.seen_raised:
                self.seen_raised.add(key)
                raise exc

    def ok(self, method: str, path: str, body: Any = None, want: int = 200) -> Any:
        a = self.call(method, path, body)
        assert a.status == want, (
            f"{method} {path} {json.dumps(body) if body is not None else ''} answered "
            f"{a.status} {a.text[:300]!r}; expected {want}"
        )
        return a.body

    def scrape(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """GET /metrics, checked line by line and parsed: {(sample name, sorted labels): value}."""
        a = self.call("GET", "/metrics")
        self.raise_kept()
        assert a.status == 200, f"GET /metrics answered {a.status} {a.text[:300]!r}; expected 200"
        return parse_exposition(a.text)


def terms(
    components: Any,
    *,
    features: tuple[str, ...] = ("jobs", "serving"),
    expires_in: float = 30 * 86400,
    grace_s: float = 7 * 86400,
    now: float = 1_767_225_600.0,
    licensee: str = "acme",
) -> Any:
    return components.LicenseTerms(
        licensee=licensee,
        features=frozenset(features),
        expires_at=now + expires_in,
        grace_s=grace_s,
    )


@pytest.fixture
def make_live(components: Any, control: Any, routes: Any, transport: Any) -> Any:
    """make_live(nodes=[("node-0", 8), ...], max_attempts=2, choose=None, ttft=None,
    license=None, tokens=None) -> Live, served on 127.0.0.1:0; stopped and closed after the test."""
    made: list[Live] = []

    def make(
        nodes: list[tuple[str, int]] | None = None,
        max_attempts: int = 2,
        choose: Any = None,
        ttft: Any = None,
        license: Any = None,
        tokens: Any = None,
    ) -> Live:
        nodes = nodes if nodes is not None else [("node-0", 8), ("node-1", 8), ("node-2", 4)]
        clock = TestClock()
        parts = (
            RecordingScheduler(choose),
            TestRunner(),
            TestServing(components, ttft, tokens),
            TestLicenser(license if license is not None else terms(components, now=clock.t)),
            clock,
        )
        comps = components.Components(*parts)
        platform = control.Platform(
            comps, [components.NodeSpec(n, g) for n, g in nodes], max_attempts=max_attempts
        )
        server = transport.serve(routes, platform, port=0)
        live = Live(platform, server, f"http://127.0.0.1:{server.server_address[1]}", *parts, nodes)
        made.append(live)
        return live

    yield make
    for live in made:
        transport.stop(live.server)
        try:
            live.platform.close()
        except Exception:  # noqa: S110 (teardown: close is graded by the scenario's own test)
            pass


# ------------------------------------------------------------------------------ the exposition

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
_SAMPLE = re.compile(
    rf"^({_NAME})(?:\{{((?:{_LABEL})(?:,{_LABEL})*)?,?\}})? "
    r"([-+]?(?:[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?|Inf|NaN))$"
)
_META = re.compile(rf"^# (HELP|TYPE) ({_NAME})(?: (.*))?$")


def parse_exposition(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The 0.0.4 text strictly: every line a # HELP / # TYPE line or a sample; each family's
    HELP and TYPE once and before its samples, its samples together; then prometheus_client's
    parser for the values. Raises AssertionError naming the line."""
    from prometheus_client.parser import text_string_to_metric_families

    assert text.endswith("\n"), "GET /metrics: the exposition text must end with a newline"
    typed: dict[str, str] = {}
    helped: set[str] = set()
    finished: set[str] = set()
    current = None
    for n, line in enumerate(text.split("\n")[:-1], 1):
        if line.startswith("#"):
            m = _META.match(line)
            if m is None:
                continue  # a comment
            kind, name, rest = m.groups()
            if kind == "TYPE":
                assert name not in typed, f"/metrics line {n}: a second # TYPE for {name}"
                assert rest in ("counter", "gauge", "histogram", "summary", "untyped"), (
                    f"/metrics line {n}: unknown type {rest!r} for {name}"
                )
                typed[name] = rest
            else:
                assert name not in helped, f"/metrics line {n}: a second # HELP for {name}"
                helped.add(name)
            if current != name:
                assert name not in finished, f"/metrics line {n}: family {name} is split in two"
                if current is not None:
                    finished.add(current)
                current = name
            continue
        m = _SAMPLE.match(line)
        assert m is not None, f"/metrics line {n} is not a valid sample line: {line!r}"
        fam = m.group(1)
        for suffix in ("_bucket", "_sum", "_count"):
            if fam.endswith(suffix) and typed.get(fam[: -len(suffix)]) == "histogram":
                fam = fam[: -len(suffix)]
        assert fam in typed, f"/metrics line {n}: sample {m.group(1)} before its family's # TYPE"
        if current != fam:
            assert fam not in finished, f"/metrics line {n}: family {fam} is split in two"
            if current is not None:
                finished.add(current)
            current = fam
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            assert key not in out, f"/metrics: the sample {s.name}{s.labels} appears twice"
            out[key] = float(s.value)
    return out


def sample(scraped: dict, name: str, **labels: str) -> float | None:
    """The value of one sample (None when it is not there)."""
    return scraped.get((name, tuple(sorted(labels.items()))))


def samples(scraped: dict, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {labels: v for (n, labels), v in scraped.items() if n == name}


@pytest.fixture(scope="session")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.skip("promtool is not installed (capability promtool)")
    return path


def promtool_check_metrics(promtool: str, text: str) -> list[str]:
    """promtool check metrics' findings (empty when it is content)."""
    r = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    return [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]


def isclose(a: float | None, b: float) -> bool:
    return a is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


@pytest.fixture(scope="session")
def kit() -> Any:
    """The helpers above, for test modules (which import nothing from here)."""
    import types

    return types.SimpleNamespace(
        terms=terms,
        parse_exposition=parse_exposition,
        sample=sample,
        samples=samples,
        promtool_check_metrics=promtool_check_metrics,
        isclose=isclose,
        Answer=Answer,
    )


# --- cli (cap-cli) ---
# The CLI (cli/, tasks cli and cli-errors) and the release artifacts (release/, task release).
# The CLI is built with tsc into the build cache (harness.native.typescript) and run with node
# against a recording fake of the platform: the service itself (yours) is not needed here.

import http.server  # noqa: E402
import os  # noqa: E402
import socket  # noqa: E402
import time  # noqa: E402
import urllib.parse  # noqa: E402
from pathlib import Path  # noqa: E402

CLI_SOURCES = ("cli/src/cli.ts", "cli/src/client.ts")  # yours
CLI_GIVEN = ("cli/src/env.d.ts", "cli/src/todo.ts")
CLI_EXIT_TODO = 3  # todo.ts's exit status
CLI_WAIT_S = 15.0  # one platformctl run, start to exit (node starts in ~0.1 s)
CLI_WAIT_AFTER_HANG_S = 5.0  # once a run has hung, the module's later runs wait this long


@dataclass
class Recorded:
    """One request the fake platform received."""

    method: str
    target: str  # path and query, as sent ("/v1/jobs?state=running")
    headers: dict[str, str]  # names lower-cased
    body: bytes

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))


class FakePlatform:
    """A recording fake of API.md on 127.0.0.1:<free port>: answers each request with what the
    test set for its method and target (`answer(...)`), else 404 {"error": ...}; records every
    request. `hang(target)` makes that target never answer (until teardown)."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.answers: dict[tuple[str, str], tuple[int, bytes, str]] = {}
        self.hanging: set[str] = set()
        self.delays: dict[str, float] = {}
        self.release = threading.Event()
        self.lock = threading.Lock()
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _body(self) -> bytes:
                if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                    out = b""
                    while len(out) < 1 << 20:  # a chunked body (no Content-Length) is valid too
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline().strip():  # trailers
                                pass
                            return out
                        out += self.rfile.read(size)
                        self.rfile.readline()
                    return out
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def _any(self) -> None:
                body = self._body()
                rec = Recorded(
                    self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body
                )
                with fake.lock:
                    fake.requests.append(rec)
                    hang = self.path in fake.hanging
                    delay = fake.delays.get(self.path, 0.0)
                    status, data, ctype = fake.answers.get(
                        (self.command, self.path),
                        (404, json.dumps({"error": f"no route {self.path}"}).encode(), "application/json"),
                    )  # fmt: skip
                if hang:
                    fake.release.wait(CLI_WAIT_S + 10)
                    return
                if delay:
                    fake.release.wait(delay)
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = _any

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def answer(self, method: str, target: str, status: int, body: Any) -> None:
        """Answer `method target` with `status` and `body` (JSON, or bytes sent as text/html)."""
        if isinstance(body, bytes):
            data, ctype = body, "text/html"
        else:
            data, ctype = json.dumps(body).encode(), "application/json"
        with self.lock:
            self.answers[(method, target)] = (status, data, ctype)

    def hang(self, target: str) -> None:
        with self.lock:
            self.hanging.add(target)

    def slow(self, target: str, seconds: float) -> None:
        """Answer `target` only after `seconds` (a slow server, not a silent one)."""
        with self.lock:
            self.delays[target] = seconds

    def take(self) -> list[Recorded]:
        """The requests received since the last take()."""
        with self.lock:
            out, self.requests = self.requests, []
        return out

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


@dataclass
class CliRun:
    """One platformctl run: its exit status and output."""

    args: list[str]
    code: int
    stdout: str
    stderr: str
    seconds: float

    def said(self) -> str:
        return f"`platformctl {' '.join(self.args)}` exited {self.code}; stdout {self.stdout[-800:]!r}; stderr {self.stderr[-800:]!r}"  # fmt: skip


class Cli:
    """The built CLI (dist/cli.js in the build cache), run with the node the capability found."""

    def __init__(self, dist: Path, node: list[str]) -> None:
        self.dist, self.node = dist, node
        self.hung = False  # a CLI that hung once costs little more: later runs wait less

    def run(self, *args: str, env: dict[str, str] | None = None, wait_s: float = CLI_WAIT_S) -> CliRun:  # fmt: skip
        from harness import KataTodo

        base = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LC_ALL": "C",
            "HOME": str(self.dist),
        }
        if self.hung:
            wait_s = min(wait_s, CLI_WAIT_AFTER_HANG_S)
        start = time.monotonic()
        try:
            proc = subprocess.run(
                [*self.node, str(self.dist / "cli.js"), *args], capture_output=True, text=True,
                env={**base, **(env or {})}, timeout=wait_s, stdin=subprocess.DEVNULL, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            self.hung = True
            raise AssertionError(
                f"`platformctl {' '.join(args)}` did not exit within {wait_s:.0f} s"
            ) from None
        run = CliRun(
            list(args), proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start
        )
        todo = [ln for ln in proc.stderr.splitlines() if ln.startswith("KATA-TODO:")]
        if proc.returncode == CLI_EXIT_TODO and todo:
            raise KataTodo(todo[-1].removeprefix("KATA-TODO:").strip())
        return run


@pytest.fixture(scope="module")
def cli(kata: Any) -> Cli:
    """cli/ (yours: cli.ts, client.ts) compiled by tsc (tsconfig.json, given) and run by node."""
    from harness.native.typescript import build_typescript, node_command

    sources = [kata.source(f) for f in (*CLI_SOURCES, *CLI_GIVEN)]
    built = build_typescript(
        kata.source("cli/tsconfig.json"), sources, package_json=kata.source("cli/package.json")
    )
    return Cli(built.path, node_command())


@pytest.fixture
def fake_platform() -> Any:
    """A fresh recording fake of the platform (FakePlatform), closed after the test."""
    fake = FakePlatform()
    yield fake
    fake.close()


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def encode_segment(text: str) -> str:
    """JavaScript's encodeURIComponent, for a path segment the CLI must send."""
    return urllib.parse.quote(text, safe="-_.!~*'()")


def parse_table(text: str) -> list[dict[str, str]]:
    """A CLI table (CLI.md): a header line, then one line per row, cells split by spaces."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return []
    header = lines[0].split()
    return [dict(zip(header, ln.split(), strict=False)) for ln in lines[1:]]


@pytest.fixture(scope="session")
def cli_kit() -> Any:
    """The CLI tests' helpers, for test modules (which import nothing from here)."""
    import types

    return types.SimpleNamespace(
        closed_port=closed_port, encode_segment=encode_segment, parse_table=parse_table,
        Recorded=Recorded, wait_s=CLI_WAIT_S,
    )  # fmt: skip


# The release artifacts (task release): release/*.md read as a reviewer would (release/RELEASE.md).
RELEASE_FILES = ("DESIGN.md", "RUNBOOK.md", "CHANGELOG.md", "notes-1.0.0.md")
RELEASE_STUB = "<!-- not started"
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_CODE_SPAN = re.compile(r"`+([^`]*)`+")
_METRIC = re.compile(r"\bplatform_[a-z0-9_]+")
_RULE = re.compile(r"\bplatform:[a-z0-9_][a-z0-9_:]*")
_ENDPOINT = re.compile(r"\b(GET|POST|DELETE|PUT|PATCH|HEAD)\s+(/[^\s`'\"),\]]*)")
_CTL = re.compile(r"^platformctl\s+([a-z][a-z-]*)(?:\s+([a-z][a-z-]*))?")


@dataclass
class Section:
    """A heading of a Markdown document and the text under it up to the next heading of its
    level or above (subsections included)."""

    level: int
    title: str
    text: str


def md_sections(text: str) -> list[Section]:
    """Every heading (outside code fences) with its text, in document order."""
    lines = text.splitlines()
    heads: list[tuple[int, int, str]] = []
    fence = False
    for i, line in enumerate(lines):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        elif not fence and (m := _HEADING.match(line)):
            heads.append((i, len(m[1]), m[2]))
    out = []
    for k, (i, level, title) in enumerate(heads):
        end = next((j for j, lv, _ in heads[k + 1 :] if lv <= level), len(lines))
        out.append(Section(level, title, "\n".join(lines[i + 1 : end]).strip()))
    return out


def code_spans(text: str) -> list[str]:
    return [m.strip() for m in _CODE_SPAN.findall(text)]


def api_table(kata: Any) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """API.md's endpoints [(method, template)] and metric families [(name, type)]."""
    text = kata.source("API.md").read_text(encoding="utf-8")
    endpoints, families = [], []
    for line in text.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0] in ("GET", "POST", "DELETE") and cells[1].startswith("/"):
            endpoints.append((cells[0], cells[1]))
        elif len(cells) >= 2 and cells[0].startswith("platform_") and cells[1] in ("gauge", "counter", "histogram"):  # fmt: skip
            families.append((cells[0], cells[1]))
    return endpoints, families


def metric_names(families: list[tuple[str, str]]) -> set[str]:
    """Every name a family exposes: itself, and a histogram's _bucket, _sum and _count."""
    names = set()
    for name, kind in families:
        names.add(name)
        if kind == "histogram":
            names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    return names


def endpoint_known(method: str, path: str, endpoints: list[tuple[str, str]]) -> bool:
    path = path.split("?", 1)[0].rstrip(".:;")
    for m, template in endpoints:
        pattern = "^" + re.sub(r"\\\{[^/]*?\\\}", "[^/?]+", re.escape(template)) + "$"
        if m == method and re.match(pattern, path):
            return True
    return False


def mentions(text: str) -> dict[str, list[Any]]:
    """The names a document mentions: metrics, recording rules, endpoints (method, path) and
    platformctl commands (in code spans), in order."""
    ctl = []
    for span in code_spans(text):
        if m := _CTL.match(span):
            ctl.append(" ".join(w for w in (m[1], m[2]) if w))
    return {
        "metrics": _METRIC.findall(text),
        "rules": [r.rstrip(":") for r in _RULE.findall(text)],
        "endpoints": _ENDPOINT.findall(text),
        "commands": ctl,
    }


CLI_COMMANDS = {"health": (), "license": (), "generate": (), "jobs": ("list", "submit", "get", "cancel"),
                "nodes": ("list", "fail")}  # fmt: skip


def command_known(words: str) -> bool:
    first, _, second = words.partition(" ")
    if first not in CLI_COMMANDS:
        return False
    subs = CLI_COMMANDS[first]
    return not subs or second in subs


def slo_rule_names(kata: Any) -> tuple[list[str], list[str], set[str]]:
    """slo_rules.yml's alerts, recording rules and the metric names its rules read (the file's
    `- alert:` and `- record:` keys, and every name in it: it holds rules only)."""
    text = kata.source("slo_rules.yml").read_text(encoding="utf-8")
    body = "\n".join(ln.split("#", 1)[0] for ln in text.splitlines())  # comments are prose
    alerts = re.findall(r"^\s*-?\s*alert:\s*['\"]?([A-Za-z_:][\w:]*)", body, re.M)
    records = re.findall(r"^\s*-?\s*record:\s*['\"]?([A-Za-z_:][\w:]*)", body, re.M)
    reads = set(_METRIC.findall(body)) | set(_RULE.findall(body))
    return alerts, records, reads


class ReleaseDocs:
    """release/*.md of this implementation; `text(name)` raises KataTodo while it is the stub."""

    def __init__(self, kata: Any) -> None:
        self.kata = kata

    def text(self, name: str) -> str:
        from harness import KataTodo

        text = self.kata.source(f"release/{name}").read_text(encoding="utf-8")
        if RELEASE_STUB in text:
            raise KataTodo(f"release/{name} is the stub still (its `{RELEASE_STUB} -->` line)")
        return text

    def package(self) -> dict[str, Any]:
        return json.loads(self.kata.source("cli/package.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def release_docs(kata: Any) -> ReleaseDocs:
    """release/ (yours): DESIGN.md, RUNBOOK.md, CHANGELOG.md, notes-1.0.0.md."""
    return ReleaseDocs(kata)


@pytest.fixture(scope="session")
def release_kit() -> Any:
    """The release tests' helpers (the Markdown reader and the name checks above)."""
    import types

    return types.SimpleNamespace(
        sections=md_sections, code_spans=code_spans, api_table=api_table, metric_names=metric_names,
        endpoint_known=endpoint_known, mentions=mentions, command_known=command_known,
        slo_rules=slo_rule_names, files=RELEASE_FILES,
    )  # fmt: skip
