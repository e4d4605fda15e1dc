"""Azure preemptions -> `InstanceEvent`: the Event Grid system topic of Azure Resource Notifications -
Health Resources (`Microsoft.ResourceNotifications.HealthResources`) raises `...ResourceAnnotated` with the
annotation `VirtualMachinePreempted` when a Spot VM is evicted (capacity recall or price).

The VM is the last part of `data.resourceInfo.properties.targetResourceId`
(`/subscriptions/<id>/resourceGroups/<rg>/providers/Microsoft.Compute/virtualMachines/<name>`): skyless's
Azure nodes' instance ids are their VM names. Other annotations and event types parse to None.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.events.instances import InstanceEvent

RESOURCE_ANNOTATED = "Microsoft.ResourceNotifications.HealthResources.ResourceAnnotated"
PREEMPTED_ANNOTATION = "VirtualMachinePreempted"
VM_TYPE = "microsoft.compute/virtualmachines"
SOURCE = "azure.resourcehealth"


class _AnnotationProperties(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    target_resource_id: str = Field(alias="targetResourceId")
    target_resource_type: str | None = Field(default=None, alias="targetResourceType")
    annotation_name: str = Field(alias="annotationName")
    occurred_time: str | None = Field(default=None, alias="occurredTime")


class _ResourceInfo(BaseModel):
    model_config = ConfigDict(extra="ignore")

    properties: _AnnotationProperties


class _Data(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    resource_info: _ResourceInfo = Field(alias="resourceInfo")


def parse_preemption_annotation(event_type: str, data: dict[str, Any] | None) -> InstanceEvent | None:
    """An Event Grid event's type and `data` (Event Grid or CloudEvents schema alike) -> InstanceEvent."""
    if event_type != RESOURCE_ANNOTATED:
        return None
    try:
        properties = _Data.model_validate(data or {}).resource_info.properties
    except ValidationError:
        return None
    if properties.annotation_name != PREEMPTED_ANNOTATION:
        return None
    parts = properties.target_resource_id.rstrip("/").split("/")
    if len(parts) < 3 or "/".join(parts[-3:-1]).lower() != VM_TYPE or not parts[-1]:
        return None
    return InstanceEvent(
        instance_id=parts[-1], kind="preempted", source=SOURCE, time=properties.occurred_time
    )


def parse_event_grid_preemption(event: dict[str, Any]) -> InstanceEvent | None:
    """A whole Event Grid event as JSON: `eventType` (Event Grid schema) or `type` (CloudEvents schema)."""
    event_type = event.get("eventType") or event.get("type")
    data = event.get("data")
    if not isinstance(event_type, str) or not isinstance(data, dict):
        return None
    return parse_preemption_annotation(event_type, data)
