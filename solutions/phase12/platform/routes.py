"""HTTP routing: a request in, a transport.Response out (the reference)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from .components import ApiError
from .control import Platform
from .transport import Response

_SEGMENT = r"([^/]+)"
# (pattern, template, {method: handler(platform, match, query, body) -> (status, body)})
_Handler = Callable[[Platform, "re.Match[str]", dict[str, list[str]], bytes], tuple[int, Any]]


def _json(body: bytes) -> object:
    try:
        return json.loads(body.decode("utf-8")) if body else None
    except (UnicodeDecodeError, ValueError):
        raise ApiError(400, "the request body is not valid JSON") from None


def _list_jobs(p: Platform, m: Any, q: dict[str, list[str]], b: bytes) -> tuple[int, Any]:
    state = q.get("state", [None])[-1]
    return 200, {"jobs": p.list_jobs(state)}


TABLE: list[tuple[re.Pattern[str], str, dict[str, _Handler]]] = [
    (re.compile(r"/healthz"), "/healthz", {"GET": lambda p, m, q, b: (200, p.health())}),
    (
        re.compile(r"/v1/jobs"),
        "/v1/jobs",
        {"GET": _list_jobs, "POST": lambda p, m, q, b: (201, p.submit(_json(b)))},
    ),
    (
        re.compile(r"/v1/jobs/" + _SEGMENT),
        "/v1/jobs/{id}",
        {
            "GET": lambda p, m, q, b: (200, p.get_job(unquote(m[1]))),
            "DELETE": lambda p, m, q, b: (200, p.cancel_job(unquote(m[1]))),
        },
    ),
    (
        re.compile(r"/v1/nodes"),
        "/v1/nodes",
        {"GET": lambda p, m, q, b: (200, {"nodes": p.list_nodes()})},
    ),
    (
        re.compile(r"/v1/nodes/" + _SEGMENT + r"/fail"),
        "/v1/nodes/{name}/fail",
        {"POST": lambda p, m, q, b: (200, p.fail_node(unquote(m[1])))},
    ),
    (
        re.compile(r"/v1/generate"),
        "/v1/generate",
        {"POST": lambda p, m, q, b: (200, p.generate(_json(b)))},
    ),
    (re.compile(r"/v1/license"), "/v1/license", {"GET": lambda p, m, q, b: (200, p.license())}),
    (re.compile(r"/metrics"), "/metrics", {"GET": lambda p, m, q, b: (200, p.metrics())}),
]


def route(platform: Platform, method: str, target: str, body: bytes) -> Response:
    parts = urlsplit(target)
    query = parse_qs(parts.query)
    for pattern, template, methods in TABLE:
        m = pattern.fullmatch(parts.path)
        if m is None:
            continue
        handler = methods.get(method)
        if handler is None:
            allowed = ", ".join(sorted(methods))
            return Response(
                405, {"error": f"{method} is not allowed on {template} ({allowed})"}, template
            )
        try:
            status, answer = handler(platform, m, query, body)
        except ApiError as e:
            return Response(e.status, {"error": e.message}, template)
        return Response(status, answer, template)
    return Response(404, {"error": f"no such path: {parts.path}"}, "other")
