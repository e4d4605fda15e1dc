"""The optimizer's answer: an ordered failover plan per task, and what has failed so far."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict


class Candidate(BaseModel):
    """One place to launch a task's nodes. The provisioner walks a task's candidates in order."""

    model_config = ConfigDict(frozen=True)

    cloud: str
    region: str
    zone: str | None
    instance_type: str
    accelerator: str | None
    accelerator_count: float
    vcpus: float
    memory_gib: float
    use_spot: bool
    hourly_price: float  # one node
    num_nodes: int
    estimated_hours: float
    estimated_cost: float  # num_nodes * hourly_price * estimated_hours
    # What the team pays differs from list price (shared/optimizer/contract_pricing.py):
    list_price: float | None = None  # one node at list price, when hourly_price is not it
    reservation: str | None = None  # the reservation the nodes are launched into (hourly_price 0: paid)
    reservation_kind: str | None = None  # shared.optimizer.contract_terms.RESERVATION_KINDS

    @property
    def place(self) -> str:
        return "/".join(p for p in (self.cloud, self.region, self.zone) if p)


class TaskPlan(BaseModel):
    task_name: str | None
    num_nodes: int
    candidates: list[Candidate]  # best first; candidates[0] is the chosen one

    @property
    def chosen(self) -> Candidate:
        return self.candidates[0]


class Plan(BaseModel):
    objective: str  # "cost" or "time"
    tasks: list[TaskPlan]  # in pipeline order
    egress_cost: float = 0.0
    total_cost: float  # estimated, all tasks, egress included
    notes: list[str] = []  # why the order is what it is beyond price (e.g. zones cooling after preemptions)


class Block(BaseModel):
    """A place that failed. Fields left None widen the block (zone < region < cloud)."""

    model_config = ConfigDict(frozen=True)

    cloud: str
    region: str | None = None
    zone: str | None = None
    instance_family: str | None = None  # quota blocks are per family (e.g. "p4d", "a2")
    reason: str = ""

    def covers(self, cloud: str, region: str, zone: str | None, instance_type: str) -> bool:
        if cloud != self.cloud:
            return False
        if self.region is not None and region != self.region:
            return False
        if self.zone is not None and zone != self.zone:
            return False
        return self.instance_family is None or instance_family_of(instance_type) == self.instance_family


def instance_family_of(instance_type: str) -> str:
    """`p4d.24xlarge` -> `p4d`; `a2-highgpu-1g` -> `a2`; `Standard_NC24ads_A100_v4` -> `Standard_NC`."""
    azure = re.match(r"(Standard_[A-Z]+)", instance_type)
    if azure:
        return azure.group(1)
    return re.split(r"[.\-]", instance_type, maxsplit=1)[0]
