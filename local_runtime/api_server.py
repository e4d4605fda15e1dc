"""The Chalice app served over HTTP on 127.0.0.1, threaded, as API Gateway would call it."""

from __future__ import annotations

import logging
import threading
from typing import Any

from chalice import Chalice
from chalice.config import Config
from chalice.local import ChaliceRequestHandler, CustomLocalChalice, LocalChalice, LocalDevServer

log = logging.getLogger("skyless.api")


class QuietRequestHandler(ChaliceRequestHandler):
    """Requests are handled concurrently, one thread each: the app class becomes chalice's LocalChalice
    below, whose `current_request` is kept per thread, so two requests never read each other's."""

    def log_message(self, format: str, *args: Any) -> None:
        # One line per request (agents' heartbeats included) would swamp runtime.log.
        log.debug("%s %s", self.address_string(), format % args)


class ApiServer:
    """The API on host:port in a background thread; `stop()` shuts it down."""

    def __init__(self, app: Chalice, host: str, port: int) -> None:
        config = Config.create(chalice_stage="local", app_name=app.app_name)
        if not isinstance(app, LocalChalice):
            # What chalice.local.create_local_server does to the app, without binding a socket of its own.
            CustomLocalChalice.__bases__ = (LocalChalice, app.__class__)
            app.__class__ = CustomLocalChalice
        self._server = LocalDevServer(app, config, host, port, handler_cls=QuietRequestHandler)
        self._server.server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.server.serve_forever, name="api", daemon=True)
        self.url = f"http://{host}:{port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server.server_close()
        self._thread.join(timeout=10)


def load_app() -> Any:
    from functions.submit.app import app

    return app
