"""A local Azure Instance Metadata Service for Scheduled Events, as documented
(https://learn.microsoft.com/azure/virtual-machines/linux/scheduled-events):

- `GET /metadata/scheduledevents?api-version=2020-07-01` with the header `Metadata: true` (else 400) answers
  `{"DocumentIncarnation": n, "Events": [...]}`; an event has EventId, EventType (`Preempt` for a Spot
  eviction, `Freeze`, `Reboot`, ...), ResourceType, Resources (VM names), EventStatus (`Scheduled` |
  `Started`), NotBefore, Description, EventSource, DurationInSeconds;
- `POST` of `{"StartRequests": [{"EventId": id}]}` approves an event: it starts (and, here, is gone).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from werkzeug.wrappers import Request, Response

from fakes.http_server import FakeServer, json_response

PATH = "/metadata/scheduledevents"


@dataclass
class FakeAzureMetadata:
    url: str = ""
    incarnation: int = 1
    events: list[dict[str, Any]] = field(default_factory=list)
    approvals: list[str] = field(default_factory=list)
    refused: int = 0
    on_approve: Callable[[str], None] | None = None

    def schedule(self, event_type: str, resources: list[str], notice_seconds: int = 30) -> str:
        event_id = str(uuid.uuid4()).upper()
        not_before = datetime.now(UTC) + timedelta(seconds=notice_seconds)
        self.events.append(
            {
                "EventId": event_id,
                "EventStatus": "Scheduled",
                "EventType": event_type,
                "ResourceType": "VirtualMachine",
                "Resources": resources,
                "NotBefore": not_before.strftime("%a, %d %b %Y %H:%M:%S GMT"),
                "Description": "",
                "EventSource": "Platform",
                "DurationInSeconds": -1 if event_type == "Preempt" else 5,
            }
        )
        self.incarnation += 1
        return event_id

    def handle(self, request: Request) -> Response:
        if request.headers.get("Metadata") != "true" or "X-Forwarded-For" in request.headers:
            self.refused += 1
            return json_response({"error": "Bad request. Required metadata header not specified"}, 400)
        if request.path != PATH:
            return json_response({"error": "Not found"}, 404)
        if request.args.get("api-version") != "2020-07-01":
            self.refused += 1
            return json_response({"error": "Bad request. api-version is invalid or was not specified"}, 400)
        if request.method == "POST":
            return self._start(request)
        return json_response({"DocumentIncarnation": self.incarnation, "Events": self.events})

    def _start(self, request: Request) -> Response:
        try:
            ids = [str(item["EventId"]) for item in json.loads(request.get_data())["StartRequests"]]
        except (ValueError, KeyError, TypeError):
            self.refused += 1
            return json_response({"error": "Bad request. Invalid StartRequests"}, 400)
        for event_id in ids:
            if self.on_approve is not None:
                self.on_approve(event_id)
            self.approvals.append(event_id)
        self.events = [e for e in self.events if e["EventId"] not in ids]
        self.incarnation += 1
        return Response(status=200)


def start_fake_azure_metadata() -> tuple[FakeAzureMetadata, FakeServer]:
    fake = FakeAzureMetadata()
    server = FakeServer(fake.handle).start()
    fake.url = server.url
    return fake, server
