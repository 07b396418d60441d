"""HTTP routing: a request in, a transport.Response out (the file you edit).

transport.py (given) reads each request and calls route(platform, method, target, body); you
map it onto the Platform's methods as API.md's table says: the status codes, 404 for a path
that is not in the table, 405 for a method the path does not take, 400 for a body that is not
a JSON object, {"error": sentence} for every ApiError. Let any other exception out: transport
answers 500 and the tests show you your traceback.
"""

from __future__ import annotations

from harness import todo

from .components import ROUTES, ApiError  # noqa: F401  (the route templates; errors)
from .control import Platform
from .transport import Response


def route(platform: Platform, method: str, target: str, body: bytes) -> Response:
    """One request: `target` is the path with its query string ("/v1/jobs?state=running"),
    `body` the raw bytes (b"" when none). Response.route is the template of ROUTES that
    matched the path (whatever the method), "other" when none did."""
    todo("route")
