"""A small threaded HTTP server on a free port of 127.0.0.1 that hands each request to a route function."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"null")


Route = Callable[[Request], tuple[int, Any]]


@dataclass
class FakeServer:
    """`with FakeServer(route) as server:` serves `route` at `server.url`; `server.requests` is what came."""

    route: Route
    requests: list[Request] = field(default_factory=list)
    fail_with: tuple[int, Any] | None = None  # answer every request with this (status, body)

    def __enter__(self) -> FakeServer:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                request = Request(
                    self.command,
                    parts.path,
                    {k: v[-1] for k, v in parse_qs(parts.query).items()},
                    {k.lower(): v for k, v in self.headers.items()},
                    self.rfile.read(length) if length else b"",
                )
                fake.requests.append(request)
                status, body = fake.fail_with or fake.route(request)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
