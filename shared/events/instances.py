"""EventBridge EC2 events (and skyless.local events of the same shape) -> `InstanceEvent`.

Handled: "EC2 Spot Instance Interruption Warning" (detail.instance-id, detail.instance-action) and
"EC2 Instance State-change Notification" (detail.instance-id, detail.state) for the states in which a
VM is going or gone. Events that say nothing about a VM going away parse to None.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

SPOT_WARNING = "EC2 Spot Instance Interruption Warning"
STATE_CHANGE = "EC2 Instance State-change Notification"
SOURCES = ("aws.ec2", "skyless.local")
GONE_STATES = ("stopping", "stopped", "shutting-down", "terminated")


@dataclass(frozen=True, kw_only=True)
class InstanceEvent:
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


def parse_instance_event(raw: dict[str, Any] | str) -> InstanceEvent | None:
    """An EventBridge event (a dict, or the JSON body SQS delivers) -> InstanceEvent, or None."""
    try:
        data = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    detail_type, source, detail = data.get("detail-type"), data.get("source"), data.get("detail")
    region, time = data.get("region"), data.get("time")
    if not isinstance(detail_type, str) or source not in SOURCES or not isinstance(detail, dict):
        return None
    if not (region is None or isinstance(region, str)) or not (time is None or isinstance(time, str)):
        return None
    instance_id = detail.get("instance-id")
    if not isinstance(instance_id, str) or not instance_id:
        return None
    common = {"instance_id": instance_id, "source": source, "region": region, "time": time}
    if detail_type == SPOT_WARNING:
        return InstanceEvent(kind="spot-warning", **common)
    if detail_type == STATE_CHANGE:
        state = detail.get("state")
        if state in GONE_STATES:
            return InstanceEvent(kind=str(state), **common)
    return None
