"""GCP preemptions -> `InstanceEvent`: the Cloud Audit Logs system event `compute.instances.preempted`,
routed by a Logging sink to a Pub/Sub topic and delivered to a Cloud Function as a CloudEvent
(`google.cloud.pubsub.topic.v1.messagePublished`: `data.message.data` is the base64 of the LogEntry JSON).

The instance is named by the last part of `protoPayload.resourceName`
(`projects/<project>/zones/<zone>/instances/<name>`): skyless's GCP nodes' instance ids are their names.
Anything else (another method, a malformed message) parses to None.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.events.instances import InstanceEvent

PREEMPTED_METHOD = "compute.instances.preempted"
SOURCE = "gcp.compute"


class _AuditLog(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    method_name: str = Field(alias="methodName")
    resource_name: str = Field(alias="resourceName")


class _LogEntry(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    proto_payload: _AuditLog = Field(alias="protoPayload")
    resource: dict[str, Any] = {}
    timestamp: str | None = None


def parse_preemption_log_entry(entry: dict[str, Any]) -> InstanceEvent | None:
    """A Cloud Logging LogEntry (as JSON) -> InstanceEvent(kind="preempted"), or None."""
    try:
        log = _LogEntry.model_validate(entry)
    except ValidationError:
        return None
    if log.proto_payload.method_name != PREEMPTED_METHOD:
        return None
    parts = log.proto_payload.resource_name.split("/")
    if len(parts) < 2 or parts[-2] != "instances" or not parts[-1]:
        return None
    labels = log.resource.get("labels") or {}
    zone = labels.get("zone") if isinstance(labels, dict) else None
    if not isinstance(zone, str) or not zone:
        zone = parts[parts.index("zones") + 1] if "zones" in parts[:-2] else None
    region = zone.rsplit("-", 1)[0] if zone else None
    return InstanceEvent(
        instance_id=parts[-1], kind="preempted", source=SOURCE, region=region, time=log.timestamp
    )


def parse_pubsub_preemption(data: dict[str, Any] | None) -> InstanceEvent | None:
    """The `data` of a Pub/Sub messagePublished CloudEvent -> InstanceEvent, or None."""
    message = (data or {}).get("message")
    if not isinstance(message, dict) or not isinstance(message.get("data"), str):
        return None
    try:
        entry = json.loads(base64.b64decode(message["data"], validate=True))
    except (binascii.Error, ValueError):
        return None
    return parse_preemption_log_entry(entry) if isinstance(entry, dict) else None
