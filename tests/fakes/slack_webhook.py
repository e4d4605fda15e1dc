"""A Slack incoming webhook: a real local HTTP server that records each POST and can answer errors first.

`SlackWebhook().start()`; `url` is the webhook URL; `posts` holds the JSON bodies it accepted (200 "ok");
`fail_first(429, retry_after="0")` or `fail_first(500, times=2)` fails the next posts; `attempts` counts all.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from werkzeug.wrappers import Request, Response

from fakes.http_server import FakeServer

WEBHOOK_PATH = "/services/T0000/B0000/XXXXsecretXXXX"


class SlackWebhook:
    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []
        self.attempts = 0
        self._failures: list[tuple[int, dict[str, str]]] = []
        self._lock = threading.Lock()
        self._server = FakeServer(self._handle)
        self.url = self._server.url + WEBHOOK_PATH

    def start(self) -> SlackWebhook:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def fail_first(self, status: int, *, times: int = 1, retry_after: str | None = None) -> None:
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        with self._lock:
            self._failures.extend([(status, headers)] * times)

    def _handle(self, request: Request) -> Response:
        with self._lock:
            self.attempts += 1
            if request.method != "POST" or request.path != WEBHOOK_PATH:
                return Response("no_service", status=404)
            if self._failures:
                status, headers = self._failures.pop(0)
                return Response(
                    "rate_limited" if status == 429 else "server_error", status=status, headers=headers
                )
            try:
                body = json.loads(request.get_data(as_text=True))
            except ValueError:
                return Response("invalid_payload", status=400)
            if not isinstance(body, dict) or not (body.get("text") or body.get("blocks")):
                return Response("no_text", status=400)
            self.posts.append(body)
        return Response("ok", status=200, content_type="text/plain")
