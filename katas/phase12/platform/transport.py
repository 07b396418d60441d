"""HTTP/1.1 for the platform (given: read it, do not edit it).

    server = serve(routes, platform, port=0)       # routes: your routes module
    host, port = server.server_address[:2]
    ...
    stop(server)                                   # shutdown, close the socket, join the thread

Each request is read here, handed to `routes.route(platform, method, target, body)` (yours), and
its Response written back: a dict body as JSON, a str body as it is (the metrics text). Then
`platform.observe_http(route, method, status, seconds)` is called BEFORE the answer is sent, so
a scrape that follows an answer always counts it.

An exception out of your code is not turned into a quiet 500: the server answers 500 with the
exception's text and keeps the exception itself in `server.kata_raised` (the tests raise it
again in the test, so you read your own traceback; a todo() there means "not started").
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .components import CONTENT_TYPE_JSON, CONTENT_TYPE_METRICS

MAX_BODY = 1 << 20  # a request body larger than 1 MiB is refused (413) before your code runs
RAISED_HEADER = "X-Kata-Raised"  # the key of the exception in server.kata_raised


@dataclass
class Response:
    """What routes.route answers: the status, the body (a dict: JSON; a str: the metrics text,
    sent as CONTENT_TYPE_METRICS) and the route template of API.md that matched ("other")."""

    status: int
    body: dict[str, Any] | str
    route: str


class PlatformServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # stop() joins the request threads itself, within a deadline
    kata_raised: dict[str, BaseException]
    kata_thread: threading.Thread
    kata_requests: list[threading.Thread]
    kata_lock: threading.Lock

    def process_request(self, request: Any, client_address: Any) -> None:
        """ThreadingMixIn's, keeping each request's thread for stop() to join (a request stuck
        in a deadlock of yours cannot hold stop() forever: the thread is a daemon)."""
        t = threading.Thread(
            target=self.process_request_thread, args=(request, client_address), daemon=True
        )
        with self.kata_lock:
            self.kata_requests = [r for r in self.kata_requests if r.is_alive()] + [t]
        t.start()

    def keep(self, exc: BaseException) -> str:
        with self.kata_lock:
            key = str(len(self.kata_raised) + 1)
            self.kata_raised[key] = exc
        return key


def _handler(routes: Any, platform: Any) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 10  # a client that connects and sends nothing cannot hold server_close()
        server: PlatformServer

        def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read answers
            pass

        def _send(self, status: int, body: bytes, ctype: str, raised: str = "") -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            if raised:
                self.send_header(RAISED_HEADER, raised)
            self.send_header("Connection", "close")  # one request per connection: nothing idles
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True

        def _error(self, status: int, message: str, raised: str = "") -> None:
            body = json.dumps({"error": message}).encode()
            self._send(status, body, CONTENT_TYPE_JSON, raised)

        def _handle(self) -> None:
            t0 = time.perf_counter()
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self.close_connection = True
                self._error(413, f"the request body is larger than {MAX_BODY} bytes")
                return
            body = self.rfile.read(length) if length > 0 else b""
            try:
                resp = routes.route(platform, self.command, self.path, body)
                if not isinstance(resp, Response):
                    raise TypeError(
                        f"routes.route returned {type(resp).__name__}; expected a Response"
                    )
                if isinstance(resp.body, str):
                    payload, ctype = resp.body.encode(), CONTENT_TYPE_METRICS
                else:
                    payload, ctype = json.dumps(resp.body).encode(), CONTENT_TYPE_JSON
            except Exception as exc:  # yours: answered 500 and raised again in the test
                key = self.server.keep(exc)
                self._error(500, f"{type(exc).__name__}: {exc}", raised=key)
                return
            try:
                platform.observe_http(
                    resp.route, self.command, resp.status, time.perf_counter() - t0
                )
            except Exception as exc:  # noqa: BLE001 (kept for the test; the answer still goes out)
                self.server.keep(exc)
            self._send(resp.status, payload, ctype)

        do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = _handle

    return Handler


def serve(routes: Any, platform: Any, port: int = 0, host: str = "127.0.0.1") -> PlatformServer:
    """Serve `platform` through `routes.route` on (host, port) in a thread; serving when it
    returns."""
    server = PlatformServer((host, port), _handler(routes, platform))
    server.kata_raised = {}
    server.kata_requests = []
    server.kata_lock = threading.Lock()
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    server.kata_thread = thread
    return server


def stop(server: PlatformServer, timeout: float = 5.0) -> None:
    """Stop serving, close the listening socket, join the threads (each within `timeout`)."""
    server.shutdown()
    server.server_close()
    server.kata_thread.join(timeout)
    for t in list(server.kata_requests):
        t.join(timeout)
