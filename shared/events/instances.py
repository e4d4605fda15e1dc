"""EventBridge EC2 events (and skyless.local events of the same shape) -> `InstanceEvent`.

Handled: "EC2 Spot Instance Interruption Warning" (detail.instance-id, detail.instance-action) and
"EC2 Instance State-change Notification" (detail.instance-id, detail.state) for the states in which a
VM is going or gone. Events that say nothing about a VM going away parse to None.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

SPOT_WARNING = "EC2 Spot Instance Interruption Warning"
STATE_CHANGE = "EC2 Instance State-change Notification"
SOURCES = ("aws.ec2", "skyless.local")
GONE_STATES = ("stopping", "stopped", "shutting-down", "terminated")


class InstanceEvent(BaseModel):
    model_config = ConfigDict(frozen=True)

    instance_id: str
    kind: str  # "spot-warning" or the new state ("stopped", "terminated", ...)
    source: str
    region: str | None = None
    time: str | None = None

    @property
    def description(self) -> str:
        if self.kind == "spot-warning":
            return "spot interruption warning"
        return f"instance {self.kind}"


class _Envelope(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    detail_type: str = Field(alias="detail-type")
    source: str
    region: str | None = None
    time: str | None = None
    detail: dict[str, Any]


def parse_instance_event(raw: dict[str, Any] | str) -> InstanceEvent | None:
    """An EventBridge event (a dict, or the JSON body SQS delivers) -> InstanceEvent, or None."""
    try:
        data = json.loads(raw) if isinstance(raw, str) else raw
        envelope = _Envelope.model_validate(data)
    except (ValueError, ValidationError):
        return None
    if envelope.source not in SOURCES:
        return None
    instance_id = envelope.detail.get("instance-id")
    if not isinstance(instance_id, str) or not instance_id:
        return None
    common = {"instance_id": instance_id, "source": envelope.source, "region": envelope.region,
              "time": envelope.time}  # fmt: skip
    if envelope.detail_type == SPOT_WARNING:
        return InstanceEvent(kind="spot-warning", **common)
    if envelope.detail_type == STATE_CHANGE:
        state = envelope.detail.get("state")
        if state in GONE_STATES:
            return InstanceEvent(kind=str(state), **common)
    return None
