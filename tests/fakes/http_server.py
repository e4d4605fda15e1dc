"""A threaded werkzeug server on 127.0.0.1 and a free port, started and stopped by the fixtures
(https when given an `ssl_context`)."""

from __future__ import annotations

import json
import logging
import ssl
import threading
from collections.abc import Callable
from typing import Any

from werkzeug.serving import BaseWSGIServer, make_server
from werkzeug.wrappers import Request, Response

Handler = Callable[[Request], Response]


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    text = "" if body is None else json.dumps(body)
    return Response(text, status=status, headers=headers or {}, content_type="application/json")


class FakeServer:
    def __init__(self, handler: Handler, ssl_context: ssl.SSLContext | None = None) -> None:
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self._handler = handler
        self._server: BaseWSGIServer = make_server(
            "127.0.0.1", 0, self._wsgi, threaded=True, ssl_context=ssl_context
        )
        self.port = self._server.server_port
        self.url = f"{'https' if ssl_context else 'http'}://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    def _wsgi(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        try:
            response = self._handler(request)
        except Exception as error:  # a fake's bug shows up as a 500 the client maps to transient
            response = json_response({"error": f"fake server bug: {error!r}"}, status=500)
        return response(environ, start_response)

    def start(self) -> FakeServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
