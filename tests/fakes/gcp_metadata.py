"""A local GCP metadata server for `instance/preempted`, as documented
(https://cloud.google.com/compute/docs/metadata/querying-metadata, .../instances/spot#detect-preemption):

- every request needs `Metadata-Flavor: Google` (else 403), and one carrying `X-Forwarded-For` is refused;
- the answer is the text `FALSE` or `TRUE` with an `ETag` and `Metadata-Flavor: Google`;
- `?wait_for_change=true` holds the request until the value changes (or `timeout_sec` passes, then answers the
  unchanged value); with `last_etag=` it answers at once when the current ETag differs.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field

from werkzeug.wrappers import Request, Response

from fakes.http_server import FakeServer

PATH = "/computeMetadata/v1/instance/preempted"


@dataclass
class FakeGcpMetadata:
    preempted: bool = False
    url: str = ""
    requests: list[dict[str, str]] = field(default_factory=list)  # the query of each accepted request
    refused: int = 0
    changed: threading.Condition = field(default_factory=threading.Condition)
    stopping: bool = False

    def value(self) -> str:
        return "TRUE" if self.preempted else "FALSE"

    def etag(self) -> str:
        return hashlib.sha1(self.value().encode()).hexdigest()[:16]

    def preempt(self) -> None:
        with self.changed:
            self.preempted = True
            self.changed.notify_all()

    def release(self) -> None:
        """Answer every held request now (the server is about to stop)."""
        with self.changed:
            self.stopping = True
            self.changed.notify_all()

    def handle(self, request: Request) -> Response:
        if request.headers.get("Metadata-Flavor") != "Google" or "X-Forwarded-For" in request.headers:
            self.refused += 1
            return Response("Missing required header: Metadata-Flavor: Google", status=403)
        if request.path != PATH:
            return Response("not found", status=404)
        self.requests.append(dict(request.args))
        if request.args.get("wait_for_change") == "true":
            timeout = float(request.args.get("timeout_sec", "3600"))
            last = request.args.get("last_etag")
            with self.changed:
                start = self.etag()
                if last is None or last == start:
                    self.changed.wait_for(lambda: self.etag() != start or self.stopping, timeout=timeout)
        return Response(
            self.value(),
            headers={"ETag": self.etag(), "Metadata-Flavor": "Google"},
            content_type="application/text",
        )


def start_fake_gcp_metadata() -> tuple[FakeGcpMetadata, FakeServer]:
    fake = FakeGcpMetadata()
    server = FakeServer(fake.handle).start()
    fake.url = server.url
    return fake, server
