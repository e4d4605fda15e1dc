"""The optimizer's answer: an ordered failover plan per task, and what has failed so far.

Plain dataclasses: every handler reads a job's plan and blocklist from its own rows, so these are on
each cold start's path; the rows were written by `to_json`, and `from_json`/`from_dict` read them back
(unknown keys ignored, numbers as the fields' types), without a schema to build first.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

_FLOATS = ("accelerator_count", "vcpus", "memory_gib", "hourly_price", "estimated_hours", "estimated_cost")


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """One place to launch a task's nodes. The provisioner walks a task's candidates in order."""

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

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Candidate:
        known = _known(cls, data)
        for name in _FLOATS:
            known[name] = float(known[name])
        if known.get("list_price") is not None:
            known["list_price"] = float(known["list_price"])
        known["num_nodes"] = int(known["num_nodes"])
        return cls(**known)


@dataclass(kw_only=True)
class TaskPlan:
    task_name: str | None
    num_nodes: int
    candidates: list[Candidate]  # best first; candidates[0] is the chosen one

    @property
    def chosen(self) -> Candidate:
        return self.candidates[0]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskPlan:
        candidates = [Candidate.from_dict(c) for c in data["candidates"]]
        return cls(task_name=data.get("task_name"), num_nodes=int(data["num_nodes"]), candidates=candidates)


@dataclass(kw_only=True)
class Plan:
    objective: str  # "cost" or "time"
    tasks: list[TaskPlan]  # in pipeline order
    egress_cost: float = 0.0
    total_cost: float  # estimated, all tasks, egress included
    notes: list[str] = field(default_factory=list)  # why the order is what it is beyond price

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        return cls(
            objective=str(data["objective"]),
            tasks=[TaskPlan.from_dict(t) for t in data["tasks"]],
            egress_cost=float(data.get("egress_cost", 0.0)),
            total_cost=float(data["total_cost"]),
            notes=[str(n) for n in data.get("notes", [])],
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Plan:
        return cls.from_dict(json.loads(text))


@dataclass(frozen=True, kw_only=True)
class Block:
    """A place that failed. Fields left None widen the block (zone < region < cloud)."""

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

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Block:
        return cls(**_known(cls, data))

    def as_dict(self) -> dict[str, Any]:
        """The fields that differ from their defaults (what a blocklist row keeps)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != f.default}


def _known(cls: type[Any], data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def instance_family_of(instance_type: str) -> str:
    """`p4d.24xlarge` -> `p4d`; `a2-highgpu-1g` -> `a2`; `Standard_NC24ads_A100_v4` -> `Standard_NC`."""
    azure = re.match(r"(Standard_[A-Z]+)", instance_type)
    if azure:
        return azure.group(1)
    return re.split(r"[.\-]", instance_type, maxsplit=1)[0]
